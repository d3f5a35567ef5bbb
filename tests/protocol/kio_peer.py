"""kio (PyPI), an independent codec generated from Kafka's specs, as the peer seglog.protocol is
checked against: our bodies become kio entities and back, with kio's few renamings undone
(``timeout_ms`` is kio's ``timeout``, a timedelta; ``log_append_time_ms`` a datetime)."""

from __future__ import annotations

import dataclasses
import datetime
import io
import typing
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from seglog.protocol.schema import ZERO_UUID

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def kio_class(api_key: int, version: int, request: bool) -> type | None:
    try:
        return (load_request_schema if request else load_response_schema)(api_key, version)
    except Exception:  # kio lacks this API or version
        return None


def _our_name(f: dataclasses.Field, ours: dict[str, Any]) -> str:
    kind = f.metadata.get("kafka_type", "")
    if kind.startswith(("timedelta", "datetime")) and f.name + "_ms" in ours:
        return f.name + "_ms"
    return f.name


def _item_class(annotation: Any) -> Any:
    """The entity class of a ``tuple[X, ...]`` (or ``X | None``) annotation, if any."""
    for arg in typing.get_args(annotation) or (annotation,):
        if dataclasses.is_dataclass(arg):
            return arg
        inner = _item_class(arg) if typing.get_args(arg) else None
        if inner is not None:
            return inner
    return None


def to_kio(cls: type, body: dict[str, Any]) -> Any:
    """A kio entity holding the values of one of our (decoded, complete) bodies."""
    values = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        value = body[_our_name(f, body)]
        kind = f.metadata.get("kafka_type", "")
        item = _item_class(f.type)
        if value is None:
            pass
        elif kind == "error_code":
            value = ErrorCode(value)
        elif kind.startswith("timedelta"):
            value = datetime.timedelta(milliseconds=value)
        elif kind == "datetime_i64":
            value = None if value == -1 else _EPOCH + datetime.timedelta(milliseconds=value)
        elif item is not None and isinstance(value, list):
            value = tuple(to_kio(item, v) if isinstance(v, dict) else v for v in value)
        elif item is not None:
            value = to_kio(item, value)
        elif isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, memoryview):
            value = bytes(value)
        values[f.name] = value
    return cls(**values)


def from_kio(entity: Any, ours: dict[str, Any]) -> dict[str, Any]:
    """Our view of a kio entity, for the fields kio has (named as ours)."""
    out = {}
    for f in dataclasses.fields(entity):
        name = _our_name(f, ours)
        value = getattr(entity, f.name)
        kind = f.metadata.get("kafka_type", "")
        if isinstance(value, datetime.timedelta):
            value = value // datetime.timedelta(milliseconds=1)
        elif kind == "datetime_i64":
            value = -1 if value is None else (value - _EPOCH) // datetime.timedelta(milliseconds=1)
        elif kind == "uuid":
            value = ZERO_UUID if value is None else value
        elif kind == "error_code" or isinstance(value, bool):
            value = int(value) if kind == "error_code" else value
        elif isinstance(value, tuple):
            value = [from_kio(v, ours[name][i]) if dataclasses.is_dataclass(v) else v for i, v in enumerate(value)]
        elif dataclasses.is_dataclass(value):
            value = from_kio(value, ours[name])
        out[name] = value
    return out


def kio_write(entity: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def kio_read(cls: type, data: bytes) -> Any:
    entity, size = entity_reader(cls)(memoryview(data), 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return entity


def typed_fields(cls: type, kind: str, seen: set[str] | None = None) -> set[str]:
    """Our names of the fields kio reads as ``kind``: error codes must be known to kio's enum,
    datetimes fit Python's, and kio's float conversion of timedeltas is exact only for moderate
    ones."""
    names = set() if seen is None else seen
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("kafka_type") == kind:
            names.add(f.name + "_ms" if kind.startswith(("datetime", "timedelta")) else f.name)
        item = _item_class(f.type)
        if item is not None:
            typed_fields(item, kind, names)
    return names
