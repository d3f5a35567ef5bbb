"""The C walks of ``storage/_scan.c`` against the Python they replace on the storage
hot paths, on random and damaged input: the same answers, and the same faults
(type, message, position, offset).

- ``check_append`` against ``LogValidator.validate_general`` (and, for a leader,
  its edits against ``assign_offsets`` and the batch object's own setters);
- a segment's recovery (``recover_batches`` in chunks, legacy batches handed to
  Python) against the Python walk it had, kept here as ``recovery_reference``;
- ``find_timestamp`` against decoding the batch and scanning its records.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptIndexError, CorruptRecordError, SeglogError
from seglog.records import (
    BatchIterator,
    Compression,
    LegacyBatch,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_message_set,
)
from seglog.records.batch import check_batch
from seglog.records.compression import decompress
from seglog.storage import _scan
from seglog.storage import segment as segment_module
from seglog.storage.index import MAX_RELATIVE_OFFSET, OffsetIndex, TimeIndex
from seglog.storage.log import PartitionLog
from seglog.storage.naming import offset_file_name
from seglog.storage.segment import LogSegment

from .conftest import MS, Clock, index_file_entries, new_log, time_index_file_entries

INT64_MAX = (1 << 63) - 1
SLOW = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def outcome(fn):
    """What a call came to: ("ok", its answer), or the error's type and full text."""
    try:
        return "ok", fn()
    except SeglogError as e:
        return type(e).__name__, str(e)


def reseal(buffer: bytearray, at: int, end: int) -> None:
    """A valid CRC for the batch at ``buffer[at:end]`` (damage inside it then reaches
    the checks after the CRC)."""
    struct.pack_into(">I", buffer, at + 17, crc32c(memoryview(buffer)[at + 21 : end]))


# --- inputs ----------------------------------------------------------------------------------------

