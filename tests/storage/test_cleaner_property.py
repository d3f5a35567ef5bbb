"""The compaction property: for any appends, tombstones, rolls, cleanings and clock moves,
the compacted log is the uncompacted one minus superseded records (and expired tombstones),
offsets unchanged, and a reader starting anywhere sees what the uncompacted log would show."""

from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import seglog
from seglog.records import Compression, Record, build_batch
from seglog.storage.log import PartitionLog
from seglog.storage.offset_map import ENTRY_SIZE

NOW = 1_700_000_000_000
RETENTION = 1000  # delete.retention.ms
KEYS = [b"k%d" % i for i in range(12)]

put = st.tuples(
    st.just("put"), st.lists(st.tuples(st.integers(0, len(KEYS) - 1), st.booleans()), min_size=1, max_size=4)
)
op = st.one_of(
    # mostly appends, so that cleanings have something to remove
    st.sampled_from(["put"] * 5 + ["roll"] * 2 + ["clean", "force", "tick", "reopen"]).flatmap(
        lambda kind: {
            "put": put,
            "roll": st.just(("roll",)),
            "clean": st.just(("clean", False)),
            "force": st.just(("clean", True)),
            "tick": st.tuples(st.just("tick"), st.sampled_from([1, 400, 1000, 5000])),
            "reopen": st.just(("reopen",)),
        }[kind]
    ),
)


class Model:
    """The uncompacted log: every record ever appended, by offset."""

    def __init__(self) -> None:
        self.records: dict[int, tuple[bytes, bytes | None, int]] = {}

    def latest(self, start: int = 0) -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        for offset in sorted(self.records):
            if offset >= start:
                out[self.records[offset][0]] = offset
        return out


def check(log: PartitionLog, model: Model) -> None:
    got = [(r.offset, r.key, r.value, r.timestamp) for r in log.records()]
    offsets = [g[0] for g in got]
    assert offsets == sorted(set(offsets)), "offsets must increase"
    for offset, key, value, ts in got:
        assert model.records[offset] == (key, value, ts), "a record must be the one appended at its offset"
    by_key: dict[bytes, list[int]] = {}
    for offset, key, _, _ in got:
        by_key.setdefault(key, []).append(offset)
    for key, last in model.latest().items():
        present = by_key.get(key, [])
        if model.records[last][1] is not None:
            assert present and present[-1] == last, "the latest value of a key must survive"
        else:
            assert not present or present[-1] == last, "a tombstone is the last word on its key"
    # a reader starting anywhere sees, per key, what the uncompacted log shows from there on
    for start in sorted(model.records)[:: max(1, len(model.records) // 8)]:
        seen: dict[bytes, int] = {}
        for r in log.records(start):
            assert r.offset >= start
            seen[r.key] = r.offset
        expected = model.latest(start)
        for key, offset in expected.items():
            if model.records[offset][1] is not None:
                assert seen.get(key) == offset
            else:
                assert seen.get(key) in (None, offset)
        assert set(seen) <= set(expected)


def tombstones(log: PartitionLog) -> dict[int, int]:
    """Offset -> delete horizon (-1: none yet) of every tombstone below the active segment."""
    active = log.active_segment.base_offset
    out = {}
    for batch in log.batches():
        if batch.is_control or batch.base_offset >= active:
            continue
        for r in batch.records():
            if r.value is None:
                out[r.offset] = batch.delete_horizon_ms
    return out


@settings(max_examples=35, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op, min_size=1, max_size=60),
    dedupe_entries=st.sampled_from([6, 16, 10_000]),
    codec=st.sampled_from([Compression.NONE, Compression.LZ4, Compression.GZIP]),
)
def test_compaction_keeps_the_latest_of_every_key(ops, dedupe_entries, codec):
    d = tempfile.mkdtemp(prefix="seglog-prop-")
    clock = [NOW]
    broker = {"log.cleaner.dedupe.buffer.size": dedupe_entries * ENTRY_SIZE, "log.cleaner.io.buffer.load.factor": 0.5}
    topic = {"cleanup.policy": "compact", "delete.retention.ms": RETENTION, "segment.bytes": 700}

    def open_logs():
        return seglog.open(d, broker, clock=lambda: clock[0], background=False)

    logs = open_logs()
    try:
        logs.create_topic("c", 1, topic)
        log = logs.partition("c", 0)
        model = Model()
        for step in ops:
            kind = step[0]
            if kind == "put":
                records = [
                    Record(KEYS[k], None if tomb else b"v%d-%d" % (k, clock[0]), clock[0]) for k, tomb in step[1]
                ]
                first, _ = log.append(records, compression=codec)
                for i, r in enumerate(records):
                    model.records[first + i] = (r.key, r.value, r.timestamp)
            elif kind == "roll":
                log.roll()
            elif kind == "tick":
                clock[0] += step[1]
            elif kind == "reopen":
                logs.close()
                logs = open_logs()
                log = logs.partition("c", 0)
            else:
                force = step[1]
                expired = {o for o, h in tombstones(log).items() if 0 <= h <= clock[0]}
                before = tombstones(log)
                stats = logs.clean(force=force)
                after = tombstones(log)
                if any(s.records_removed for s in stats):
                    event("a cleaning removed records")
                if len(stats) > 1:
                    event("a cleaning took several passes")
                if set(before) - set(after):
                    event("tombstones went")
                if force:
                    # a tombstone whose delete horizon had passed is gone after a full cleaning
                    assert not expired & set(after)
                # and none goes before its horizon: it was stamped by an earlier cleaning
                for offset in set(before) - set(after):
                    assert 0 <= before[offset] <= clock[0] or model.latest().get(model.records[offset][0]) != offset
                check(log, model)
                assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.dir))
        check(log, model)
        assert log.log_end_offset == (max(model.records) + 1 if model.records else 0)
        # in the end, with every horizon passed, no tombstone is left below the active segment
        clock[0] += 2 * RETENTION
        log.roll()
        logs.clean(force=True)
        logs.clean(force=True)  # the first stamps horizons on tombstones it saw for the first time
        clock[0] += 2 * RETENTION
        logs.clean(force=True)
        check(log, model)
        assert tombstones(log) == {}
        kept = sum(1 for _ in log.records())
        event(f"records kept at the end: {'all' if kept == len(model.records) else 'some'}")
    finally:
        logs.close()
        shutil.rmtree(d, ignore_errors=True)


def test_a_batch_rebuilt_around_removed_records_reads_from_any_offset(tmp_path):
    """Offsets inside a rebuilt batch, removed or kept, read like the uncompacted log."""
    with seglog.open(str(tmp_path), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("c", 1, {"cleanup.policy": "compact"})
        log = logs.partition("c", 0)
        log.append_batches(build_batch([(b"a", b"1", NOW), (b"b", b"1", NOW), (b"c", b"1", NOW), (b"d", b"1", NOW)]))
        log.append([Record(b"b", b"2", NOW), Record(b"c", b"2", NOW)])
        log.roll()
        logs.clean(force=True)
        for start, expected in [(0, [0, 3, 4, 5]), (1, [3, 4, 5]), (2, [3, 4, 5]), (3, [3, 4, 5]), (5, [5])]:
            assert [r.offset for r in log.records(start)] == expected
