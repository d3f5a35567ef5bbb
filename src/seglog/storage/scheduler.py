"""One background thread running the log manager's periodic and delayed tasks
(checkpoints, flushes, retention, deferred file deletion), like Kafka's
KafkaScheduler. Tests run the same tasks synchronously instead."""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class Scheduler:
    def __init__(self, name: str = "seglog-scheduler") -> None:
        self._tasks: list[tuple[float, int, str, Callable[[], None], float | None]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, name: str, fn: Callable[[], None], delay_ms: float, period_ms: float | None = None) -> None:
        with self._cond:
            if self._stopped:
                return
            heapq.heappush(self._tasks, (time.monotonic() + delay_ms / 1000, next(self._seq), name, fn, period_ms))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (not self._tasks or self._tasks[0][0] > time.monotonic()):
                    timeout = self._tasks[0][0] - time.monotonic() if self._tasks else None
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                due, _, name, fn, period = heapq.heappop(self._tasks)
                if period is not None:
                    heapq.heappush(self._tasks, (due + period / 1000, next(self._seq), name, fn, period))
            try:
                fn()
            except Exception:  # a failing task must not kill the others
                log.exception("background task %s failed", name)

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        if threading.current_thread() is not self._thread:
            self._thread.join()
