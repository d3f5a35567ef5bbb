"""Staged appends: files of batches staged beside a log dir, committed all or nothing."""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

import seglog
from seglog.errors import CorruptRecordError, InvalidTimestampError, KafkaStorageError, UnknownTopicOrPartitionError
from seglog.records import BatchIterator, build_batch
from seglog.storage import fileio, staged_append
from seglog.storage.staged_append import Staging, WriteAbortedError, commit_staged

LIMITS = {"out": 1 << 30}


@pytest.fixture(autouse=True)
def no_faults_left():
    yield
    fileio.faults.clear()


def topic(path, partitions=3, config=None, dirs=None):
    with seglog.open(dirs or str(path), background=False) as logs:
        logs.create_topic("out", partitions, config=config)


def batch(*values, timestamp=None):
    return build_batch([(b"k", b"v%d" % v, timestamp) for v in values])


def staging(path):
    return sorted(p.name for p in Path(path).iterdir() if p.name.startswith(staged_append.STAGING_PREFIX))


def paths(files):
    return [f.path for f in files]


def values(path, partition=None):
    with seglog.open(str(path), background=False) as logs:
        chosen = logs.partitions("out") if partition is None else [partition]
        return sorted(r.value for p in chosen for r in logs.partition("out", p).records())


def commit(path, files, dirs=None):
    with seglog.open(dirs or str(path), background=False) as logs:
        commit_staged(logs, files)


def stage(write, appends, limits=LIMITS, topic="out"):
    """``appends``: (partition, batches) in order; returns the files staged."""
    with write.writer(limits) as staged:
        for partition, batches in appends:
            staged.append(topic, partition, batches)
    return staged.files


def fds_under(path):
    """The files under ``path`` this process holds open."""
    gc.collect()  # a FileHandle no one holds closes its fd when collected
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(FileNotFoundError):  # the fd that listed them, closed since
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [n for n in names if n.startswith(str(path))]


def test_staged_files_keep_each_partitions_order_and_a_cut_file_is_refused(tmp_path):
    topic(tmp_path)
    write = Staging.begin(str(tmp_path))
    appends = [(v % 3, [batch(v, v + 100)]) for v in range(30)]
    files = stage(write, appends)
    # one file per partition, each nothing but record batches, as a segment holds them
    assert sorted((f.topic, f.partition) for f in files) == [("out", 0), ("out", 1), ("out", 2)]
    for f in files:
        scan = BatchIterator(Path(f.path).read_bytes())
        assert sum(b.record_count for b in scan) == 20 and scan.remaining == 0
    cut = next(f.path for f in files if f.partition == 1)
    with open(cut, "r+b") as out:  # a file cut inside its last batch
        out.truncate(os.path.getsize(cut) - 1)
    write.close()
    with pytest.raises(CorruptRecordError, match="partial batch") as refused:
        commit(tmp_path, files)
    assert any(cut in note for note in refused.value.__notes__)
    assert values(tmp_path) == []  # all or nothing
    write.discard(paths(files))
    assert staging(tmp_path) == []

    write = Staging.begin(str(tmp_path))
    files = stage(write, appends)
    write.close()
    commit(tmp_path, files)
    with seglog.open(str(tmp_path), background=False) as logs:
        for p in range(3):
            got = [r.value for r in logs.partition("out", p).records()]
            assert got == [b"v%d" % w for v in range(p, 30, 3) for w in (v, v + 100)]  # in the writer's order
    write.discard()
    assert staging(tmp_path) == []


def test_a_staged_file_holds_no_more_than_a_segment(tmp_path):
    topic(tmp_path, 1, {"segment.bytes": 1 << 20})
    write = Staging.begin(str(tmp_path))
    rows = [b"%04d" % i + b"x" * 1000 for i in range(3000)]  # 3 MB
    batches = [build_batch([(None, v) for v in rows[i : i + 100]]) for i in range(0, 3000, 100)]
    files = stage(write, [(0, batches)], {"out": 1 << 20})
    assert len(files) >= 3 and all(os.path.getsize(p) <= 1 << 20 for p in paths(files))
    commit(tmp_path, files)  # an append of more than segment.bytes would be refused
    with seglog.open(str(tmp_path), background=False) as logs:
        log = logs.partition("out", 0)
        assert [r.value for r in log.records()] == rows
        assert len(log.segments) >= 3


