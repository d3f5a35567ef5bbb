"""The cleaner's C loops (storage/_compact.c) against the rules written out in Python:
the hash (as the map stores it) against SipHash's reference vectors, the map and its marks against a dict,
the filter's batches against the records the slow path keeps, the walks over runs of
batches against batch-by-batch calls, and damaged records against CorruptRecordError."""

from __future__ import annotations

import os
import random
import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError
from seglog.records import (
    BatchIterator,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_message_set,
    end_transaction_marker,
)
from seglog.records.compression import compress
from seglog.records.layout import ATTRIBUTES_LENGTH, ATTRIBUTES_OFFSET, CRC_START, HEADER_SIZE
from seglog.storage import _compact, fileio
from seglog.storage.offset_map import ENTRY_SIZE, OffsetMap, OffsetMarks

NOW = 1_700_000_000_000
HORIZON = NOW + 86_400_000
KEYS = [b"k%d" % i for i in range(10)] + [b"", b"x" * 40]  # 0, 2, 40-byte keys: SipHash's word loop and tail

# SipHash-2-4 with 128-bit output, key 00..0f, message 00..(n-1): the reference's vectors.h
SIPHASH128 = {
    0: "a3817f04ba25a8e66df67214c7550293",
    1: "da87c1d86b99af44347659119b22fc45",
    7: "a1f1ebbed8dbc153c0b84aa61ff08239",
    8: "3b62a9ba6258f5610f83e264f31497b4",
    15: "5493e99933b0a8117e08ec0f97cfc3d9",
    16: "6ee2a4ca67b054bbfd3315bf85230577",
    63: "5150d1772f50834a503e069a973fbd7c",
}


def stored_hash(key: bytes, seed: int) -> tuple[int, int]:
    """The (lo, hi) a map seeded with ``seed`` stores for ``key``, its only entry."""
    m = OffsetMap(64 * ENTRY_SIZE, 0.5, seed=seed)
    assert m.put(key, 7)
    entries = [struct.unpack_from("=QQq", m.table, at) for at in range(0, len(m.table), ENTRY_SIZE)]
    ((lo, hi, offset),) = [e for e in entries if e[0]]
    assert offset == 7 and m.get(key) == 7
    slot = hi * m.slots >> 64  # the first probe, in an empty map
    assert struct.unpack_from("=QQq", m.table, slot * ENTRY_SIZE) == (lo, hi, 7)
    return lo, hi


def test_hash_is_siphash_2_4_128():
    key = bytes(range(16))
    seed = int.from_bytes(key[8:], "little") << 64 | int.from_bytes(key[:8], "little")
    for n, expected in SIPHASH128.items():
        lo, hi = stored_hash(bytes(range(n)), seed)
        reference = bytes.fromhex(expected)
        # lo's bit 0 is forced to 1 (0 marks an empty slot): the other 127 bits are SipHash's
        assert lo == int.from_bytes(reference[:8], "little") | 1, n
        assert hi == int.from_bytes(reference[8:], "little"), n


def test_map_layout_and_growth():
    m = OffsetMap(64 * ENTRY_SIZE, 0.5, seed=(5 << 64) | 9)
    assert (m.k0, m.k1) == (9, 5)
    assert m.put(b"a", 7) and m.get(b"a") == 7 and m.entries == 1
    lo, hi = stored_hash(b"a", m.seed)  # (a fresh map of the same seed and size)
    slot = hi * m.slots >> 64  # the first probe, in an empty map
    assert struct.unpack_from("=QQq", m.table, slot * ENTRY_SIZE) == (lo, hi, 7)
    bigger = OffsetMap(256 * ENTRY_SIZE, 0.5, seed=m.seed)
    bigger.put(b"a", 3)
    bigger.put(b"b", 4)
    bigger.absorb(m)
    assert (bigger.get(b"a"), bigger.get(b"b"), bigger.entries) == (7, 4, 2)
    with pytest.raises(ValueError):
        bigger.absorb(OffsetMap(64 * ENTRY_SIZE, seed=1))
    with pytest.raises(ValueError):
        _compact.map_get(bytearray(ENTRY_SIZE + 1), 0, 0, b"a")


