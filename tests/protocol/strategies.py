"""Hypothesis strategies that draw message bodies from the declared schemas, and the value a
body decodes to at a version (absent fields at their defaults, records as bytes)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from seglog.protocol import SCHEMAS
from seglog.protocol.codec import message_class
from seglog.protocol.compiler import message_classes
from seglog.protocol.message import Message
from seglog.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Array,
    Field,
    FieldType,
    Struct,
)

_INTS = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}
_PRIMITIVES: dict[str, st.SearchStrategy[Any]] = {
    BOOL: st.booleans(),
    UINT16: st.integers(0, 2**16 - 1),
    UINT32: st.integers(0, 2**32 - 1),
    FLOAT64: st.floats(allow_nan=False),
    UUID: st.uuids(),
    STRING: st.text(max_size=12),
    BYTES: st.binary(max_size=12),
    RECORDS: st.binary(max_size=40),
    **{t: st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for t, bits in _INTS.items()},
}


# the message class of every struct of every schema, by the struct's id: what a drawn body is built as
_CLASSES = {
    key: cls
    for api in SCHEMAS.values()
    for message, response in ((api.request, False), (api.response, True))
    for key, cls in message_classes(api, message, message_class(api.key, response)).items()
}


def _present(f: Field, version: int, flexible: bool) -> bool:
    return version in f.versions and (f.tag is None or flexible)


Overrides = dict[str, st.SearchStrategy[Any]]


def value_of(
    f: Field, type_: FieldType, version: int, flexible: bool, overrides: Overrides, item: bool = False
) -> st.SearchStrategy[Any]:
    if isinstance(type_, Array):
        inner = st.lists(value_of(f, type_.item, version, flexible, overrides, item=True), max_size=3)
    elif isinstance(type_, Struct):
        inner = body_of(type_, version, flexible, overrides)
    else:
        inner = overrides.get(f.name, _PRIMITIVES[type_])
    return st.none() | inner if version in f.null and not item else inner


def body_of(
    struct: Struct, version: int, flexible: bool, overrides: Overrides | None = None
) -> st.SearchStrategy[Message]:
    """Bodies with every field the version has set; ``overrides`` draws the named fields' values."""
    fields = [f for f in struct.fields if _present(f, version, flexible)]
    values = st.fixed_dictionaries({f.name: value_of(f, f.type, version, flexible, overrides or {}) for f in fields})
    return values.map(lambda drawn: _CLASSES[id(struct)](**drawn))


def expected(struct: Struct, body: Message, version: int, flexible: bool) -> dict[str, Any]:
    """What ``body`` decodes to: every field of the struct, the absent ones at their default."""
    out = {}
    for f in struct.fields:
        if _present(f, version, flexible):
            out[f.name] = _expected_value(f.type, getattr(body, f.name), version, flexible)
        else:
            out[f.name] = f.default_value()
    return out


def _expected_value(type_: FieldType, value: Any, version: int, flexible: bool) -> Any:
    if value is None:
        return None
    if isinstance(type_, Array):
        return [_expected_value(type_.item, v, version, flexible) for v in value]
    if isinstance(type_, Struct):
        return expected(type_, value, version, flexible)
    return value


def plain(value: Any) -> Any:
    """A decoded value as dicts and lists, its memoryviews made bytes, for comparing."""
    if isinstance(value, memoryview):
        return bytes(value)
    if isinstance(value, Message):
        return {name: plain(getattr(value, name)) for name in value._fields()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
