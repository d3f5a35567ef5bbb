"""The four codecs of Kafka's record format, as Kafka frames them.

- gzip: a plain gzip stream (several members are read as one, as Java does).
- snappy: Kafka's Java client writes xerial's framing::

      magic    8 bytes  \\x82 S N A P P Y \\x00
      version  int32    1
      compat   int32    1
      blocks   int32 length + a raw snappy block, repeated

  Other clients (librdkafka, kafkajs) send bare raw snappy; both are read,
  xerial is written.
- lz4: the LZ4 frame format, parsed here so that the old wrong header
  checksum (KAFKA-3160: magic-0 messages hash the frame's magic too) is
  accepted and a hostile content-size field never sizes an allocation::

      magic 04 22 4D 18 | FLG | BD | [content size u64] [dict id u32] | HC
      blocks: u32 size (high bit: stored uncompressed) + data [+ u32 xxh32]
      end mark u32 0 [+ u32 content xxh32]

  Blocks may be independent (Kafka's Java client) or linked (librdkafka's
  default: a block may copy from the previous 64 KiB of output). Written as
  the Java client writes it, byte for byte (records/_lz4.h): independent
  64 KiB blocks, no checksums but the header's, each block compressed by
  lz4-java's fast compressor (liblz4's LZ4_compress_default), or stored when
  that is no smaller.
- zstd: a plain zstd stream (frames one after another, as zstd-jni reads them)::

      magic 28 B5 2F FD | FHD | [window] [dict id] [content size]
      blocks: u24 header (bit 0 last, bits 1-2 type: raw, RLE, compressed; size) + data
      [u32 content checksum]

  Decoded by python-zstandard, whose readers end a frame cut short without a
  word: the frames' framing is walked here first, so that one is refused.

Decompression is bounded: output past ``MAX_DECOMPRESSED_BYTES`` is refused,
so a small hostile batch cannot claim gigabytes. ``decompress_stream`` gives the
output in pieces as it is inflated (gzip and zstd in pieces of a chosen size,
xerial snappy a block at a time, lz4 a frame block at a time, bare snappy whole:
it has no blocks), for readers that need not hold a whole batch's records at
once; ``decompress`` is the same stream joined.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Callable, Iterator

import cramjam
import lz4.block
import xxhash
import zstandard

from ..errors import CorruptRecordError, UnsupportedCompressionTypeError
from . import _codec

Buffer = bytes | bytearray | memoryview

MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
STREAM_CHUNK_BYTES = 64 * 1024  # a piece of decompress_stream (gzip, zstd); lz4's blocks are this size too


class Compression(enum.IntEnum):
    """Codec ids of attribute bits 0-2, with Kafka's names."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def parse(cls, name: str | int | Compression) -> Compression:
        if type(name) is cls:  # a member already (every batch built): no enum lookup
            return name
        try:
            if isinstance(name, int) and not isinstance(name, bool):
                return cls(name)
            if isinstance(name, str):
                return cls[name.upper()]
        except (KeyError, ValueError):
            pass
        raise UnsupportedCompressionTypeError(f"unknown compression type {name!r}")


def _too_large() -> CorruptRecordError:
    return CorruptRecordError(f"records decompress to more than {MAX_DECOMPRESSED_BYTES} bytes")


# --- gzip ----------------------------------------------------------------------


def _gzip_compress(data: Buffer) -> bytes:
    # Kafka's default gzip level is 6 (compression.gzip.level = -1 -> zlib's default)
    co = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return co.compress(data) + co.flush()


def _gzip_stream(data: Buffer, chunk: int) -> Iterator[bytes]:
    # input goes in by slices of ``chunk`` too: zlib copies the unconsumed input
    # on each call, which for a whole large input would be quadratic
    view = memoryview(data)
    pos, pending = 0, memoryview(b"")
    member = None
    produced = 0
    try:
        while True:
            if not pending and pos < len(view):
                pending, pos = view[pos : pos + chunk], pos + chunk
            if member is None:
                if not pending:
                    return
                member = zlib.decompressobj(16 + zlib.MAX_WBITS)
            # never more than one byte past the bound, whatever the chunk (0 would mean no limit)
            piece = member.decompress(pending, max(1, min(chunk, MAX_DECOMPRESSED_BYTES + 1 - produced)))
            produced += len(piece)
            stalled = not piece and len(member.unconsumed_tail) == len(pending)
            pending = memoryview(member.unconsumed_tail)
            if piece:
                yield piece
            if member.eof:  # another member may follow: Java's GZIPInputStream reads them as one
                pending, member = memoryview(member.unused_data), None
            elif stalled:
                raise CorruptRecordError("gzip stream ends early")
    except zlib.error as e:
        raise CorruptRecordError(f"gzip: {e}") from None


