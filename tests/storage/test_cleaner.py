"""Log compaction: what the cleaner keeps, how it rewrites batches, and when it runs."""

from __future__ import annotations

import errno
import math
import os
import time
import weakref

import pytest

import seglog
from seglog.records import Compression, Record, RecordBatch, TimestampType, build_batch, end_transaction_marker
from seglog.records.control import leader_change
from seglog.storage import checkpoint, fileio
from seglog.storage import cleaner as cleaner_module
from seglog.storage.log import PartitionLog
from seglog.storage.offset_map import ENTRY_SIZE, OffsetMap
from seglog.storage.throttler import Throttler

NOW = 1_700_000_000_000
DAY = 86_400_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def compacted(tmp_path, clock, config=None, broker=None, **overrides):
    logs = seglog.open(str(tmp_path), broker, clock=clock, background=False)
    logs.create_topic("c", 1, {"cleanup.policy": "compact", **overrides})
    return logs, logs.partition("c", 0)


def put(log: PartitionLog, key: bytes | None, value: bytes | None, ts: int = NOW) -> int:
    return log.append([Record(key, value, ts)])[0]


def view(log: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in log.records()]


def latest(records) -> dict:
    out = {}
    for offset, key, value in records:
        out[key] = (offset, value)
    return out


def raw_batches(log: PartitionLog) -> list[bytes]:
    return [bytes(b.buffer) for b in log.batches()]


# --- the offset map and the throttle ------------------------------------------------------------------


def test_offset_map():
    m = OffsetMap(100 * ENTRY_SIZE, 0.5, seed=7)
    assert m.slots == 100 and m.max_entries == 50
    assert m.get(b"a") == -1
    assert m.put(b"a", 1) and m.put(b"b", 2) and m.put(b"a", 3)
    assert (m.get(b"a"), m.get(b"b"), m.entries, m.latest_offset) == (3, 2, 2, 3)
    keys = [b"k%d" % i for i in range(200)]
    records = [Record(k, b"", 0, (), i) for i, k in enumerate(keys)]
    full_at = m.put_records(records, 0)
    assert full_at == 48 and m.entries == 50 and m.latest_offset == 47  # 48 new keys fit beside a and b
    assert not m.put(b"new", 9) and m.put(b"a", 10)  # no new key, but an existing one updates
    assert m.offsets_of([*records[:3], Record(None, b"", 0, (), 5)], 10**9) == [0, 1, 2, -1]
    assert m.offsets_of(records[:2], 0) == [0, -1]  # above `upto`: not looked up
    bigger = OffsetMap(1000 * ENTRY_SIZE, 0.9, seed=7)
    bigger.absorb(m)
    assert bigger.entries == 50 and all(bigger.get(k) == i for i, k in enumerate(keys[:48]))
    m.clear()
    assert m.entries == 0 and m.get(b"a") == -1 and m.latest_offset == -1
    with pytest.raises(ValueError):
        OffsetMap(ENTRY_SIZE)


def test_offset_map_collisions_probe_everywhere():
    m = OffsetMap(7 * ENTRY_SIZE, 0.99, seed=1)
    for i in range(m.max_entries):
        assert m.put(b"%d" % i, i)
    assert [m.get(b"%d" % i) for i in range(m.max_entries)] == list(range(m.max_entries))


def test_throttler():
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    t = Throttler(1000, 100, monotonic=lambda: now[0], sleep=sleep)
    t.maybe_throttle(50)  # inside the check interval: no decision yet
    now[0] = 0.2
    t.maybe_throttle(450)  # 500 bytes in 0.2 s at 1000 B/s: 0.3 s early
    assert slept == [pytest.approx(0.3)]
    now[0] += 0.5
    t.maybe_throttle(100)  # slow enough
    assert len(slept) == 1
    assert Throttler(math.inf).unlimited


# --- what compaction keeps ------------------------------------------------------------------------------


