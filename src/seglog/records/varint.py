"""Zigzag varints (signed) and plain unsigned varints, as Kafka writes them.

Groups of 7 bits, least significant first, the high bit set while more bytes
follow (protobuf's encoding). A signed value is zigzag-mapped first so that
small negative numbers stay short: 0, -1, 1, -2 ... become 0, 1, 2, 3 ...
The record codec's per-record loops have their own C copy of this
(`_varint.h`); this module serves everything else (control records, tools).
"""

from __future__ import annotations

from ..errors import CorruptRecordError

MAX_VARINT_BYTES = 5  # int32
MAX_VARLONG_BYTES = 10  # int64


def zigzag(value: int, bits: int = 64) -> int:
    return ((value << 1) ^ (value >> (bits - 1))) & ((1 << bits) - 1)


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_unsigned_varint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_unsigned_varint(
    buf: bytes | bytearray | memoryview, pos: int = 0, max_bytes: int = MAX_VARLONG_BYTES
) -> tuple[int, int]:
    """Returns (value, position after it)."""
    value = shift = 0
    for i in range(max_bytes):
        if pos + i >= len(buf):
            raise CorruptRecordError("truncated varint", position=pos)
        byte = buf[pos + i]
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos + i + 1
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes", position=pos)


def encode_varint(value: int) -> bytes:
    """Zigzag varint of a signed int32."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    return encode_unsigned_varint(zigzag(value, 32))


def encode_varlong(value: int) -> bytes:
    """Zigzag varint of a signed int64."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    return encode_unsigned_varint(zigzag(value, 64))


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    raw, end = decode_unsigned_varint(buf, pos, MAX_VARINT_BYTES)
    return unzigzag(raw & 0xFFFFFFFF), end


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    raw, end = decode_unsigned_varint(buf, pos, MAX_VARLONG_BYTES)
    return unzigzag(raw & 0xFFFFFFFFFFFFFFFF), end
