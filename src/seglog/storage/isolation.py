"""What a read_committed reader needs of a log: its last stable offset (LSO) and the
aborted transactions overlapping a range (Kafka's ``UnifiedLog.lastStableOffset`` and
``collectAbortedTransactions``), and the consumer's rule that drops aborted records.

The LSO is the first offset of the earliest transaction not yet decided (no COMMIT or
ABORT marker), or the high watermark when there is none: a read_committed consumer
reads no further. Transactions are found from the batch headers and markers of the
whole log (``producer_state.py``, the summaries the cleaner also uses, kept per
segment: a reader that keeps the log open, as the broker will, pays only for what was
appended since its last call); where Kafka left a ``.txnindex`` beside a segment, the
aborted transactions whose markers that segment holds are taken from it, as Kafka does
(``txn_index.py``).

A fetch hands the reader the aborted transactions as Kafka's FetchResponse does, as
(producer id, first offset) pairs; ``committed_batches`` is what Kafka's consumer does
with them: a transactional batch of a producer whose aborted transaction has begun, and
not yet met its ABORT marker, is dropped, and so is every control batch.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from ..errors import CorruptIndexError, KafkaStorageError
from ..records.batches import AnyBatch
from .log import PartitionLog
from .producer_state import ABORT, control_type, producer_state
from .segment import LogSegment
from .txn_index import AbortedTxn, read_txn_index, txn_index_path

log = logging.getLogger(__name__)

_SCAN_BUFFER = 1 << 20


@dataclass(frozen=True)
class TransactionState:
    """A log's transactions as a read_committed reader sees them."""

    last_stable_offset: int
    aborted: tuple[AbortedTxn, ...]  # by first offset

    def aborted_transactions(self, start: int, end: int) -> list[AbortedTxn]:
        """The aborted transactions a fetch of [start, end) must know: those whose
        records may lie in it (begun before ``end``, marker at or after ``start``)."""
        return [t for t in self.aborted if t.first_offset < end and t.last_offset >= start]


def transaction_state(log_: PartitionLog) -> TransactionState:
    """Read the log's transactions: the LSO and every aborted transaction."""
    segments = log_.segments
    state = producer_state(segments, _read, bytearray(_SCAN_BUFFER))
    high_watermark = log_.high_watermark
    lso = high_watermark if state.first_unstable_offset is None else min(state.first_unstable_offset, high_watermark)
    indexed = _indexed_aborts(segments)
    bases = [s.base_offset for s in segments]
    # aborts whose marker lies in a segment with a .txnindex come from that index
    found = [
        AbortedTxn(first, marker, pid)
        for first, marker, pid in state.aborted
        if segments[max(0, bisect.bisect_right(bases, marker) - 1)].base_offset not in indexed
    ]
    for entries in indexed.values():
        found.extend(entries)
    return TransactionState(lso, tuple(sorted(found)))


def _read(segment: LogSegment, buffer: bytearray, position: int, size: int) -> int:
    return segment.handle.readinto(memoryview(buffer)[:size], position)


def _indexed_aborts(segments: Sequence[LogSegment]) -> dict[int, list[AbortedTxn]]:
    """The entries of every segment's ``.txnindex`` (by segment base offset); a corrupt
    one is passed over, and that segment's markers are read instead."""
    out = {}
    for segment in segments:
        if not os.path.exists(txn_index_path(segment.log_path)):
            continue
        try:
            out[segment.base_offset] = read_txn_index(txn_index_path(segment.log_path))
        except (CorruptIndexError, KafkaStorageError) as e:
            log.warning("%s; reading the segment's transaction markers instead", e)
    return out


def committed_batches(batches: Iterable[AnyBatch], aborted: Iterable[tuple[int, int]]) -> Iterator[AnyBatch]:
    """The batches a read_committed consumer keeps, given the aborted transactions of the
    range as (producer id, first offset): Kafka's consumer rule (``CompletedFetch``)."""
    pending = sorted((first, pid) for pid, first in aborted)
    next_txn = 0
    aborting: set[int] = set()
    for batch in batches:
        pid = batch.producer_id
        if pid >= 0:
            # a transaction counts from the first batch that reaches its first offset
            while next_txn < len(pending) and pending[next_txn][0] <= batch.last_offset:
                aborting.add(pending[next_txn][1])
                next_txn += 1
            if batch.is_control:
                if pid in aborting and control_type(batch) == ABORT:  # type: ignore[arg-type]
                    aborting.discard(pid)
                continue
            if batch.is_transactional and pid in aborting:
                continue
        elif batch.is_control:
            continue
        yield batch