def test_keeps_the_latest_value_of_each_key_at_its_offset(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"segment.bytes": 1500})
    writes = [(b"k%d" % (i % 7), b"v%d" % i) for i in range(120)]
    for key, value in writes:
        put(log, key, value)
    before = view(log)
    active = log.active_segment
    stats = logs.clean()
    assert len(stats) == 1 and stats[0].records_removed > 0
    after = view(log)
    assert latest(after) == latest(before)
    assert set(after) <= set(before)  # offsets and contents unchanged
    assert [o for o, _, _ in after] == sorted(o for o, _, _ in after)
    assert log.active_segment is active  # never touched
    cleaned = [r for r in after if r[0] < active.base_offset]
    assert len({k for _, k, _ in cleaned}) == len(cleaned)  # one record per key below the active segment
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.dir))
    assert logs.clean() == []  # nothing dirty left
    logs.close()


def test_tombstones_live_delete_retention_ms(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"delete.retention.ms": 1000})
    put(log, b"a", b"1")
    put(log, b"b", b"1")
    tomb = put(log, b"a", None)
    log.roll()
    put(log, b"z", b"active")
    logs.clean(force=True)
    assert view(log) == [(1, b"b", b"1"), (tomb, b"a", None), (3, b"z", b"active")]
    # the first cleaning that kept the tombstone stamped its batch with the delete horizon
    batch = next(b for b in log.batches() if b.last_offset == tomb)
    assert batch.has_delete_horizon and batch.delete_horizon_ms == NOW + 1000
    assert [r.timestamp for r in batch.records()] == [NOW]  # record timestamps are unchanged
    clock.now = NOW + 999
    logs.clean(force=True)
    assert (tomb, b"a", None) in view(log)
    clock.now = NOW + 1000
    logs.clean(force=True)
    assert view(log) == [(1, b"b", b"1"), (3, b"z", b"active")]
    logs.close()


def test_wholly_kept_batches_are_copied_byte_for_byte(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    batches = [
        build_batch([(b"x%d" % i, b"v", NOW), (b"y%d" % i, b"w", NOW + 1)], compression=Compression.LZ4)
        for i in range(5)
    ]
    for b in batches:
        log.append_batches(b)
    put(log, b"x0", b"newer")  # makes batch 0 partly obsolete
    log.roll()
    kept_before = raw_batches(log)[1:5]
    logs.clean(force=True)
    after = raw_batches(log)
    assert after[1:5] == kept_before
    assert RecordBatch(after[0]).record_count == 1  # rebuilt
    logs.close()


@pytest.mark.parametrize("codec", list(Compression))
def test_rebuilt_batches_keep_their_fields(tmp_path, codec):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    log.become_leader(3)
    batch = build_batch(
        [(b"a", b"1", NOW - 5, [("h", b"x")]), (b"b", b"2", NOW - 9), (b"c", b"3", NOW - 7)],
        compression=codec,
        producer_id=77,
        producer_epoch=4,
        base_sequence=10,
    )
    log.append_batches(batch)
    put(log, b"b", b"newer")
    log.append([Record(b"q", b"last", NOW)], producer_id=77, producer_epoch=4, base_sequence=13)
    log.roll()
    logs.clean(force=True)
    rebuilt = next(log.batches())
    rebuilt.validate()
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.record_count) == (0, 2, 2)
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (77, 4, 10)
    assert rebuilt.last_sequence == 12  # the sequence range survives through the last offset delta
    assert rebuilt.compression == codec and rebuilt.partition_leader_epoch == 3
    assert [(r.offset, r.key, r.timestamp, tuple(r.headers)) for r in rebuilt.records()] == [
        (0, b"a", NOW - 5, (("h", b"x"),)),
        (2, b"c", NOW - 7, ()),
    ]
    assert rebuilt.max_timestamp == NOW - 5 and not rebuilt.has_delete_horizon
    logs.close()


