"""A DeleteRecords waiting for every replica: Kafka's ``DelayedDeleteRecords``.

The leader moves its own log start offset at once; its followers move theirs when their next
fetch tells them the leader's (``Partition.append_as_follower``), and say so in the fetch after
(its ``log_start_offset``). A partition is answered once its low watermark, the smallest log
start offset over the leader and the followers of live brokers (``Partition.low_watermark``),
has reached the offset asked for; the operation waits in the delete-records purgatory under
its partitions' keys and is checked again at each follower's fetch and role change. A
partition no longer led here answers NOT_LEADER_OR_FOLLOWER, one still waiting at the
request's ``timeout_ms`` REQUEST_TIMED_OUT with the low watermark the leader's delete left
(the records are deleted on the leader all the same, as in Kafka).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..common import TopicPartition
from ..errors import SeglogError
from ..protocol import ErrorCode
from .purgatory import DelayedOperation

INVALID_LOW_WATERMARK = -1


class DelayedDeleteRecords(DelayedOperation[list[tuple[int, int]]]):
    """The answers, (error code, low watermark) in request order, of the partitions ``waiting``
    (index in the request -> partition and the offset each replica's log must start at)."""

    def __init__(
        self,
        delay_ms: int,
        answers: list[tuple[int, int]],
        waiting: dict[int, tuple[TopicPartition, int]],
        low_watermark: Callable[[TopicPartition], int],
    ) -> None:
        super().__init__(delay_ms)
        self.answers = list(answers)  # those of ``waiting`` hold the leader's delete's low watermark
        self.waiting = dict(waiting)
        self._low_watermark = low_watermark

    def check(self) -> bool:
        """Answer the partitions whose low watermark has reached their offset, or that failed;
        True when none waits."""
        for i, (tp, required) in list(self.waiting.items()):
            try:
                low = self._low_watermark(tp)
            except SeglogError as e:
                self.answers[i] = (e.error_code, INVALID_LOW_WATERMARK)
                del self.waiting[i]
                continue
            if low >= required:
                self.answers[i] = (ErrorCode.NONE, low)
                del self.waiting[i]
        return not self.waiting

    def try_complete(self, event: Any) -> bool:
        return self.check() and self.force_complete()

    def on_complete(self, expired: bool) -> list[tuple[int, int]]:
        self.check()
        answers = list(self.answers)
        for i in self.waiting:
            answers[i] = (ErrorCode.REQUEST_TIMED_OUT, answers[i][1])
        return answers