def test_a_commit_makes_large_staged_files_segments_and_copies_small_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(staged_append, "_ADOPT_BYTES", 4000)
    topic(tmp_path, 2)
    with seglog.open(str(tmp_path), background=False) as logs:
        for p in range(2):
            logs.partition("out", p).append([seglog.Record(value=b"before")])
    write = Staging.begin(str(tmp_path))
    large = stage(write, [(0, [batch(*range(0, 300)), batch(*range(1000, 1100))]), (1, [batch(*range(300, 310))])])
    small = stage(write, [(1, [batch(*range(310, 320))])])
    inodes = {path: os.stat(path).st_ino for path in paths(large) + paths(small)}
    (large_file,) = (f.path for f in large if f.partition == 0)
    assert os.path.getsize(large_file) >= 4000 > max(os.path.getsize(p) for p in paths(small))
    removed = []
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):  # a copied file goes once its records are in the log
        if path in inodes and os.path.exists(path):
            with seglog.open(str(tmp_path), read_only=True) as logs:
                removed.append((path, logs.partition("out", 1).log_end_offset))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    commit(tmp_path, large + small)
    with seglog.open(str(tmp_path), background=False) as logs:
        adopted, copied = logs.partition("out", 0), logs.partition("out", 1)
        assert [s.base_offset for s in adopted.segments] == [0, 1]
        assert os.stat(adopted.segments[1].log_path).st_ino == inodes[large_file]  # the very file, no copy
        assert [r.value for r in adopted.records()] == [b"before"] + [
            b"v%d" % v for v in [*range(300), *range(1000, 1100)]
        ]
        assert [s.base_offset for s in copied.segments] == [0]
        assert [r.value for r in copied.records()] == [b"before"] + [b"v%d" % v for v in range(300, 320)]
    (first_small,) = (f.path for f in large if f.partition == 1)
    # a thread removes them, behind the appends: never a file before its records are in
    assert [path for path, _ in removed] == [first_small, paths(small)[0]]
    assert removed[0][1] >= 11 and removed[1][1] == 21
    write.discard()
    assert staging(tmp_path) == []


def test_staged_files_on_another_filesystem_are_copied(tmp_path, monkeypatch):
    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on a filesystem of its own")
    monkeypatch.setattr(staged_append, "_ADOPT_BYTES", 4000)
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:
        dirs = [str(tmp_path), shm]  # partition 0 lands in the first dir, 1 in the second
        topic(tmp_path, 2, dirs=dirs)
        with seglog.open(dirs, background=False) as logs:
            assert [os.path.dirname(logs.partition("out", p).dir) for p in range(2)] == dirs
        write = Staging.begin(str(tmp_path))
        files = stage(write, [(p, [batch(*range(p * 400, p * 400 + 400))]) for p in range(2)])
        inodes = {f.partition: os.stat(f.path).st_ino for f in files}
        commit(tmp_path, files, dirs)
        with seglog.open(dirs, background=False) as logs:
            for p in range(2):
                log = logs.partition("out", p)
                assert [r.value for r in log.records()] == [b"v%d" % v for v in range(p * 400, p * 400 + 400)]
            assert os.stat(logs.partition("out", 0).active_segment.log_path).st_ino == inodes[0]  # adopted
            assert os.stat(logs.partition("out", 1).active_segment.log_path).st_dev != os.stat(tmp_path).st_dev
        write.discard()
        assert staging(tmp_path) == []
    finally:
        shutil.rmtree(shm)


def test_a_staged_file_that_cannot_be_renamed_into_the_log_is_copied(tmp_path, monkeypatch):
    monkeypatch.setattr(staged_append, "_ADOPT_BYTES", 1)
    topic(tmp_path, 1)
    write = Staging.begin(str(tmp_path))
    files = stage(write, [(0, [batch(*range(100))])])
    fileio.faults.inject("rename", errno.EXDEV, path=staged_append.STAGING_PREFIX)  # a bind mount, say
    commit(tmp_path, files)
    assert fileio.faults._faults[0].times == 0  # the rename was tried, and refused
    assert values(tmp_path) == sorted(b"v%d" % i for i in range(100))
    write.discard()
    assert staging(tmp_path) == []


def test_open_staged_files_are_capped_and_a_failed_sync_fails_the_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(staged_append, "_OPEN_FILES", 2)  # five partitions: files closed and opened again
    monkeypatch.setattr(staged_append, "_SYNC_BYTES", 1)  # and synced behind the writer after every batch
    topic(tmp_path, 5)
    write = Staging.begin(str(tmp_path))
    appends = [(v % 5, [batch(v)]) for v in range(150)]
    commit(tmp_path, stage(write, appends))
    with seglog.open(str(tmp_path), background=False) as logs:
        for p in range(5):
            want = [b"v%d" % v for v in range(150) if v % 5 == p]
            assert [r.value for r in logs.partition("out", p).records()] == want  # in order, none lost
    write.discard()

    write = Staging.begin(str(tmp_path))
    fileio.faults.inject("fsync", path=staged_append.STAGING_PREFIX, times=-1)
    with pytest.raises(KafkaStorageError, match="writing a staging file to disk failed: Input/output error"):
        stage(write, appends[:20])
    assert staging(tmp_path) == [os.path.basename(write.marker)]  # the writer left nothing behind


def test_a_write_closed_while_a_writer_runs_leaves_none_of_its_files(tmp_path):
    topic(tmp_path)
    write = Staging.begin(str(tmp_path))
    with pytest.raises(WriteAbortedError, match="was closed while this task ran"), write.writer(LIMITS) as staged:
        staged.append("out", 0, [batch(1)])
        write.discard()  # the job failed elsewhere: the driver closes the write
        staged.append("out", 1, [batch(2)])  # a partition of its own: this writer's next file, which sees it
    assert staging(tmp_path) == [] and values(tmp_path) == []


