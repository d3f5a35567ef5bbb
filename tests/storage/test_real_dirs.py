"""Log dirs written by real Kafka brokers (0.10 to 3.6) open through seglog.open.

Each is copied to a temporary dir first (the originals are never touched). Then:
every record reads back as kafka-python reads the files; lookups by offset and by
timestamp agree with a brute-force scan; opening truncates nothing; appends
continue each log; and what seglog wrote is read by kafka-python, with index
entries (read from the raw .index bytes) pointing at batch starts.
"""

from __future__ import annotations

import bisect
import os
import random
import shutil
import stat
from pathlib import Path

import pytest

from seglog.records import BatchIterator, Compression, Record
from seglog.storage import PartitionLog

from ..conftest import KAFKA_DATA
from .conftest import as_tuples, check_log, index_file_entries, kafka_python_records, open_logs

REAL = KAFKA_DATA / "real_segments"
DIRS = {
    "cp7.6-kraft": "rjmfernandes_flink-on-prem__cp7.6_kraft/data",
    "cp5.1.2": "mscaldas2012_kafka-connect-spooldir__cp5.1.2/kafka-data",
    "kafka0.10-magic1": "xpxwo100_bullShit__kafka0.10_magic1/tmp/kafka-logs",
    "kafka0.11": "SharaWeil_kafka-0.11.0/data",
}
COMPACTED = ("__consumer_offsets", "_schemas", "promotions", "connect-configs", "connect-status", "docker-connect")


def copy_writable(src: Path, dst: Path) -> Path:
    """Copy a tree whose files and dirs are read-only, as the shared data's are."""
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for root, dirs, files in os.walk(dst):
        for name in dirs + files:
            path = os.path.join(root, name)
            os.chmod(path, os.stat(path).st_mode | stat.S_IWUSR)
    os.chmod(dst, os.stat(dst).st_mode | stat.S_IWUSR)
    return dst


def files_by_partition(root: Path) -> dict[str, list[Path]]:
    return {d.name: sorted(d.glob("*.log")) for d in sorted(root.iterdir()) if d.is_dir()}


def assert_index_entries_point_at_batch_starts(log_path: Path) -> int:
    """Every 8-byte entry of the .index beside ``log_path``: relative offset = the
    batch's last offset - base offset, position = where that batch starts."""
    index = log_path.with_suffix(".index")
    if not index.exists():
        return 0
    base = int(log_path.stem)
    starts = {b.position: b.last_offset for b in BatchIterator(log_path.read_bytes())}
    entries = index_file_entries(index)
    if entries == [(0, 0)] and 0 not in starts:
        return 0  # a preallocated, empty index
    for rel, pos in entries:
        assert starts.get(pos) == base + rel, f"{index.name}: entry ({rel}, {pos}) is not a batch start"
    return len(entries)


def scan(log: PartitionLog) -> tuple[list, list]:
    """Batches (base, last, position, file) and records, control records included (a
    lookup by timestamp, as Kafka's, does not skip them), read from the files directly."""
    batches, recs = [], []
    for segment in log.segments:
        data = Path(segment.log_path).read_bytes()
        for b in BatchIterator(data):
            batches.append((b.base_offset, b.last_offset, b.position, segment.log_path))
            recs += [r for r in b.records() if r.offset >= log.log_start_offset]
    return batches, recs


def check_offset_lookups(log: PartitionLog, batches: list, rng: random.Random) -> None:
    offsets = range(log.log_start_offset, log.log_end_offset)
    sample = offsets if len(offsets) <= 1500 else rng.sample(offsets, 1500)
    lasts = [b[1] for b in batches]
    for offset in sample:
        expected = batches[bisect.bisect_left(lasts, offset)]  # the first batch ending at or after it
        fetch = log.read(offset, 1)
        assert fetch.slice is not None
        assert (fetch.slice.handle.path, fetch.slice.position) == (expected[3], expected[2]), offset
        first = next(fetch.slice.batches())
        assert first.base_offset == expected[0] and first.last_offset == expected[1]