records_st = st.lists(
    st.tuples(
        st.one_of(st.binary(max_size=6), st.binary(min_size=1, max_size=6), st.none()),  # key
        st.one_of(st.none(), st.binary(max_size=40)),  # value
        st.integers(-7_200_000, 7_200_000),  # timestamp - MS
        st.lists(st.tuples(st.sampled_from(["h", "hé", ""]), st.one_of(st.none(), st.binary(max_size=4))), max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@st.composite
def batch_st(draw, *, legacy: bool = True) -> tuple[bytes, bool]:
    """(bytes of one batch, whether it is legacy)."""
    if legacy and draw(st.integers(0, 9)) == 0:
        rows = [Record(k or b"k", v, MS + ts, (), 0) for k, v, ts, _ in draw(records_st)]
        magic = draw(st.sampled_from([0, 1]))
        return build_message_set(rows, magic=magic, base_offset=draw(st.integers(0, 50))), True
    rows = [Record(k, v, MS + ts, tuple(h), 0) for k, v, ts, h in draw(records_st)]
    kind = draw(st.sampled_from(["plain", "plain", "plain", "gzip", "lz4", "control", "append_time"]))
    data = build_batch(
        rows,
        base_offset=draw(st.integers(0, 60)),
        compression=Compression.GZIP if kind == "gzip" else Compression.LZ4 if kind == "lz4" else Compression.NONE,
        control=kind == "control",
        timestamp_type=TimestampType.LOG_APPEND_TIME if kind == "append_time" else TimestampType.CREATE_TIME,
        log_append_time=MS if kind == "append_time" else None,
        partition_leader_epoch=draw(st.integers(-1, 3)),
    )
    return bytes(data), False


@st.composite
def damaged_st(draw, *, legacy: bool = True) -> bytes:
    """Batches one after another, some damaged: bytes overwritten (then, mostly, the
    CRC made valid again, so that the checks after it see the damage), offsets and
    timestamps rewritten, the end cut off."""
    parts = draw(st.lists(batch_st(legacy=legacy), min_size=1, max_size=5))
    buffer = bytearray()
    bounds = []
    for data, is_legacy in parts:
        bounds.append((len(buffer), len(buffer) + len(data), is_legacy))
        buffer += data
    for _ in range(draw(st.integers(0, 3))):
        at, end, is_legacy = draw(st.sampled_from(bounds))
        what = draw(st.sampled_from(["byte", "record", "record", "base_offset", "count", "delta", "base_ts", "length"]))
        if what in ("byte", "record"):
            pos = draw(st.integers(at + 61 if what == "record" and end - at > 61 else at, end - 1))
            buffer[pos] = draw(st.integers(0, 255))
        elif what == "base_offset":
            struct.pack_into(">q", buffer, at, draw(st.integers(-5, 80) | st.just(INT64_MAX - 2)))
        elif what == "length":
            struct.pack_into(">i", buffer, at + 8, draw(st.integers(-1, end - at + 100)))
        elif not is_legacy:
            field = {"count": (57, ">i"), "delta": (23, ">i"), "base_ts": (27, ">q")}[what]
            value = draw(st.integers(-3, 8) if what != "base_ts" else st.sampled_from([0, -INT64_MAX, INT64_MAX]))
            struct.pack_into(field[1], buffer, at + field[0], value)
        if not is_legacy and draw(st.integers(0, 3)):
            reseal(buffer, at, end)
    cut = draw(st.integers(0, 3))
    if cut == 1:
        del buffer[len(buffer) - draw(st.integers(1, min(70, len(buffer)))) :]
    return bytes(buffer)


def has_legacy(buffer: bytes) -> bool:
    """Whether a walk over ``buffer`` meets a legacy batch before it stops."""
    pos = 0
    while len(buffer) - pos >= 17:
        magic, size = buffer[pos + 16], struct.unpack_from(">i", buffer, pos + 8)[0]
        if magic in (0, 1) and size >= (14, 22)[magic]:
            return True
        if magic != 2 or size < 49:
            return False
        pos += 12 + size
    return False


# --- appends -----------------------------------------------------------------------------------


def log_for(tmp_path_factory, compact: bool, append_time: bool, max_bytes: int, wide: bool) -> PartitionLog:
    config = {
        "cleanup.policy": "compact" if compact else "delete",
        "message.timestamp.type": "LogAppendTime" if append_time else "CreateTime",
        "max.message.bytes": max_bytes,
        "message.timestamp.before.max.ms": INT64_MAX if wide else 3_600_000,
        "message.timestamp.after.max.ms": INT64_MAX if wide else 3_600_000,
    }
    _, log = new_log(tmp_path_factory.mktemp("log"), config=config, clock=Clock())
    return log


@SLOW
@given(
    buffer=damaged_st(),
    leader=st.booleans(),
    origin=st.sampled_from(["client", "coordinator"]),
    compact=st.booleans(),
    append_time=st.booleans(),
    max_bytes=st.sampled_from([1_000_000, 1_000_000, 150]),
    wide=st.booleans(),
)
def test_check_append_faults_and_facts_are_the_general_paths(
    tmp_path_factory, buffer, leader, origin, compact, append_time, max_bytes, wide
):
    log = log_for(tmp_path_factory, compact, append_time, max_bytes, wide)
    bounds = log.validator.leader_rules()[0] if leader else None
    general = outcome(lambda: log.validator.validate_general(bytearray(buffer), leader, origin, bounds))
    fast = outcome(
        lambda: _scan.check_append(
            bytearray(buffer), leader, origin != "client", compact, max_bytes, bounds, decompress, log.dir
        )
    )
    if fast == ("ok", None):  # a legacy batch before any fault: the general path's
        assert has_legacy(buffer)
    else:
        assert fast == general
    if general[0] != "ok" or not leader or fast[1] is None:
        return
    # a leader's edits: in the same call as the checks, as the batch objects make them
    stamp = MS + 5 if append_time else None
    for segment_bytes in (1 << 30, len(buffer) - 1):
        assignment = (1000, 7, stamp, segment_bytes)
        one = bytearray(buffer)
        combined = outcome(
            lambda b=one, a=assignment: _scan.check_and_assign(
                b, origin != "client", compact, max_bytes, bounds, decompress, log.dir, a
            )
        )
        if segment_bytes < len(buffer):
            assert combined[0] == "RecordTooLargeError" and "segment.bytes" in combined[1]
            assert one == buffer  # nothing written
            continue
        assert one == assigned_by_objects(buffer, general[1], 1000, 7, stamp, bounds is not None)
        assert combined == ("ok", assigned_entries(general[1], 1000, stamp))


@SLOW
@given(
    data=st.lists(batch_st(legacy=False), min_size=1, max_size=3),
    damage=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
)
def test_check_append_record_faults_are_the_general_paths(tmp_path_factory, data, damage):
    """Damage inside the records of a leader's append, the CRC made valid again: the
    record walk's faults (truncated fields, bad lengths, counts) and the checks after it."""
    buffer, spans = bytearray(), []
    for part, _ in data:
        spans.append((len(buffer), len(buffer) + len(part)))
        buffer += part
    for which, where, value in damage:
        at, end = spans[which % len(spans)]
        buffer[at + 61 + where % (end - at - 61)] = value
        reseal(buffer, at, end)
    log = log_for(tmp_path_factory, False, False, 1_000_000, True)
    bounds = log.validator.leader_rules()[0]
    general = outcome(lambda: log.validator.validate_general(bytearray(buffer), True, "coordinator", bounds))
    fast = outcome(
        lambda: _scan.check_append(bytearray(buffer), True, True, False, 1_000_000, bounds, decompress, log.dir)
    )
    assert fast == general


CREATE_TIME = TimestampType.CREATE_TIME


def assigned_by_objects(
    buffer: bytes, facts: list, next_offset: int, epoch: int, stamp: int | None, create_time: bool
) -> bytearray:
    out = bytearray(buffer)
    view = memoryview(out)
    for position, size, count, delta, max_ts, _epoch, _base in facts:
        batch = RecordBatch(view[position : position + size], position)
        batch.set_base_offset(next_offset)
        batch.set_partition_leader_epoch(epoch)
        if stamp is not None:
            batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, stamp)
        elif create_time and count and (batch.max_timestamp, batch.timestamp_type) != (max_ts, CREATE_TIME):
            batch.set_max_timestamp(CREATE_TIME, max_ts)  # Kafka's LogValidator: the records' largest
        next_offset += delta + 1
    return out


def assigned_entries(facts: list, next_offset: int, stamp: int | None) -> tuple:
    """What a leader's append is told of its batches, given what validation learned of them:
    (entries, first offset, last offset, max timestamp, record count), an entry being
    (position, size, last offset, max timestamp) as the segment indexes the batch."""
    entries, first = [], next_offset
    for position, size, _count, delta, max_ts, _epoch, _base in facts:
        next_offset += delta + 1
        entries.append((position, size, next_offset - 1, max_ts if stamp is None else stamp))
    return entries, first, next_offset - 1, max(e[3] for e in entries), sum(f[2] for f in facts)


def test_check_append_names_exact_faults(tmp_path):
    """A few faults spelled out (the property test above holds the two paths to each other)."""
    wide = {"message.timestamp.before.max.ms": INT64_MAX, "message.timestamp.after.max.ms": INT64_MAX}
    _, log = new_log(tmp_path, config=wide, clock=Clock())
    good = build_batch([Record(b"k", b"v", MS, (), 0), Record(b"k", b"v", MS + 5, (), 0)])

    def check(buffer, bounds=None):
        return _scan.check_append(
            buffer,
            leader=True,
            allow_control=False,
            compact=False,
            max_bytes=10**6,
            timestamp_bounds=bounds,
            decompress=decompress,
            file=log.dir,
        )

    bad = bytearray(good)
    bad[-1] ^= 1
    crc = r"^CRC mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8} \(position 0, offset 0\)$"
    with pytest.raises(CorruptRecordError, match=crc):
        check(bad)
    high = bytearray(good)
    struct.pack_into(">q", high, 27, INT64_MAX - 2)  # the second record's timestamp passes an int64
    reseal(high, 0, len(high))
    past = rf"timestamps {INT64_MAX - 2}..{INT64_MAX + 3} are outside \[-?\d+, {INT64_MAX}\]"
    with pytest.raises(SeglogError, match=past):
        check(high, log.validator.leader_rules()[0])
    with pytest.raises(SeglogError, match=past):
        log.validator.validate_general(high, True, "client", log.validator.leader_rules()[0])
    with pytest.raises(SeglogError, match="2 bytes of a partial batch at the end of the append"):
        check(bytes(good) + b"\x00\x00")
    assert check(bytes(good) + build_message_set([Record(b"k", b"v", MS, (), 0)], magic=1)) is None


# --- recovery ----------------------------------------------------------------------------------------


def recovery_reference(data: bytes, base: int, interval: int) -> tuple[int, list, list, list, tuple[int, int], str]:
    """segment.py's recovery walk as it was in Python before the C walk, over a whole
    file: (valid bytes, offset index entries, time index entries (the roll's last one
    too), epoch changes, (max timestamp, its offset), fault)."""
    scan = BatchIterator(data)
    view = scan.view
    prev_last, epoch = base - 1, None
    batches, epochs, fault = [], [], "a partial batch"
    try:
        for at, end, head in scan.headers():
            if head is None:
                legacy = LegacyBatch(view[at:end], at)
                legacy.validate()
                first, last, max_ts = legacy.base_offset, legacy.last_offset, legacy.max_timestamp
            else:
                check_batch(view, at, end, head, at)
                first, last, max_ts = head[0], head[0] + head[6], head[8]
            if first <= prev_last or not 0 <= last - base <= MAX_RELATIVE_OFFSET:
                raise CorruptRecordError(
                    f"batch offsets {first}..{last} do not follow {prev_last}", position=at, offset=first
                )
            prev_last = last
            batches.append((at, end - at, last, max_ts))
            if head is not None and head[2] != epoch:
                epoch = head[2]
                epochs.append((epoch, first))
    except CorruptRecordError as e:
        fault = str(e)
    valid = batches[-1][0] + batches[-1][1] if batches else 0
    # _index_batches, then the roll's entry
    offsets, times = [], []
    max_ts, max_ts_offset, indexed, since = -1, base, -1, 0
    for at, size, last, batch_max_ts in batches:
        if batch_max_ts > max_ts:
            max_ts, max_ts_offset = batch_max_ts, last
        if since > interval:
            offsets.append((last, at))
            if max_ts > indexed:
                times.append((max_ts, max_ts_offset))
                indexed = max_ts
            since = 0
        since += size
    if max_ts > indexed:
        times.append((max_ts, max_ts_offset))
    return valid, offsets, times, epochs, (max_ts, max_ts_offset), fault


@SLOW
@given(
    data=damaged_st(),
    base=st.sampled_from([0, 3, 40]),
    interval=st.sampled_from([0, 60, 4096]),
    chunk=st.sampled_from([17, 90, 300, 1 << 20]),
)
def test_recovery_finds_what_the_python_walk_found(tmp_path_factory, monkeypatch, caplog, data, base, interval, chunk):
    """Chunks as small as a frame, batches larger than a chunk, legacy batches met
    mid-chunk: the same valid bytes, index entries, epochs, max timestamp and fault."""
    directory = str(tmp_path_factory.mktemp("seg"))
    with open(os.path.join(directory, offset_file_name(base, ".log")), "wb") as f:
        f.write(data)
    monkeypatch.setattr(segment_module, "_RECOVERY_CHUNK", chunk)
    seg = LogSegment(directory, base, index_interval_bytes=interval)
    epochs: list[tuple[int, int]] = []
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="seglog.storage.segment"):
        truncated = seg.recover(on_epoch=lambda e, o: epochs.append((e, o)))
    valid, offsets, times, want_epochs, max_ts, fault = recovery_reference(data, base, interval)
    assert truncated == len(data) - valid
    assert seg.size == valid
    assert [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)] == offsets
    assert [seg.time_index.entry(i) for i in range(seg.time_index.entries)] == times
    # the files hold these entries and no more (written whole at the end of the recovery)
    assert os.path.getsize(seg.index_path) == 8 * len(offsets)
    assert os.path.getsize(seg.time_index_path) == 12 * len(times)
    assert index_file_entries(seg.index_path) == [(o - base, p) for o, p in offsets]
    assert time_index_file_entries(seg.time_index_path) == [(t, o - base) for t, o in times]
    assert epochs == want_epochs
    assert seg.max_timestamp_and_offset == max_ts
    if truncated:
        assert f"truncating {truncated} bytes at position {valid}: {fault}" in caplog.text
    seg.close()


