"""A real full disk (a 2 MiB tmpfs; skipped where mounting is not permitted) under every
operation that takes space: append, roll, create_topic, compaction and close. Each fails
with a clear KafkaStorageError (ENOSPC, naming the file), no acknowledged record is lost,
and the dir opens afterwards, full or not."""

from __future__ import annotations

import errno
import os

import pytest

from seglog.errors import KafkaStorageError

from .conftest import MS, check_log, open_logs

CONFIG = {
    "log.segment.bytes": 32 * 1024,  # rolls all along
    "log.index.size.max.bytes": 4096,
    "log.index.interval.bytes": 1024,
}


def _no_space(e: pytest.ExceptionInfo[KafkaStorageError]) -> None:
    assert e.value.errno == errno.ENOSPC and e.value.error_code == 56, e.value
    assert e.value.file is not None and "No space left on device" in str(e.value)


def _fill(log, acked: list[bytes]) -> None:
    """Append until the disk refuses five times."""
    refused = 0
    while refused < 5:
        key = b"k%d" % len(acked)
        try:
            log.append([(key, os.urandom(2000), MS + len(acked))])
        except KafkaStorageError as e:
            assert e.errno == errno.ENOSPC, e
            refused += 1
            continue
        acked.append(key)


def test_a_full_disk_under_every_operation(small_tmpfs, clock):
    root = small_tmpfs / "logs"
    ballast = small_tmpfs / "ballast"
    ballast.write_bytes(bytes(256 * 1024))  # removed at the end: room again
    manager = open_logs(root, CONFIG, clock=clock)
    manager.create_topic("c", 1, {"cleanup.policy": "compact"})
    compacted = manager.partition("c", 0)
    for i in range(60):
        compacted.append([(b"key%d" % (i % 4), os.urandom(500), MS + i)])
    compacted_before = [(r.offset, r.key, r.value) for r in compacted.records()]
    manager.create_topic("t", 1)
    log = manager.partition("t", 0)
    acked: list[bytes] = []

    # append and roll: the disk fills up
    _fill(log, acked)
    assert len(log.segments) > 5 and len(acked) > 100
    assert [r.key for r in log.records()] == acked
    check_log(log)

    # create_topic: refused whole
    with pytest.raises(KafkaStorageError) as e:
        manager.create_topic("u", 3)
    _no_space(e)
    assert manager.topics() == ["c", "t"] and not any(n.startswith("u-") for n in os.listdir(root))

    # compaction: the .cleaned segment cannot be written, the log stays as it was
    with pytest.raises(KafkaStorageError) as e:
        manager.clean(force=True)
    _no_space(e)
    assert [(r.offset, r.key, r.value) for r in compacted.records()] == compacted_before
    assert not any(".cleaned" in n for n in os.listdir(compacted.dir))
    check_log(compacted, dense=False)

    # close: the checkpoints cannot be written, it finishes all the same (locks released)
    with pytest.raises(KafkaStorageError) as e:
        manager.close()
    _no_space(e)
    assert not (root / ".kafka_cleanshutdown").exists()

    # the dir opens while still full, and everything acknowledged is there
    manager = open_logs(root, CONFIG, clock=clock)
    assert [r.key for r in manager.partition("t", 0).records()] == acked
    assert [(r.offset, r.key, r.value) for r in manager.partition("c", 0).records()] == compacted_before
    try:
        manager.close()
    except KafkaStorageError as e:  # the checkpoints again, as the disk is still full
        assert e.errno == errno.ENOSPC

    # with room again: appends, compaction and a clean close
    ballast.unlink()
    with open_logs(root, CONFIG, clock=clock) as manager:
        log = manager.partition("t", 0)
        log.append([(b"after", b"v", MS)])
        acked.append(b"after")
        assert manager.clean(force=True)
        check_log(log)
    assert (root / ".kafka_cleanshutdown").exists()
    with open_logs(root, CONFIG, clock=clock) as manager:
        assert [r.key for r in manager.partition("t", 0).records()] == acked
        compacted = manager.partition("c", 0)
        assert {r.key: r.value for r in compacted.records()} == {k: v for _, k, v in compacted_before}


def _ballast(directory, pages: int) -> list:
    """Files of a page each until the disk refuses one (at most ``pages``)."""
    directory.mkdir()
    made = []
    for n in range(pages):
        path = directory / str(n)
        try:
            path.write_bytes(bytes(4096))
        except OSError as e:
            assert e.errno == errno.ENOSPC
            path.unlink(missing_ok=True)
            break
        made.append(path)
    return made


def test_a_full_disk_fails_the_index_reservation_before_the_append_writes(small_tmpfs, clock):
    """Index files are sparse at Kafka's full length (10 MiB each, here on a 2 MiB disk)
    and take blocks in chunks ahead of their entries. On a full disk the chunk's
    reservation fails the append with ENOSPC before its batch is written: the log, its
    indexes and every acknowledged record stay as they were, and the process lives (a
    store through the map into a hole would have been a SIGBUS)."""
    root = small_tmpfs / "logs"
    config = {"log.index.interval.bytes": 0}  # an entry in each index for every batch
    manager = open_logs(root, config, clock=clock)
    manager.create_topic("t", 1)
    log = manager.partition("t", 0)
    ballast = _ballast(small_tmpfs / "ballast", 1024)
    acked: list[bytes] = []
    refused_by = None
    while refused_by is None and len(acked) < 20_000:
        key = b"k%d" % len(acked)
        size_before = log.active_segment.size
        try:
            log.append([(key, b"v", MS + len(acked))])
        except KafkaStorageError as e:
            assert e.errno == errno.ENOSPC, e
            assert log.log_end_offset == len(acked) and log.active_segment.size == size_before, e
            if e.file.endswith((".index", ".timeindex")):
                refused_by = e.file
            else:
                ballast.pop().unlink()  # the log's next page (or a checkpoint's): a page of room, no more
            continue
        acked.append(key)
    assert refused_by is not None and refused_by.endswith((".index", ".timeindex")), refused_by
    assert [r.key for r in log.records()] == acked
    check_log(log)
    for path in ballast:
        path.unlink()
    log.append([(b"after", b"v", MS + len(acked))])  # room again: the reservation is made
    acked.append(b"after")
    manager.close()
    with open_logs(root, config, clock=clock) as manager:
        log = manager.partition("t", 0)
        assert [r.key for r in log.records()] == acked
        check_log(log)
