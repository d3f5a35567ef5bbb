"""What a read_committed consumer does with what a fetch gives it: Kafka's rule that drops
the records of aborted transactions (``committed_batches``, the consumer's
``CompletedFetch``).

Where a read_committed reader stops and which transactions it is told of are the log's,
as Kafka keeps them: ``PartitionLog.last_stable_offset`` (the producer state's first
unstable offset, or the high watermark) and ``PartitionLog.collect_aborted_transactions``
(the segments' ``.txnindex``, ``txn_index.py``); a broker's read_committed fetch gets both
from ``PartitionLog.read(read_committed=True)``. A fetch hands the reader the aborted
transactions as Kafka's FetchResponse does, as (producer id, first offset) pairs: a
transactional batch of a producer whose aborted transaction has begun, and not yet met
its ABORT marker, is dropped, and so is every control batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ..records.batches import AnyBatch
from .producer_state import ABORT, control_type


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