# --- snappy --------------------------------------------------------------------

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # the Java client's block size


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw(block: Buffer, budget: int) -> bytes:
    try:
        claimed = cramjam.snappy.decompress_raw_len(block)
    except Exception as e:
        raise _snappy_error(e) from None
    # a snappy block expands at most ~21x (3-byte copy of 64 bytes): a larger
    # claim is a lie, and a claim past the budget is refused before allocating
    if claimed > 24 * len(block) + 64:
        raise CorruptRecordError(f"snappy block of {len(block)} bytes claims {claimed} bytes")
    if claimed > budget:
        raise _too_large()
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except Exception as e:
        raise _snappy_error(e) from None


def _snappy_error(e: Exception) -> CorruptRecordError:
    return CorruptRecordError("snappy: " + str(e).removeprefix("snappy: "))  # cramjam names itself already


def _snappy_stream(data: Buffer, chunk: int) -> Iterator[bytes]:
    view = memoryview(data)
    if view[:8] != _XERIAL_MAGIC:
        yield _snappy_raw(view, MAX_DECOMPRESSED_BYTES)
        return
    if len(view) < 16:
        raise CorruptRecordError("snappy: truncated xerial header")
    pos, total = 16, 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError(f"snappy: truncated xerial block length at byte {pos}")
        (size,) = struct.unpack_from(">i", view, pos)
        pos += 4
        if size < 0 or pos + size > len(view):
            raise CorruptRecordError(f"snappy: xerial block of {size} bytes at byte {pos - 4} runs past the end")
        block = _snappy_raw(view[pos : pos + size], MAX_DECOMPRESSED_BYTES - total)
        total += len(block)
        pos += size
        yield block


# --- lz4 -----------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_WINDOW = 64 * 1024
_LZ4_BLOCK_SIZES = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def _lz4_compress(data: Buffer) -> bytes:
    # as the Java client writes it (_lz4.h, which the cleaner's C shares): its bytes exactly
    return _codec.lz4_frame(data)


