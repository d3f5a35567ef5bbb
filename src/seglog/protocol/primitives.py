"""Kafka's primitive protocol types, and the checks every decoder shares.

Fixed-width types are big-endian: int8/16/32/64, uint16/32, float64 (IEEE 754), bool (one
byte, non-zero is true), uuid (16 bytes). Variable-width types:

    string / bytes            int16 / int32 length, then the bytes; -1 = null
    compact string / bytes    uvarint (length + 1), then the bytes; 0 = null
    array                     int32 count (-1 = null), then the items
    compact array             uvarint (count + 1); 0 = null
    records                   as bytes (compact in flexible versions), nullable
    uvarint                   7 bits a byte, least significant first, high bit = more; at most 5 bytes
    varint / varlong          zigzag, then as uvarint (at most 5 / 10 bytes)

The generated codecs (compiler.py) inline the fixed-width reads and call these for the rare
long varints and for the errors, so that every malformed input ends in `InvalidRequestError`
with the byte position in the frame.
"""

from __future__ import annotations

import functools
import uuid

from seglog.errors import InvalidRequestError


def short(position: int, needed: int, end: int) -> InvalidRequestError:
    return InvalidRequestError(
        f"frame cut short: {needed} bytes needed, {max(end - position, 0)} left", position=position
    )


def bad_count(position: int, count: int, left: int) -> InvalidRequestError:
    """An array count or a length that is negative (other than null) or larger than the bytes
    left: refused before anything is allocated for it."""
    if count < 0:
        return InvalidRequestError(f"invalid length or count {count}", position=position)
    return InvalidRequestError(f"length or count {count} exceeds the {left} bytes left", position=position)


def not_nullable(position: int, name: str) -> InvalidRequestError:
    return InvalidRequestError(f"null in non-nullable field {name}", position=position)


def read_uvarint(buf: memoryview | bytes, position: int, end: int) -> tuple[int, int]:
    """(value, position after it) of an unsigned varint of at most 5 bytes (a uint32)."""
    value = shift = 0
    p = position
    while True:
        if p >= end:
            raise short(p, 1, end)
        byte = buf[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if shift > 28:
            raise InvalidRequestError("unsigned varint longer than 5 bytes", position=position)
    if value > 0xFFFFFFFF:
        raise InvalidRequestError(f"unsigned varint {value} exceeds 32 bits", position=position)
    return value, p


def uvarint(value: int) -> bytes:
    """An unsigned varint (0 <= value < 2**32)."""
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_zigzag(buf: memoryview | bytes, position: int, end: int, max_bytes: int) -> tuple[int, int]:
    value = shift = 0
    p = position
    while True:
        if p >= end:
            raise short(p, 1, end)
        byte = buf[p]
        p += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
        if p - position >= max_bytes:
            raise InvalidRequestError(f"varint longer than {max_bytes} bytes", position=position)
    return (value >> 1) ^ -(value & 1), p


def read_varint(buf: memoryview | bytes, position: int, end: int) -> tuple[int, int]:
    """(value, position after it) of a zigzag varint (int32, at most 5 bytes)."""
    return _read_zigzag(buf, position, end, 5)


def read_varlong(buf: memoryview | bytes, position: int, end: int) -> tuple[int, int]:
    """(value, position after it) of a zigzag varlong (int64, at most 10 bytes)."""
    return _read_zigzag(buf, position, end, 10)


def varint(value: int) -> bytes:
    if not -(2**31) <= value < 2**31:
        raise ValueError(f"varint out of range: {value}")
    return uvarint((value << 1) ^ (value >> 31))


def varlong(value: int) -> bytes:
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"varlong out of range: {value}")
    value = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@functools.lru_cache(maxsize=4096)
def to_uuid(raw: bytes) -> uuid.UUID:
    """A UUID from its 16 bytes; cached, since the same topic ids arrive in every fetch."""
    return uuid.UUID(bytes=raw)


def utf8(raw: memoryview) -> str:
    # Kafka decodes with Java's String(bytes, UTF_8), which replaces malformed sequences rather
    # than failing: a bad topic name is then refused by name validation, as Kafka does
    return str(raw, "utf-8", "replace")


def records_size(records: object) -> int:
    """The byte size of a records value: bytes-like, or an object with an int ``size``
    (storage's FileSlice, written by the broker with sendfile)."""
    if isinstance(records, bytes | bytearray):
        return len(records)
    if isinstance(records, memoryview):
        return records.nbytes
    size = getattr(records, "size", None)
    if not isinstance(size, int) or size < 0:
        raise TypeError(f"records must be bytes-like or have an int size, not {type(records).__name__}")
    return size
