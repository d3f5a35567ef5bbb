"""Helpers shared by the storage tests: a fake clock, a crash without a shutdown,
and a checker of everything a valid log promises (checked from the files, not
through the code under test where that can be avoided)."""

from __future__ import annotations

import os
import struct
import subprocess
import uuid
from collections.abc import Iterable
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

import seglog
from seglog.records import BatchIterator, Record
from seglog.storage import LogManager, PartitionLog

MS = 1_700_000_000_000  # a fixed "now" for the fake clocks


class Clock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, now: int = MS) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> int:
        self.now += ms
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def open_logs(path: Path | str, config: dict | None = None, **kw) -> LogManager:
    """seglog.open without the background thread (tests run tasks themselves)."""
    kw.setdefault("background", False)
    return seglog.open(str(path), config, **kw)


def new_log(path: Path | str, topic: str = "t", config: dict | None = None, **kw) -> tuple[LogManager, PartitionLog]:
    """A log dir holding one topic of one partition with ``config`` as its overrides."""
    manager = open_logs(path, **kw)
    manager.create_topic(topic, 1, config or {})
    return manager, manager.partition(topic, 0)


def records(n: int, *, start: int = 0, ts: int | None = MS, size: int = 20) -> list[Record]:
    """``n`` records keyed k<i> from i = ``start``, with values of ``size`` bytes and
    timestamps ``ts``, ``ts + 1``, ... (all -1 when ``ts`` is -1: no timestamp)."""
    return [
        Record(b"k%d" % i, (b"v%d-" % i).ljust(size, b"x"), ts if ts is None or ts < 0 else ts + i - start)
        for i in range(start, start + n)
    ]


def crash(manager: LogManager) -> None:
    """Leave the log dirs as a kill -9 would: nothing flushed, trimmed, checkpointed
    or marked clean; the dir lock released (the process holding it is gone)."""
    for partition_log in manager.logs():
        partition_log.close_without_flush()
    if manager._scheduler is not None:
        manager._scheduler.shutdown()
    manager._closed = True
    for d in manager._dirs:
        d.unlock()


def index_file_entries(path: str | os.PathLike) -> list[tuple[int, int]]:
    """Entries of an .index file read straight from its bytes (8 bytes each), up to
    the zero-filled tail a preallocated file has (an all-zero first entry counts)."""
    data = Path(path).read_bytes()
    out = [struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)]
    while len(out) > 1 and out[-1] == (0, 0):
        out.pop()
    return out


def time_index_file_entries(path: str | os.PathLike) -> list[tuple[int, int]]:
    """(timestamp, relative offset) entries of a .timeindex file (12 bytes each)."""
    data = Path(path).read_bytes()
    out = [struct.unpack_from(">qi", data, i) for i in range(0, len(data) - len(data) % 12, 12)]
    while len(out) > 1 and out[-1] == (0, 0):
        out.pop()
    return out


def kafka_python_records(data: bytes, *, skip_control: bool = True) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record as kafka-python reads
    ``data`` (a whole .log file or a fetch's bytes); v0 timestamps None become -1."""
    out, reader = [], MemoryRecords(data)
    while (batch := reader.next_batch()) is not None:
        if skip_control and getattr(batch, "is_control_batch", False):
            continue
        for r in batch:
            ts = -1 if r.timestamp is None else r.timestamp
            out.append((r.offset, ts, r.key, r.value, [tuple(h) for h in (r.headers or [])]))
    return out


def as_tuples(recs: Iterable[Record]) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in recs]


def check_log(log: PartitionLog, *, dense: bool = True) -> list[tuple[int, int, int, int]]:
    """Assert what a valid log promises, reading its files directly: whole batches only,
    each CRC good, offsets increasing (dense unless compacted), the log end offset right
    after the last batch, and both indexes consistent — every offset index entry is the
    last offset of the batch starting at its position, every time index entry the
    running max timestamp at the batch of its offset. Returns (base offset, last offset,
    max timestamp, position) of every batch."""
    batches: list[tuple[int, int, int, int]] = []
    prev_last: int | None = None
    segments = log.segments
    for i, segment in enumerate(segments):
        if i + 1 < len(segments):
            assert segment.base_offset < segments[i + 1].base_offset
        data = Path(segment.log_path).read_bytes()
        assert len(data) == segment.size, f"{segment.log_path}: size {len(data)} != {segment.size}"
        scan = BatchIterator(data)
        here: list[tuple[int, int, int, int]] = []
        for batch in scan:
            batch.validate()
            base, last = batch.base_offset, batch.last_offset
            assert base >= segment.base_offset
            if i + 1 < len(segments):
                assert last < segments[i + 1].base_offset
            if prev_last is not None:
                if dense:
                    assert base == prev_last + 1, f"offset gap: {prev_last} then {base}"
                else:
                    assert base > prev_last
            prev_last = last
            here.append((base, last, batch.max_timestamp, batch.position))
        assert scan.remaining == 0, f"{segment.log_path}: {scan.remaining} bytes of a partial batch"
        oi, ti = segment.offset_index, segment.time_index
        oi.verify(segment.size)
        ti.verify()
        by_position = {pos: last for _, last, _, pos in here}
        for slot in range(oi.entries):
            offset, pos = oi.entry(slot)
            assert by_position.get(pos) == offset, f"index entry {slot} ({offset}, {pos}) is not a batch start"
        running, first_reaching = -1, {}
        for base, last, max_ts, _ in here:
            if max_ts > running:
                running = max_ts
                first_reaching[running] = (base, last)
        for slot in range(ti.entries):
            ts, offset = ti.entry(slot)
            assert ts in first_reaching, f"time index entry {slot} ({ts}, {offset}) is no running max"
            base, last = first_reaching[ts]  # the batch that first reached ts holds the offset
            assert base <= offset <= last, f"time index entry {slot} ({ts}, {offset}) is not in batch {base}..{last}"
        batches += here
    if prev_last is not None:
        assert log.log_end_offset == prev_last + 1
    else:
        assert log.log_end_offset == segments[-1].base_offset
    return batches


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 2 MiB tmpfs, or a skip where mounting is not permitted."""
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
