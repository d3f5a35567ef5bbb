"""A fetch waiting for records: Kafka's ``DelayedFetch``.

A fetch whose first read found fewer than ``min_bytes`` waits in the replica manager's
fetch purgatory (``ReplicaManager.fetch_messages``) under its partitions' keys: a
follower's is offered the size of each append to them, a consumer's the bytes each move
of their high watermark exposes (``replica_manager.fetch_key``). It completes once it
has ``min_bytes``, or at ``max_wait_ms``; the replica manager then reads again, so the
operation holds nothing of the first read (no file slice) while it waits. A
read_committed fetch counts only what lies below the last stable offset, asked again at
each event (``stable_bytes``): the bytes an event exposes may belong to a transaction
still open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .purgatory import DelayedOperation


class DelayedFetch(DelayedOperation[None]):
    def __init__(self, delay_ms: int, min_bytes: int, have: int, stable_bytes: Callable[[], int] | None = None) -> None:
        super().__init__(delay_ms)
        self.min_bytes = min_bytes
        self.have = have
        self.stable_bytes = stable_bytes

    def try_complete(self, event: Any) -> bool:
        if self.stable_bytes is not None:
            self.have = self.stable_bytes()
        else:
            self.have += int(event or 0)
        return self.have >= self.min_bytes and self.force_complete()

    def on_complete(self, expired: bool) -> None:
        return None
