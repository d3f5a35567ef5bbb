"""Crash safety.

A real child process (crash_child.py) appends until it is killed with SIGKILL at
a random moment, again and again on the same log dir; after each kill the dir is
copied and opened (an unclean shutdown: recovery) and must be a valid log that
holds every acknowledged record, unchanged. Then the damage a crash or a disk
can do is made by hand — a torn batch, a truncated file, garbage, zeroed and
truncated indexes — and each must be recovered, with a log line saying what was
done.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seglog.records import BatchIterator

from . import crash_child
from .conftest import MS, check_log, crash, new_log, open_logs, records

CHILD = Path(crash_child.__file__)
SRC = Path(__file__).resolve().parents[2] / "src"
KILLS_PER_MODE = 26  # two modes: 52 kills per run


def acknowledged(path: Path) -> int:
    """The largest offset the child acknowledged as flushed (-1: none yet)."""
    if not path.exists():
        return -1
    lines = path.read_bytes().split(b"\n")[:-1]  # a line cut by the kill has no newline
    return max((int(line) for line in lines), default=-1)


def earliest_offset_at_or_after(ts: int, end: int) -> int | None:
    """Brute force over the formula of crash_child.expected: timestamps lie within 12 ms
    below 2 * offset, so only a small window of offsets can be the answer."""
    around = (ts - crash_child.BASE_TS) // 2
    for offset in range(max(0, around - 8), min(end, around + 16)):
        if crash_child.expected(offset)[2] >= ts:
            return offset
    return None


def verify(root: Path, scratch: Path, acks: Path, known_end: int, rng: random.Random) -> int:
    """Open a copy of the killed dir (recovering it), check it, return its log end offset."""
    shutil.copytree(root, scratch)
    with open_logs(scratch) as manager:
        log = manager.partition(crash_child.TOPIC, 0)
        check_log(log)  # whole batches, CRCs, dense offsets, both indexes consistent
        end = log.log_end_offset
        acked = acknowledged(acks)
        assert end > acked, f"acknowledged offset {acked} lost: the log ends at {end}"
        assert end >= known_end, f"the log shrank from {known_end} to {end}: recovery dropped whole batches"
        start = max(0, known_end - 50)
        got = [(r.offset, r.key, r.value, r.timestamp) for r in log.records(start)]
        assert [g[0] for g in got] == list(range(start, end))
        for offset, key, value, ts in got:
            assert (key, value, ts) == crash_child.expected(offset), f"record {offset} is not what was written"
        for _ in range(3):
            target = crash_child.BASE_TS + rng.randrange(0, 2 * end + 10)
            expected = earliest_offset_at_or_after(target, end)
            found = log.offset_for_timestamp(target)
            assert (found[0] if found else None) == expected, target
    shutil.rmtree(scratch)
    return end


def kill_repeatedly(tmp_path: Path, mode: str, kills: int, seed: int) -> int:
    root, acks = tmp_path / "logs", tmp_path / "acks"
    with open_logs(root) as manager:
        manager.create_topic(crash_child.TOPIC, 1, crash_child.CONFIGS[mode])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    rng = random.Random(seed)
    end = 0
    for n in range(kills):
        stderr = tmp_path / "stderr"
        with open(stderr, "wb") as err:
            child = subprocess.Popen(
                [sys.executable, str(CHILD), str(root), str(acks), mode, str(seed * 1000 + n)],
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
            )
        try:
            ready = child.stdout.readline()
            assert ready == b"ready\n", stderr.read_text()
            time.sleep(rng.uniform(0.0, 0.2))
            assert child.poll() is None, f"the child died before the kill: {stderr.read_text()}"
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
            child.stdout.close()
        assert child.returncode == -signal.SIGKILL
        end = verify(root, tmp_path / "copy", acks, end, rng)
    assert acknowledged(acks) >= 0, "no append was ever acknowledged"
    return end


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["flush1", "default"])
def test_sigkill_while_appending(tmp_path, mode):
    end = kill_repeatedly(tmp_path, mode, KILLS_PER_MODE, seed=1 if mode == "flush1" else 2)
    assert end > KILLS_PER_MODE  # the log grew across the kills


# --- damage made by hand ---------------------------------------------------------------------------


def crashed_log(tmp_path: Path, *, segments: int = 1, clock=None):
    """A log of 40 records (of 2-record batches), crashed: nothing trimmed or marked clean."""
    config = {"segment.bytes": 900 if segments > 1 else 1 << 20, "index.interval.bytes": 100}
    manager, log = new_log(tmp_path, config=config, clock=clock)
    for i in range(20):
        log.append(records(2, start=i * 2, size=30, ts=MS + i * 2))
    assert len(log.segments) >= segments
    paths = [s.log_path for s in log.segments]
    indexes = [s.index_path for s in log.segments]
    crash(manager)
    return paths, indexes


def reopen_and_check(tmp_path: Path, caplog, end: int) -> int:
    """Open (recovering), check, append; returns the active segment's size once opened."""
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        check_log(log)
        size = log.segments[-1].size
        assert log.log_end_offset == end
        assert [r.key for r in log.records()] == [b"k%d" % i for i in range(end)]
        log.append(records(1, start=end))  # and the log takes appends again
        assert log.log_end_offset == end + 1
        check_log(log)
    return size