@pytest.mark.parametrize("first", [5, 63])  # 63: the last slot, whose next is slot 0
def test_the_second_probe_is_the_next_slot(first):
    """A key whose first slot is taken goes to the slot after it (the line C prefetched
    with the first), wrapping at the end; found there, and by an absorbing map."""
    seed = 11
    keys = [k for k in (b"k%d" % i for i in range(5000)) if stored_hash(k, seed)[1] * 64 >> 64 == first][:2]
    m = OffsetMap(64 * ENTRY_SIZE, 0.5, seed=seed)
    assert m.put(keys[0], 1) and m.put(keys[1], 2)
    second = (first + 1) % 64
    assert struct.unpack_from("=QQq", m.table, second * ENTRY_SIZE) == (*stored_hash(keys[1], seed), 2)
    assert (m.get(keys[0]), m.get(keys[1])) == (1, 2)
    bigger = OffsetMap(256 * ENTRY_SIZE, 0.5, seed=seed)
    bigger.absorb(m)
    assert (bigger.get(keys[0]), bigger.get(keys[1]), bigger.entries) == (1, 2, 2)


# --- random batches -------------------------------------------------------------------------------

record = st.tuples(
    st.sampled_from([*KEYS, None]),  # None: keyless
    st.one_of(st.none(), st.binary(max_size=30)),  # None: a tombstone
    st.integers(-5, 50),  # timestamp after NOW - 10
    st.lists(st.tuples(st.sampled_from(["h", "hé"]), st.one_of(st.none(), st.binary(max_size=5))), max_size=2),
    st.integers(1, 3),  # offset step
)


@st.composite
def batches(draw, codecs=tuple(Compression)):
    rows = draw(st.lists(record, min_size=1, max_size=30))
    base = draw(st.integers(0, 40))
    offset, records = base, []
    for key, value, ts, headers, step in rows:
        records.append(Record(key, value, NOW - 10 + ts, headers, offset))
        offset += step
    append_time = draw(st.booleans())
    horizon = draw(st.sampled_from([None, NOW - 1, NOW + 1]))  # a horizon passed, or not yet
    pid = draw(st.sampled_from([-1, 42]))
    return build_batch(
        records,
        base_offset=base,
        compression=draw(st.sampled_from(codecs)),
        timestamp_type=TimestampType.LOG_APPEND_TIME if append_time else TimestampType.CREATE_TIME,
        log_append_time=NOW + 5 if append_time else None,
        producer_id=pid,
        producer_epoch=3 if pid >= 0 else -1,
        base_sequence=11 if pid >= 0 else -1,
        partition_leader_epoch=draw(st.integers(-1, 4)),
        keep_offsets=True,
        last_offset_delta=offset - base - 1 + draw(st.integers(0, 2)),  # removed records may leave a gap
        delete_horizon_ms=horizon,
    )


@st.composite
def map_states(draw):
    """A map holding some keys at some offsets, its latest offset, and marks over part of the offsets."""
    omap = OffsetMap(128 * ENTRY_SIZE, 0.9, seed=draw(st.integers(0, 2**128 - 1)))
    for key in draw(st.lists(st.sampled_from(KEYS), unique=True)):
        omap.put(key, draw(st.integers(0, 130)))
    omap.latest_offset = draw(st.integers(-1, 130))
    marks = OffsetMarks(draw(st.integers(0, 60)), draw(st.integers(0, 80)))
    for i in range(marks.count):
        if draw(st.booleans()):
            marks.mark(marks.first + i)
    return omap, marks


def reference_keep(batch: RecordBatch, omap: OffsetMap, marks: OffsetMarks) -> tuple[list[Record], int]:
    """The cleaner's rules in Python (Kafka's shouldRetainRecord): the kept records, and
    how many were keyless below the map's latest offset."""
    retain_deletes = not batch.has_delete_horizon or batch.base_timestamp > NOW
    kept, invalid = [], 0
    for r in batch.records():
        if r.offset > omap.latest_offset:
            kept.append(r)
            continue
        if r.key is None:
            invalid += 1
            continue
        covered = marks.first <= r.offset < marks.first + marks.count
        wins = not marks.is_superseded(r.offset) if covered else r.offset >= omap.get(r.key)
        if wins and (retain_deletes or r.value is not None):
            kept.append(r)
    return kept, invalid