def test_recover_batches_stops_at_a_legacy_batch_and_carries_its_state():
    v2 = build_batch([Record(b"k", b"v", MS, (), 0)] * 3, base_offset=0, partition_leader_epoch=4)
    legacy = build_message_set([Record(b"k", b"v", MS, (), 0)], magic=1, base_offset=3)
    chunk = bytes(v2) + legacy + bytes(build_batch([Record(b"k", b"v", MS + 9, (), 0)], base_offset=4))
    state = (-1, None, 0, -1, 0, -1)
    end, state, offsets, times, epochs, stop = _scan.recover_batches(chunk, 0, 0, 0, -1, 0, state)
    assert (end, stop, epochs, offsets, times) == (len(v2), True, [(4, 0)], b"", b"")
    assert state == (2, 4, len(v2), MS, 2, -1)
    state = (3, 4, 0, MS, 2, -1)  # Python walked the legacy batch
    end, state, offsets, times, epochs, stop = _scan.recover_batches(
        chunk, start=len(v2) + len(legacy), origin=0, segment_base=0, max_batch_size=-1, interval=0, state=state
    )
    assert (end, stop, epochs) == (len(chunk), None, [(-1, 4)])
    assert state[0] == 4 and state[3:5] == (MS + 9, 4)


def another_thread_runs_during(call) -> bool:
    """Whether another thread ran in the middle half of a call, in one of 20 calls. While
    a call holds the GIL the other thread runs only at its edges: before the C function
    takes over and once it has returned."""
    import threading
    import time

    ticks: list[float] = []
    done = threading.Event()

    def tick() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        for _ in range(20):
            begin = time.perf_counter()
            call()
            finish = time.perf_counter()
            quarter = (finish - begin) / 4
            if any(begin + quarter < t < finish - quarter for t in ticks[-10_000:]):
                return True
        return False
    finally:
        done.set()
        thread.join()


