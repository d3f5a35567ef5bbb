"""LogManager: topics, per-topic configs, the log dir's own files, clean shutdown,
read-only opening. (Recovery and the files a crash leaves: test_loader.py.)"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import time
from pathlib import Path

import pytest

import seglog
from seglog.errors import (
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidTopicError,
    KafkaStorageError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from seglog.storage import checkpoint, fileio
from seglog.storage.manager import read_meta_properties

from .conftest import MS, crash, new_log, open_logs, records


def data_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file() and p.name != ".lock")


# --- topics ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "x" * 250, "sp ace", "../../etc/passwd"])
def test_illegal_topic_names_touch_nothing(tmp_path, name):
    with open_logs(tmp_path / "d") as manager:
        before = sorted(os.listdir(tmp_path / "d"))
        with pytest.raises(InvalidTopicError):
            manager.create_topic(name, 1)
        assert sorted(os.listdir(tmp_path / "d")) == before
    assert sorted(os.listdir(tmp_path)) == ["d"]


def test_create_topic_rules(tmp_path):
    with open_logs(tmp_path, {"num.partitions": 3}) as manager:
        manager.create_topic("a.b")
        assert manager.partitions("a.b") == [0, 1, 2]
        with pytest.raises(TopicExistsError):
            manager.create_topic("a.b", 1)
        with pytest.raises(InvalidTopicError, match="collides"):
            manager.create_topic("a_b", 1)
        with pytest.raises(InvalidPartitionsError):
            manager.create_topic("c", 0)
        with pytest.raises(InvalidConfigurationError):
            manager.create_topic("c", 1, {"segment.bytes": 1})
        with pytest.raises(InvalidConfigurationError):
            manager.create_topic("c", 1, {"no.such.key": 1})
        assert manager.topics() == ["a.b"]
        meta = (tmp_path / "a.b-0" / "partition.metadata").read_text()
        assert meta.startswith("version: 0\ntopic_id: ")


def test_delete_topic_renames_then_removes_later(tmp_path):
    with open_logs(tmp_path, background=True) as manager:
        manager.create_topic("gone", 2, {"file.delete.delay.ms": 300})
        manager.create_topic("kept", 1)
        manager.partition("gone", 0).append(records(3))
        manager.delete_topic("gone")
        renamed = [n for n in os.listdir(tmp_path) if n.endswith("-delete")]
        assert len(renamed) == 2 and all(n.startswith("gone-") for n in renamed)
        assert not (tmp_path / "gone-0").exists()
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.partition("gone", 0)
        assert manager.topics() == ["kept"]
        deadline = time.monotonic() + 10
        while any(n.endswith("-delete") for n in os.listdir(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(n.endswith("-delete") for n in os.listdir(tmp_path))
        assert "gone" not in json.loads((tmp_path / "topic-configs.json").read_text())["topics"]
        assert ("gone", 0) not in checkpoint.read_offsets(str(tmp_path / "recovery-point-offset-checkpoint"))
        manager.create_topic("gone", 1)  # the name is free again
        assert manager.partition("gone", 0).log_end_offset == 0


def test_delete_partition_logs_deletes_the_set_and_answers_each_one_not_deleted(tmp_path):
    # StopReplica's deletions: a topic's config and id go with its last partition, whichever call that is
    with open_logs(tmp_path) as manager:
        manager.create_topic("a", 3, {"retention.ms": 1000})
        manager.create_topic("b", 2)
        failed = manager.delete_partition_logs([("a", 0), ("a", 1), ("b", 0), ("nope", 0)])
        assert list(failed) == [("nope", 0)] and isinstance(failed["nope", 0], UnknownTopicOrPartitionError)
        assert manager.partitions("a") == [2] and manager.partitions("b") == [1]
        assert manager.topic_overrides("a") == {"retention.ms": 1000}
        assert sorted(json.loads((tmp_path / "topic-configs.json").read_text())["topics"]) == ["a", "b"]
        assert sorted(checkpoint.read_offsets(str(tmp_path / "recovery-point-offset-checkpoint"))) == [
            ("a", 2),
            ("b", 1),
        ]
        assert manager.delete_partition_logs([("a", 2), ("b", 1)]) == {}
        assert manager.topics() == []
        assert json.loads((tmp_path / "topic-configs.json").read_text())["topics"] == {}
        assert checkpoint.read_offsets(str(tmp_path / "recovery-point-offset-checkpoint")) == {}
        assert not [n for n in os.listdir(tmp_path) if n.startswith(("a-", "b-")) and not n.endswith("-delete")]
        manager.create_topic("a", 1)  # the name is free again, with the defaults
        assert manager.topic_overrides("a") == {}


def test_leftover_delete_dirs_are_removed_on_open(tmp_path, caplog):
    with open_logs(tmp_path) as manager:
        manager.create_topic("t", 1)
    leftover = tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete"
    shutil.copytree(tmp_path / "t-0", leftover)
    (tmp_path / "not-a-partition").mkdir()
    with caplog.at_level(logging.WARNING), open_logs(tmp_path) as manager:
        assert not leftover.exists()
        assert manager.topics() == ["t"]
    assert "not a topic-partition name" in caplog.text


# --- configs ------------------------------------------------------------------------------------------


def test_topic_configs_are_persisted_and_override_broker_defaults(tmp_path, clock):
    broker = {"log.segment.bytes": 5000, "log.retention.hours": 2}
    with open_logs(tmp_path, broker, clock=clock) as manager:
        manager.create_topic("small", 1, {"segment.bytes": 1000, "cleanup.policy": "compact,delete"})
        manager.create_topic("plain", 1)
        assert manager.topic_config("small").segment_bytes == 1000
        assert manager.topic_config("plain").segment_bytes == 5000
        assert manager.topic_config("plain").retention_ms == 2 * 3_600_000
    stored = json.loads((tmp_path / "topic-configs.json").read_text())
    assert stored["topics"]["small"]["config"] == {"segment.bytes": 1000, "cleanup.policy": "compact,delete"}
    assert stored["topics"]["plain"]["config"] == {}
    with open_logs(tmp_path, broker, clock=clock) as manager:
        config = manager.topic_config("small")
        assert config.segment_bytes == 1000 and config.compact and config.delete
        log = manager.partition("small", 0)
        for i in range(30):
            log.append(records(1, start=i, size=100))
        assert all(s.size <= 1000 for s in log.segments) and len(log.segments) > 2
    with open_logs(tmp_path, {"log.segment.bytes": 700}) as manager:
        assert manager.topic_config("plain").segment_bytes == 700  # a default, not an override


def test_a_replicas_logs_rewrite_the_topic_configs_only_when_their_entry_changes(tmp_path, clock):
    """get_or_create_log (the controller's LeaderAndIsr, one partition at a time) rewrites
    topic-configs.json for a new topic or changed overrides, not for each partition of the same."""
    path = tmp_path / "topic-configs.json"
    with open_logs(tmp_path, clock=clock) as manager:
        manager.get_or_create_log("wide", 0, "AAAAAAAAAAAAAAAAAAAAAA", {"segment.bytes": 1000})
        os.link(path, tmp_path / "written")  # a write renames a new file over it (the link keeps this one)
        for p in range(1, 5):
            manager.get_or_create_log("wide", p, "AAAAAAAAAAAAAAAAAAAAAA", {"segment.bytes": 1000})
        assert os.path.samefile(path, tmp_path / "written")
        manager.get_or_create_log("wide", 5, "AAAAAAAAAAAAAAAAAAAAAA", {"segment.bytes": 2000})
        manager.get_or_create_log("other", 0, "BAAAAAAAAAAAAAAAAAAAAA")
    stored = json.loads(path.read_text())["topics"]
    assert stored["wide"] == {"topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "config": {"segment.bytes": 2000}}
    assert stored["other"] == {"topic_id": "BAAAAAAAAAAAAAAAAAAAAA", "config": {}}
    with open_logs(tmp_path, clock=clock) as manager:
        assert manager.partitions("wide") == list(range(6))
        assert manager.topic_config("wide").segment_bytes == 2000


def test_alter_topic_config_takes_effect_without_reopening(tmp_path, clock):
    with open_logs(tmp_path, clock=clock) as manager:
        manager.create_topic("t", 2)
        log = manager.partition("t", 1)
        log.append(records(5, size=100))
        assert len(log.segments) == 1
        config = manager.alter_topic_config("t", {"segment.bytes": 200, "cleanup.policy": "compact"})
        assert config.segment_bytes == 200 and manager.partition("t", 0).config.segment_bytes == 200
        log.append(records(1, size=100))
        assert len(log.segments) == 2  # rolled at once
        with pytest.raises(Exception, match="without a key"):
            log.append([seglog.Record(None, b"v", MS)])
        config = manager.alter_topic_config("t", delete=["cleanup.policy"])
        assert not config.compact
        log.append([seglog.Record(None, b"v", MS)])
        with pytest.raises(InvalidConfigurationError):
            manager.alter_topic_config("t", {"segment.bytes": -5})
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.alter_topic_config("nope", {"segment.bytes": 500})
    with open_logs(tmp_path) as manager:
        assert manager.topic_config("t").overrides == {"segment.bytes": 200}


# --- the log dir's own files ----------------------------------------------------------------------


def test_meta_properties_v0_written_and_read(tmp_path):
    with open_logs(tmp_path, {"broker.id": 7}):
        pass
    props = read_meta_properties(str(tmp_path / "meta.properties"))
    assert props["version"] == "0" and props["broker.id"] == "7" and props["cluster.id"]
    with pytest.raises(InvalidConfigurationError, match="does not match"):
        open_logs(tmp_path, {"broker.id": 8})
    with open_logs(tmp_path):  # not configured: whatever is stored
        pass


def test_meta_properties_v1_of_kraft(tmp_path):
    (tmp_path / "meta.properties").write_text(
        "#\n#Thu Apr 18 10:00:00 UTC 2024\nnode.id=3\ndirectory.id=abc\nversion=1\ncluster.id=Zq3\n"
    )
    assert read_meta_properties(str(tmp_path / "meta.properties"))["node.id"] == "3"
    with open_logs(tmp_path, {"broker.id": 3}):
        pass
    with pytest.raises(InvalidConfigurationError):
        open_logs(tmp_path, {"broker.id": 4})
    (tmp_path / "meta.properties").write_text("version=2\nnode.id=3\n")
    with pytest.raises(KafkaStorageError, match="version"):
        open_logs(tmp_path)


def test_checkpoints_written_on_close(tmp_path, clock):
    with open_logs(tmp_path, clock=clock) as manager:
        manager.create_topic("t", 2)
        manager.partition("t", 0).append(records(5))
        manager.partition("t", 1).append(records(2))
        manager.delete_records("t", 0, 3)
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == "0\n2\nt 0 5\nt 1 2\n"
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n2\nt 0 3\nt 1 0\n"
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n2\nt 0 5\nt 1 2\n"
    with open_logs(tmp_path) as manager:
        assert manager.partition("t", 0).log_start_offset == 3


def test_checkpoints_naming_missing_partitions_and_empty_ones_are_tolerated(tmp_path):
    with open_logs(tmp_path) as manager:
        manager.create_topic("t", 1)
        manager.partition("t", 0).append(records(2))
    checkpoint.write_offsets(str(tmp_path / "recovery-point-offset-checkpoint"), {("t", 0): 2, ("gone", 4): 99})
    (tmp_path / "log-start-offset-checkpoint").write_bytes(b"")
    (tmp_path / "replication-offset-checkpoint").write_text("garbage")
    with open_logs(tmp_path) as manager:
        assert manager.topics() == ["t"] and manager.partition("t", 0).log_end_offset == 2


def test_clean_shutdown_marker(tmp_path):
    marker = tmp_path / ".kafka_cleanshutdown"
    manager = open_logs(tmp_path)
    assert not marker.exists()
    manager.create_topic("t", 1)
    manager.close()
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": -1}
    manager = open_logs(tmp_path)
    assert not marker.exists()  # from here on a crash is an unclean shutdown
    crash(manager)
    assert not marker.exists()


# --- read-only opening ----------------------------------------------------------------------------------


def test_read_only_opening_of_a_dir_a_writer_owns(tmp_path, clock):
    writer = open_logs(tmp_path, clock=clock)
    writer.create_topic("t", 2, {"segment.bytes": 600})
    log = writer.partition("t", 0)
    for i in range(20):
        log.append(records(1, start=i, size=60))
    before = {p: os.path.getsize(tmp_path / p) for p in data_files(tmp_path)}
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        assert [r.offset for r in rlog.records()] == list(range(20))
        assert rlog.offset_for_timestamp(MS + 7) is None or rlog.offset_for_timestamp(MS) == (0, MS)
        with pytest.raises(KafkaStorageError, match="read-only"):
            rlog.append(records(1))
        with pytest.raises(KafkaStorageError, match="read-only"):
            reader.create_topic("x", 1)
        log.append(records(1, start=20))  # the writer goes on meanwhile
        assert [r.offset for r in rlog.records(15)] == list(range(15, 20))
    assert writer.partition("t", 0).log_end_offset == 21
    writer.close()
    after = {p: os.path.getsize(tmp_path / p) for p in data_files(tmp_path)}
    assert set(before) <= set(after)  # the reader deleted nothing
    with seglog.open(str(tmp_path), read_only=True) as reader:
        assert reader.partition("t", 0).log_end_offset == 21


def test_read_only_opening_rebuilds_missing_indexes_in_memory(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 100}, clock=clock)
    for i in range(30):
        log.append(records(1, start=i, size=60))
    index = log.segments[0].index_path
    manager.close()
    os.unlink(index)
    files = data_files(tmp_path)
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        assert rlog.read(25).slice is not None
        assert rlog.segments[0].offset_index.entries > 3
    assert data_files(tmp_path) == files and not os.path.exists(index)
    with pytest.raises(KafkaStorageError, match="does not exist"):
        seglog.open(str(tmp_path / "nope"), read_only=True)


def test_read_only_opening_lists_again_when_a_segment_goes_under_it(tmp_path, clock):
    """A reader lists the segments, then the owner deletes one (retention, a truncation)
    before the reader opens it: the reader lists again instead of failing."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 600}, clock=clock)
    for i in range(20):
        log.append(records(1, start=i, size=60))
    manager.close()
    active = os.path.basename(log.segments[-1].log_path)
    fileio.faults.inject("open", errno.ENOENT, path=active, times=2)
    try:
        with seglog.open(str(tmp_path), read_only=True) as reader:
            assert reader.partition("t", 0).log_end_offset == 20
        fileio.faults.inject("open", errno.ENOENT, path=active, times=-1)
        with pytest.raises(KafkaStorageError, match="No such file"):
            seglog.open(str(tmp_path), read_only=True)
    finally:
        fileio.faults.clear()


def test_a_reader_never_deletes_segments_below_a_checkpointed_log_start(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(5))
    manager.close()
    path = tmp_path / "log-start-offset-checkpoint"
    checkpoint.write_offsets(str(path), {("t", 0): 50})  # ahead of the data, as after the data went
    files = data_files(tmp_path)
    with seglog.open(str(tmp_path), read_only=True) as reader:
        rlog = reader.partition("t", 0)
        assert (rlog.log_start_offset, rlog.log_end_offset) == (50, 50)
        assert list(rlog.records()) == []
    assert data_files(tmp_path) == files
    with open_logs(tmp_path) as writer:  # the owner starts the log afresh there
        assert writer.partition("t", 0).log_end_offset == 50


def test_two_log_dirs(tmp_path, clock):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    with seglog.open(dirs, clock=clock, background=False) as manager:
        manager.create_topic("t", 4)
        for p in range(4):
            manager.partition("t", p).append(records(p + 1))
    assert len([n for n in os.listdir(dirs[0]) if n.startswith("t-")]) == 2
    assert len([n for n in os.listdir(dirs[1]) if n.startswith("t-")]) == 2
    with seglog.open(dirs, background=False) as manager:
        assert [manager.partition("t", p).log_end_offset for p in range(4)] == [1, 2, 3, 4]
        manager.create_topic("u", 1)  # the dirs hold two each (counted from the loaded logs): a's turn
        manager.create_topic("v", 2)  # v-0 to b, which holds fewer; v-1 to a again (a tie)
    assert [sorted(n for n in os.listdir(d) if n.startswith(("u-", "v-"))) for d in dirs] == [["u-0", "v-1"], ["v-0"]]
    # each dir's topic-configs.json: the topics it holds a partition of
    assert [sorted(json.loads((Path(d) / "topic-configs.json").read_text())["topics"]) for d in dirs] == [
        ["t", "u", "v"],
        ["t", "v"],
    ]
    in_a = next(n for n in os.listdir(dirs[0]) if n.startswith("t-"))
    shutil.copytree(Path(dirs[0]) / in_a, Path(dirs[1]) / in_a)
    with pytest.raises(KafkaStorageError, match="two log dirs"):
        seglog.open(dirs, background=False)


def test_create_partitions_counts_a_partial_topic_by_its_highest_partition(tmp_path):
    """A dir holding events-0 and events-2 only (a cluster broker's): the topic has three partitions,
    so growing it to three is refused, as Kafka refuses a count that is not larger, and growing it
    to four adds events-3 alone (neither touching events-2 nor making events-1 here)."""
    with seglog.open(str(tmp_path)) as logs:
        logs.create_topic("events", partitions=3)
        logs.partition("events", 2).append(records(2))
    shutil.rmtree(tmp_path / "events-1")
    with seglog.open(str(tmp_path)) as logs:
        with pytest.raises(InvalidPartitionsError, match="has 3 partitions"):
            logs.create_partitions("events", 3)
        logs.create_partitions("events", 4)
        assert logs.partitions("events") == [0, 2, 3]
        assert logs.partition("events", 2).log_end_offset == 2