def test_torn_write_is_cut_off(tmp_path, caplog, clock):
    (path, *_), _ = crashed_log(tmp_path, clock=clock)
    size = os.path.getsize(path)
    half = bytes(list(BatchIterator(Path(path).read_bytes()))[-1].buffer)
    with open(path, "ab") as f:
        f.write(half[: len(half) // 2])  # a batch cut in half at the end
    assert reopen_and_check(tmp_path, caplog, 40) == size  # the torn bytes are gone
    assert f"truncating {len(half) // 2} bytes at position {size}: a partial batch" in caplog.text


def test_truncated_log_file(tmp_path, caplog, clock):
    (path, *_), _ = crashed_log(tmp_path, clock=clock)
    last = list(BatchIterator(Path(path).read_bytes()))[-1]
    os.truncate(path, last.position + 30)  # the last batch lost its tail
    reopen_and_check(tmp_path, caplog, 38)
    assert f"truncating 30 bytes at position {last.position}" in caplog.text


def test_garbage_after_the_last_batch(tmp_path, caplog, clock):
    (path, *_), _ = crashed_log(tmp_path, clock=clock)
    size = os.path.getsize(path)
    with open(path, "ab") as f:
        f.write(random.Random(3).randbytes(5000))
    reopen_and_check(tmp_path, caplog, 40)
    assert f"truncating 5000 bytes at position {size}" in caplog.text


def test_zeroes_after_the_last_batch(tmp_path, caplog, clock):
    """A file extended by the filesystem but never written (zeros) ends the log."""
    (path, *_), _ = crashed_log(tmp_path, clock=clock)
    size = os.path.getsize(path)
    os.truncate(path, size + 4096)
    reopen_and_check(tmp_path, caplog, 40)
    assert f"truncating 4096 bytes at position {size}" in caplog.text


def test_corrupt_batch_in_an_earlier_segment_ends_the_log_there(tmp_path, caplog, clock):
    paths, _ = crashed_log(tmp_path, segments=3, clock=clock)
    data = bytearray(Path(paths[1]).read_bytes())
    batches = list(BatchIterator(bytes(data)))
    data[batches[1].position + 40] ^= 0x55  # the second batch of the second segment
    Path(paths[1]).write_bytes(bytes(data))
    end = batches[1].base_offset
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        check_log(log)
        assert log.log_end_offset == end and len(log.segments) == 2
    for later in paths[2:]:
        assert not os.path.exists(later)
    assert "CRC mismatch" in caplog.text and "deleting segment" in caplog.text


@pytest.mark.parametrize("damage", ["zeroed", "truncated", "odd size", "time index zeroed", "time index odd"])
def test_damaged_index_of_an_inactive_segment_is_rebuilt(tmp_path, caplog, clock, damage):
    """Below the recovery point segments are not rescanned; their indexes are checked when
    first used, and rebuilt from the log if they fail the checks."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 900, "index.interval.bytes": 100}, clock=clock)
    for i in range(20):
        log.append(records(2, start=i * 2, size=30, ts=MS + i * 2))
    first = log.segments[0]
    entries = first.offset_index.entries
    assert entries >= 2
    manager.close()  # clean: nothing will be recovered
    target = first.time_index_path if damage.startswith("time") else first.index_path
    size = os.path.getsize(target)
    if "zeroed" in damage:
        Path(target).write_bytes(bytes(size))
    elif damage == "truncated":
        os.truncate(target, size - 8)  # whole entries lost: still a valid, shorter index
    else:
        os.truncate(target, size - 3)
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        check_log(log)
        assert log.offset_for_timestamp(MS + 3) == (3, MS + 3)
        assert batches_start(log.read(5)) == 4
    if damage == "truncated":
        assert "rebuilding" not in caplog.text
    else:
        assert "corrupt index" in caplog.text and "rebuilding the indexes from the log" in caplog.text
        assert os.path.getsize(first.index_path) == entries * 8  # rebuilt and trimmed at close


def batches_start(fetch) -> int:
    return next(fetch.slice.batches()).base_offset


def test_zeroed_index_of_the_active_segment_after_a_clean_shutdown(tmp_path, caplog, clock):
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 100}, clock=clock)
    for i in range(20):
        log.append(records(2, start=i * 2, size=30, ts=MS + i * 2))
    path = log.segments[0].index_path
    manager.close()
    Path(path).write_bytes(bytes(os.path.getsize(path)))
    with caplog.at_level(logging.INFO), open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        check_log(log)
        assert log.segments[0].offset_index.entries > 3
    assert "corrupt index" in caplog.text


def test_zeroed_and_truncated_indexes_of_a_crashed_active_segment(tmp_path, caplog, clock):
    _, (index, *_) = crashed_log(tmp_path, clock=clock)
    Path(index).write_bytes(bytes(os.path.getsize(index)))
    time_index = index.replace(".index", ".timeindex")
    os.truncate(time_index, 7)
    reopen_and_check(tmp_path, caplog, 40)
    assert "recovering segment 0" in caplog.text


def test_missing_segment_indexes_after_a_crash(tmp_path, caplog, clock):
    _, indexes = crashed_log(tmp_path, segments=3, clock=clock)
    os.unlink(indexes[0])
    reopen_and_check(tmp_path, caplog, 40)
    assert "index files missing: rebuilding them" in caplog.text or "recovering segment 0" in caplog.text
