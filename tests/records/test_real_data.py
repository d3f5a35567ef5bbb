"""Real broker-written segments and fetch responses decode as kafka-python decodes them."""

from __future__ import annotations

import pytest
from kafka.record.memory_records import MemoryRecords

from seglog.records import BatchIterator, ControlRecordType, LeaderChange, SnapshotFooter, SnapshotHeader

from ..conftest import KAFKA_DATA

REAL = KAFKA_DATA / "real_segments"
WIRE = KAFKA_DATA / "wire_captures"
FILES = sorted([*REAL.glob("**/*.log"), *REAL.glob("**/*.checkpoint"), *WIRE.glob("*/extracted_records/*.bin")])


def _ids(path):
    return str(path.relative_to(KAFKA_DATA))


def seglog_records(data):
    scan = BatchIterator(data)
    out = []
    for batch in scan:
        batch.validate()
        out += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]
    return out, scan


def kafka_python_records(data):
    out, records = [], MemoryRecords(data)
    while (batch := records.next_batch()) is not None:
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, r.key, r.value, [tuple(h) for h in (r.headers or [])]))
    return out


@pytest.mark.parametrize("path", FILES, ids=_ids)
def test_decodes_like_kafka_python(path):
    data = path.read_bytes()
    ours, scan = seglog_records(data)
    assert ours == kafka_python_records(data)
    if "partial_messages" not in path.name and "index_out_of_range" not in path.name:
        assert scan.remaining == 0


def test_real_data_was_found():
    assert len(FILES) > 50
    total = sum(len(seglog_records(p.read_bytes())[0]) for p in FILES)
    assert total > 60_000


def test_partial_trailing_batches_stop_cleanly():
    for path in WIRE.glob("*/extracted_records/*partial_messages*"):
        data = path.read_bytes()
        scan = BatchIterator(data)
        batches = list(scan)
        assert scan.remaining > 0 and scan.position + scan.remaining == len(data)
        assert all(b.is_valid for b in batches)


def test_kraft_control_records():
    meta = REAL / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data" / "__cluster_metadata-0"
    control = [b for b in BatchIterator((meta / "00000000000000000000.log").read_bytes()) if b.is_control]
    assert len(control) == 1
    (change,) = control[0].control_records()
    assert isinstance(change, LeaderChange) and change.leader_id == 1 and change.voters == (1,)
    for snapshot in meta.glob("*.checkpoint"):
        kinds = [c for b in BatchIterator(snapshot.read_bytes()) if b.is_control for c in b.control_records()]
        assert isinstance(kinds[0], SnapshotHeader) and kinds[0].last_contained_log_timestamp > 0
        assert isinstance(kinds[-1], SnapshotFooter)
    assert ControlRecordType(2) is ControlRecordType.LEADER_CHANGE


def test_lz4_and_log_append_time_batches_in_real_data():
    monitoring = REAL / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data" / "_confluent-monitoring-0"
    batches = list(BatchIterator((monitoring / "00000000000000000000.log").read_bytes()))
    assert len(batches) == 1951
    assert all(b.compression.name == "LZ4" for b in batches)
    assert all(b.timestamp_type.label == "LogAppendTime" for b in batches)
    for b in batches[:50]:
        assert {r.timestamp for r in b.records()} == {b.max_timestamp}
        assert b.producer_id >= 0