def _lz4_header(view: memoryview) -> tuple[int, int, int]:
    """Returns (end of the frame header, max block size, FLG)."""
    if len(view) < 7 or view[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("lz4: not an LZ4 frame (bad magic)")
    flg, bd = view[4], view[5]
    if flg >> 6 != 1:
        raise CorruptRecordError(f"lz4: unsupported frame version {flg >> 6}")
    block_max = _LZ4_BLOCK_SIZES.get((bd >> 4) & 7)
    if block_max is None:
        raise CorruptRecordError(f"lz4: bad block size code {(bd >> 4) & 7}")
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if end >= len(view):
        raise CorruptRecordError("lz4: truncated frame header")
    hc = view[end]
    right = (xxhash.xxh32_intdigest(view[4:end]) >> 8) & 0xFF
    kafka_3160 = (xxhash.xxh32_intdigest(view[0:end]) >> 8) & 0xFF
    if hc not in (right, kafka_3160):
        raise CorruptRecordError(f"lz4: frame header checksum {hc:#04x} is wrong (expected {right:#04x})")
    return end + 1, block_max, flg


def _lz4_stream(data: Buffer, chunk: int) -> Iterator[bytes]:
    view = memoryview(data)
    pos, block_max, flg = _lz4_header(view)
    block_checksum = flg & 0x10
    content = xxhash.xxh32() if flg & 0x04 else None
    # linked blocks (librdkafka's default) may copy from the previous 64 KiB of output
    linked = not flg & 0x20
    window = b""
    while True:
        if pos + 4 > len(view):
            raise CorruptRecordError(f"lz4: truncated block size at byte {pos}")
        (word,) = struct.unpack_from("<I", view, pos)
        pos += 4
        if word == 0:
            break
        size, stored = word & 0x7FFFFFFF, word & 0x80000000
        if size > block_max or pos + size > len(view):
            raise CorruptRecordError(f"lz4: block of {size} bytes at byte {pos - 4} is out of range")
        block = view[pos : pos + size]
        pos += size
        if block_checksum:
            if pos + 4 > len(view) or struct.unpack_from("<I", view, pos)[0] != xxhash.xxh32_intdigest(block):
                raise CorruptRecordError(f"lz4: block checksum mismatch at byte {pos}")
            pos += 4
        if stored:
            piece = bytes(block)
        else:
            try:
                piece = lz4.block.decompress(block, uncompressed_size=block_max, dict=window)
            except lz4.block.LZ4BlockError as e:
                raise CorruptRecordError(f"lz4: {e} in block at byte {pos - size}") from None
        if linked:
            window = piece[-_LZ4_WINDOW:] if len(piece) >= _LZ4_WINDOW else (window + piece)[-_LZ4_WINDOW:]
        if content is not None:
            content.update(piece)
        yield piece
    if content is not None and (pos + 4 > len(view) or struct.unpack_from("<I", view, pos)[0] != content.intdigest()):
        raise CorruptRecordError("lz4: content checksum mismatch")


# --- zstd ----------------------------------------------------------------------

_ZSTD_COMPRESSOR = zstandard.ZstdCompressor(level=3)  # Kafka's default zstd level


def _zstd_compress(data: Buffer) -> bytes:
    return _ZSTD_COMPRESSOR.compress(data)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50  # the low 4 bits are free
_ZSTD_RLE_BLOCK = 1  # one byte stored, repeated size times


def _zstd_stream(data: Buffer, chunk: int) -> Iterator[bytes]:
    _zstd_check_framing(memoryview(data))
    try:
        # streaming, so the frame's content-size field never sizes an allocation
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
        # read(n) allocates n bytes before inflating: pieces of a MiB at most, whatever the chunk
        while piece := reader.read(min(chunk, 1 << 20)):
            yield piece
    except zstandard.ZstdError as e:
        raise CorruptRecordError(f"zstd: {e}") from None


def _zstd_check_framing(view: memoryview) -> None:
    """Refuse frames cut short (block headers and sizes only: nothing is inflated here). Bytes
    that do not start a frame are left to the decoder, which names them."""
    pos = 0
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError(f"zstd: {len(view) - pos} bytes after the last frame")
        (magic,) = struct.unpack_from("<I", view, pos)
        if magic & ~0xF == _ZSTD_SKIPPABLE_MAGIC:
            pos += 8 + (struct.unpack_from("<I", view, pos + 4)[0] if pos + 8 <= len(view) else 0)
            continue
        if magic != _ZSTD_MAGIC:
            return
        fhd = view[pos + 4] if pos + 4 < len(view) else 0
        single_segment = fhd >> 5 & 1
        pos += 5 + (1 - single_segment) + (0, 1, 2, 4)[fhd & 3] + (single_segment, 2, 4, 8)[fhd >> 6]
        last = 0
        while not last:
            if pos + 3 > len(view):
                raise _zstd_cut_short(len(view))
            header = view[pos] | view[pos + 1] << 8 | view[pos + 2] << 16
            last, kind, size = header & 1, header >> 1 & 3, header >> 3
            pos += 3 + (1 if kind == _ZSTD_RLE_BLOCK else size)
        pos += 4 if fhd & 0x04 else 0  # the content checksum
    if pos > len(view):
        raise _zstd_cut_short(len(view))


def _zstd_cut_short(size: int) -> CorruptRecordError:
    return CorruptRecordError(f"zstd: a frame is cut short (its blocks run past the {size} bytes)")


# --- dispatch ------------------------------------------------------------------

_COMPRESSORS: dict[int, Callable[[Buffer], bytes]] = {
    Compression.GZIP: _gzip_compress,
    Compression.SNAPPY: _snappy_compress,
    Compression.LZ4: _lz4_compress,
    Compression.ZSTD: _zstd_compress,
}
_STREAMS: dict[int, Callable[[Buffer, int], Iterator[bytes]]] = {
    Compression.GZIP: _gzip_stream,
    Compression.SNAPPY: _snappy_stream,
    Compression.LZ4: _lz4_stream,
    Compression.ZSTD: _zstd_stream,
}


def compress(codec: int, data: Buffer) -> bytes:
    try:
        return _COMPRESSORS[codec](data)
    except KeyError:
        raise UnsupportedCompressionTypeError(f"cannot compress with codec id {codec}") from None


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress one compressed block; corrupt input raises CorruptRecordError."""
    # one piece as large as the bound: gzip and zstd inflate in a single call, as before streaming
    return b"".join(decompress_stream(codec, data, MAX_DECOMPRESSED_BYTES + 1))


def decompress_stream(codec: int, data: Buffer, chunk: int = STREAM_CHUNK_BYTES) -> Iterator[bytes]:
    """The decompressed bytes of one compressed block, in pieces as they are inflated: gzip and zstd
    in pieces of at most ``chunk`` bytes, xerial snappy and lz4 a block at a time (at most 4 MiB, an
    lz4 frame's largest block), bare snappy whole. Corrupt input raises CorruptRecordError when the
    stream meets it (after the pieces before it); so does output past ``MAX_DECOMPRESSED_BYTES``."""
    try:
        stream = _STREAMS[codec]
    except KeyError:
        raise UnsupportedCompressionTypeError(f"unknown compression codec id {codec}") from None
    return _bounded(stream(data, chunk))


def _bounded(pieces: Iterator[bytes]) -> Iterator[bytes]:
    total = 0
    for piece in pieces:
        total += len(piece)
        if total > MAX_DECOMPRESSED_BYTES:
            raise _too_large()
        yield piece