def filter_one(batch: RecordBatch, omap: OffsetMap, marks: OffsetMarks):
    codec = batch.compression
    return _compact.filter_batch(
        batch.buffer, batch.records_section() if codec else None, table=omap.table, k0=omap.k0, k1=omap.k1,
        latest=omap.latest_offset, marks=marks.superseded, marks_first=marks.first, marks_count=marks.count,
        now=NOW, horizon=HORIZON, position=batch.position,
    )  # fmt: skip


def seal(filtered: bytearray, codec: int) -> bytearray:
    """What the cleaner does with filter_batch's output."""
    if codec:
        body = compress(codec, memoryview(filtered)[HEADER_SIZE:])
        filtered = filtered[:HEADER_SIZE] + body
        struct.pack_into(">i", filtered, 8, len(filtered) - 12)
    struct.pack_into(">I", filtered, 17, crc32c(memoryview(filtered)[CRC_START:]))
    return filtered


def expected_batch(batch: RecordBatch, kept: list[Record]) -> RecordBatch:
    """The slow path's rebuilt batch, Kafka's filterTo through build_batch."""
    stamp = any(r.value is None for r in kept) and not batch.has_delete_horizon
    append_time = batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    return RecordBatch(
        build_batch(
            kept,
            base_offset=batch.base_offset,
            compression=batch.compression,
            timestamp_type=batch.timestamp_type,
            log_append_time=batch.max_timestamp if append_time else None,
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            partition_leader_epoch=batch.partition_leader_epoch,
            keep_offsets=True,
            last_offset_delta=batch.last_offset_delta,
            delete_horizon_ms=HORIZON if stamp else batch.delete_horizon_ms if batch.has_delete_horizon else None,
        )
    )


def fields(b: RecordBatch) -> tuple:
    return (
        b.base_offset, b.last_offset_delta, b.partition_leader_epoch, b.attributes, b.max_timestamp,
        b.producer_id, b.producer_epoch, b.base_sequence, b.record_count, b.delete_horizon_ms,
    )  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=batches(), state=map_states())
def test_filter_batch_keeps_what_the_slow_path_keeps(raw, state):
    omap, marks = state
    batch = RecordBatch(raw)
    kept, invalid = reference_keep(batch, omap, marks)
    out, n, n_invalid, max_ts = filter_one(batch, omap, marks)
    assert (n, n_invalid) == (len(kept), invalid)
    stamp = any(r.value is None for r in kept) and not batch.has_delete_horizon
    event("kept none" if not kept else "kept all" if len(kept) == batch.record_count else "kept some")
    event("a delete horizon set" if stamp else "no new delete horizon")
    if not kept or (len(kept) == batch.record_count and not stamp):
        assert out is None  # the batch goes, or stays as it is
        if kept:
            assert max_ts == batch.max_timestamp
        return
    assert out is not None
    got = RecordBatch(seal(out, batch.compression))
    got.validate()
    want = expected_batch(batch, kept)
    assert fields(got) == fields(want) and max_ts == got.max_timestamp
    assert got.records() == want.records() == kept  # offsets, timestamps, keys, values, headers
    # Kafka's base timestamp (the delete horizon, else the first kept record's) and deltas
    assert got.base_timestamp == want.base_timestamp
    assert got.records_section() == want.records_section()


@settings(max_examples=200, deadline=None)
@given(raw=batches(), seed=st.integers(0, 2**128 - 1), start=st.integers(0, 50), skip=st.integers(0, 5))
def test_map_batch_maps_like_a_dict(raw, seed, start, skip):
    batch = RecordBatch(raw)
    omap = OffsetMap(64 * ENTRY_SIZE, 0.9, seed=seed)
    marks = OffsetMarks(20, 100)
    section = batch.records_section() if batch.compression else None
    full_at = omap.put_batch(batch.buffer, section, start, marks, skip)
    assert full_at == -1
    latest: dict[bytes, int] = {}
    lost: set[int] = set()
    last_put = -1
    for r in batch.records()[skip:]:
        if r.offset < start:
            continue
        if r.key is None:
            lost.add(r.offset)
            continue
        if r.key in latest:
            lost.add(latest[r.key])
        latest[r.key] = last_put = r.offset
    assert {k: omap.get(k) for k in latest} == latest and omap.entries == len(latest)
    assert omap.latest_offset == last_put
    assert {o for o in range(20, 120) if marks.is_superseded(o)} == {o for o in lost if 20 <= o < 120}


