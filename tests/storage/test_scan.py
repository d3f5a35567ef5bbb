"""The C walks of ``records/_scan.c`` against the Python they replace on the storage
hot paths, on random and damaged input: the same answers, and the same faults
(type, message, position, offset).

- ``check_append`` against ``PartitionLog._validate_general`` (and, for a leader,
  its edits against ``assign_offsets`` and the batch object's own setters);
- ``crc32c`` against the crc32c package.
"""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import CorruptRecordError, SeglogError
from seglog.records import (
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    _scan,
    build_batch,
    build_message_set,
)
from seglog.records.compression import decompress
from seglog.storage.log import PartitionLog

from .conftest import MS, Clock, new_log

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
    bounds = log._timestamp_bounds() if leader and not append_time else None
    general = outcome(lambda: log._validate_general(bytearray(buffer), leader, origin, bounds))
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
    # a leader's edits: in the same call, as assign_offsets makes them, as the batch objects make them
    stamp = MS + 5 if append_time else None
    for segment_bytes in (1 << 30, len(buffer) - 1):
        assignment = (1000, 7, stamp, segment_bytes)
        one = bytearray(buffer)
        combined = outcome(
            lambda b=one, a=assignment: _scan.check_append(
                b, True, origin != "client", compact, max_bytes, bounds, decompress, log.dir, a
            )
        )
        if segment_bytes < len(buffer):
            assert combined[0] == "RecordTooLargeError" and "segment.bytes" in combined[1]
            assert one == buffer  # nothing written
            continue
        two = bytearray(buffer)
        assert combined == ("ok", _scan.assign_offsets(two, general[1], 1000, 7, stamp))
        assert one == two == assigned_by_objects(buffer, general[1], 1000, 7, stamp)
        entries, first, last, max_ts, count = combined[1]
        assert (first, last, count) == (1000, 999 + sum(f[3] + 1 for f in general[1]), sum(f[2] for f in general[1]))
        assert max_ts == max(e[3] for e in entries)


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
    bounds = log._timestamp_bounds()
    general = outcome(lambda: log._validate_general(bytearray(buffer), True, "coordinator", bounds))
    fast = outcome(
        lambda: _scan.check_append(bytearray(buffer), True, True, False, 1_000_000, bounds, decompress, log.dir)
    )
    assert fast == general


def assigned_by_objects(buffer: bytes, facts: list, next_offset: int, epoch: int, stamp: int | None) -> bytearray:
    out = bytearray(buffer)
    view = memoryview(out)
    for position, size, _count, delta, _ts, _epoch, _base in facts:
        batch = RecordBatch(view[position : position + size], position)
        batch.set_base_offset(next_offset)
        batch.set_partition_leader_epoch(epoch)
        if stamp is not None:
            batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, stamp)
        next_offset += delta + 1
    return out


def test_check_append_names_exact_faults(tmp_path):
    """A few faults spelled out (the property test above holds the two paths to each other)."""
    wide = {"message.timestamp.before.max.ms": INT64_MAX, "message.timestamp.after.max.ms": INT64_MAX}
    _, log = new_log(tmp_path, config=wide, clock=Clock())
    good = build_batch([Record(b"k", b"v", MS, (), 0), Record(b"k", b"v", MS + 5, (), 0)])

    def check(buffer, bounds=None):
        return _scan.check_append(buffer, True, False, False, 10**6, bounds, decompress, log.dir)

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
        check(high, log._timestamp_bounds())
    with pytest.raises(SeglogError, match=past):
        log._validate_general(high, True, "client", log._timestamp_bounds())
    with pytest.raises(SeglogError, match="2 bytes of a partial batch at the end of the append"):
        check(bytes(good) + b"\x00\x00")
    assert check(bytes(good) + build_message_set([Record(b"k", b"v", MS, (), 0)], magic=1)) is None


# --- CRC -------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=40_000), skip=st.integers(0, 15))
def test_crc32c_is_the_packages(data, skip):
    view = memoryview(data)[min(skip, len(data)) :]
    assert _scan.crc32c(view) == crc32c(view)
    assert _scan.crc32c(view, False) == crc32c(view)


def test_crc32c_across_the_stream_lengths():
    data = os.urandom(3 * 4096 * 2 + 3 * 256 * 3 + 77)
    for n in (0, 1, 7, 8, 767, 768, 769, 12287, 12288, 12289, 24576 + 768 + 5, len(data)):
        for skip in (0, 3):
            assert _scan.crc32c(data[skip : skip + n]) == crc32c(data[skip : skip + n])
    assert _scan.HARDWARE_CRC in (0, 1)
