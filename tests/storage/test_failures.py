"""A dir that must keep opening and closing whatever is wrong in it, and creations and
deletions that either complete or change nothing: damaged checkpoint and meta.properties
files, a close that fails for one partition, a create or roll failing part way (nothing
left behind, no file kept open), a topic name at Kafka's limit."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

import pytest

from seglog.errors import InvalidPartitionsError, KafkaStorageError, SeglogError
from seglog.storage import checkpoint, fileio
from seglog.storage.checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
)

from .conftest import check_log, crash, new_log, open_logs, records


@pytest.fixture(autouse=True)
def no_faults_left():
    yield
    fileio.faults.clear()


def held_files(root: Path) -> list[str]:
    """Files under ``root`` this process still has open or mapped."""
    root_text = str(root.resolve())
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root_text) and not target.endswith("/.lock"):
            held.append(target)
    with open("/proc/self/maps") as maps:
        held += [line.split(None, 5)[-1].strip() for line in maps if root_text in line]
    return held


# --- damaged checkpoints and meta.properties -------------------------------------------------


def _append_one_by_one(log, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        log.append(records(1, start=i, size=100))


def _dir_with_data(tmp_path, clock) -> None:
    manager, log = new_log(tmp_path, config={"segment.bytes": 300}, clock=clock)
    _append_one_by_one(log, 4)
    log.delete_records(1)
    crash(manager)  # recovery must then read the checkpoints


@pytest.mark.parametrize(
    "name",
    [
        RECOVERY_POINT_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
        f"t-0/{LEADER_EPOCH_CHECKPOINT}",
    ],
)
@pytest.mark.parametrize(
    "content", [b"0\n1\nt 0 \xff\n", b"\xfe\xff\x00garbage", b"0\n1\nt 0 -5\n", b"0\n1\nt 0 99999999999999999999\n"]
)
def test_a_corrupt_checkpoint_reads_as_empty_with_a_warning(tmp_path, clock, caplog, name, content):
    _dir_with_data(tmp_path, clock)
    (tmp_path / name).write_bytes(content)
    with caplog.at_level(logging.WARNING), open_logs(tmp_path, clock=clock) as manager:
        log = manager.partition("t", 0)
        assert [r.offset for r in log.records()][-3:] == [1, 2, 3]
        check_log(log)
    assert any(str(tmp_path / name) in r.getMessage() for r in caplog.records), caplog.text


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (b"version=0\nbroker.id=\xff\n", "not UTF-8"),
        (b"version=0\nbroker.id=abc\n", "broker.id 'abc'"),
        (b"version=0\nnode.id=99999999999\n", "node.id"),
        (b"garbage", "version"),
    ],
)
def test_a_meta_properties_that_cannot_be_parsed(tmp_path, clock, content, text):
    _dir_with_data(tmp_path, clock)
    (tmp_path / "meta.properties").write_bytes(content)
    for config in ({}, {"broker.id": 3}):
        with pytest.raises(KafkaStorageError, match=text) as e:
            open_logs(tmp_path, config, clock=clock)
        assert e.value.file == str(tmp_path / "meta.properties")
    (tmp_path / "meta.properties").unlink()
    with open_logs(tmp_path, clock=clock) as manager:  # the lock was released
        assert manager.topics() == ["t"]


@pytest.mark.parametrize(
    "content", [b"[1, 2]", b'{"topics": {"t": 5}}', b'{"topics": {"t": {"config": {"segment.bytes": -1}}}}']
)
def test_a_topic_configs_file_that_cannot_be_parsed(tmp_path, clock, content):
    _dir_with_data(tmp_path, clock)
    (tmp_path / "topic-configs.json").write_bytes(content)
    with pytest.raises(SeglogError) as e:  # a KafkaStorageError, or the config error it holds
        open_logs(tmp_path, clock=clock)
    assert e.value.file == str(tmp_path / "topic-configs.json")


# --- close always finishes -----------------------------------------------------------------


def test_close_finishes_whatever_one_partition_does(tmp_path, clock):
    """A 0-byte .timeindex of an inactive segment made every close raise and skip the
    other partitions, the checkpoints and the clean-shutdown marker."""
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic("t", 2, {"segment.bytes": 300})
    for p in (0, 1):
        _append_one_by_one(manager.partition("t", p), 4)
    manager.close()
    (tmp_path / "t-0" / "00000000000000000000.timeindex").write_bytes(b"")
    manager = open_logs(tmp_path, clock=clock)
    manager.partition("t", 1).append(records(1, start=4, size=100))
    manager.close()
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    assert "t 1 5" in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    with open_logs(tmp_path, clock=clock) as manager:
        assert [r.offset for r in manager.partition("t", 0).records()] == [0, 1, 2, 3]


def test_a_partition_failing_to_close_leaves_the_others_closed_and_checkpointed(tmp_path, clock):
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic("a", 1)
    manager.create_topic("b", 1)
    for topic in ("a", "b"):
        manager.partition(topic, 0).append(records(3))
    fileio.faults.inject("fsync", errno.EIO, path="a-0/")
    with pytest.raises(KafkaStorageError, match="fsync"):
        manager.close()
    assert not (tmp_path / ".kafka_cleanshutdown").exists()  # a-0 recovers at the next start
    assert "b 0 3" in (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert held_files(tmp_path) == []
    with open_logs(tmp_path, clock=clock) as manager:  # the lock was released
        for topic in ("a", "b"):
            assert [r.offset for r in manager.partition(topic, 0).records()] == [0, 1, 2]


# --- creations that fail part way ------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "path"),
    [
        ("mkdir", "t-2"),
        ("write", "t-2/partition.metadata"),
        ("open", "t-2/00000000000000000000.log"),
        ("allocate", "t-2/00000000000000000000.index"),
        ("allocate", "t-2/00000000000000000000.timeindex"),
        ("write", "topic-configs.json"),
    ],
)
def test_a_failed_create_topic_leaves_nothing(tmp_path, clock, op, path):
    manager = open_logs(tmp_path, clock=clock)
    fileio.faults.inject(op, errno.ENOSPC, path=path)
    with pytest.raises(KafkaStorageError, match="No space left"):
        manager.create_topic("t", 4)
    assert manager.topics() == []
    assert [n for n in os.listdir(tmp_path) if n.startswith("t-")] == []
    assert held_files(tmp_path) == []
    manager.create_topic("t", 4)  # the name is free again
    crash(manager)
    with open_logs(tmp_path, clock=clock) as manager:
        assert manager.partitions("t") == [0, 1, 2, 3]


def test_a_failed_create_partitions_leaves_the_topic_as_it_was(tmp_path, clock):
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic("t", 2)
    fileio.faults.inject("allocate", errno.ENOSPC, path="/t-3/")
    with pytest.raises(KafkaStorageError, match="No space left"):
        manager.create_partitions("t", 5)
    assert manager.partitions("t") == [0, 1]
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("t-")) == ["t-0", "t-1"]
    with pytest.raises(InvalidPartitionsError):
        manager.create_partitions("t", 2**31)  # no int32: refused before any dir is made
    manager.create_partitions("t", 5)
    crash(manager)
    with open_logs(tmp_path, clock=clock) as manager:
        assert manager.partitions("t") == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("op", "path"), [("allocate", ".index"), ("allocate", ".timeindex"), ("truncate", ".log")])
def test_a_failed_roll_leaves_no_file_open_or_behind(tmp_path, clock, op, path):
    manager, log = new_log(tmp_path, config={"segment.bytes": 300}, clock=clock)
    _append_one_by_one(log, 2)
    names = sorted(os.listdir(log.dir))
    fileio.faults.inject(op, errno.ENOSPC, path=f"00000000000000000002{path}")
    with pytest.raises(KafkaStorageError):
        log.append(records(1, start=2, size=100))
    assert sorted(os.listdir(log.dir)) == names
    assert all("00000000000000000002" not in held for held in held_files(tmp_path))
    log.append(records(1, start=2, size=100))
    check_log(log)
    manager.close()


@pytest.mark.parametrize("path", [".index.cleaned", ".timeindex.cleaned"])
def test_a_failed_cleaned_segment_leaves_no_file_open_or_behind(tmp_path, clock, path):
    config = {"cleanup.policy": "compact", "segment.bytes": 2000}
    manager, log = new_log(tmp_path, config=config, clock=clock)
    for i in range(30):
        log.append([(b"k%d" % (i % 3), b"v" * 100, 1000 + i)])
    names = sorted(os.listdir(log.dir))
    fileio.faults.inject("allocate", errno.ENOSPC, path=path)
    with pytest.raises(KafkaStorageError):
        manager.clean(force=True)
    assert sorted(os.listdir(log.dir)) == names
    assert all(".cleaned" not in held for held in held_files(tmp_path))
    manager.close()


# --- deleting a topic --------------------------------------------------------------------------


def test_delete_a_topic_whose_name_is_249_characters(tmp_path, clock):
    name = "t" * 249
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic(name, 2)
    manager.partition(name, 1).append(records(2))
    manager.delete_topic(name)
    assert manager.topics() == []
    left = os.listdir(tmp_path)
    assert all(not n.startswith("ttt") or (n.endswith("-delete") and len(n) <= 255) for n in left), left
    manager.close()
    with open_logs(tmp_path, clock=clock) as manager:
        assert manager.topics() == []
    assert all(not n.startswith("ttt") for n in os.listdir(tmp_path))


def test_a_delete_that_fails_changes_nothing(tmp_path, clock):
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic("t", 3)
    manager.partition("t", 0).append(records(2))
    fileio.faults.inject("rename", errno.EIO, path="/t-2")
    with pytest.raises(KafkaStorageError):
        manager.delete_topic("t")
    assert manager.partitions("t") == [0, 1, 2]
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("t-")) == ["t-0", "t-1", "t-2"]
    manager.partition("t", 0).append(records(1, start=2))
    manager.close()
    with open_logs(tmp_path, clock=clock) as manager:
        assert [r.offset for r in manager.partition("t", 0).records()] == [0, 1, 2]
        manager.delete_topic("t")
        assert manager.topics() == []


def test_a_partition_whose_delete_fails_is_answered_and_the_others_are_deleted(tmp_path, clock):
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic("t", 3)
    fileio.faults.inject("rename", errno.EIO, path="/t-1")
    failed = manager.delete_partition_logs([("t", 0), ("t", 1), ("t", 2)])
    assert list(failed) == [("t", 1)] and isinstance(failed["t", 1], KafkaStorageError)
    assert manager.partitions("t") == [1]
    manager.partition("t", 1).append(records(2))  # still served
    assert ("t", 1) in checkpoint.read_offsets(str(tmp_path / "recovery-point-offset-checkpoint"))
    manager.close()
    with open_logs(tmp_path, clock=clock) as manager:
        assert manager.partitions("t") == [1]
        assert [r.offset for r in manager.partition("t", 1).records()] == [0, 1]


def test_a_delete_failing_after_its_renames_completes(tmp_path, clock):
    manager = open_logs(tmp_path, clock=clock)
    manager.create_topic("t", 2)
    fileio.faults.inject("fsync", errno.EIO, path=lambda p: p == str(tmp_path))
    with pytest.raises(KafkaStorageError):
        manager.delete_topic("t")
    assert manager.topics() == [] and held_files(tmp_path) == []
    fileio.faults.clear()
    manager.create_topic("t", 1)  # the name is free
    manager.close()
    with open_logs(tmp_path, clock=clock) as manager:
        assert manager.partitions("t") == [0]