def big_append() -> bytearray:
    one = build_batch([Record(b"k", b"v" * 1000, MS, (), i) for i in range(16)])
    buffer = bytearray(one * 2048)  # 32 MiB, offsets following each other
    for n in range(2048):
        struct.pack_into(">q", buffer, n * len(one), 16 * n)
    return buffer


def test_recovery_walks_without_the_gil():
    """The recovery threads of several partitions walk at once."""
    buffer = big_append()

    def walk() -> None:
        assert _scan.recover_batches(buffer, 0, 0, 0, -1, 4096, (-1, None, 0, -1, 0, -1))[0] == len(buffer)

    assert another_thread_runs_during(walk), "no other thread ran during 20 walks"


def test_append_checks_run_without_the_gil():
    """The appends of several partitions (a Spark commit's) are checked at once."""
    buffer = big_append()

    def check() -> None:
        facts = _scan.check_append(buffer, True, False, False, 1 << 20, None, decompress, "f")
        assert len(facts) == 2048

    assert another_thread_runs_during(check), "no other thread ran during 20 checks"


# --- lookups by timestamp --------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    data=batch_st(legacy=False),
    target=st.integers(-7_300_000, 7_300_000),
    start=st.integers(-2, 70),
    damage=st.none() | st.tuples(st.integers(61, 400), st.integers(0, 255)),
)
def test_find_timestamp_is_a_brute_force_scan(data, target, start, damage):
    buffer = bytearray(data[0])
    if damage is not None:
        buffer[min(damage[0], len(buffer) - 1)] = damage[1]
        reseal(buffer, 0, len(buffer))
    batch = RecordBatch(buffer, 100)

    def brute():
        return next(
            ((r.timestamp, r.offset) for r in batch.records() if r.timestamp >= MS + target and r.offset >= start), None
        )

    found = outcome(lambda: _scan.find_timestamp(batch.buffer, MS + target, start, batch.position, decompress))
    assert found == outcome(brute)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batches=st.lists(
        st.tuples(
            st.integers(1, 5),  # records
            st.integers(0, 2500),  # value size
            st.integers(-40, 40),  # timestamp step from the batch before
            st.integers(0, 2),  # offsets skipped before it (compaction's gaps)
            st.integers(0, 12),  # 0: a legacy (magic 1) batch
        ),
        min_size=1,
        max_size=20,
    ),
    interval=st.sampled_from([0, 100, 4096]),
    starts=st.lists(st.integers(99, 200), min_size=3, max_size=3),
)
# a v1 message whose timestamp lay past the 64-byte read after a large batch: read as
# "no timestamp", it was skipped
@example(batches=[(5, 798, 0, 0, 1), (3, 4, 4, 0, 0)], interval=0, starts=[99, 99, 99])
def test_segment_lookups_by_time_are_a_brute_force_scan(tmp_path_factory, batches, interval, starts):
    """Through the time index, the offset index and the header scan, to the C search
    of a batch's records: the first record in offset order at or after a timestamp
    and a start offset. Batches with and without index entries, offsets with gaps,
    timestamps that fall, legacy messages among v2 batches."""
    seg = LogSegment.create(str(tmp_path_factory.mktemp("seg")), 100, index_interval_bytes=interval)
    offset, ts = 100, MS
    for n, size, step, gap, kind in batches:
        offset, ts = offset + gap, ts + step
        rows = [Record(b"k", b"v" * size, ts + (5 * i) % 7, (), offset + i) for i in range(n)]
        data = (
            build_message_set(rows, magic=1, base_offset=offset) if kind == 0 else build_batch(rows, base_offset=offset)
        )
        walked = list(BatchIterator(data))  # a legacy set: a message each
        seg.append(data, [(b.position, b.size_in_bytes, b.last_offset, b.max_timestamp) for b in walked])
        offset = walked[-1].last_offset + 1
    seg.on_become_inactive()  # the roll's time entry too
    every = [r for b in BatchIterator(Path(seg.log_path).read_bytes()) for r in b.records()]
    for target in sorted({r.timestamp for r in every} | {MS - 50, ts + 50}):
        for start in (100, *starts):
            want = next(((r.timestamp, r.offset) for r in every if r.timestamp >= target and r.offset >= start), None)
            assert seg.find_offset_by_timestamp(target, start) == want, (target, start)
    seg.close()