def test_log_append_time_batches(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"message.timestamp.type": "LogAppendTime"})
    log.append([Record(b"a", b"1", 5), Record(b"b", b"1", 6)])
    clock.now += 10
    put(log, b"a", b"2")
    log.roll()
    logs.clean(force=True)
    first = next(log.batches())
    assert first.timestamp_type == TimestampType.LOG_APPEND_TIME and first.max_timestamp == NOW
    assert [(r.key, r.timestamp) for r in first.records()] == [(b"b", NOW)]
    logs.close()


def test_last_batch_of_a_producer_stays_as_an_empty_header(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    log.append([Record(b"a", b"1", NOW)], producer_id=5, producer_epoch=2, base_sequence=0)
    log.append([Record(b"a", b"2", NOW)], producer_id=5, producer_epoch=2, base_sequence=1)
    put(log, b"a", b"3")  # no producer id
    put(log, b"b", b"4")
    log.roll()
    logs.clean(force=True)
    batches = list(log.batches())
    assert [(b.base_offset, b.record_count, b.producer_id) for b in batches] == [(1, 0, 5), (2, 1, -1), (3, 1, -1)]
    empty = batches[0]
    empty.validate()
    assert (empty.producer_epoch, empty.base_sequence, empty.max_timestamp) == (2, 1, NOW)
    assert view(log) == [(2, b"a", b"3"), (3, b"b", b"4")]
    # a producer idle past producer.id.expiration.ms loses it
    clock.now += DAY
    put(log, b"c", b"5")
    log.roll()
    logs.clean(force=True)
    assert [b.producer_id for b in log.batches()] == [-1, -1, -1]
    logs.close()


def test_transactions(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"delete.retention.ms": 100})

    def txn(pid, records):
        log.append_batches(build_batch(records, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True))

    def marker(pid, commit):
        m = build_batch([end_transaction_marker(commit, timestamp=clock.now)], producer_id=pid, producer_epoch=0,
                        transactional=True, control=True)  # fmt: skip
        log.append_batches(m, origin="coordinator")

    put(log, b"k", b"plain")
    txn(1, [(b"k", b"aborted", NOW), (b"x", b"aborted", NOW)])  # 1, 2
    txn(2, [(b"k", b"committed", NOW)])  # 3
    marker(1, commit=False)  # 4
    marker(2, commit=True)  # 5
    put(log, b"y", b"plain")  # 6
    log.roll()
    logs.clean(force=True)
    # the aborted records went without regard to keys; the committed one is the latest of k
    assert view(log) == [(3, b"k", b"committed"), (6, b"y", b"plain")]
    batches = [(b.base_offset, b.is_control, b.record_count, b.producer_id) for b in log.batches()]
    # the aborted batch is producer 1's last: it stays, emptied; both markers stay, as
    # batches of their transactions were seen in this cleaning
    assert batches == [(1, False, 0, 1), (3, False, 1, 2), (4, True, 1, 1), (5, True, 1, 2), (6, False, 1, -1)]

    clock.now += 2 * DAY  # both producers expire
    put(log, b"k", b"plain2")  # 7: supersedes the committed record
    log.roll()
    logs.clean(force=True)
    assert [(b.base_offset, b.record_count) for b in log.batches() if not b.is_control] == [(6, 1), (7, 1)]
    assert all(b.record_count == 1 and not b.has_delete_horizon for b in log.batches() if b.is_control)
    logs.clean(force=True)  # no batch of either transaction is left: the markers get a horizon
    assert all(b.delete_horizon_ms == clock.now + 100 for b in log.batches() if b.is_control)
    clock.now += 100
    logs.clean(force=True)  # and go once it passed
    assert [b.is_control for b in log.batches()] == [False, False]
    assert view(log) == [(6, b"y", b"plain"), (7, b"k", b"plain2")]
    logs.close()


