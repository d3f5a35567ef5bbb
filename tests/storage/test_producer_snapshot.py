"""Kafka's producer state `.snapshot` files: every Kafka-written one reads and writes back
byte for byte, corrupt ones are refused by name, and a partition's state is rebuilt from
its latest snapshot plus the log after it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from seglog.errors import CorruptSnapshotError
from seglog.records import RecordBatch, build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage import producer_snapshot
from seglog.storage.producer_entry import AppendOrigin, ProducerStateEntry
from seglog.storage.producer_state_manager import ProducerStateManager

from .conftest import MS, new_log, open_logs, records

CP76 = "real_segments/rjmfernandes_flink-on-prem__cp7.6_kraft/data"


def _fields(entry: ProducerStateEntry) -> tuple:
    return (
        entry.producer_id,
        entry.producer_epoch,
        entry.last_seq,
        entry.last_data_offset,
        entry.last_offset_delta,
        entry.last_timestamp,
        entry.coordinator_epoch,
        entry.current_txn_first_offset,
    )


def _state(manager: ProducerStateManager) -> list[tuple]:
    return sorted(_fields(e) for e in manager.producers.values())


def test_every_kafka_snapshot_reads_and_writes_back_byte_for_byte(kafka_data: Path):
    files = sorted(kafka_data.glob("real_segments/**/*.snapshot"))
    assert len(files) == 75
    producers = 0
    for path in files:
        entries = producer_snapshot.read(str(path))
        raw = path.read_bytes()
        assert len(entries) == (len(raw) - 10) // 46
        assert producer_snapshot.encode(entries) == raw, path
        producers += len(entries)
    assert producers == 11


def test_replaying_kafka_logs_gives_kafkas_own_snapshots(kafka_data: Path, tmp_path: Path):
    """The state rebuilt from the log alone equals what Kafka wrote at the log's end: the
    reader and the replay checked against each other on independent evidence."""
    manager = open_logs(kafka_data / CP76, read_only=True)
    try:
        compared = 0
        for snapshot in sorted((kafka_data / CP76).glob("*/*.snapshot")):
            topic, _, partition = snapshot.parent.name.rpartition("-")
            log = manager.partition(topic, int(partition))
            expected = producer_snapshot.read(str(snapshot))
            offset = int(snapshot.stem)
            state = ProducerStateManager(str(tmp_path))  # no snapshot there: the whole log is replayed
            state.load(log.segments, log.log_start_offset, offset, MS * 2)
            assert _state(state) == sorted(_fields(e) for e in expected), snapshot
            assert state.map_end_offset == offset
            compared += len(expected)
        assert compared == 11
    finally:
        manager.close()


@pytest.fixture
def kafka_snapshot(kafka_data: Path, tmp_path: Path) -> Path:
    source = kafka_data / CP76 / "_confluent-monitoring-0" / "00000000000000002827.snapshot"
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    return copy


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda b: b[:40] + bytes([b[40] ^ 1]) + b[41:], "CRC"),
        (lambda b: b[:-1], "cannot hold 5 entries"),
        (lambda b: b + b"\0", "cannot hold 5 entries"),
        (lambda b: b"\0\2" + b[2:], "unknown version 2"),
        (lambda b: b[:6] + b"\xff\xff\xff\xff" + b[10:], "cannot hold -1 entries"),
        (lambda b: b[:7], "too short"),
    ],
)
def test_a_corrupt_snapshot_is_refused_naming_its_file(kafka_snapshot: Path, edit, message):
    kafka_snapshot.write_bytes(edit(kafka_snapshot.read_bytes()))
    with pytest.raises(CorruptSnapshotError, match=message) as e:
        producer_snapshot.read(str(kafka_snapshot))
    assert e.value.file == str(kafka_snapshot)
    assert str(kafka_snapshot) in str(e.value)
    assert e.value.error_code == 2


def _append(log, state: ProducerStateManager, batch: bytearray, origin: AppendOrigin) -> None:
    """The broker's path: the leader assigns offsets (in place), then the state checks the
    batch and takes it over."""
    info = log.append_batches(batch, origin=origin.value)
    check = state.analyze([RecordBatch(batch)], origin)
    assert check.duplicate is None
    state.update(check, info.last_offset + 1)


def _produce(log, state: ProducerStateManager, pid: int, seq: int, n: int, *, txn: bool = False) -> None:
    batch = build_batch(records(n), producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=txn)
    _append(log, state, batch, AppendOrigin.CLIENT)


def _mark(log, state: ProducerStateManager, pid: int, commit: bool) -> None:
    marker = end_transaction_marker(commit, 5, MS)
    batch = build_batch([marker], producer_id=pid, producer_epoch=0, transactional=True, control=True)
    _append(log, state, batch, AppendOrigin.COORDINATOR)


def test_state_reloads_from_the_last_snapshot_and_the_log_after_it(tmp_path: Path):
    manager, log = new_log(tmp_path / "logs")
    try:
        live = ProducerStateManager(log.dir)
        _produce(log, live, 1, 0, 3)
        _produce(log, live, 2, 0, 2, txn=True)
        first = live.take_snapshot()
        log.roll()
        _produce(log, live, 1, 3, 4)
        _produce(log, live, 2, 2, 1, txn=True)
        _mark(log, live, 2, commit=False)
        _produce(log, live, 3, 0, 1, txn=True)
        assert os.path.basename(first) == "00000000000000000005.snapshot"

        reloaded = ProducerStateManager(log.dir)
        reloaded.load(log.segments, log.log_start_offset, log.log_end_offset, MS)
        assert reloaded.last_snapshot_offset == 5
        assert _state(reloaded) == _state(live)
        assert reloaded.first_undecided_offset == live.first_undecided_offset == 11
        # the snapshot held what the log before it did: producer 2's open transaction
        assert producer_snapshot.read(first)[1].current_txn_first_offset == 3
    finally:
        manager.close()


def test_load_drops_snapshots_past_the_log_end_and_falls_back_past_corrupt_ones(tmp_path: Path):
    manager, log = new_log(tmp_path / "logs")
    try:
        live = ProducerStateManager(log.dir)
        _produce(log, live, 1, 0, 2)
        live.take_snapshot()  # at 2
        _produce(log, live, 1, 2, 2)
        corrupt = Path(live.take_snapshot())  # at 4
        corrupt.write_bytes(corrupt.read_bytes()[:-3])
        producer_snapshot.write(log.dir, 99, live.producers.values())  # past the log end
        _produce(log, live, 1, 4, 2)

        reloaded = ProducerStateManager(log.dir)
        reloaded.load(log.segments, log.log_start_offset, log.log_end_offset, MS)
        assert reloaded.last_snapshot_offset == 2
        assert _state(reloaded) == _state(live)
        assert producer_snapshot.snapshot_offsets(log.dir) == [2]
    finally:
        manager.close()


def test_expired_producers_are_not_loaded_from_a_snapshot(tmp_path: Path):
    manager, log = new_log(tmp_path / "logs")
    try:
        live = ProducerStateManager(log.dir)
        _produce(log, live, 1, 0, 2)  # its max timestamp is MS + 1
        live.take_snapshot()
        later = ProducerStateManager(log.dir, producer_id_expiration_ms=1000)
        later.load(log.segments, log.log_start_offset, log.log_end_offset, MS + 1 + 1000)
        assert later.producers == {}
        kept = ProducerStateManager(log.dir, producer_id_expiration_ms=1000)
        kept.load(log.segments, log.log_start_offset, log.log_end_offset, MS + 1 + 999)
        assert list(kept.producers) == [1]
    finally:
        manager.close()


def test_a_kafka_dir_opens_with_the_producer_state_of_its_snapshots(kafka_data: Path, tmp_path: Path):
    dst = tmp_path / "kafka"
    shutil.copytree(kafka_data / CP76, dst, copy_function=shutil.copyfile)
    expected = {p.parent.name: producer_snapshot.read(str(p)) for p in dst.glob("*/*.snapshot")}
    assert sum(len(entries) for entries in expected.values()) > 0
    # Kafka's clock when it wrote them: entries idle producer.id.expiration.ms are not loaded
    now = max(e.last_timestamp for entries in expected.values() for e in entries) + 1
    loaded = 0
    with open_logs(dst, clock=lambda: now) as logs:
        for name, entries in expected.items():
            topic, _, partition = name.rpartition("-")
            state = logs.partition(topic, int(partition)).producer_state
            assert _state(state) == sorted(_fields(e) for e in entries if not state.is_expired(e, now)), name
            loaded += len(state.producers)
    assert loaded > 0