# --- indexes and CRC -------------------------------------------------------------------------------------


def test_packed_index_appends_check_what_entry_appends_check(tmp_path):
    oi = OffsetIndex(str(tmp_path / "a.index"), 100, 64)
    oi.append_packed(struct.pack(">iiii", 1, 0, 5, 40))
    assert [oi.entry(i) for i in range(oi.entries)] == [(101, 0), (105, 40)]
    with pytest.raises(CorruptIndexError, match="offset 105 appended after 105: index offsets must increase"):
        oi.append_packed(struct.pack(">ii", 5, 50))
    with pytest.raises(CorruptIndexError, match="index is full"):
        oi.append_packed(struct.pack(">" + "ii" * 7, *[v for i in range(7) for v in (10 + i, 60)]))
    ti = TimeIndex(str(tmp_path / "a.timeindex"), 100, 48)
    ti.append_packed(struct.pack(">qiqi", MS, 1, MS + 1, 1))
    assert [ti.entry(i) for i in range(ti.entries)] == [(MS, 101), (MS + 1, 101)]
    with pytest.raises(CorruptIndexError, match="appended after"):
        ti.append_packed(struct.pack(">qi", MS + 1, 2))
    with pytest.raises(CorruptIndexError, match="full"):
        ti.append_packed(struct.pack(">qiqi", MS + 2, 2, MS + 3, 3))  # the last slot is the roll's
    ti.maybe_append(MS + 2, 102)
    ti.maybe_append(MS + 2, 103)  # not larger: nothing
    assert ti.entries == 3


@pytest.mark.parametrize(
    "args, error",
    [
        ((False, False, 1 << 20, None, decompress, "/f", (5, 0, None, 1 << 30), "extra"), TypeError),
        ((False, False, "1048576", None, decompress, "/f", (5, 0, None, 1 << 30)), TypeError),
        ((False, False, 1 << 20, (0,), decompress, "/f", (5, 0, None, 1 << 30)), TypeError),
        ((False, False, 1 << 20, None, decompress, "/f", (5, 1 << 31, None, 1 << 30)), OverflowError),
        ((False, False, 1 << 20, None, decompress, "/f", (5, 0, "now", 1 << 30)), TypeError),
        ((False, False, 1 << 20, None, decompress, "/f", (5, 0)), TypeError),
    ],
)
def test_check_and_assign_refuses_wrong_arguments_and_writes_nothing(args, error):
    # positional only and parsed by hand (every append calls it): wrong ones still raise
    batch = build_batch([(b"k", b"v", MS)])
    buffer = bytearray(batch)
    with pytest.raises(error):
        _scan.check_and_assign(buffer, *args)
    assert buffer == batch
