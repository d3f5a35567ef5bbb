"""The declarations' language: fields with version ranges, nullable and tagged versions, defaults.

A message is a `Struct` of `Field`s; a field's type is a primitive name (``INT32``, ``STRING``,
``RECORDS`` ...), an `Array` of a type, or a nested `Struct`. Version ranges are written as
Kafka's specs write them: ``"3+"``, ``"0-12"``, ``"5"``, ``"none"``. An `Api` pairs a request
and a response struct with the API key, its valid versions and its first flexible version.

Every nested struct (an array's item or a field's type) carries the name Kafka's spec gives it
(``"type": "[]TopicProduceData"`` names the item ``TopicProduceData``), the name of the class
generated for it, as Kafka generates ``ProduceRequestData.TopicProduceData``. A request's or a
response's own struct is unnamed: its class is ``<Api>RequestData`` or ``<Api>ResponseData``.
Within one message a name denotes one struct, wherever it appears (Kafka's ``commonStructs``).

What the specs say about the wire, kept here in one place:

- flexible versions (KIP-482) write strings, bytes, records and arrays in compact form (an
  unsigned varint of length + 1, 0 for null) and end every struct with a tagged-field section:
  ``count uvarint, then (tag uvarint, size uvarint, value)`` in ascending tag order;
- a tagged field exists only in flexible versions and is written only when it differs from
  its default;
- a field a version lacks takes its default when decoded and is ignored when encoded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from seglog.common import ZERO_UUID
from seglog.protocol.api_key import ApiKey

# primitive types (names as the specs spell them)
BOOL = "bool"
INT8 = "int8"
INT16 = "int16"
INT32 = "int32"
INT64 = "int64"
UINT16 = "uint16"
UINT32 = "uint32"
FLOAT64 = "float64"
UUID = "uuid"
STRING = "string"
BYTES = "bytes"
RECORDS = "records"

FIXED_FORMATS = {
    BOOL: "?",
    INT8: "b",
    INT16: "h",
    INT32: "i",
    INT64: "q",
    UINT16: "H",
    UINT32: "I",
    FLOAT64: "d",
    UUID: "16s",
}


_TYPE_DEFAULTS: dict[str, Any] = {
    BOOL: False,
    INT8: 0,
    INT16: 0,
    INT32: 0,
    INT64: 0,
    UINT16: 0,
    UINT32: 0,
    FLOAT64: 0.0,
    UUID: ZERO_UUID,
    STRING: "",
    BYTES: b"",
    RECORDS: None,
}

MAX_VERSION = 0x7FFF


class Versions(NamedTuple):
    """An inclusive range of versions; ``lo > hi`` is the empty range ("none")."""

    lo: int
    hi: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @classmethod
    def parse(cls, spec: str | None) -> Versions:
        if spec is None or spec == "none":
            return NONE
        if spec.endswith("+"):
            return cls(int(spec[:-1]), MAX_VERSION)
        lo, _, hi = spec.partition("-")
        return cls(int(lo), int(hi or lo))


NONE = Versions(1, 0)


@dataclass(frozen=True)
class Array:
    item: FieldType


_STRUCT_NAME = re.compile(r"[A-Z][A-Za-z0-9]*")


@dataclass(frozen=True, init=False)
class Struct:
    """Fields in wire order; ``name`` is the spec's name of a nested struct ("" at the top)."""

    fields: tuple[Field, ...]
    name: str = ""

    def __init__(self, *fields: Field, name: str = "") -> None:
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {names}")
        if name and not _STRUCT_NAME.fullmatch(name):
            raise ValueError(f"struct name {name!r} is not CamelCase")
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "name", name)


FieldType = str | Array | Struct


@dataclass(frozen=True, init=False)
class Field:
    """One field. ``versions`` defaults to every version; ``null`` gives the nullable versions;
    ``tag`` makes it a tagged field (present in the flexible versions of ``versions``);
    ``default`` is the spec's default (the type's own when not given)."""

    name: str
    type: FieldType
    versions: Versions
    null: Versions
    tag: int | None
    default: Any

    def __init__(
        self,
        name: str,
        type: FieldType,
        versions: str = "0+",
        *,
        null: str | None = None,
        tag: int | None = None,
        default: Any = ...,
    ) -> None:
        if isinstance(type, str) and type not in _TYPE_DEFAULTS:
            raise ValueError(f"unknown type {type!r} of field {name}")
        nested = type.item if isinstance(type, Array) else type
        if isinstance(nested, Struct) and not nested.name:
            raise ValueError(f"the struct of field {name} has no name")
        if default is ...:
            default = _TYPE_DEFAULTS.get(type) if isinstance(type, str) else None
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "versions", Versions.parse(versions))
        object.__setattr__(self, "null", Versions.parse(null))
        object.__setattr__(self, "tag", tag)
        object.__setattr__(self, "default", default)

    def default_value(self) -> Any:
        """The value a version without this field decodes to (a fresh one for arrays and structs)."""
        if isinstance(self.type, Array):
            return []
        if isinstance(self.type, Struct):
            return struct_default(self.type)
        return self.default


def struct_default(struct: Struct) -> dict[str, Any]:
    return {f.name: f.default_value() for f in struct.fields}


@dataclass(frozen=True)
class Api:
    """One API: its key, the versions declared, the first flexible version, both messages."""

    key: ApiKey
    versions: Versions
    flexible: Versions
    request: Struct
    response: Struct

    def __init__(self, key: ApiKey, versions: str, *, flexible: str, request: Struct, response: Struct) -> None:
        if request.name or response.name:
            raise ValueError(f"{key.name}: request and response structs are unnamed (named after the API)")
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "versions", Versions.parse(versions))
        object.__setattr__(self, "flexible", Versions.parse(flexible))
        object.__setattr__(self, "request", request)
        object.__setattr__(self, "response", response)

    def request_header_version(self, version: int) -> int:
        if version in self.flexible:
            return 2
        # header v0 (no client id) is ControlledShutdown v0's alone
        return 0 if self.key == ApiKey.CONTROLLED_SHUTDOWN and version == 0 else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions answers with header v0 always: a client that sent a version too new for
        # the broker must still read the error response and its list of versions
        return 1 if version in self.flexible and self.key != ApiKey.API_VERSIONS else 0


def array_of(name: str, *fields: Field) -> Array:
    """An array of structs, the specs' ``"type": "[]Name"`` with ``"fields"``: ``Name`` first."""
    if not isinstance(name, str):
        raise TypeError(f"array_of takes the item struct's name first, not {name!r}")
    return Array(Struct(*fields, name=name))


def by_topic(
    topic_struct: str, partition_struct: str, *partition_fields: Field, topic: str = "name", field: str = "topics"
) -> Field:
    """The specs' usual nesting: an array of topics (``topic_struct``), each a name and an array
    of partitions (``partition_struct``)."""
    return Field(
        field,
        array_of(
            topic_struct, Field(topic, STRING), Field("partitions", array_of(partition_struct, *partition_fields))
        ),
    )
