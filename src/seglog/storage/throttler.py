"""A byte-rate throttle shared by the cleaner threads (Kafka's Throttler).

Callers report the bytes they moved; every ``check_interval_ms`` the observed
rate is compared with the desired one and the caller that closes the period
sleeps long enough to bring the period's rate down to it. With no limit
(``log.cleaner.io.max.bytes.per.second`` is infinite by default) reporting
costs one comparison.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class Throttler:
    def __init__(
        self,
        bytes_per_second: float,
        check_interval_ms: float = 300,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self.check_interval = check_interval_ms / 1000
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = monotonic()
        self._observed = 0.0
        self.slept = 0.0  # seconds spent throttled, for stats and tests

    @property
    def unlimited(self) -> bool:
        return math.isinf(self.bytes_per_second)

    def maybe_throttle(self, observed: float) -> None:
        if self.unlimited:
            return
        with self._lock:
            self._observed += observed
            now = self._monotonic()
            elapsed = now - self._period_start
            if elapsed < self.check_interval:
                return
            wait = self._observed / self.bytes_per_second - elapsed if self.bytes_per_second > 0 else 0.0
            # the period restarts now; the sleep below belongs to the one that just closed
            self._period_start = now + max(wait, 0.0)
            self._observed = 0.0
            if wait > 0:
                self.slept += wait
        if wait > 0:
            self._sleep(wait)