def test_an_open_transaction_stops_the_cleaner(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    put(log, b"k", b"1")
    put(log, b"k", b"2")
    log.roll()
    log.append_batches(build_batch([(b"k", b"open", NOW)], producer_id=9, producer_epoch=0, transactional=True))
    log.roll()
    put(log, b"k", b"3")
    log.roll()
    logs.clean(force=True)
    # the segment holding the undecided transaction and all after it are not cleaned
    assert view(log)[0] == (1, b"k", b"2") and (2, b"k", b"open") in view(log)
    assert (3, b"k", b"3") in view(log)
    logs.close()


def test_control_batches_of_other_kinds_stay(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    log.append_batches(build_batch([leader_change(1, (1, 2, 3), NOW)], control=True), origin="coordinator")
    put(log, b"a", b"1")
    put(log, b"a", b"2")
    log.roll()
    logs.clean(force=True)
    first = next(log.batches())
    assert first.is_control and first.record_count == 1
    assert view(log) == [(2, b"a", b"2")]
    logs.close()


def test_keyless_records_are_dropped_below_the_map(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    put(log, b"a", b"1")
    log.append_as_follower(build_batch([(None, b"keyless", NOW)], base_offset=1))
    put(log, b"a", b"2")
    log.roll()
    stats = logs.clean(force=True)
    assert stats[0].invalid_records == 1
    assert view(log) == [(2, b"a", b"2")]
    logs.close()


# --- when it runs ------------------------------------------------------------------------------------------


def test_dirty_ratio_and_cleaning_state(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"min.cleanable.dirty.ratio": 0.5})
    for i in range(10):
        put(log, b"k%d" % i, b"x" * 100)
    log.roll()
    state = logs.cleaning_state("c", 0)
    assert state.compacted and state.dirty_ratio == 1.0 and state.first_dirty_offset == 0
    assert state.first_uncleanable_offset == 10 and state.last is None and not state.in_progress
    logs.clean()
    state = logs.cleaning_state("c", 0)
    assert state.first_dirty_offset == 10 and state.dirty_ratio == 0.0
    assert state.last is not None and state.last.bytes_read == state.clean_bytes and state.last.records_removed == 0
    assert state.last.seconds >= 0 and state.last.start_ms == NOW
    # a little dirt stays below the ratio: nothing to do
    put(log, b"k0", b"y" * 100)
    log.roll()
    assert 0 < logs.cleaning_state("c", 0).dirty_ratio < 0.5
    assert logs.clean() == []
    logs.alter_topic_config("c", {"min.cleanable.dirty.ratio": 0.01})  # takes effect at once
    assert len(logs.clean()) == 1
    assert checkpoint.read_offsets(str(tmp_path / "cleaner-offset-checkpoint")) == {("c", 0): 11}
    logs.close()


def test_min_compaction_lag(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"min.compaction.lag.ms": 1000})
    put(log, b"k", b"old", NOW - 5000)
    log.roll()
    put(log, b"k", b"young", NOW - 10)
    log.roll()
    put(log, b"k", b"active", NOW)
    logs.clean(force=True)
    assert view(log) == [(0, b"k", b"old"), (1, b"k", b"young"), (2, b"k", b"active")]
    clock.now += 1000
    logs.clean(force=True)
    assert view(log) == [(1, b"k", b"young"), (2, b"k", b"active")]
    logs.close()


def test_max_compaction_lag_overrides_the_ratio(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"min.cleanable.dirty.ratio": 0.99, "max.compaction.lag.ms": 60_000})
    for i in range(20):
        put(log, b"k%d" % i, b"x" * 50, NOW)
    log.roll()
    logs.clean(force=True)
    put(log, b"k0", b"new", NOW)
    log.roll()
    assert logs.clean() == []  # far below the ratio
    clock.now += 60_001
    assert len(logs.clean()) == 1  # the dirty segment is older than max.compaction.lag.ms
    logs.close()