def check_timestamp_lookups(log: PartitionLog, recs: list, rng: random.Random) -> int:
    by_ts = sorted((r.timestamp, r.offset) for r in recs if r.timestamp >= 0)
    if not by_ts:
        assert log.offset_for_timestamp(0) is None
        return 0
    # suffix minimum: the earliest offset among records with timestamp >= by_ts[i]
    earliest = [0] * len(by_ts)
    best = None
    for i in range(len(by_ts) - 1, -1, -1):
        if best is None or by_ts[i][1] < best[1]:
            best = by_ts[i]
        earliest[i] = best
    stamps = sorted({ts for ts, _ in by_ts})
    targets = {0, stamps[0] - 1, stamps[-1], stamps[-1] + 1}
    for ts in rng.sample(stamps, min(len(stamps), 300)):
        targets |= {ts - 1, ts, ts + 1}
    for target in sorted(targets):
        i = bisect.bisect_left(by_ts, (target, -1))
        expected = None if i == len(by_ts) else (earliest[i][1], earliest[i][0])
        assert log.offset_for_timestamp(target) == expected, target
    return len(targets)


@pytest.mark.parametrize("name", sorted(DIRS))
def test_real_kafka_dir(tmp_path, name, caplog):
    source = REAL / DIRS[name]
    root = copy_writable(source, tmp_path / "logs")
    original = files_by_partition(root)
    sizes = {p: p.stat().st_size for files in original.values() for p in files}
    kafka_indexed = sum(assert_index_entries_point_at_batch_starts(p) for f in original.values() for p in f)
    rng = random.Random(name)
    total = 0
    with open_logs(root) as manager:
        assert {f"{t}-{p}" for t in manager.topics() for p in manager.partitions(t)} == set(original)
        for partition_log in manager.logs():
            expected = []
            for path in original[partition_log.name]:
                expected += kafka_python_records(path.read_bytes())
            expected = [r for r in expected if r[0] >= partition_log.log_start_offset]
            got = as_tuples(partition_log.records())
            assert got == expected, partition_log.name
            total += len(got)
            check_log(partition_log, dense=False)
            batches, recs = scan(partition_log)
            if batches:
                check_offset_lookups(partition_log, batches, rng)
            check_timestamp_lookups(partition_log, recs, rng)
    for path, size in sizes.items():
        assert path.stat().st_size == size, f"opening changed {path}"
    assert total > 0
    assert kafka_indexed > 800 or name != "cp7.6-kraft"

    # appends continue every log; kafka-python reads what seglog wrote
    appended = {}
    with open_logs(root) as manager:
        for i, partition_log in enumerate(manager.logs()):
            end = partition_log.log_end_offset
            new = [Record(b"new-%d" % j, b"value-%d" % j, 1_700_000_000_000 + j, [("h", b"x")]) for j in range(3)]
            codec = list(Compression)[i % len(Compression)]
            assert partition_log.append(new, compression=codec) == (end, end + 2)
            assert partition_log.append(new[:1]) == (end + 3, end + 3)
            appended[partition_log.name] = end
    with open_logs(root) as manager:
        for partition_log in manager.logs():
            end = appended[partition_log.name]
            assert partition_log.log_end_offset == end + 4
            data = b"".join(Path(s.log_path).read_bytes() for s in partition_log.segments)
            tail = [r for r in kafka_python_records(data) if r[0] >= end]
            assert [(r[0], r[2], r[3], r[4]) for r in tail] == [
                (end + j, b"new-%d" % (j % 3), b"value-%d" % (j % 3), [("h", b"x")]) for j in range(4)
            ]
            check_log(partition_log, dense=False)
            assert partition_log.offset_for_timestamp(1_700_000_000_002) is not None
    for files in files_by_partition(root).values():
        for path in files:
            assert_index_entries_point_at_batch_starts(path)


def test_a_lone_production_segment(tmp_path):
    """One .log of a 2025 production broker, in a partition dir of its own."""
    (source,) = (REAL / "someshkovi_kafka-log-parser").rglob("*.log")
    d = tmp_path / "bp.nsi.v3.changes.fre-0"
    d.mkdir()
    shutil.copyfile(source, d / source.name)
    with open_logs(tmp_path) as manager:
        partition_log = manager.partition("bp.nsi.v3.changes.fre", 0)
        expected = kafka_python_records(source.read_bytes())
        assert [(r.offset, r.value) for r in partition_log.records()] == [(r[0], r[3]) for r in expected]
        assert len(expected) >= 4
        check_log(partition_log, dense=False)
