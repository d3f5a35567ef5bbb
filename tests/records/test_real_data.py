"""Real broker-written segments and fetch responses decode as kafka-python decodes them."""

from __future__ import annotations

import pytest

from seglog.records import BatchIterator, ControlRecordType, LeaderChange, SnapshotFooter, SnapshotHeader

from ..conftest import KAFKA_DATA
from .peer import kafka_python_batches, kafka_python_header, kafka_python_records, seglog_header

REAL = KAFKA_DATA / "real_segments"
WIRE = KAFKA_DATA / "wire_captures"
FILES = sorted([*REAL.glob("**/*.log"), *REAL.glob("**/*.checkpoint"), *WIRE.glob("*/extracted_records/*.bin")])


def _ids(path):
    return str(path.relative_to(KAFKA_DATA))


def validated_records(data):
    scan = BatchIterator(data)
    out = []
    for batch in scan:
        batch.validate()
        out += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch.records()]
    return out, scan


@pytest.mark.parametrize("path", FILES, ids=_ids)
def test_batch_headers_read_like_kafka_python(path):
    data = path.read_bytes()
    batches = list(BatchIterator(data))
    assert all(b.is_valid for b in batches)
    assert [seglog_header(b) for b in batches] == [kafka_python_header(b) for b in kafka_python_batches(data)]


@pytest.mark.parametrize("path", FILES, ids=_ids)
def test_decodes_like_kafka_python(path):
    data = path.read_bytes()
    ours, scan = validated_records(data)
    assert ours == kafka_python_records(data)
    if "partial_messages" not in path.name and "index_out_of_range" not in path.name:
        assert scan.remaining == 0


def test_real_data_was_found():
    assert len(FILES) > 50
    total = sum(len(validated_records(p.read_bytes())[0]) for p in FILES)
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


def _census(folder):
    """(batches, records, lz4 batches, LogAppendTime batches, tombstones, timestamp -1) of every .log below."""
    totals = [0] * 6
    for path in sorted((REAL / folder).glob("**/*.log")):
        for b in BatchIterator(path.read_bytes()):
            records = b.records()
            totals[0] += 1
            totals[1] += len(records)
            totals[2] += b.compression.name == "LZ4"
            totals[3] += b.timestamp_type.label == "LogAppendTime"
            totals[4] += sum(r.value is None for r in records)
            totals[5] += sum(r.timestamp == -1 for r in records)
    return totals


def test_what_the_data_readme_counts():
    # figures from kafka-data/README.md, counted there by independent tools
    flink = _census("rjmfernandes_flink-on-prem__cp7.6_kraft")
    assert flink[:2] == [37_113, 41_901]
    spooldir = _census("mscaldas2012_kafka-connect-spooldir__cp5.1.2")
    assert spooldir[:5] == [526, 582, 69, 46, 102]
    magic1 = _census("xpxwo100_bullShit__kafka0.10_magic1")
    assert magic1[1] == 22_280 and magic1[5] == 9_000
    assert _census("SharaWeil_kafka-0.11.0")[:2] == [32, 33]
    assert _census("someshkovi_kafka-log-parser")[0] == 4


def test_what_the_data_readme_counts_per_partition():
    data = REAL / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"
    orders = list(BatchIterator((data / "orders-0" / "00000000000000000000.log").read_bytes()))
    assert len(orders) == 17_194 and all(r.headers for b in orders for r in b.records())
    (store,) = data.glob("*MonitoringVerifierStore-changelog-0")
    changelog = list(BatchIterator((store / "00000000000000000000.log").read_bytes()))
    assert len(changelog) == 523 and sum(len(b.records()) for b in changelog) == 3_204
    assert all(b.compression.name == "LZ4" for b in changelog)
    metadata = list(BatchIterator((data / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()))
    assert len(metadata) == 16_340
    offsets = list(BatchIterator((data / "__consumer_offsets-36" / "00000000000000000000.log").read_bytes()))
    assert sum(len(b.records()) for b in offsets) == 1_564
    topic = REAL / "xpxwo100_bullShit__kafka0.10_magic1" / "tmp" / "kafka-logs" / "TEST-TOPIC-0"
    assert sum(1 for _ in BatchIterator((topic / "00000000000000000000.log").read_bytes())) == 21_211


def test_empty_segments_with_a_base_offset_above_zero():
    for path in [
        REAL / "mscaldas2012_kafka-connect-spooldir__cp5.1.2" / "kafka-data" / "_confluent-monitoring-0",
        REAL / "SharaWeil_kafka-0.11.0" / "data" / "mac_test-0",
    ]:
        (empty,) = [p for p in path.glob("*.log") if p.stat().st_size == 0]
        assert int(empty.stem) > 0
        scan = BatchIterator(empty.read_bytes())
        assert list(scan) == [] and scan.remaining == 0