def test_a_full_map_says_where_it_stopped():
    records = [Record(b"k%d" % i, b"v", NOW, (), i) for i in range(40)]
    raw = build_batch(records, keep_offsets=True)
    omap = OffsetMap(20 * ENTRY_SIZE, 0.5, seed=1)  # room for 10 keys
    full_at = omap.put_batch(raw, None, 0)
    assert (full_at, omap.entries, omap.latest_offset) == (10, 10, 9)
    bigger = OffsetMap(100 * ENTRY_SIZE, 0.9, seed=1)
    bigger.absorb(omap)
    assert bigger.put_batch(raw, None, 0, skip=full_at) == -1
    assert [bigger.get(r.key) for r in records] == list(range(40))


# --- walks over runs of batches --------------------------------------------------------------------


def mixed_log(rng: random.Random) -> bytearray:
    """Batches of every kind one after another, offsets increasing."""
    out, offset = bytearray(), 0
    for _ in range(40):
        n = rng.randrange(1, 8)
        records = [
            Record(rng.choice([*KEYS, None]), rng.choice([b"v", None, b"w" * 20]), NOW + i, (), offset + i)
            for i in range(n)
        ]
        kind = rng.choice(["plain"] * 5 + ["lz4", "txn", "control", "legacy", "pid", "empty"])
        if kind == "legacy":
            out += build_message_set(records, magic=1, base_offset=offset)
        elif kind == "control":
            n = 1
            out += build_batch([end_transaction_marker(True, timestamp=NOW)], base_offset=offset, producer_id=7,
                               producer_epoch=0, transactional=True, control=True)  # fmt: skip
        else:
            out += build_batch(
                [] if kind == "empty" else records,
                base_offset=offset,
                compression=Compression.LZ4 if kind == "lz4" else Compression.NONE,
                producer_id=7 if kind in ("txn", "pid") else -1,
                producer_epoch=0,
                base_sequence=0 if kind in ("txn", "pid") else -1,
                transactional=kind == "txn",
                keep_offsets=True,
                last_offset_delta=n - 1,
            )
        offset += n
    return out


@pytest.mark.parametrize("lz4", [False, True], ids=["plain", "lz4 too"])
@pytest.mark.parametrize("seed", range(6))
def test_walks_take_plain_batches_and_leave_the_rest_to_python(seed, lz4):
    """With buffers to decompress into (``lz4``), the walks take the Java client's lz4
    batches too: the same map and the same bytes as Python's path (the codec's)."""
    rng = random.Random(seed)
    log = mixed_log(rng)
    view = memoryview(log)
    taken = 0x30 if lz4 else 0x37  # transactional, control; and compressed, unless lz4
    plain = {b.position for b in BatchIterator(view) if isinstance(b, RecordBatch) and not b.attributes & taken}
    assert not lz4 or any(b.compression for b in BatchIterator(view) if b.position in plain)
    records_buffer, rebuilt = (bytearray(), bytearray()) if lz4 else (None, None)

    # mapping: a run in C, one batch in Python, the same map as batch by batch
    walked, single = OffsetMap(256 * ENTRY_SIZE, seed=seed), OffsetMap(256 * ENTRY_SIZE, seed=seed)
    marks_w, marks_s = OffsetMarks(0, 400), OffsetMarks(0, 400)
    at = 0
    while True:
        at, needs_python, _, _ = walked.put_batches(view, at, 1000, 0, marks_w, records_buffer)
        if not needs_python:
            break
        batch = next(BatchIterator(view, at))
        assert batch.position not in plain or walked.room < batch.record_count
        if isinstance(batch, RecordBatch) and not batch.is_control:
            section = batch.records_section() if batch.compression else None
            walked.put_batch(batch.buffer, section, 0, marks_w, 0, batch.position)
        at += batch.size_in_bytes
    assert at == len(log)
    for batch in BatchIterator(view):
        if isinstance(batch, RecordBatch) and not batch.is_control:
            section = batch.records_section() if batch.compression else None
            single.put_batch(batch.buffer, section, 0, marks_s, 0, batch.position)
    assert walked.table == single.table and marks_w.superseded == marks_s.superseded

    # filtering: C appends what it does to `out`, stops at the others, and flushes at the limit
    plain_offsets = sorted(b.next_offset for b in BatchIterator(view) if b.position in plain)
    upper_bound = rng.choice(plain_offsets)  # an empty batch ending there stays: Python decides
    group_end = 1000 + len(log)  # the last batch is the group's last: Python decides too
    out, length, entries, at, python, flushed = bytearray(), 0, [], 0, set(), bytearray()
    while True:
        at, stop, read, written, _, changed, length = _compact.filter_batches(
            view, at, 1000, out=out, out_len=length, out_limit=300, entries=entries, table=walked.table, k0=walked.k0,
            k1=walked.k1, latest=walked.latest_offset, marks=marks_w.superseded, marks_first=marks_w.first,
            marks_count=marks_w.count, now=NOW, horizon=HORIZON, upper_bound=upper_bound, group_end=group_end,
            section=records_buffer, rebuilt=rebuilt,
        )  # fmt: skip
        assert read >= written and changed >= 0
        assert length <= len(out)
        if stop == 2:
            assert length >= 300
            for position, size, last_offset, max_ts in entries:
                b = RecordBatch(out[position : position + size])
                b.validate()
                assert (b.last_offset, b.max_timestamp) == (last_offset, max_ts)
            flushed += out[:length]
            length = 0  # out is kept: the next batches overwrite it
            entries.clear()
            continue
        if stop == 0:
            break
        batch = next(BatchIterator(view, at))
        python.add(batch.position)
        at += batch.size_in_bytes
    assert at == len(log)
    # what C took is what filter_batch keeps; an empty batch goes unless Python must decide
    expected = bytearray()
    for batch in BatchIterator(view):
        if batch.position not in plain:
            assert batch.position in python
            continue
        filtered, kept, _, _ = filter_one(batch, walked, marks_w)
        ends_group = batch.position + batch.size_in_bytes == len(log)
        python_decides = not kept and (batch.producer_id >= 0 or batch.next_offset == upper_bound or ends_group)
        assert (batch.position in python) == python_decides
        if kept:
            expected += batch.buffer if filtered is None else seal(filtered, batch.compression)
    assert flushed + out[:length] == expected


