"""One group's committed offsets and the commits still on their way to the log
(the offset half of Kafka's ``GroupMetadata``).

A commit goes through three places:

- ``pending``: an OffsetCommit whose record is being appended. It is not yet
  visible to OffsetFetch, but a ``require_stable`` fetch of its partition is told
  UNSTABLE_OFFSET_COMMIT, and it is never expired;
- ``pending_txn``: a TxnOffsetCommit, per producer id, appended or not, waiting for
  its transaction's marker: COMMIT makes it committed, ABORT drops it;
- ``offsets``: committed. Of two commits of a partition the one whose record has the
  larger log offset wins (Kafka's ``olderThan``), whatever order they complete in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..common import TopicPartition
from ..errors import SeglogError
from .group_loader import CommittedOffset
from .group_records import OffsetCommitValue

_new = tuple.__new__
NOT_APPENDED = -1  # the batch offset of a transactional commit whose record is not yet written


@dataclass
class GroupOffsets:
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    pending: dict[TopicPartition, OffsetCommitValue] = field(default_factory=dict)
    pending_txn: dict[int, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets or self.pending or self.pending_txn)

    def has_pending(self, tp: TopicPartition) -> bool:
        return tp in self.pending or any(tp in slots for slots in self.pending_txn.values())

    # --- plain commits -----------------------------------------------------------------------------

    def prepare_commit(self, offsets: dict[TopicPartition, OffsetCommitValue]) -> None:
        self.pending.update(offsets)

    def commit_appended(self, tp: TopicPartition, value: OffsetCommitValue, batch_offset: int) -> None:
        committed = _new(CommittedOffset, (value, batch_offset))  # (tuple.__new__: half a named tuple's cost)
        if tp in self.pending:
            current = self.offsets.get(tp)
            if current is None or current.batch_offset < batch_offset:
                self.offsets[tp] = committed
        if self.pending.get(tp) == value:  # a later commit of the partition may still be pending
            del self.pending[tp]

    def commit_failed(self, tp: TopicPartition, value: OffsetCommitValue) -> None:
        if self.pending.get(tp) == value:
            del self.pending[tp]

    # --- transactional commits -----------------------------------------------------------------------

    def prepare_txn_commit(self, producer_id: int, offsets: dict[TopicPartition, OffsetCommitValue]) -> None:
        slots = self.pending_txn.setdefault(producer_id, {})
        for tp, value in offsets.items():
            slots[tp] = CommittedOffset(value, NOT_APPENDED)

    def txn_commit_appended(self, producer_id: int, tp: TopicPartition, batch_offset: int) -> None:
        slots = self.pending_txn.get(producer_id)
        if slots is not None and tp in slots:
            slots[tp] = CommittedOffset(slots[tp].value, batch_offset)

    def txn_commit_failed(self, producer_id: int, tps: Iterable[TopicPartition]) -> None:
        slots = self.pending_txn.get(producer_id)
        if slots is None:
            return
        for tp in tps:
            slots.pop(tp, None)
        if not slots:
            del self.pending_txn[producer_id]

    def complete_txn(self, producer_id: int, committed: bool) -> None:
        """The transaction's marker is written: its offsets become committed, or go."""
        slots = self.pending_txn.pop(producer_id, {})
        if not committed:
            return
        for tp, pending in slots.items():
            if pending.batch_offset == NOT_APPENDED:
                raise SeglogError(
                    f"producer {producer_id}'s offset commit of {tp[0]}-{tp[1]} completes before its record was written"
                )
            current = self.offsets.get(tp)
            if current is None or current.batch_offset < pending.batch_offset:
                self.offsets[tp] = pending

    # --- removal ---------------------------------------------------------------------------------------

    def remove(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Forget these partitions' commits, pending ones too; the committed ones removed."""
        removed = []
        for tp in tps:
            self.pending.pop(tp, None)
            for slots in self.pending_txn.values():
                slots.pop(tp, None)
            if self.offsets.pop(tp, None) is not None:
                removed.append(tp)
        return removed

    def expired(
        self,
        now_ms: int,
        retention_ms: int,
        base_timestamp: Callable[[OffsetCommitValue], int],
        subscribed: frozenset[str] = frozenset(),
    ) -> list[TopicPartition]:
        """The committed offsets past their retention, counted from ``base_timestamp``; an
        offset with its own expiry (OffsetCommit v1's) keeps it. Offsets with a plain
        commit being written and offsets of ``subscribed`` topics stay (a transaction's
        pending commit does not hold an offset, as in Kafka)."""
        out = []
        for tp, committed in self.offsets.items():
            if tp[0] in subscribed or tp in self.pending:
                continue
            value = committed.value
            if value.expire_timestamp != -1:
                due = now_ms >= value.expire_timestamp
            else:
                due = now_ms - base_timestamp(value) >= retention_ms
            if due:
                out.append(tp)
        return out
