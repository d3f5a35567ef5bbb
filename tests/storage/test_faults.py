"""I/O errors: a full disk, failing fsyncs, opens, truncates and preallocations.

Through the file layer's fault injection (``fileio.faults``), and for the full
disk also for real, on a small tmpfs mounted for the test (skipped where
mounting is not permitted).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from seglog.errors import KafkaStorageError
from seglog.storage import fileio

from .conftest import MS, check_log, crash, new_log, open_logs, records


@pytest.fixture(autouse=True)
def no_faults_left():
    yield
    fileio.faults.clear()


def file_state(directory: str) -> dict[str, bytes]:
    return {name: (Path(directory) / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_enospc_on_append_fails_cleanly(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(5))
    before = file_state(log.dir)
    fileio.faults.inject("write", errno.ENOSPC, path=".log")
    with pytest.raises(KafkaStorageError) as e:
        log.append(records(3, start=5))
    assert e.value.errno == errno.ENOSPC and e.value.error_code == 56
    assert e.value.file == log.segments[-1].log_path
    assert file_state(log.dir) == before
    assert log.log_end_offset == 5 and [r.offset for r in log.records()] == list(range(5))
    log.append(records(3, start=5))  # the fault was for one write: the disk has room again
    assert [r.key for r in log.records()] == [b"k%d" % i for i in range(8)]
    check_log(log)
    manager.close()
    with open_logs(tmp_path) as manager:
        check_log(manager.partition("t", 0))


def test_enospc_on_every_write_then_space_again(tmp_path, clock):
    manager, log = new_log(tmp_path, config={"segment.bytes": 500}, clock=clock)
    log.append(records(3, size=100))
    fileio.faults.inject("write", errno.ENOSPC, path=".log", times=-1)
    for i in range(5):
        with pytest.raises(KafkaStorageError):
            log.append(records(1, start=3 + i, size=100))
        assert log.log_end_offset == 3
    assert [r.offset for r in log.records()] == [0, 1, 2]
    fileio.faults.clear()
    log.append(records(1, start=3, size=100))
    assert log.log_end_offset == 4
    check_log(log)
    manager.close()


def test_enospc_while_rolling(tmp_path, clock):
    """The new segment's files cannot be created or preallocated: the append fails, the
    old segment stays active, and the next append rolls."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400}, clock=clock)
    log.append(records(3, size=100))
    for op, path in [("open", ".log"), ("allocate", ".index"), ("allocate", ".timeindex"), ("truncate", ".index")]:
        fileio.faults.inject(op, errno.ENOSPC, path=path)
        with pytest.raises(KafkaStorageError):
            log.append(records(3, start=3, size=100))
        assert log.log_end_offset == 3 and len(log.segments) == 1, op
        assert [r.offset for r in log.records()] == [0, 1, 2]
        fileio.faults.clear()
    log.append(records(3, start=3, size=100))
    assert [s.base_offset for s in log.segments] == [0, 3]
    check_log(log)
    manager.close()
    with open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        assert [s.base_offset for s in log.segments] == [0, 3] and log.log_end_offset == 6


def test_failed_fsync_fails_the_append_but_never_loses_the_log(tmp_path, clock):
    """With flush.messages=1 an append is only acknowledged once fsynced: a failed fsync
    fails it. The bytes were written, so the log is still whole and readable."""
    manager, log = new_log(tmp_path, config={"flush.messages": 1}, clock=clock)
    log.append(records(2))
    fileio.faults.inject("fsync", errno.EIO, path=".log")
    with pytest.raises(KafkaStorageError, match="fsync"):
        log.append(records(1, start=2))
    assert log.recovery_point == 2  # not moved past what was never fsynced
    check_log(log)
    log.append(records(1, start=3))
    assert log.recovery_point == log.log_end_offset
    crash(manager)
    with open_logs(tmp_path) as manager:
        check_log(manager.partition("t", 0))


def test_failed_checkpoint_write_keeps_the_old_checkpoint(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(4))
    manager.checkpoint()
    cp = tmp_path / "recovery-point-offset-checkpoint"
    old = cp.read_text()
    log.append(records(4, start=4))
    fileio.faults.inject("write", errno.ENOSPC, path="recovery-point-offset-checkpoint")
    with pytest.raises(KafkaStorageError):
        manager.checkpoint_recovery_points()
    assert cp.read_text() == old
    manager.close()


def test_a_failed_read_is_a_storage_error(tmp_path, clock):
    manager, log = new_log(tmp_path, clock=clock)
    log.append(records(4))
    fileio.faults.inject("read", errno.EIO, path=".log")
    with pytest.raises(KafkaStorageError, match="read failed"):
        list(log.records())
    assert [r.offset for r in log.records()] == [0, 1, 2, 3]
    manager.close()


# --- a real full disk ------------------------------------------------------------------------------


def test_full_tmpfs(small_tmpfs, clock):
    config = {"segment.bytes": 256 * 1024, "segment.index.bytes": 4096, "index.interval.bytes": 1024}
    manager, log = new_log(small_tmpfs / "logs", config=config, clock=clock)
    ballast = small_tmpfs / "ballast"
    ballast.write_bytes(bytes(300 * 1024))
    value = os.urandom(3000)
    failures, appended = 0, 0
    for _ in range(2000):
        try:
            log.append([(b"k%d" % appended, value, MS + appended)])
        except KafkaStorageError as e:
            assert e.errno == errno.ENOSPC, e
            failures += 1
            if failures == 5:
                break
            continue
        appended += 1
    assert failures == 5 and appended > 100
    assert log.log_end_offset == appended
    assert [r.key for r in log.records()] == [b"k%d" % i for i in range(appended)]
    check_log(log)
    ballast.unlink()  # space again: the log takes appends again
    for _ in range(3):
        log.append([(b"k%d" % appended, value, MS + appended)])
        appended += 1
    assert log.log_end_offset == appended
    check_log(log)
    manager.close()
    with open_logs(small_tmpfs / "logs") as manager:
        log = manager.partition("t", 0)
        assert log.log_end_offset == appended
        check_log(log)


def test_a_failed_leader_epoch_checkpoint_fails_the_append_before_its_batch_is_written(tmp_path, clock):
    """The first append of an epoch writes leader-epoch-checkpoint (Kafka assigns the
    epoch before the segment append): when that write fails, nothing is in the log, and
    the next append takes the same offsets (written after, the batch stayed in the
    segment past the log end offset, and the next append reused its offsets)."""
    manager, log = new_log(tmp_path, clock=clock)
    fileio.faults.inject("write", errno.ENOSPC, path="leader-epoch-checkpoint")
    with pytest.raises(KafkaStorageError, match="No space left"):
        log.append(records(2))
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    assert log.leader_epoch_cache.entries == []
    log.append(records(2))
    assert [r.offset for r in log.records()] == [0, 1]
    assert log.leader_epoch_cache.entries == [(0, 0)]
    check_log(log)
    manager.close()
    with open_logs(tmp_path) as manager:
        assert [r.offset for r in manager.partition("t", 0).records()] == [0, 1]
