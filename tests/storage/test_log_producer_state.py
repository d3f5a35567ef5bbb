"""A partition log's producer state: idempotent appends checked against it, its
``.snapshot`` files, its rebuild after a crash, and the ``.txnindex`` of aborts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seglog.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from seglog.records import build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage.producer_snapshot import read as read_snapshot
from seglog.storage.producer_snapshot import snapshot_offsets
from seglog.storage.txn_index import read_txn_index

from .conftest import MS, crash, new_log, open_logs, records

PID = 4000


def idempotent(log, n, seq, *, epoch=0, pid=PID, start=0, ts=None):
    return log.append(records(n, start=start, ts=ts), producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def marker(log, commit, *, pid=PID, epoch=0):
    batch = build_batch([end_transaction_marker(commit, 3, MS)], producer_id=pid, producer_epoch=epoch, control=True)
    return log.append_batches(batch, origin="coordinator")


def test_a_retried_batch_is_acknowledged_with_its_first_offsets_and_written_once(tmp_path):
    manager, log = new_log(tmp_path)
    assert idempotent(log, 3, 0) == (0, 2)
    assert idempotent(log, 2, 3, start=3) == (3, 4)
    assert idempotent(log, 3, 0) == (0, 2)  # the retry of the first batch
    assert idempotent(log, 2, 3, start=3) == (3, 4)
    assert log.log_end_offset == 5
    assert [r.offset for r in log.records(0)] == [0, 1, 2, 3, 4]
    manager.close()


def test_a_gap_and_an_old_epoch_are_refused_and_change_nothing(tmp_path):
    manager, log = new_log(tmp_path)
    idempotent(log, 2, 0, epoch=1)
    with pytest.raises(OutOfOrderSequenceError):
        idempotent(log, 1, 5, epoch=1)
    with pytest.raises(InvalidProducerEpochError):
        idempotent(log, 1, 2, epoch=0)
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch starts at 0
        idempotent(log, 1, 7, epoch=2)
    assert log.log_end_offset == 2
    assert idempotent(log, 1, 2, epoch=1) == (2, 2)
    manager.close()


def test_snapshots_at_each_roll_and_close_bring_the_state_back(tmp_path):
    manager, log = new_log(tmp_path)
    idempotent(log, 2, 0)
    log.roll()
    idempotent(log, 2, 2, start=2)
    manager.close()
    dir = log.dir
    assert snapshot_offsets(dir) == [2, 4]
    (entry,) = read_snapshot(os.path.join(dir, "00000000000000000004.snapshot"))
    assert (entry.producer_id, entry.last_seq, entry.last_data_offset) == (PID, 3, 3)
    manager = open_logs(tmp_path)
    log = manager.partition("t", 0)
    assert idempotent(log, 2, 2, start=2) == (2, 3)  # still known as a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        idempotent(log, 1, 9, start=4)
    manager.close()


def test_a_crash_rebuilds_the_state_from_the_last_snapshot_and_the_log_after_it(tmp_path):
    manager, log = new_log(tmp_path)
    idempotent(log, 2, 0)
    log.roll()  # snapshot at 2
    idempotent(log, 2, 2, start=2)
    idempotent(log, 2, 4, start=4)
    crash(manager)
    manager = open_logs(tmp_path)
    log = manager.partition("t", 0)
    assert log.log_end_offset == 6
    assert idempotent(log, 2, 4, start=4) == (4, 5)  # found by replaying the log after the snapshot
    assert idempotent(log, 1, 6, start=6) == (6, 6)
    manager.close()


def test_expired_producers_are_forgotten(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    idempotent(log, 1, 0, ts=MS)
    clock.advance(1000)
    manager.remove_expired_producers()
    assert PID in log.producer_state.producers
    clock.advance(24 * 3_600_000)  # producer.id.expiration.ms
    manager.remove_expired_producers()
    assert PID not in log.producer_state.producers
    assert idempotent(log, 1, 7, start=1, ts=clock.now) == (1, 1)  # an unknown producer may start anywhere
    manager.close()


def test_an_abort_marker_writes_the_transaction_index_that_read_committed_readers_use(tmp_path):
    manager, log = new_log(tmp_path)
    log.append(records(2, ts=None), producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)
    log.append(records(1, start=2))  # a plain record in between
    assert log.producer_state.first_unstable_offset(log.high_watermark) == 0 == log.last_stable_offset
    marker(log, commit=False)
    assert log.producer_state.first_unstable_offset(log.high_watermark) is None
    assert log.last_stable_offset == log.high_watermark == 4
    path = log.active_segment.txn_index_path
    (entry,) = read_txn_index(path)
    assert (entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset) == (PID, 0, 3, 4)
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset) for t in aborted] == [(PID, 0)]
    log.truncate_to(3)  # the marker goes, and its entry with it
    assert not os.path.exists(path)
    manager.close()


def test_recovery_writes_the_transaction_index_again_from_the_markers(tmp_path):
    manager, log = new_log(tmp_path)
    log.append(records(1, ts=None), producer_id=PID, producer_epoch=0, base_sequence=0, transactional=True)
    marker(log, commit=False)  # aborts [0, 1]
    manager.close()  # a snapshot at 2: a later replay starts there
    manager = open_logs(tmp_path)
    log = manager.partition("t", 0)
    path = log.active_segment.txn_index_path
    before = Path(path).read_bytes()
    log.append(records(1, ts=None), producer_id=PID + 1, producer_epoch=0, base_sequence=0, transactional=True)
    marker(log, commit=False, pid=PID + 1)  # aborts [2, 3]
    Path(path).write_bytes(before)  # as if the crash came between the second marker and its entry
    crash(manager)
    manager = open_logs(tmp_path)
    entries = [(e.producer_id, e.first_offset, e.last_offset) for e in read_txn_index(path)]
    assert entries == [(PID, 0, 1), (PID + 1, 2, 3)]
    manager.close()


def test_recovered_transaction_index_entries_keep_the_last_stable_offset_of_their_marker(tmp_path):
    """Kafka's recovery writes an entry's LSO as of its marker (``lastStableOffset``: the
    first offset of another producer's transaction still open then, else the marker's
    offset + 1), the entry an append wrote; not the marker's offset + 1 always."""
    manager, log = new_log(tmp_path)
    txn = {"producer_epoch": 0, "base_sequence": 0, "transactional": True}
    log.append(records(1, ts=None), producer_id=PID, **txn)  # PID's transaction opens at 0
    log.append(records(1, start=1, ts=None), producer_id=PID + 1, **txn)
    marker(log, commit=False, pid=PID + 1)  # aborts [1, 2] while PID's is open: LSO 0
    marker(log, commit=False)  # aborts [0, 3]: nothing open, LSO 4
    path = log.active_segment.txn_index_path
    written = read_txn_index(path)
    assert [(e.producer_id, e.last_offset, e.last_stable_offset) for e in written] == [(PID + 1, 2, 0), (PID, 3, 4)]
    os.unlink(path)  # as if the crash came before the entries were written
    crash(manager)
    with open_logs(tmp_path):
        assert read_txn_index(path) == written
