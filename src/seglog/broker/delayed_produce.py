"""An acks=all produce waiting for the ISR: Kafka's ``DelayedProduce``.

Once appended, a partition's records are acknowledged when the high watermark passes them,
that is when every member of the ISR has them. The operation waits in the produce
purgatory under its partitions' keys and is checked again whenever one of them moves its
high watermark, changes its ISR or its role; a partition whose ISR shrank below
``min.insync.replicas`` meanwhile answers NOT_ENOUGH_REPLICAS_AFTER_APPEND, one that is no
longer led here NOT_LEADER_OR_FOLLOWER, and what is still waiting at the request's
``timeout_ms`` REQUEST_TIMED_OUT (the records stay in the log, as in Kafka).
"""

from __future__ import annotations

from typing import Any

from ..common import TopicPartition
from ..protocol import ErrorCode
from .partition import Partition
from .purgatory import DelayedOperation


class DelayedProduce(DelayedOperation[dict[TopicPartition, int]]):
    def __init__(self, delay_ms: int, waiting: dict[TopicPartition, tuple[Partition, int]]) -> None:
        super().__init__(delay_ms)
        self.waiting = dict(waiting)  # partition and the offset its records end at
        self.codes: dict[TopicPartition, int] = {}

    def check(self) -> bool:
        """Move the partitions the ISR has caught up with to ``codes``; True when none waits."""
        for tp, (partition, required) in list(self.waiting.items()):
            code = partition.replication_reached(required)
            if code is not None:
                self.codes[tp] = code
                del self.waiting[tp]
        return not self.waiting

    def try_complete(self, event: Any) -> bool:
        return self.check() and self.force_complete()

    def on_complete(self, expired: bool) -> dict[TopicPartition, int]:
        self.check()
        return {**self.codes, **{tp: ErrorCode.REQUEST_TIMED_OUT for tp in self.waiting}}
