"""A producer's usual append (one batch of no producer id into the active segment), and a
coordinator's records, is one C call, ``_scan.append_batch``; everything else
takes the general path. The two must leave the same files behind, fail alike, and the one
call must cut off a write that fails midway, as the general path does."""

from __future__ import annotations

import contextlib
import copy
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from seglog.errors import InvalidTimestampError, SeglogError
from seglog.records import Compression, build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage import _scan, fileio
from seglog.storage.file_records import LogOffsetMetadata
from seglog.storage.log import AppendInfo
from seglog.storage.producer_entry import AppendOrigin

from .conftest import MS, new_log

CONFIGS = {
    "create-time": {},
    "log-append-time": {"message.timestamp.type": "LogAppendTime"},
    "rolls": {"segment.bytes": 16000, "index.interval.bytes": 700, "segment.index.bytes": 4096},
    "rolls-by-time": {"segment.ms": 50},
    "compact": {"cleanup.policy": "compact", "index.interval.bytes": 1},
}


def _batches(n: int) -> list[bytearray]:
    """Batches of every kind an append meets: sizes from one record to 60, timestamps
    that go back and forth, a compressed one, some of producers, two in one buffer."""
    out = []
    for i in range(n):
        records = [(b"k%d-%d" % (i, j), b"v" * (i * 7 % 300), MS + (i * 37 % 11) * 5 + j) for j in range(1 + i % 60)]
        if i % 13 == 5:
            out.append(build_batch(records, compression=Compression.GZIP))
        elif i % 17 == 3:
            out.append(
                build_batch(
                    records,
                    producer_id=7,
                    producer_epoch=0,
                    base_sequence=sum(1 + k % 60 for k in range(i) if k % 17 == 3),
                )
            )
        elif i % 19 == 7:
            out.append(build_batch(records[:1]) + build_batch(records[1:] or records))
        else:
            out.append(build_batch(records))
    return out


def _files(directory: Path) -> dict[str, bytes]:
    part = directory / "t-0"
    return {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.suffix in (".log", ".index", ".timeindex")}


class _GeneralPath:
    """A fault set that never fires (no such file): ``append_batches`` then never takes the
    one call, which stands aside whenever a fault is set."""

    def __enter__(self) -> None:
        fileio.faults.inject("write", path="/no/such/file/anywhere")

    def __exit__(self, *exc: object) -> None:
        fileio.faults.clear()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_one_call_leaves_the_files_the_general_path_leaves(tmp_path, clock, name):
    results = {}
    for path in ("one-call", "general"):
        manager, log = new_log(tmp_path / path, config=CONFIGS[name], clock=clock)
        clock.now = MS + 100
        infos = []
        with _GeneralPath() if path == "general" else contextlib.nullcontext():
            for i, batch in enumerate(_batches(120)):
                clock.advance(3)
                try:
                    infos.append(log.append_batches(bytearray(batch)))
                except SeglogError as e:  # (a batch larger than the config that rolls allows)
                    infos.append((type(e), str(e).replace(path, "")))
                if i % 41 == 40:
                    clock.advance(60)  # past segment.ms, for the config that rolls by time
        end = log.log_end_offset
        manager.close()
        results[path] = (infos, end, _files(tmp_path / path))
        clock.now = MS
    assert results["one-call"] == results["general"]
    assert len(results["general"][2]) >= 3


def _call(log, batch):
    return _scan.append_batch(batch, log.segments[-1], log._one_call_rules, log.log_end_offset, 0)


def test_the_one_call_takes_one_batch_of_no_producer_into_a_segment_under_way(tmp_path):
    _, log = new_log(tmp_path)
    first = build_batch([(b"k", b"v", MS)])
    assert _call(log, bytearray(first)) is None  # the segment's first batch: its rolling time is set there
    log.append_batches(first)
    size = log.segments[-1].size
    refused = [
        build_batch([(b"k", b"v", MS)], producer_id=3, producer_epoch=0, base_sequence=0),
        build_batch([(b"k", b"v", MS)]) + build_batch([(b"k", b"v", MS)]),
        build_batch([(b"k", b"v", MS)])[:-1],
    ]
    for batch in refused:
        copy = bytearray(batch)
        assert _call(log, copy) is None
        assert copy == batch and log.segments[-1].size == size and log.log_end_offset == 1
    info, end, end_offset, entry = _call(log, build_batch([(b"k", b"v", MS + 1)]))
    assert entry is None  # (no producer's)
    assert type(info) is AppendInfo and info == (1, 1, MS + 1, 1, size, -1)
    assert type(end) is LogOffsetMetadata and end == (2, 0, size * 2) and log.segments[-1].size == size * 2
    assert end_offset is end[0]  # (one int, which the log keeps as its end offset)
    # the segment's state, in its slots, as the general path leaves it
    segment = log.segments[-1]
    assert segment.bytes_since_last_index_entry == size * 2 and segment.max_timestamp_and_offset == (MS + 1, 1)


def test_the_one_call_takes_only_the_segment_type_it_was_bound_to(tmp_path):
    """It writes the state into the slots of the classes ``bind_segment`` gave it, and
    refuses any other object; ``bind_segment`` refuses a class without such slots."""
    _, log = new_log(tmp_path)
    log.append_batches(build_batch([(b"k", b"v", MS)]))
    with pytest.raises(TypeError, match="bound segment type"):
        _scan.append_batch(build_batch([(b"k", b"v", MS)]), object(), log._one_call_rules, 1, 0)

    class NoSlots:
        pass

    with pytest.raises((TypeError, AttributeError)):
        _scan.bind_segment(NoSlots, NoSlots, NoSlots, NoSlots)
    assert log.append_batches(build_batch([(b"k", b"v", MS)])).first_offset == 1  # bound as it was