# --- damage ------------------------------------------------------------------------------------------


def damaged(rng: random.Random, raw: bytearray) -> bytearray:
    """The batch with bytes of its records changed, cut or added, its CRC and length made
    right again, so that only the records' own structure can tell."""
    body = bytearray(raw[HEADER_SIZE:])
    kind = rng.randrange(3)
    if kind == 0 and body:
        for _ in range(rng.randrange(1, 4)):
            body[rng.randrange(len(body))] = rng.randrange(256)
    elif kind == 1:
        del body[rng.randrange(len(body) + 1) :]
    else:
        at = rng.randrange(len(body) + 1)
        body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
    out = bytearray(raw[:HEADER_SIZE]) + body
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


def read_damaged(way: int, raw: bytearray, position: int, seed: int) -> None:
    """Read a batch found at ``position`` by one of the four C entry points (a walk that
    leaves the batch to Python followed by the call Python makes); the walks decompress
    lz4 batches themselves."""
    omap, marks = OffsetMap(64 * ENTRY_SIZE, seed=seed), OffsetMarks(0, 10)
    omap.latest_offset = 3
    batch = RecordBatch(raw, position)
    if way == 0:
        omap.put_batch(raw, batch.records_section() if batch.compression else None, 0, marks, 0, position)
    elif way == 1:
        filter_one(batch, omap, marks)
    elif way == 2:
        _, needs_python, _, _ = omap.put_batches(memoryview(raw), 0, position, 0, marks, bytearray())
        if needs_python:  # as the cleaner does: this batch, alone
            omap.put_batch(raw, batch.records_section() if batch.compression else None, 0, marks, 0, position)
    else:
        _, stop, *_ = _compact.filter_batches(
            memoryview(raw), 0, position, out=bytearray(), out_len=0, out_limit=1 << 20, entries=[], table=omap.table,
            k0=omap.k0, k1=omap.k1, latest=3, marks=marks.superseded, marks_first=0, marks_count=10, now=NOW,
            horizon=HORIZON, upper_bound=-1, group_end=-1, section=bytearray(), rebuilt=bytearray(),
        )  # fmt: skip
        if stop == 1:
            filter_one(RecordBatch(raw, position), omap, marks)


