"""Checkpoint files, names on disk, and the leader epoch cache."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from seglog.errors import InvalidTopicError, KafkaStorageError
from seglog.storage import checkpoint, fileio
from seglog.storage.checkpoint import CorruptCheckpointError
from seglog.storage.leader_epoch import LeaderEpochCache
from seglog.storage.naming import (
    deleted_dir_name,
    offset_file_name,
    parse_deleted_dir,
    parse_offset_file,
    parse_partition_dir,
    validate_topic,
)

# --- checkpoint files ----------------------------------------------------------------------------


def test_offset_checkpoint_format(tmp_path):
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    checkpoint.write_offsets(path, {("b", 1): 977, ("a", 0): 1042, ("a", 10): 5})
    assert Path(path).read_text() == "0\n3\na 0 1042\na 10 5\nb 1 977\n"
    assert checkpoint.read_offsets(path) == {("a", 0): 1042, ("a", 10): 5, ("b", 1): 977}
    assert os.listdir(tmp_path) == ["recovery-point-offset-checkpoint"]  # no temp file left


def test_empty_and_missing_checkpoints_have_no_entries(tmp_path):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert checkpoint.read_offsets(str(empty)) == {}
    blank = tmp_path / "blank"
    blank.write_text("\n")
    assert checkpoint.read_offsets(str(blank)) == {}
    assert checkpoint.read_offsets(str(tmp_path / "missing")) == {}
    zero = tmp_path / "zero"
    checkpoint.write_offsets(str(zero), {})
    assert zero.read_text() == "0\n0\n" and checkpoint.read_offsets(str(zero)) == {}


@pytest.mark.parametrize(
    "text, error",
    [
        ("1\n0\n", "version"),
        ("0\nx\n", "count"),
        ("0\n2\na 0 5\n", "expected 2"),
        ("0\n1\na zero 5\n", "malformed line"),
        ("0\n1\na 0\n", "malformed line"),
    ],
)
def test_corrupt_checkpoints(tmp_path, text, error, caplog):
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(CorruptCheckpointError, match=error):
        checkpoint.read_offsets(str(path))
    assert checkpoint.read_offsets_or_empty(str(path)) == {}
    assert "ignoring corrupt checkpoint" in caplog.text


def test_checkpoint_written_by_temp_file_and_rename(tmp_path):
    """A failure before the rename leaves the old file whole."""
    path = str(tmp_path / "cp")
    checkpoint.write_offsets(path, {("a", 0): 1})
    fileio.faults.inject("rename", errno.EIO, path="cp.tmp")
    try:
        with pytest.raises(KafkaStorageError, match="rename"):
            checkpoint.write_offsets(path, {("a", 0): 2})
    finally:
        fileio.faults.clear()
    assert checkpoint.read_offsets(path) == {("a", 0): 1}
    fileio.faults.inject("fsync", errno.EIO, path="cp.tmp")
    try:
        with pytest.raises(KafkaStorageError, match="fsync"):
            checkpoint.write_offsets(path, {("a", 0): 3})
    finally:
        fileio.faults.clear()
    assert checkpoint.read_offsets(path) == {("a", 0): 1}
    checkpoint.write_offsets(path, {("a", 0): 4})  # a stale temp file is simply overwritten
    assert checkpoint.read_offsets(path) == {("a", 0): 4}


@pytest.mark.parametrize("op", ["write", "fsync", "rename"])
def test_a_failed_atomic_write_leaves_no_temp_file(tmp_path, op):
    """Nor its blocks: a checkpoint that failed on a full disk must not keep taking space."""
    path = tmp_path / "cp"
    fileio.write_atomically(str(path), b"old")
    fileio.faults.inject(op, errno.ENOSPC, path="cp.tmp")
    try:
        with pytest.raises(KafkaStorageError, match="No space left"):
            fileio.write_atomically(str(path), b"new")
    finally:
        fileio.faults.clear()
    assert os.listdir(tmp_path) == ["cp"] and path.read_bytes() == b"old"


def test_epoch_checkpoint_format(tmp_path):
    path = str(tmp_path / "leader-epoch-checkpoint")
    checkpoint.write_epochs(path, [(0, 0), (3, 120)])
    assert Path(path).read_text() == "0\n2\n0 0\n3 120\n"
    assert checkpoint.read_epochs(path) == [(0, 0), (3, 120)]


# --- the leader epoch cache -------------------------------------------------------------------------


def test_leader_epoch_cache_rules(tmp_path):
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(-1, 0)  # no epoch: nothing recorded
    assert cache.entries == [] and not os.path.exists(cache.path)
    cache.assign(1, 0)
    cache.assign(1, 5)  # the same epoch again: it started earlier
    cache.assign(0, 7)  # an older epoch: ignored
    cache.assign(3, 10)
    cache.assign(5, 20)
    assert cache.entries == [(1, 0), (3, 10), (5, 20)]
    assert cache.end_offset_for(2, 30) == (1, 10)
    assert cache.end_offset_for(3, 30) == (3, 20)
    assert cache.end_offset_for(5, 30) == (5, 30)
    cache.truncate_from_start(15)
    assert cache.entries == [(3, 15), (5, 20)]
    cache.truncate_from_end(20)
    assert cache.entries == [(3, 15)]
    cache.assign(4, 12)  # a new epoch supersedes entries at or after its start
    assert cache.entries == [(4, 12)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(4, 12)]  # persisted


def test_end_offset_for_answers_as_kafkas_end_offset_for(tmp_path):
    """Kafka's LeaderEpochFileCache.endOffsetFor at its edges (LeaderEpochFileCacheTest's cases):
    an epoch below the first is answered as itself, ending where the first starts; one above
    the latest, the undefined epoch and an empty cache get (-1, -1)."""
    cache = LeaderEpochCache(str(tmp_path))
    assert cache.end_offset_for(7, 0) == (-1, -1)  # empty
    for epoch, start in [(5, 11), (6, 12), (7, 13)]:
        cache.assign(epoch, start)
    assert cache.end_offset_for(4, 0) == (4, 11)
    assert cache.end_offset_for(0, 0) == (0, 11)
    assert cache.end_offset_for(6, 20) == (6, 13)
    assert cache.end_offset_for(7, 20) == (7, 20)
    assert cache.end_offset_for(8, 20) == (-1, -1)
    assert cache.end_offset_for(-1, 20) == (-1, -1)
    cache.truncate_from_end(13)  # epochs with gaps: the largest at most the one asked
    cache.assign(9, 15)
    assert cache.end_offset_for(7, 20) == (6, 15)


def test_leader_epoch_cache_tolerates_a_corrupt_file(tmp_path, caplog):
    (tmp_path / "leader-epoch-checkpoint").write_text("0\n5\n1 0\n")
    assert LeaderEpochCache(str(tmp_path)).entries == []
    assert "corrupt leader epoch checkpoint" in caplog.text


def test_read_only_cache_writes_nothing(tmp_path):
    cache = LeaderEpochCache(str(tmp_path), read_only=True)
    cache.assign(1, 0)
    assert cache.entries == [(1, 0)] and os.listdir(tmp_path) == []


# --- names ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["", ".", "..", "a" * 250, "../x", "a/b", "/etc", "x y", "tab\t", "é", "a\0b", "a:b", "~x", "a\\b", "..\\x"],
)
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopicError):
        validate_topic(name)


@pytest.mark.parametrize("name", ["a", "a" * 249, "...", "a..b", "_x-Y.9", "-"])
def test_legal_topic_names(name):
    assert validate_topic(name) == name


def test_partition_and_segment_file_names():
    assert parse_partition_dir("my.topic-12") == ("my.topic", 12)
    assert parse_partition_dir("a-b-3") == ("a-b", 3)
    for bad in ("topic", "topic-x", "t-1.0123456789abcdef0123456789abcdef-delete", "t-0-future", "t-0-stray", "-1"):
        assert parse_partition_dir(bad) is None, bad
    name = deleted_dir_name("a-b", 3)
    assert name.endswith("-delete") and parse_deleted_dir(name) == ("a-b", 3)
    assert parse_partition_dir(name) is None
    assert offset_file_name(42, ".log") == "00000000000000000042.log"
    assert offset_file_name((1 << 63) - 1, ".index") == "09223372036854775807.index"
    assert parse_offset_file("00000000000000000042.log.swap") == (42, ".log.swap")
    assert parse_offset_file("00000000000000000042.timeindex") == (42, ".timeindex")
    for bad in ("42.log", "0000000000000000004x.log", "leader-epoch-checkpoint", "00000000000000000042"):
        assert parse_offset_file(bad) is None


# --- the versioned JSON files a broker keeps in its log dir (ACLs, quotas, dynamic configs) --------


@pytest.mark.parametrize(
    "text, why",
    [
        ('{"version":1,"entities":{', "Expecting"),  # torn write
        ('{"version":2,"entities":{}}', "not version 1"),
        ('{"version":1,"entities":[]}', "a JSON object"),
        ('{"version":1}', "'entities'"),
        ("[1]", "list indices"),
        ("\xff", "Expecting value|codec"),
    ],
)
def test_a_damaged_json_file_is_refused_whole_naming_it(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "client-quotas.json"
    path.write_text(text, encoding="latin-1")
    with pytest.raises(KafkaStorageError, match=f"^not a client quota file: .*({why})") as e:
        fileio.read_json_file(str(path), "entities", dict, "a client quota")
    assert str(path) in str(e.value)


def test_a_json_file_read_whole_or_missing(tmp_path: Path) -> None:
    path = tmp_path / "broker-configs.json"

    def read() -> object:
        return fileio.read_json_file(str(path), "brokers", dict, "a dynamic broker config")

    assert read() is None
    path.write_text('{"version":1,"brokers":{"0":{"max.connections":"5"}}}')
    assert read() == {"0": {"max.connections": "5"}}
    path.unlink()
    path.mkdir()  # unreadable: its errno is a storage error's
    with pytest.raises(KafkaStorageError, match="read failed: Is a directory"):
        read()
