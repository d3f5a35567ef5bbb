"""Idempotence: what a partition remembers of each producer, and the check of its next batch.

Kafka's ``ProducerStateEntry``, ``BatchMetadata`` and ``ProducerAppendInfo``, pure:
no file, no log, no clock. Per producer id the partition keeps the producer's
epoch, the coordinator epoch of its last transaction marker, the first offset
of its open transaction, and its last five batches (``NUM_BATCHES_TO_RETAIN``)
as (last sequence, last offset, offset delta, max timestamp); a batch's first
sequence and first offset follow from the delta.

A client's batch is checked in this order (Kafka's ``UnifiedLog.analyzeAndValidate-
ProducerState`` and ``ProducerAppendInfo``):

1. a batch of the current epoch whose sequence range equals one of the five kept
   is a **duplicate**: the broker acknowledges it with the offsets of the earlier
   append and writes nothing (``ProducerStateEntry.find_duplicate``);
2. an epoch older than the producer's is refused with INVALID_PRODUCER_EPOCH (47)
   (Kafka answered PRODUCER_FENCED here before 2.7; that code now belongs to the
   transaction coordinator);
3. a newer epoch must start at sequence 0, unless the producer is unknown (no
   epoch: its state expired or its batches were deleted), which may start
   anywhere (KIP-360); the same epoch must continue the last sequence by one,
   wrapping from Int.MaxValue to 0; else OUT_OF_ORDER_SEQUENCE_NUMBER (45).

A replica's batches (``AppendOrigin.REPLICATION``, and the rebuild from the log)
are not checked, only recorded; the coordinator's (offset commits, markers)
are checked for their epoch only.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1


# A StrEnum, and compared with ``==``: a caller may still name it by its value ("coordinator")
class AppendOrigin(enum.StrEnum):
    CLIENT = "client"  # a producer: sequence and epoch checked
    COORDINATOR = "coordinator"  # offset commits and markers: epoch checked
    REPLICATION = "replication"  # a follower, or the log replayed: recorded as is


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequences wrap from Int.MaxValue to 0 (Kafka's DefaultRecordBatch.incrementSequence)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class BatchMetadata(NamedTuple):
    """One of a producer's last batches (a tuple: ``_scan.append_batch`` reads the last
    sequence, its first item, and ``on_in_order_append`` makes one by ``tuple.__new__``)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    """A producer as a partition knows it; ``batches`` oldest first, at most five."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=deque)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The kept batch with exactly this sequence range in the current epoch, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def maybe_update_epoch(self, epoch: int) -> None:
        # a new epoch starts the sequences again: the old epoch's batches are no longer duplicates
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_epoch(epoch)
        self._keep(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def _keep(self, batch: BatchMetadata) -> None:
        if len(self.batches) == NUM_BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(batch)

    def update(self, other: ProducerStateEntry) -> None:
        """Take what an append changed (Kafka's ``ProducerStateEntry.update``)."""
        self.maybe_update_epoch(other.producer_epoch)
        for batch in other.batches:
            self._keep(batch)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            deque(self.batches),
        )


class CompletedTxn(NamedTuple):
    """A transaction its marker ended: what the transaction index and the LSO need."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool


class ProducerAppendInfo:
    """The producer's batches of one append, checked against its state before the append
    and gathered into ``entry``, which replaces that state once the append is written."""

    def __init__(self, producer_id: int, current: ProducerStateEntry | None, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.origin = origin
        self.current = current if current is not None else ProducerStateEntry(producer_id)
        self.entry = self.current.copy()
        self.entry.batches.clear()
        self.started_transactions: list[int] = []  # first offsets of the transactions this append began

    def append_data_batch(
        self,
        epoch: int,
        first_seq: int,
        last_seq: int,
        timestamp: int,
        first_offset: int,
        last_offset: int,
        is_transactional: bool,
    ) -> None:
        self._check_epoch(epoch, first_offset)
        if self.origin == AppendOrigin.CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.entry.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, timestamp)
        in_txn = self.entry.current_txn_first_offset is not None
        if in_txn and not is_transactional:
            raise InvalidTxnStateError(
                f"producer {self.producer_id} wrote outside the transaction it has open", offset=first_offset
            )
        if not in_txn and is_transactional:
            self.entry.current_txn_first_offset = first_offset
            self.started_transactions.append(first_offset)

    def append_end_txn_marker(
        self, is_abort: bool, coordinator_epoch: int, epoch: int, offset: int, timestamp: int
    ) -> CompletedTxn | None:
        """A COMMIT or ABORT marker; the transaction it ends, if it held any data."""
        self._check_epoch(epoch, offset)
        if self.entry.coordinator_epoch > coordinator_epoch and self.origin != AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {self.producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {self.entry.coordinator_epoch}",
                offset=offset,
            )
        first = self.entry.current_txn_first_offset
        completed = None if first is None else CompletedTxn(self.producer_id, first, offset, is_abort)
        self.entry.maybe_update_epoch(epoch)
        self.entry.coordinator_epoch = coordinator_epoch
        self.entry.current_txn_first_offset = None
        self.entry.last_timestamp = timestamp
        return completed

    def _check_epoch(self, epoch: int, offset: int) -> None:
        # a replica records what its leader accepted, even from an older epoch
        if epoch < self.entry.producer_epoch and self.origin != AppendOrigin.REPLICATION:
            raise InvalidProducerEpochError(
                f"producer {self.producer_id} wrote with epoch {epoch}, older than its epoch "
                f"{self.entry.producer_epoch}",
                offset=offset,
            )

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if epoch != self.entry.producer_epoch:
            if first_seq != 0 and self.entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {self.producer_id} began epoch {epoch} at sequence {first_seq}, not 0 "
                    f"(its epoch was {self.entry.producer_epoch})",
                    offset=offset,
                )
            return
        if not self.entry.is_empty:
            last = self.entry.last_seq
        elif epoch == self.current.producer_epoch:
            last = self.current.last_seq
        else:
            last = NO_SEQUENCE
        # an unknown producer (its batches deleted or its state expired) may start anywhere
        if self.current.producer_epoch != NO_PRODUCER_EPOCH and not in_sequence(last, first_seq):
            raise OutOfOrderSequenceError(
                f"producer {self.producer_id} sent sequence {first_seq} after {last}", offset=offset
            )