def lz4_damaged(rng: random.Random, raw: bytearray) -> bytearray:
    """The batch compressed with lz4, then its frame damaged, or a sound frame of damaged records."""
    if rng.randrange(2):
        return damaged(rng, build_batch(RecordBatch(raw).records(), compression=Compression.LZ4, keep_offsets=True))
    bad = damaged(rng, raw)
    out = bytearray(bad[:HEADER_SIZE]) + compress(Compression.LZ4, memoryview(bad)[HEADER_SIZE:])
    out[ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH - 1] |= Compression.LZ4  # the low byte holds the codec
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(memoryview(out)[CRC_START:]))
    return out


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4], ids=["plain", "lz4"])
@pytest.mark.parametrize("seed", range(4))
def test_damaged_records_raise_corrupt_record_error(seed, codec):
    rng = random.Random(seed)
    faults = 0
    for i in range(300):
        records = [
            Record(rng.choice([*KEYS, None]), rng.choice([b"v" * rng.randrange(20), None]), NOW, [("h", b"x")], j)
            for j in range(rng.randrange(1, 6))
        ]
        raw = build_batch(records, keep_offsets=True)
        raw = lz4_damaged(rng, raw) if codec else damaged(rng, raw)
        position = 4096 * i
        try:
            RecordBatch(raw).records()
            ok = True
        except CorruptRecordError:
            ok = False
        for way in range(4):
            if ok:
                read_damaged(way, raw, position, i)  # what the decoder reads, C reads too
                continue
            with pytest.raises(CorruptRecordError) as e:
                read_damaged(way, raw, position, i)
            assert e.value.position == position
            faults += 1
    assert faults > 100


def test_a_small_lz4_frame_claims_little_room():
    """A frame of many tiny blocks, each of which could claim 64 KiB: the walk's buffer
    grows by what the blocks can hold (lz4 expands 255 to 1 at most), and the batch,
    which decompresses to nothing sound, goes to Python, which refuses it."""
    frame = b"\x04\x22\x4d\x18\x60\x40\x82" + b"\x01\x00\x00\x00\xff" * 4000 + bytes(4)
    raw = bytearray(build_batch([(b"a", b"1", NOW)], compression=Compression.LZ4))
    raw[HEADER_SIZE:] = frame
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">I", raw, 17, crc32c(memoryview(raw)[CRC_START:]))
    section = bytearray()
    at, needs_python, _, _ = OffsetMap(64 * ENTRY_SIZE, seed=1).put_batches(memoryview(raw), 0, 0, 0, None, section)
    assert (at, needs_python) == (0, True)
    assert len(section) <= 4000 * (255 + 16)  # not 4000 x 64 KiB
    with pytest.raises(CorruptRecordError, match="lz4"):
        RecordBatch(raw).records_section()


def test_a_record_count_larger_than_the_bytes_is_refused_before_any_allocation():
    raw = build_batch([(b"a", b"1", NOW)])
    struct.pack_into(">i", raw, 57, 2**31 - 1)
    struct.pack_into(">I", raw, 17, crc32c(memoryview(raw)[CRC_START:]))
    omap = OffsetMap(64 * ENTRY_SIZE, seed=1)
    omap.latest_offset = 10
    with pytest.raises(CorruptRecordError, match="record count"):
        filter_one(RecordBatch(raw, 77), omap, OffsetMarks(0, 0))
    with pytest.raises(CorruptRecordError, match="record count"):
        omap.put_batch(raw, None, 0)


@pytest.mark.parametrize("out_len", [-1, 11])
def test_a_filter_walk_refuses_a_length_outside_its_output(out_len):
    """The walk writes from byte out_len of a buffer the cleaner keeps: a length outside
    it is refused before anything is read or written."""
    raw = build_batch([(b"a", b"1", NOW)], compression=Compression.LZ4)
    omap, out = OffsetMap(64 * ENTRY_SIZE, seed=1), bytearray(10)
    with pytest.raises(ValueError, match="out of the buffer"):
        _compact.filter_batches(
            memoryview(raw), 0, 0, out=out, out_len=out_len, out_limit=1 << 20, entries=[], table=omap.table,
            k0=omap.k0, k1=omap.k1, latest=3, marks=bytearray(2), marks_first=0, marks_count=10, now=NOW,
            horizon=HORIZON, upper_bound=-1, group_end=-1, section=bytearray(), rebuilt=bytearray(),
        )  # fmt: skip
    assert out == bytearray(10)


# --- producer state: batch headers skimmed in C ----------------------------------------------------


