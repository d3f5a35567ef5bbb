"""Control records: transaction markers, KRaft leader changes and snapshot markers."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from seglog.errors import CorruptRecordError
from seglog.records import (
    BatchIterator,
    Compression,
    ControlRecordType,
    EndTransactionMarker,
    LeaderChange,
    Record,
    RecordBatch,
    SnapshotFooter,
    SnapshotHeader,
    UnknownControlRecord,
    build_batch,
    end_transaction_marker,
    parse_control_record,
)
from seglog.records.control import KRaftVersion, leader_change

from ..conftest import KAFKA_DATA

METADATA = KAFKA_DATA / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data" / "__cluster_metadata-0"


def _control_record(kind: int, value: bytes | None) -> Record:
    return Record(struct.pack(">hh", 0, kind), value, 1, (), 0)


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("commit", [True, False])
def test_transaction_markers_round_trip(commit, codec):
    data = build_batch(
        [end_transaction_marker(commit, coordinator_epoch=2**31 - 1, timestamp=1700000000000)],
        base_offset=42,
        control=True,
        transactional=True,
        producer_id=5,
        producer_epoch=1,
        compression=codec,
    )
    batch = RecordBatch(data)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    assert batch.control_records() == [EndTransactionMarker(kind, 2**31 - 1)]
    # kafka-python reads the same batch as a control batch holding the same marker
    theirs = DefaultRecordBatch(bytes(data))
    assert theirs.is_control_batch and theirs.is_transactional and theirs.validate_crc()
    (record,) = list(theirs)
    assert (record.offset, record.type, record.commit) == (42, int(kind), commit)


def test_leader_change_round_trip():
    record = leader_change(3, (1, 2, 3), timestamp=1)
    parsed = parse_control_record(Record(record.key, record.value, 1, (), 0))
    assert parsed == LeaderChange(3, (1, 2, 3), (1, 2, 3))


def test_the_kraft_leader_change_of_a_real_metadata_log():
    control = [b for b in BatchIterator((METADATA / "00000000000000000000.log").read_bytes()) if b.is_control]
    assert len(control) == 1 and not control[0].is_transactional
    assert control[0].control_records() == [LeaderChange(leader_id=1, voters=(1,), granting_voters=(1,))]


@pytest.mark.parametrize("snapshot", sorted(METADATA.glob("*.checkpoint")), ids=lambda p: p.name)
def test_kraft_snapshots_open_with_a_header_and_close_with_a_footer(snapshot):
    batches = list(BatchIterator(snapshot.read_bytes()))
    assert batches[0].is_control and batches[-1].is_control
    assert not any(b.is_control for b in batches[1:-1])
    (header,) = batches[0].control_records()
    (footer,) = batches[-1].control_records()
    assert isinstance(header, SnapshotHeader) and header.version == 0
    assert 1_713_000_000_000 < header.last_contained_log_timestamp < 1_714_000_000_000  # April 2024
    assert footer == SnapshotFooter(version=0)
    # the snapshot's name is its end offset: the records inside stop just before it
    end_offset = int(snapshot.name.split("-")[0])
    assert batches[-1].last_offset < end_offset


def test_kraft_version_and_unknown_types():
    value = struct.pack(">hh", 0, 1) + b"\x00"
    assert parse_control_record(_control_record(5, value)) == KRaftVersion(kraft_version=1, version=0)
    unknown = parse_control_record(_control_record(9, b"\x01"))
    assert isinstance(unknown, UnknownControlRecord) and unknown.type == 9


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (ControlRecordType.COMMIT, b"\x00\x00\x00"),  # a marker is 6 bytes
        (ControlRecordType.LEADER_CHANGE, b"\x00\x00\x00\x00\x00\x01"),  # no voters array
        (ControlRecordType.LEADER_CHANGE, b"\x00\x00\x00\x00\x00\x01\xff\xff\xff\x0f"),  # 2**32 voters
        (ControlRecordType.SNAPSHOT_HEADER, b"\x00\x00\x00\x00"),  # timestamp cut short
        (ControlRecordType.SNAPSHOT_FOOTER, b"\x00\x00\x01\x00\x05ab"),  # tagged field past the end
        (ControlRecordType.SNAPSHOT_FOOTER, b"\x00\x00" + b"\xff" * 11),  # varint too long
    ],
)
def test_corrupt_control_values_raise_corrupt_record_error(kind, value):
    with pytest.raises(CorruptRecordError):
        parse_control_record(_control_record(kind, value), 77)


@pytest.mark.parametrize("key", [None, b"", b"\x00", b"\x00\x00\x00"])
def test_control_record_with_a_short_key(key):
    with pytest.raises(CorruptRecordError, match="control record key") as e:
        parse_control_record(Record(key, b"", 1, (), 0), 1234)
    assert e.value.position == 1234
