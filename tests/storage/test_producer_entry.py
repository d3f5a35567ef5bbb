"""Idempotence checks (Kafka's ProducerAppendInfo / ProducerStateEntry) through the
partition's ProducerStateManager: duplicates, sequences, epochs, transactions, expiry."""

from __future__ import annotations

import pytest

from seglog.errors import (
    InvalidConfigurationError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from seglog.records import RecordBatch, build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage.producer_entry import (
    INT32_MAX,
    AppendOrigin,
    decrement_sequence,
    increment_sequence,
)
from seglog.storage.producer_state_manager import ProducerStateManager

from .conftest import MS, records

PID = 1000


def data(
    seq: int, n: int, base: int, *, epoch: int = 0, pid: int = PID, txn: bool = False, ts: int = MS
) -> RecordBatch:
    """A producer's batch of ``n`` records whose offsets the leader assigned from ``base``."""
    raw = build_batch(
        records(n, ts=ts),
        base_offset=base,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        transactional=txn,
    )
    return RecordBatch(raw)


def marker(commit: bool, offset: int, *, epoch: int = 0, coordinator_epoch: int = 0, ts: int = MS) -> RecordBatch:
    raw = build_batch(
        [end_transaction_marker(commit, coordinator_epoch, ts)],
        base_offset=offset,
        producer_id=PID,
        producer_epoch=epoch,
        transactional=True,
        control=True,
    )
    return RecordBatch(raw)


def append(manager: ProducerStateManager, *batches: RecordBatch, origin: AppendOrigin = AppendOrigin.CLIENT):
    check = manager.analyze(batches, origin)
    if check.duplicate is None:
        manager.update(check, batches[-1].last_offset + 1)
    return check


@pytest.fixture
def manager(tmp_path) -> ProducerStateManager:
    return ProducerStateManager(str(tmp_path))


def test_sequence_arithmetic_wraps_at_int_max():
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert increment_sequence(5, 3) == 8
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(decrement_sequence(0, 1), INT32_MAX) == 0


def test_in_sequence_batches_are_kept_five_at_most(manager):
    for i in range(7):
        append(manager, data(i * 3, 3, i * 3))
    entry = manager.last_entry(PID)
    assert len(entry.batches) == 5
    assert (entry.first_seq, entry.last_seq, entry.last_data_offset) == (6, 20, 20)


def test_a_retried_batch_among_the_last_five_is_a_duplicate_with_its_first_offsets(manager):
    for i in range(6):
        append(manager, data(i * 2, 2, 100 + i * 2))
    for i in range(1, 6):  # the five kept
        check = manager.analyze([data(i * 2, 2, 500)])
        assert (check.duplicate.first_offset, check.duplicate.last_offset) == (100 + i * 2, 101 + i * 2)
        assert not check.updated
    # the sixth-oldest is no longer known: it is out of order, not a duplicate
    with pytest.raises(OutOfOrderSequenceError) as e:
        manager.analyze([data(0, 2, 500)])
    assert e.value.error_code == 45


def test_a_gap_is_out_of_order(manager):
    append(manager, data(0, 5, 0))
    with pytest.raises(OutOfOrderSequenceError):
        manager.analyze([data(6, 1, 5)])
    assert manager.last_entry(PID).last_seq == 4  # a refused append changes nothing


def test_a_duplicate_from_an_older_epoch_is_fenced_not_acknowledged(manager):
    append(manager, data(0, 1, 0))
    append(manager, data(0, 1, 1, epoch=1))
    with pytest.raises(InvalidProducerEpochError) as e:
        manager.analyze([data(0, 1, 2, epoch=0)])
    assert e.value.error_code == 47


def test_a_new_epoch_starts_at_sequence_zero(manager):
    append(manager, data(0, 10, 0))
    with pytest.raises(OutOfOrderSequenceError):
        manager.analyze([data(10, 1, 10, epoch=1)])
    append(manager, data(0, 1, 10, epoch=1))
    entry = manager.last_entry(PID)
    assert (entry.producer_epoch, entry.last_seq, len(entry.batches)) == (1, 0, 1)


def test_an_unknown_producer_may_start_at_any_sequence(manager):
    # KIP-360: its state expired or its batches were deleted; Kafka 3.x accepts the batch
    append(manager, data(42, 2, 0))
    assert manager.last_entry(PID).last_seq == 43


def test_the_sequence_wraps_from_int_max_to_zero(manager):
    append(manager, data(INT32_MAX - 1, 2, 0))
    assert manager.last_entry(PID).last_seq == INT32_MAX
    append(manager, data(0, 1, 2))
    assert manager.last_entry(PID).last_seq == 0
    # a batch that wraps inside itself
    append(manager, data(INT32_MAX - 1, 3, 3, pid=7))
    assert manager.last_entry(7).last_seq == 0
    assert manager.analyze([data(INT32_MAX - 1, 3, 9, pid=7)]).duplicate.first_offset == 3


def test_several_batches_of_one_append_are_checked_in_order(manager):
    append(manager, data(0, 2, 0), data(2, 2, 2))
    with pytest.raises(OutOfOrderSequenceError):
        manager.analyze([data(4, 2, 4), data(7, 2, 6)])
    assert manager.last_entry(PID).last_seq == 3


def test_replicated_batches_are_recorded_unchecked(manager):
    append(manager, data(0, 2, 0))
    append(manager, data(9, 1, 2), origin=AppendOrigin.REPLICATION)
    assert manager.last_entry(PID).last_seq == 9


def test_a_transaction_begins_ends_and_fences_old_coordinators(manager):
    append(manager, data(0, 2, 10, txn=True))
    assert manager.first_undecided_offset == 10
    with pytest.raises(InvalidTxnStateError):
        manager.analyze([data(2, 1, 12)])
    check = append(manager, marker(False, 12, coordinator_epoch=3), origin=AppendOrigin.COORDINATOR)
    assert [(t.first_offset, t.last_offset, t.is_aborted) for t in check.completed] == [(10, 12, True)]
    assert manager.first_undecided_offset is None
    assert manager.last_entry(PID).coordinator_epoch == 3
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        manager.analyze([marker(True, 13, coordinator_epoch=2)], AppendOrigin.COORDINATOR)
    assert e.value.error_code == 52
    # the sequence goes on across the marker
    append(manager, data(2, 1, 13))


def test_a_marker_for_no_data_completes_nothing(manager):
    check = append(manager, marker(True, 0), origin=AppendOrigin.COORDINATOR)
    assert check.completed == []


def test_producers_expire_after_producer_id_expiration_ms_unless_in_a_transaction(tmp_path):
    manager = ProducerStateManager(str(tmp_path), producer_id_expiration_ms=1000)
    append(manager, data(0, 1, 0, pid=1, ts=MS))
    append(manager, data(0, 1, 1, pid=2, ts=MS, txn=True))
    append(manager, data(0, 1, 2, pid=3, ts=MS + 500))
    assert manager.remove_expired(MS + 999) == []
    assert manager.remove_expired(MS + 1000) == [1]
    assert sorted(manager.producers) == [2, 3]


def test_the_expiration_must_be_positive(tmp_path):
    with pytest.raises(InvalidConfigurationError, match=r"producer\.id\.expiration\.ms"):
        ProducerStateManager(str(tmp_path), producer_id_expiration_ms=0)
