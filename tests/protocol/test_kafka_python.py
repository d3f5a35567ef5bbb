"""Cross-check against kafka-python's hand-written protocol classes, for the versions kio (generated
from Kafka 4's specs) no longer has: Produce v0-2, Fetch v0-3, ListOffsets v0, OffsetCommit v0-1 ...
Our encodings decode there field by field, and theirs of the same values are our bytes."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import kafka.protocol.old
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.protocol import SCHEMAS, ApiKey, decode_request, decode_response, encode_request, encode_response
from seglog.protocol.message import Message
from seglog.protocol.schema import Array, Struct

from .kio_peer import kio_class
from .strategies import body_of, plain


def _old_classes() -> dict[tuple[int, int, bool], type]:
    found = {}
    for module in pkgutil.iter_modules(kafka.protocol.old.__path__):
        mod = importlib.import_module(f"kafka.protocol.old.{module.name}")
        for name, cls in vars(mod).items():
            if isinstance(cls, type) and isinstance(getattr(cls, "API_VERSION", None), int) and hasattr(cls, "SCHEMA"):
                found[(cls.API_KEY, cls.API_VERSION, "Request" in name)] = cls
    return found


OLD = _old_classes()
# kafka-python's DescribeLogDirsRequest_v0 reads partitions as one int32; the spec has []int32
_WRONG_THERE = {(ApiKey.DESCRIBE_LOG_DIRS, 0)}
CASES = [
    (api.key, v)
    for api in SCHEMAS.values()
    for v in range(api.versions.lo, api.versions.hi + 1)
    if not (kio_class(api.key, v, request=True) and kio_class(api.key, v, request=False))
    and (api.key, v, True) in OLD
    and (api.key, v, False) in OLD
    and (api.key, v) not in _WRONG_THERE
]


def positional(struct: Struct, value: Message, version: int) -> tuple:
    """Our decoded struct as kafka-python holds it: the version's fields in order, nested tuples."""
    out = []
    for f in struct.fields:
        if version not in f.versions or f.tag is not None:
            continue
        v = getattr(value, f.name)
        if isinstance(f.type, Array) and v is not None:
            item = f.type.item
            v = [positional(item, x, version) if isinstance(item, Struct) else x for x in v]
        elif isinstance(f.type, Struct):
            v = positional(f.type, v, version)
        out.append(plain(v))
    return tuple(out)


def _theirs(cls: type, ours: bytes) -> tuple:
    decoded = cls.decode(ours)
    return tuple(plain(_listed(getattr(decoded, name))) for name in cls.SCHEMA.names)


def _listed(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_listed(v) for v in value] if isinstance(value, list) else tuple(_listed(v) for v in value)
    return value


def _check(cls: type, struct: Struct, ours: bytes, decoded: Message, version: int) -> None:
    mine = positional(struct, decoded, version)
    assert _theirs(cls, ours) == _listed(mine)
    assert cls(*mine).encode() == ours


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k.name}-v{v}" for k, v in CASES])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kafka_python_agrees(api_key: ApiKey, version: int, data: st.DataObject) -> None:
    api = SCHEMAS[api_key]
    assert version not in api.flexible
    request = data.draw(body_of(api.request, version, False))
    frame = b"".join(bytes(p) for p in encode_request(api_key, version, 1, None, request))
    _check(OLD[(api_key, version, True)], api.request, frame[14:], decode_request(frame[4:]).body, version)

    response = data.draw(body_of(api.response, version, False))
    frame = b"".join(bytes(p) for p in encode_response(api_key, version, 1, response))
    _check(
        OLD[(api_key, version, False)], api.response, frame[8:], decode_response(api_key, version, frame[4:]), version
    )