def test_the_one_call_raises_what_the_general_path_raises(tmp_path, clock):
    # a fake clock: the message names "now", which a real one moves between the two appends
    _, log = new_log(tmp_path, config={"message.timestamp.after.max.ms": 1000}, clock=clock)
    log.append_batches(build_batch([(b"k", b"v", MS)]))
    late = build_batch([(b"k", b"v", 2**62)])
    with pytest.raises(InvalidTimestampError) as one_call:
        log.append_batches(bytearray(late))
    with _GeneralPath(), pytest.raises(InvalidTimestampError) as general:
        log.append_batches(bytearray(late))
    assert str(one_call.value) == str(general.value) and log.log_end_offset == 1


_CHILD = textwrap.dedent(
    """
    import errno, resource, sys
    import seglog
    from seglog.errors import KafkaStorageError
    from seglog.records import build_batch

    with seglog.open(sys.argv[1], background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        for i in range(10):
            log.append_batches(build_batch([(b"k%d" % i, bytes(3000), None)]))
        segment = log.segments[-1]
        size, end = segment.size, log.log_end_offset
        # the next batch fits but half: the write stops there (EFBIG), as a full disk stops one
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 1500, resource.RLIM_INFINITY))
        batch = build_batch([(b"late", bytes(3000), None)])
        try:
            log.append_batches(batch)  # the one call's: a batch of no producer into a segment under way
        except KafkaStorageError as e:
            assert e.errno == errno.EFBIG and e.file == segment.log_path, e
        else:
            raise AssertionError("the write did not fail")
        assert segment.size == size and log.segments[-1].handle.size() == size, "a torn write was left"
        assert log.log_end_offset == end
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        log.append_batches(build_batch([(b"after", b"v", None)]))
        keys = [r.key for r in log.records()]
        assert keys == [b"k%d" % i for i in range(10)] + [b"after"], keys
    print("ok")
    """
)


def test_a_write_the_one_call_makes_that_fails_midway_is_cut_off(tmp_path):
    """A real short write (the file size limit, RLIMIT_FSIZE, stops it halfway, as a
    full disk does; Python ignores SIGXFSZ), in a child so that the limit is its own."""
    src = Path(__file__).resolve().parents[2] / "src"
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "logs")], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_coordinators_records_take_the_one_call_and_leave_what_the_general_path_leaves(tmp_path, clock, monkeypatch):
    """An offset commit's batch (no producer id) appended as the coordinator is one C call
    too; its control batches (a marker, here one without a producer id) go the general way,
    which takes them from a coordinator, as before."""
    taken: list[int] = []
    one_call = _scan.append_batch

    def counted(*args: Any) -> Any:
        taken.append(1)
        return one_call(*args)

    monkeypatch.setattr(_scan, "append_batch", counted)
    records = [build_batch([(b"key-%d" % i, b"value-%d" % i, MS + i)]) for i in range(20)]
    marker = build_batch([end_transaction_marker(True, 0, MS)], control=True)
    results = {}
    for path in ("one-call", "general"):
        _, log = new_log(tmp_path / path, clock=clock)
        taken.clear()
        with _GeneralPath() if path == "general" else contextlib.nullcontext():
            infos = [log.try_append_batches(bytearray(b), origin=AppendOrigin.COORDINATOR) for b in records]
            infos.append(log.append_batches(bytearray(marker), origin=AppendOrigin.COORDINATOR))
            infos += [log.append_batches(bytearray(b), origin=AppendOrigin.COORDINATOR) for b in records[:3]]
        results[path] = (infos, log.log_end_offset, _files(tmp_path / path))
        if path == "one-call":  # every records batch but a segment's first: the marker never
            assert len(taken) == len(records) + 3 - 1 and all(taken)
    assert results["one-call"] == results["general"]


def test_a_new_leader_epochs_first_batch_takes_the_general_path_which_assigns_the_epoch(tmp_path, monkeypatch):
    """The one call writes the epoch in force only: the first batch after ``become_leader``
    at a new epoch goes the general way, which adds the epoch to the cache; the next ones
    take the one call again, with the new epoch in their headers."""
    written: list[bool] = []
    one_call = _scan.append_batch

    def counted(*args: Any) -> Any:
        done = one_call(*args)
        written.append(isinstance(done, tuple))
        return done

    monkeypatch.setattr(_scan, "append_batch", counted)
    _, log = new_log(tmp_path)
    for i in range(3):
        log.append_batches(build_batch([(b"k", b"v", MS + i)]))
    log.become_leader(4)
    written.clear()
    for i in range(3):
        log.append_batches(build_batch([(b"k", b"v", MS + 10 + i)]))
    assert written == [True, True]  # the epoch's first batch never reached the one call
    assert log.leader_epoch_cache.entries[-1] == (4, 3)
    assert [b.partition_leader_epoch for b in log.batches()][-3:] == [4, 4, 4]


def test_a_setting_past_an_int64_leaves_the_appends_to_the_general_path(tmp_path):
    """The one call reads the config's ints packed as int64s when the config changes; a
    setting past an int64 (a config made by hand: a topic's are checked as Kafka's LONG)
    leaves every append to the general path, which takes it as Python's ints."""
    _, log = new_log(tmp_path)
    log.append_batches(build_batch([(b"k", b"v", MS)]))
    assert log._one_call_rules is not None
    config = copy.copy(log.config)
    config.message_timestamp_before_max_ms = 1 << 64
    log.config = config
    assert log._one_call_rules is None
    infos = [log.append_batches(build_batch([(b"k", b"v", MS + i)])) for i in (1, 2)]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(1, 1), (2, 2)] and log.log_end_offset == 3