def test_small_dedupe_buffer_cleans_in_several_passes(tmp_path):
    clock = Clock()
    broker = {"log.cleaner.dedupe.buffer.size": 40 * ENTRY_SIZE, "log.cleaner.io.buffer.load.factor": 0.5}
    logs, log = compacted(tmp_path / "small", clock, broker=broker)
    big_logs, big = compacted(tmp_path / "big", clock)
    for i in range(300):
        for target in (log, big):
            put(target, b"k%d" % (i * 7 % 60), b"v%d" % i)
            if i % 50 == 49:
                target.roll()
    stats = logs.clean(force=True)  # the whole dirty section, whatever the ratio after each pass
    big_logs.clean(force=True)
    assert len(stats) >= 3  # 60 keys, 20 to a pass
    assert all(s.buffer_utilization <= 0.5 for s in stats)
    assert view(log) == view(big)
    logs.close()
    big_logs.close()


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
@pytest.mark.parametrize("budget_entries", [1 << 20, 15_000, 3000])
def test_the_map_grows_with_the_keys_within_the_budget(tmp_path, monkeypatch, budget_entries, codec):
    """A map starts small and grows as keys come; the old map and the new one never hold
    more than the dedupe buffer together. A map that can grow does so before a batch
    that may not fit, which C then maps: Python maps a batch only once the map is full."""
    budget = budget_entries * ENTRY_SIZE
    live: weakref.WeakSet[OffsetMap] = weakref.WeakSet()
    peak = [0]

    class Tracked(OffsetMap):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            live.add(self)
            peak[0] = max(peak[0], sum(m.memory for m in live))

    in_python = []
    map_batch = cleaner_module.Cleaner._map_batch

    def tracked_map_batch(self, batch, omap, *args):
        in_python.append(batch.base_offset)
        return map_batch(self, batch, omap, *args)

    monkeypatch.setattr(cleaner_module, "OffsetMap", Tracked)
    monkeypatch.setattr(cleaner_module.Cleaner, "_map_batch", tracked_map_batch)
    clock = Clock()
    logs, log = compacted(tmp_path, clock, broker={"log.cleaner.dedupe.buffer.size": budget})
    for i in range(40):
        log.append([Record(b"k%d" % (i * 100 + j), b"v", NOW) for j in range(100)], compression=codec)  # 4000 keys
    put(log, b"k0", b"newer")
    log.roll()
    stats = logs.clean(force=True)
    assert peak[0] <= budget
    assert [(r.key, r.value) for r in log.records()][-1] == (b"k0", b"newer")
    assert len(view(log)) == 4000
    omap = logs.cleaner._sync_cleaner._map
    if budget_entries > 4000 / 0.4:
        assert len(stats) == 1 and omap.slots >= 4000 / 0.4  # grew from 1024 slots by fours
        assert in_python == []
    else:
        assert len(stats) == 2 and omap.memory <= budget  # no room to grow: two passes
        assert in_python  # the batch that fills the map
    logs.close()


def test_compact_and_delete(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"cleanup.policy": "compact,delete", "retention.ms": DAY})
    put(log, b"a", b"1", NOW - 2 * DAY)
    put(log, b"b", b"1", NOW - 2 * DAY)
    log.roll()
    put(log, b"a", b"2", NOW)
    log.roll()
    assert logs.enforce_retention()[0].reasons == ("time",)
    assert view(log) == [(2, b"a", b"2")]
    put(log, b"a", b"3", NOW)
    log.roll()
    logs.clean(force=True)
    assert view(log) == [(3, b"a", b"3")]
    logs.close()


def test_background_cleaner(tmp_path):
    config = {"log.cleaner.backoff.ms": 20, "log.cleaner.threads": 2}
    with seglog.open(str(tmp_path), config, background=True) as logs:
        logs.create_topic("c", 3, {"cleanup.policy": "compact"})
        for p in range(3):
            log = logs.partition("c", p)
            for i in range(50):
                put(log, b"k%d" % (i % 5), b"v%d" % i, None)
            log.roll()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if all(logs.cleaning_state("c", p).last is not None for p in range(3)):
                break
            time.sleep(0.02)
        for p in range(3):
            assert [k for _, k, _ in view(logs.partition("c", p))] == [b"k0", b"k1", b"k2", b"k3", b"k4"]
    assert checkpoint.read_offsets(str(tmp_path / "cleaner-offset-checkpoint")) == {("c", p): 50 for p in range(3)}


