"""Follower appends get the leader's structural checks: only offset assignment differs."""

from __future__ import annotations

import struct
import zlib

import pytest

from seglog.errors import SeglogError
from seglog.records import Compression, build_batch, crc32c
from seglog.records.batch import HEADER_SIZE
from seglog.records.compression import MAX_DECOMPRESSED_BYTES

from .conftest import new_log, records

_LENGTH, _CRC, _ATTRIBUTES, _LAST_DELTA, _COUNT = 8, 17, 21, 23, 57


def _sealed(batch: bytearray, count: int, body: bytes | None = None) -> bytes:
    """``batch`` claiming ``count`` records (last offset delta to match), with ``body`` as
    its records section if given, its length and CRC made right again."""
    if body is not None:
        batch = batch[:HEADER_SIZE] + body
        struct.pack_into(">i", batch, _LENGTH, len(batch) - 12)
    struct.pack_into(">i", batch, _COUNT, count)
    struct.pack_into(">i", batch, _LAST_DELTA, count - 1)
    struct.pack_into(">I", batch, _CRC, crc32c(memoryview(batch)[_ATTRIBUTES:]))
    return bytes(batch)


def _gzip_of_zeros(size: int) -> bytes:
    """A gzip stream of ``size`` zero bytes, made a MiB at a time."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(1 << 20)
    out = [z.compress(block) for _ in range(size >> 20)]
    return b"".join(out) + z.compress(bytes(size & ((1 << 20) - 1))) + z.flush()


def _bomb(kind: str) -> bytes:
    gzip = bytearray(build_batch(records(1000), compression=Compression.GZIP))
    if kind == "count":  # 37 M records claimed by a batch whose records are a few KiB
        return _sealed(gzip, 37_000_000)
    # records that decompress past the bound: a batch of some 382 KB
    return _sealed(gzip, 37_000_000, _gzip_of_zeros(MAX_DECOMPRESSED_BYTES + (1 << 20)))


@pytest.mark.parametrize("kind", ["count", "decompressed"])
def test_a_follower_refuses_what_a_leader_refuses(tmp_path, kind):
    batch = _bomb(kind)
    manager, log = new_log(tmp_path, config={"max.message.bytes": 1 << 20})
    log.append(records(3))
    with pytest.raises(SeglogError) as leader:
        log.append_batches(batch)
    follower_batch = bytearray(batch)
    struct.pack_into(">q", follower_batch, 0, 3)  # the offsets a leader gave it, following the log
    with pytest.raises(type(leader.value)) as follower:
        log.append_as_follower(follower_batch)
    assert follower.value.error_code == leader.value.error_code
    assert log.log_end_offset == 3
    assert [r.offset for r in log.records()] == [0, 1, 2]
    manager.close()


def test_a_follower_still_takes_compacted_batches(tmp_path):
    """Compaction leaves batches whose records have offset gaps and fewer records than
    their offset span: a follower copies such batches as they are."""
    kept = [r._replace(offset=o) for r, o in zip(records(3), (0, 4, 7), strict=True)]
    batch = build_batch(kept, base_offset=0, keep_offsets=True, last_offset_delta=9)  # its span before
    manager, log = new_log(tmp_path)
    info = log.append_as_follower(batch)
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 9, 10)
    assert [r.offset for r in log.records()] == [0, 4, 7]
    manager.close()