def test_a_writer_that_starts_after_the_abort_removes_its_own_file(tmp_path):
    topic(tmp_path)
    write = Staging.begin(str(tmp_path))
    files = stage(write, [(0, [batch(1)])])
    write.discard(paths(files))
    assert staging(tmp_path) == []
    with pytest.raises(WriteAbortedError, match="was closed before this task began"):
        stage(write, [(0, [batch(2)])])
    assert staging(tmp_path) == [] and values(tmp_path) == []


@pytest.mark.parametrize("adopt_bytes", [1, 1 << 30], ids=["made-segments", "copied"])
def test_a_commit_that_fails_part_way_leaves_every_partition_as_it_was(tmp_path, monkeypatch, adopt_bytes):
    monkeypatch.setattr(staged_append, "_ADOPT_BYTES", adopt_bytes)
    topic(tmp_path)
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.partition("out", 0).append([seglog.Record(value=b"before")])
        logs.alter_topic_config("out", {"message.timestamp.before.max.ms": "3600000"})
    now = int(time.time() * 1000)
    write = Staging.begin(str(tmp_path))
    good = stage(write, [(0, [batch(1, 2, timestamp=now)]), (1, [batch(3, timestamp=now)])])
    old = stage(write, [(2, [batch(4, timestamp=now - 7200 * 1000)])])  # refused by the log
    with pytest.raises(InvalidTimestampError, match=r"message\.timestamp\.before\.max\.ms"):
        commit(tmp_path, good + old)
    with seglog.open(str(tmp_path), background=False) as logs:
        assert [r.value for r in logs.partition("out", 0).records()] == [b"before"]
        assert [logs.partition("out", p).log_end_offset for p in range(3)] == [1, 0, 0]
        for p in range(3):  # no segment of the write's is left, empty or not, beyond the active one
            log = logs.partition("out", p)
            assert sum(s.size for s in log.segments[1:]) == 0 and len(log.segments) <= 2
    write.discard(paths(good + old))
    assert staging(tmp_path) == []


# --- every file operation of a staged append fails cleanly ----------------------------------


def _before(tmp_path):
    topic(tmp_path, 2)
    with seglog.open(str(tmp_path), background=False) as logs:
        for p in range(2):
            logs.partition("out", p).append([seglog.Record(value=b"before")])


@pytest.mark.parametrize("op", ["create", "write", "fsync"])
def test_a_failed_staging_operation_fails_the_writer_and_leaves_nothing(tmp_path, op):
    _before(tmp_path)
    write = Staging.begin(str(tmp_path))
    fileio.faults.inject(op, path=staged_append.STAGING_PREFIX, after=1)  # the second file's
    with pytest.raises(KafkaStorageError, match=os.strerror(errno.EIO)):
        stage(write, [(0, [batch(1)]), (1, [batch(2)])])
    assert fileio.faults._faults[0].times == 0  # the operation was tried, and failed
    assert staging(tmp_path) == [os.path.basename(write.marker)] and fds_under(tmp_path) == []
    assert values(tmp_path) == [b"before", b"before"]


@pytest.mark.parametrize(("op", "adopt_bytes"), [("rename", 1), ("unlink", 1 << 30)], ids=["rename", "unlink"])
def test_a_failed_commit_operation_leaves_every_partition_as_it_was(tmp_path, monkeypatch, op, adopt_bytes):
    monkeypatch.setattr(staged_append, "_ADOPT_BYTES", adopt_bytes)  # rename: adopted; unlink: copied
    _before(tmp_path)
    write = Staging.begin(str(tmp_path))
    files = stage(write, [(0, [batch(1)]), (1, [batch(2)]), (1, [batch(3)])])
    write.close()
    fileio.faults.inject(op, path=files[-1].path)  # the last partition's file: the other's goes in
    with pytest.raises(KafkaStorageError, match=f"{op}.* failed: injected"):
        commit(tmp_path, files)
    assert fileio.faults._faults[0].times == 0
    assert values(tmp_path) == [b"before", b"before"] and fds_under(tmp_path) == []
    with seglog.open(str(tmp_path), background=False) as logs:
        assert [logs.partition("out", p).log_end_offset for p in range(2)] == [1, 1]
    write.discard(paths(files))
    assert staging(tmp_path) == []


def test_a_topic_without_a_size_limit_is_refused_before_a_file_is_made(tmp_path):
    write = Staging.begin(str(tmp_path))
    with pytest.raises(UnknownTopicOrPartitionError, match="unknown topic 'nope'"):
        stage(write, [(0, [batch(1)])], {"other": 1 << 20}, topic="nope")
    assert staging(tmp_path) == [os.path.basename(write.marker)]


def test_a_failed_sweep_or_marker_is_a_storage_error(tmp_path):
    for op, call in [
        ("create", lambda: Staging.begin(str(tmp_path))),
        ("list", lambda: staged_append.remove_dead_staging(str(tmp_path))),
    ]:
        fileio.faults.inject(op)
        with pytest.raises(KafkaStorageError, match=f"{op} failed: injected"):
            call()
    assert staging(tmp_path) == [] and fds_under(tmp_path) == []