def test_topic_turned_compacted_and_deleted(tmp_path):
    clock = Clock()
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        for i in range(10):
            put(log, b"k", b"%d" % i)
        log.roll()
        assert logs.clean(force=True) == []  # not compacted
        logs.alter_topic_config("t", {"cleanup.policy": "compact"})
        assert len(logs.clean()) == 1 and view(log) == [(9, b"k", b"9")]
        logs.delete_topic("t")
        assert checkpoint.read_offsets(str(tmp_path / "cleaner-offset-checkpoint")) == {}


def test_a_segment_that_is_already_clean_is_left_alone(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    for i in range(5):
        put(log, b"k%d" % i, b"v")
    log.roll()
    segment = log.segments[0]
    stats = logs.clean(force=True)
    assert stats[0].segments_swapped == 0 and log.segments[0] is segment
    logs.close()


# --- crash safety, in process: an I/O error at each step of a cleaning ------------------------------------


def _build(tmp_path, clock, segment_bytes):
    logs, log = compacted(tmp_path, clock, **{"segment.bytes": segment_bytes})
    for i in range(60):
        put(log, b"k%d" % (i % 6), b"v%d" % i if i % 11 else None)
        if i % 20 == 19:
            log.roll()
    return logs, log


def _crash(logs) -> None:
    """Leave the dirs as a killed process would: nothing flushed, closed or marked clean."""
    for pl in logs.logs():
        pl.close_without_flush()
    logs.cleaner.shutdown()
    for d in logs._dirs:
        d.unlock()


@pytest.mark.parametrize("op", ["rename", "fsync", "write", "unlink", "truncate"])
@pytest.mark.parametrize("segment_bytes", [600, 1 << 20])
def test_failure_at_any_step_leaves_before_or_after(tmp_path, monkeypatch, op, segment_bytes):
    """One group a round (large segments): the log is as before the round or after it.
    Several groups (small segments): they are swapped one by one, as in Kafka, so the log
    may also be in between: some groups cleaned, the others not, no latest value lost."""
    clock = Clock()
    ref_logs, ref = _build(tmp_path / "ref", clock, segment_bytes)
    before = view(ref)
    groups = len(ref_logs.cleaner.new_cleaner().group_segments(ref.segments[:-1], segment_bytes, 1 << 20, 60))
    calls = []
    check = fileio.faults.check
    monkeypatch.setattr(fileio.faults, "check", lambda o, path: (calls.append(o), check(o, path)))
    ref_logs.clean(force=True)
    monkeypatch.undo()
    after = view(ref)
    ref_logs.close()
    assert before != after and (groups == 1) == (segment_bytes > 600)
    total = calls.count(op)  # the cleaning's operations of this kind: fail each in turn (at most 16)
    for n in sorted({total * k // 15 for k in range(16)}):
        d = tmp_path / f"{op}{n}"
        logs, _ = _build(d, clock, segment_bytes)
        fileio.faults.inject(op, errno.EIO, path=str(d), after=n)
        try:
            logs.clean(force=True)
        except seglog.errors.KafkaStorageError:
            pass
        finally:
            fileio.faults.clear()
        _crash(logs)
        with seglog.open(str(d), clock=clock, background=False) as again:
            got = view(again.partition("c", 0))
            if groups == 1:
                assert got in (before, after), (op, n)
            else:
                assert set(after) <= set(got) <= set(before), (op, n)
            assert latest(got) == latest(before) or latest(got) == latest(after)
            assert not any(name.endswith((".cleaned", ".swap")) for name in os.listdir(again.partition("c", 0).dir))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets(tmp_path, magic):
    """Pre-0.11 data: plain messages are kept or dropped whole; a compressed wrapper is
    rebuilt with the messages it keeps, offsets and codec unchanged."""
    from seglog.records import LegacyBatch, build_message_set

    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    wrapper = [
        Record(b"a", b"1", NOW),
        Record(b"b", b"1", NOW + 1),
        Record(b"a", b"2", NOW + 2),
        Record(b"c", None, NOW + 3),
    ]
    log.append_as_follower(build_message_set(wrapper, magic=magic, base_offset=0, compression=Compression.GZIP))
    log.append_as_follower(
        build_message_set([Record(b"b", b"2", NOW + 4), Record(b"d", b"1", NOW + 5)], magic=magic, base_offset=4)
    )
    log.append_as_follower(build_batch([(b"d", b"v2", NOW + 6)], base_offset=6))
    log.roll()
    logs.clean(force=True)

    def ts(t: int) -> int:
        return t if magic else -1  # magic 0 has no timestamps

    assert [(r.offset, r.key, r.value, r.timestamp) for r in log.records()] == [
        (2, b"a", b"2", ts(NOW + 2)),
        (3, b"c", None, ts(NOW + 3)),  # a legacy tombstone stays until the legacy horizon
        (4, b"b", b"2", ts(NOW + 4)),
        (6, b"d", b"v2", NOW + 6),
    ]
    first = next(log.batches())
    assert isinstance(first, LegacyBatch) and first.magic == magic and first.compression == Compression.GZIP
    first.validate()
    assert (first.offset, first.base_offset, first.record_count) == (3, 2, 2)
    logs.close()


# --- the cleaner and the rest of the log's life --------------------------------------------------------


def test_retention_waits_for_a_cleaning_in_progress(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, **{"cleanup.policy": "compact,delete", "retention.ms": DAY})
    put(log, b"a", b"old", NOW - 2 * DAY)
    log.roll()
    put(log, b"b", b"new", NOW)
    with logs.cleaner.holding(log, "cleaning"):  # as a cleaner thread holds the log it cleans
        assert logs.enforce_retention() == []
        assert log.log_start_offset == 0
    assert log.log_start_offset == 1  # the pass ran when the cleaning let go
    assert view(log) == [(1, b"b", b"new")]
    logs.close()


def test_a_truncation_under_the_cleaner_aborts_the_round(tmp_path, monkeypatch):
    from seglog.storage.cleaner import Cleaner

    clock = Clock()
    logs, log = compacted(tmp_path, clock)
    for i in range(30):
        put(log, b"k%d" % (i % 3), b"v%d" % i)
        if i % 10 == 9:
            log.roll()
    original = Cleaner._clean_group

    def truncating(self, log_, group, *args):
        log_.truncate_to(15)  # a follower truncating to its leader's log, mid-cleaning
        return original(self, log_, group, *args)

    monkeypatch.setattr(Cleaner, "_clean_group", truncating)
    assert logs.clean() == []
    monkeypatch.undo()
    assert [o for o, _, _ in view(log)] == list(range(15))
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(log.dir))
    assert logs.cleaning_state("c", 0).uncleanable is None
    assert checkpoint.read_offsets(str(tmp_path / "cleaner-offset-checkpoint")) == {}
    log.roll()
    assert len(logs.clean()) == 1  # and the next round cleans the truncated log
    assert view(log) == [(12, b"k0", b"v12"), (13, b"k1", b"v13"), (14, b"k2", b"v14")]
    logs.close()


def test_producer_state_follows_appends_and_truncations(tmp_path):
    from seglog.storage import producer_state

    clock = Clock()
    logs, log = compacted(tmp_path, clock)

    def read(segment, buffer, position, size):
        return segment.handle.readinto(memoryview(buffer)[:size], position)

    def state():
        return producer_state.producer_state(log.segments, read, bytearray(4096))

    def txn(pid):
        b = build_batch([(b"k", b"t", NOW)], producer_id=pid, producer_epoch=1, base_sequence=0, transactional=True)
        log.append_batches(b)

    def marker(pid, commit):
        m = build_batch(
            [end_transaction_marker(commit, timestamp=NOW)],
            producer_id=pid,
            producer_epoch=1,
            transactional=True,
            control=True,
        )
        log.append_batches(m, origin="coordinator")

    put(log, b"a", b"1")
    txn(7)  # 1
    s = state()
    assert s.first_unstable_offset == 1 and s.producers[7].in_transaction and s.aborted == []
    summary = producer_state._summaries[log.active_segment]
    marker(7, commit=False)  # 2
    s = state()
    assert producer_state._summaries[log.active_segment] is summary  # extended, not rescanned
    assert s.aborted == [(1, 2, 7)] and s.first_unstable_offset is None
    assert s.producers[7] == producer_state.LastBatch(1, 1, s.producers[7].timestamp, False)
    log.truncate_to(1)  # the transaction goes; what follows is another producer's
    log.append([Record(b"b", b"2", NOW)], producer_id=9, producer_epoch=0, base_sequence=0)
    log.append([Record(b"c", b"2", NOW)], producer_id=9, producer_epoch=0, base_sequence=1)
    s = state()
    assert s.aborted == [] and set(s.producers) == {9} and s.producers[9].data_offset == 2
    logs.close()


def test_producer_state_steps_over_large_batches_by_their_headers(tmp_path):
    """Batches above 24 KiB without a producer are stepped over in C, their headers read
    alone from the file: the records, producers and transactions among them all count."""
    from seglog.storage import producer_state

    clock = Clock()
    logs, log = compacted(tmp_path, clock)

    def read(segment, buffer, position, size):
        return segment.handle.readinto(memoryview(buffer)[:size], position)

    def large(count=30):
        return build_batch([(b"k%d" % i, os.urandom(1000), NOW) for i in range(count)])

    def producer(pid, sequence, transactional=False):
        return build_batch(
            [(b"p", b"v", NOW)],
            producer_id=pid,
            producer_epoch=1,
            base_sequence=sequence,
            transactional=transactional,
        )

    marker = build_batch(
        [end_transaction_marker(False, timestamp=NOW)],
        producer_id=8,
        producer_epoch=1,
        transactional=True,
        control=True,
    )
    for batch in (large(), large(), producer(7, 0), large(), large(), producer(8, 0, True), large(5), large()):
        log.append_batches(batch)
    log.append_batches(large())
    log.append_batches(marker, origin="coordinator")
    log.append_batches(large())
    s = producer_state.producer_state(log.segments, read, bytearray(4096))
    assert sum(s.records.values()) == log.log_end_offset
    assert s.producers[7].data_offset == 60 and s.producers[8].data_offset == 121
    assert s.aborted == [(121, 187, 8)] and s.first_unstable_offset is None
    summary = producer_state._summaries[log.active_segment]
    log.append_batches(large())  # the summary's fingerprint holds: it is extended
    assert sum(producer_state.producer_state(log.segments, read, bytearray(4096)).records.values()) == 248
    assert producer_state._summaries[log.active_segment] is summary
    logs.close()


def test_cleaning_is_throttled(tmp_path):
    clock = Clock()
    logs, log = compacted(tmp_path, clock, broker={"log.cleaner.io.max.bytes.per.second": 1000.0})
    assert logs.cleaner.throttler.bytes_per_second == 1000.0
    ticks = [0.0]
    slept = []

    def monotonic():
        ticks[0] += 0.01  # every I/O the cleaner reports seems to take 10 ms
        return ticks[0]

    logs.cleaner.throttler = Throttler(1000.0, 10, monotonic=monotonic, sleep=slept.append)
    for i in range(200):
        put(log, b"k%d" % (i % 10), b"x" * 100)
    log.roll()
    stats = logs.clean(force=True)
    assert slept and sum(slept) == pytest.approx(stats[0].throttled_seconds)
    assert view(log) == [(190 + i, b"k%d" % i, b"x" * 100) for i in range(10)]
    logs.close()
