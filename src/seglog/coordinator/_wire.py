"""The primitive types of Kafka's message schemas, as the coordinators' records use them.

Classic versions: ``string`` = int16 length + UTF-8 (-1: null), ``bytes`` =
int32 length, arrays = int32 count (-1: null). Flexible versions (KIP-482):
lengths and counts are unsigned varints holding length + 1 (0: null), and every
struct ends in tagged fields (count, then per field: tag, size, bytes).

Every length is checked against the bytes left before anything is allocated, so
a hostile or torn record costs no more than its own size.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..errors import CorruptRecordError
from ..records.varint import decode_unsigned_varint, encode_unsigned_varint

T = TypeVar("T")

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    """Fields read in order from ``data``; ``what`` names the record in errors."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def _fail(self, message: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {message}", position=self.pos)

    def _take(self, fmt: struct.Struct) -> int:
        if self.pos + fmt.size > len(self.data):
            raise self._fail(f"truncated at byte {self.pos} of {len(self.data)}")
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return int(value)

    def int8(self) -> int:
        return self._take(_I8)

    def int16(self) -> int:
        return self._take(_I16)

    def int32(self) -> int:
        return self._take(_I32)

    def int64(self) -> int:
        return self._take(_I64)

    def uvarint(self) -> int:
        try:
            value, self.pos = decode_unsigned_varint(self.data, self.pos, 5)
        except CorruptRecordError as e:
            raise self._fail(e.message) from None
        return value

    def _raw(self, size: int) -> bytes:
        if size > len(self.data) - self.pos:
            raise self._fail(f"length {size} runs past the end ({len(self.data) - self.pos} bytes left)")
        out = self.data[self.pos : self.pos + size]
        self.pos += size
        return out

    def _length(self, flexible: bool, wide: bool) -> int:
        """-1 for null; a classic string's length is int16, bytes and arrays int32."""
        if flexible:
            return self.uvarint() - 1
        return self.int32() if wide else self.int16()

    def string(self, flexible: bool) -> str:
        value = self.nullable_string(flexible)
        if value is None:
            raise self._fail("null where a string is required")
        return value

    def nullable_string(self, flexible: bool) -> str | None:
        size = self._length(flexible, wide=False)
        if size < -1:
            raise self._fail(f"string length {size}")
        if size == -1:
            return None
        try:
            return self._raw(size).decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("string is not UTF-8") from None

    def bytes_(self, flexible: bool) -> bytes:
        size = self._length(flexible, wide=True)
        if size < 0:
            raise self._fail(f"bytes length {size} where bytes are required")
        return self._raw(size)

    def array(self, flexible: bool, item: Callable[[], T], *, nullable: bool = False) -> list[T] | None:
        count = self._length(flexible, wide=True)
        if count == -1 and nullable:
            return None
        # every item takes at least one byte: a count larger than what is left is a lie
        if count < 0 or count > len(self.data) - self.pos:
            raise self._fail(f"array count {count} out of range")
        return [item() for _ in range(count)]

    def tagged_fields(self) -> dict[int, bytes]:
        fields = {}
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self._raw(self.uvarint())
        return fields


class Writer:
    """Fields appended in order; ``bytes(writer.out)`` is the encoding."""

    def __init__(self) -> None:
        self.out = bytearray()

    def int8(self, value: int) -> None:
        self.out += _I8.pack(value)

    def int16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def _length(self, size: int, flexible: bool, wide: bool) -> None:
        if flexible:
            self.out += encode_unsigned_varint(size + 1)
        elif wide:
            self.int32(size)
        else:
            self.int16(size)

    def nullable_string(self, value: str | None, flexible: bool) -> None:
        if value is None:
            self._length(-1, flexible, wide=False)
            return
        raw = value.encode("utf-8")
        self._length(len(raw), flexible, wide=False)
        self.out += raw

    string = nullable_string

    def bytes_(self, value: bytes, flexible: bool) -> None:
        self._length(len(value), flexible, wide=True)
        self.out += value

    def array(self, items: Sequence[T] | None, flexible: bool, item: Callable[[T], None]) -> None:
        if items is None:
            self._length(-1, flexible, wide=True)
            return
        self._length(len(items), flexible, wide=True)
        for x in items:
            item(x)

    def tagged_fields(self, fields: dict[int, bytes]) -> None:
        self.out += encode_unsigned_varint(len(fields))
        for tag in sorted(fields):
            self.out += encode_unsigned_varint(tag) + encode_unsigned_varint(len(fields[tag])) + fields[tag]