class _Segment:
    """What summarize reads of a segment: its size and bytes, and its file (skim_file reads
    the headers of large batches from it)."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data, self.size = data, len(data)
        with open(path, "wb") as f:
            f.write(data)
        self.handle = fileio.FileHandle(path, os.open(path, os.O_RDONLY))


def _read(segment, buffer, position, size):
    chunk = segment.data[position : position + size]
    buffer[: len(chunk)] = chunk
    return len(chunk)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("buffer_size", [64, 700, 1 << 16])
def test_skimmed_headers_sum_up_as_read_ones(seed, buffer_size, monkeypatch, tmp_path):
    """A summary built with skim_batches equals one built header by header in Python,
    whatever the buffer (batches read whole, cut, or stepped over)."""
    from seglog.storage import producer_state

    rng = random.Random(seed)
    log = mixed_log(rng)
    log += build_batch([(b"big", b"v" * 70_000, NOW)], base_offset=10_000)  # stepped over, not read
    log += build_batch([(b"k", b"v", NOW)], base_offset=10_001, producer_id=3, producer_epoch=0, base_sequence=0)
    log += build_batch([(b"cut", b"v", NOW)], base_offset=10_002)[:-5]  # a partial batch ends the log

    def summary() -> tuple:
        producer_state._summaries.clear()
        segment = _Segment(bytes(log), str(tmp_path / "segment.log"))
        s = producer_state.summarize(segment, _read, bytearray(buffer_size))  # type: ignore[arg-type]
        segment.handle.close()
        return s.last, s.events, s.records, s.scanned, s.fingerprint

    skimmed = summary()
    monkeypatch.setattr(_compact, "skim_batches", lambda buffer, n, pos, end: (pos, 0, -1, 0))
    monkeypatch.setattr(_compact, "skim_file", lambda fd, pos, end, above: (pos, 0, -1, None, 0))
    assert skimmed == summary()
    assert skimmed[3] == len(log) - len(build_batch([(b"cut", b"v", NOW)])) + 5


@pytest.mark.parametrize("count", [2, 4, 100])  # records left over, missing, or far too many
def test_a_wrong_record_count_is_named_as_the_decoder_names_it(count):
    raw = build_batch([(b"a", b"1" * 30, NOW), (b"b", b"2", NOW), (b"c", b"3", NOW)])
    struct.pack_into(">i", raw, 57, count)
    struct.pack_into(">I", raw, 17, crc32c(memoryview(raw)[CRC_START:]))
    with pytest.raises(CorruptRecordError) as decoded:
        RecordBatch(raw, 4096).records()
    for way in range(4):
        with pytest.raises(CorruptRecordError) as e:
            read_damaged(way, raw, 4096, way)
        assert (e.value.message, e.value.position) == (decoded.value.message, 4096)


@pytest.mark.parametrize("append_time", [False, True])
def test_a_rebuilt_batch_takes_its_base_timestamp_from_its_first_kept_record(append_time):
    # Kafka's MemoryRecords.buildRetainedRecordsInto: the base timestamp of the first kept
    # record, the deltas relative to it; a LogAppendTime batch's records all read as the
    # append time, so its base is that and every delta 0
    records = [(b"k1", b"old", NOW - 30), (b"k2", b"v", NOW - 20), (b"k3", b"v", NOW - 10)]
    raw = build_batch(
        records,
        timestamp_type=TimestampType.LOG_APPEND_TIME if append_time else TimestampType.CREATE_TIME,
        log_append_time=NOW if append_time else None,
    )
    batch = RecordBatch(raw)
    omap = OffsetMap(64 * ENTRY_SIZE, 0.9)
    for key, offset in ((b"k1", 7), (b"k2", 1), (b"k3", 2)):  # k1 is superseded at offset 7
        omap.put(key, offset)
    omap.latest_offset = 7
    out, kept, _, max_ts = filter_one(batch, omap, OffsetMarks(0, 0))
    got = RecordBatch(seal(out, 0))
    assert kept == 2 and got.base_offset == 0 and got.last_offset_delta == 2
    assert got.base_timestamp == (NOW if append_time else NOW - 20)
    assert got.max_timestamp == max_ts == (NOW if append_time else NOW - 10)
    assert [(r.offset, r.timestamp) for r in got.records()] == [(1, max_ts if append_time else NOW - 20), (2, max_ts)]
