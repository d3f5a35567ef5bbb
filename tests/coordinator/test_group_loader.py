"""__consumer_offsets partitions replayed into groups and offsets: Kafka-written ones
(3.6, 2.1 and 0.10 message sets) checked against a replay seglog did not write, and
transactional commits, tombstones and bad records on a log seglog wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

import seglog
from seglog.coordinator import group_records as g
from seglog.coordinator.group_loader import load_groups
from seglog.coordinator.group_state import GroupState
from seglog.errors import CorruptRecordError
from seglog.records import Record, build_batch
from seglog.records.control import end_transaction_marker

from . import kafka_schemas as k

DIRS = {
    "cp7.6": "real_segments/rjmfernandes_flink-on-prem__cp7.6_kraft/data",
    "cp5.1.2": "real_segments/mscaldas2012_kafka-connect-spooldir__cp5.1.2/kafka-data",
    "kafka0.10": "real_segments/xpxwo100_bullShit__kafka0.10_magic1/tmp/kafka-logs",
}


def kafka_python_replay(partition_dir: Path) -> tuple[dict, dict]:
    """Committed offsets and groups from the partition's .log files, read by kafka-python
    and decoded with its protocol types: the later record of a key wins, a null value
    deletes. (None of these partitions holds a transaction.)"""
    offsets: dict = {}
    groups: dict = {}
    for log_file in sorted(partition_dir.glob("*.log")):
        reader = MemoryRecords(log_file.read_bytes())
        while (batch := reader.next_batch()) is not None:
            assert not getattr(batch, "is_transactional", False)
            for r in batch:
                version = int.from_bytes(r.key[:2], "big")
                if version in (0, 1):
                    _, group, topic, partition = k.decode(k.offset_commit_key(), r.key)
                    if r.value is None:
                        offsets.pop((group, topic, partition), None)
                    else:
                        v = int.from_bytes(r.value[:2], "big")
                        offsets[(group, topic, partition)] = k.decode(k.offset_commit_value(v), r.value)[1]
                else:
                    _, group = k.decode(k.group_metadata_key(), r.key)
                    if r.value is None:
                        groups.pop(group, None)
                    else:
                        v = int.from_bytes(r.value[:2], "big")
                        fields = k.decode(k.group_metadata_value(v), r.value)
                        groups[group] = (fields[1], fields[2], fields[3], fields[4], [m[0] for m in fields[-1]])
    return offsets, groups


def seglog_view(loaded: dict) -> tuple[dict, dict]:
    offsets = {
        (gid, topic, partition): c.value.offset
        for gid, group in loaded.items()
        for (topic, partition), c in group.offsets.items()
    }
    groups = {
        gid: (m.protocol_type, m.generation, m.protocol, m.leader, [x.member_id for x in m.members])
        for gid, group in loaded.items()
        if (m := group.metadata) is not None
    }
    return offsets, groups


@pytest.fixture(scope="module")
def kafka_logs(kafka_data: Path):
    managers = {name: seglog.open(str(kafka_data / d), read_only=True, background=False) for name, d in DIRS.items()}
    yield managers
    for manager in managers.values():
        manager.close()


def test_kafka_3_6_consumer_offsets_36_loads(kafka_data: Path, kafka_logs):
    loaded = load_groups(kafka_logs["cp7.6"].partition("__consumer_offsets", 36))
    assert list(loaded) == ["_confluent-controlcenter-7-6-0-1"]
    group = loaded["_confluent-controlcenter-7-6-0-1"]
    assert group.state is GroupState.STABLE
    meta = group.metadata
    assert (meta.protocol_type, meta.generation, meta.protocol, meta.version) == ("consumer", 5, "stream", 3)
    assert len(meta.members) == 12
    assert meta.leader in {m.member_id for m in meta.members}
    # every member's assignment is the consumer protocol's bytes (version 3 here)
    assert all(m.assignment[:2] == b"\x00\x03" and m.session_timeout == 60000 for m in meta.members)
    expected = kafka_python_replay(kafka_data / DIRS["cp7.6"] / "__consumer_offsets-36")
    assert seglog_view(loaded) == expected
    assert len(expected[0]) == len(group.offsets) > 0
    assert {topic for topic, _ in group.offsets} >= {"_confluent-monitoring", "_confluent-metrics"}


def test_kafka_0_10_message_sets_load(kafka_data: Path, kafka_logs):
    loaded = load_groups(kafka_logs["kafka0.10"].partition("__consumer_offsets", 40))
    assert list(loaded) == ["GroupA"]
    meta = loaded["GroupA"].metadata
    assert (meta.protocol_type, meta.protocol, meta.version, len(meta.members)) == ("consumer", "range", 1, 1)
    assert seglog_view(loaded) == kafka_python_replay(kafka_data / DIRS["kafka0.10"] / "__consumer_offsets-40")


def test_every_kafka_2_1_partition_loads_tombstones_included(kafka_data: Path, kafka_logs):
    manager = kafka_logs["cp5.1.2"]
    partitions = manager.partitions("__consumer_offsets")
    assert len(partitions) == 50
    names = set()
    for p in partitions:
        loaded = load_groups(manager.partition("__consumer_offsets", p))
        assert seglog_view(loaded) == kafka_python_replay(kafka_data / DIRS["cp5.1.2"] / f"__consumer_offsets-{p}")
        names |= set(loaded)
    assert "schema-registry" in names


def _commit(group: str, topic: str, partition: int, offset: int | None) -> Record:
    key = g.encode_key(g.OffsetCommitKey(group, topic, partition))
    value = None if offset is None else g.encode_offset_commit_value(g.OffsetCommitValue(offset, "", 1))
    return Record(key, value)


def _group(group: str, members: int) -> Record:
    value = g.GroupMetadataValue(
        "consumer",
        1,
        "range",
        "m-0" if members else None,
        tuple(g.MemberMetadata(f"m-{i}", "c", "/h", 10000, b"s", b"a", 300000) for i in range(members)),
    )
    return Record(g.encode_key(g.GroupMetadataKey(group)), g.encode_group_metadata_value(value))


@pytest.fixture
def offsets_log(tmp_path: Path):
    manager = seglog.open(str(tmp_path), background=False)
    manager.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    yield manager.partition("__consumer_offsets", 0)
    manager.close()


def _txn(log, pid: int, records: list[Record]) -> None:
    log.append_batches(build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True))


def _end(log, pid: int, commit: bool) -> None:
    marker = build_batch(
        [end_transaction_marker(commit, 0)], producer_id=pid, producer_epoch=0, transactional=True, control=True
    )
    log.append_batches(marker, origin="coordinator")


def test_transactional_commits_wait_for_their_marker(offsets_log):
    log = offsets_log
    log.append([_group("g", 2), _commit("g", "t", 0, 10), _commit("g", "t", 1, 20)])
    _txn(log, 7, [_commit("g", "t", 0, 11)])
    _txn(log, 8, [_commit("g", "t", 1, 99)])
    _txn(log, 9, [_commit("g", "t", 2, 5), _commit("g", "t", 2, None)])  # its tombstone takes its commit back
    _txn(log, 10, [_commit("other", "t", 0, 3)])  # no marker yet
    _end(log, 7, commit=True)
    _end(log, 8, commit=False)
    _end(log, 9, commit=True)
    log.append([_group("gone", 1)])
    log.append([Record(g.encode_key(g.GroupMetadataKey("gone")), None), _commit("g", "t", 3, 1)])
    log.append([_commit("g", "t", 3, None)])

    loaded = load_groups(log)
    assert set(loaded) == {"g", "other"}
    assert {tp: c.value.offset for tp, c in loaded["g"].offsets.items()} == {("t", 0): 11, ("t", 1): 20}
    assert loaded["g"].state is GroupState.STABLE
    other = loaded["other"]
    assert (other.metadata, other.offsets, other.state) == (None, {}, GroupState.EMPTY)
    assert {pid: {tp: c.value.offset for tp, c in o.items()} for pid, o in other.pending_offsets.items()} == {
        10: {("t", 0): 3}
    }


def test_a_committed_transaction_does_not_override_a_later_plain_commit(offsets_log):
    log = offsets_log
    _txn(log, 7, [_commit("g", "t", 0, 11)])
    log.append([_commit("g", "t", 0, 12)])
    _end(log, 7, commit=True)
    assert load_groups(log)["g"].offsets[("t", 0)].value.offset == 12


def test_a_bad_record_names_the_partition_and_offset(offsets_log):
    log = offsets_log
    log.append([_commit("g", "t", 0, 1)])
    log.append([Record(g.encode_key(g.OffsetCommitKey("g", "t", 0)), b"\x00\x03\x00")])
    with pytest.raises(CorruptRecordError) as e:
        load_groups(log)
    assert (e.value.file, e.value.offset) == (log.dir, 1)
    assert "OffsetCommitValue" in str(e.value)
