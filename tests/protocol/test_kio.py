"""Cross-check against kio, an independent codec: what we encode kio reads field by field and
writes back byte for byte, and what kio encodes from the same values is our bytes exactly."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from seglog.protocol import SCHEMAS, ApiKey, decode_request, decode_response, encode_request, encode_response

from .kio_peer import from_kio, kio_class, kio_read, kio_write, to_kio, typed_fields
from .strategies import body_of, plain

CASES = [
    (api.key, v)
    for api in SCHEMAS.values()
    for v in range(api.versions.lo, api.versions.hi + 1)
    if kio_class(api.key, v, request=True) and kio_class(api.key, v, request=False)
]
_ERROR_CODES = st.sampled_from([int(code) for code in ErrorCode])
# kio reads DescribeTransactions' start time as a datetime that cannot be -1, which Kafka
# sends for an id with no transaction under way: drawn non-negative there
_NO_NULL_TIMES = {ApiKey.DESCRIBE_TRANSACTIONS}


def _joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def _restrict(ours: object, theirs: object) -> object:
    """Our decoded value cut to the fields kio's has (kio leaves out the ones a version lacks)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return {name: _restrict(ours[name], value) for name, value in theirs.items()}
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        return [_restrict(o, t) for o, t in zip(ours, theirs, strict=True)]
    return ours


def _check(cls: type, ours: bytes, message: object) -> None:
    decoded = plain(message)
    entity = kio_read(cls, ours)
    theirs = plain(from_kio(entity, decoded))
    assert theirs == _restrict(decoded, theirs)
    assert kio_write(entity) == ours
    assert kio_write(to_kio(cls, decoded)) == ours


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k.name}-v{v}" for k, v in CASES])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_kio_agrees(api_key: ApiKey, version: int, data: st.DataObject) -> None:
    api = SCHEMAS[api_key]
    flexible = version in api.flexible
    request_cls = kio_class(api_key, version, request=True)
    response_cls = kio_class(api_key, version, request=False)
    assert request_cls is not None and response_cls is not None
    times, spans = st.just(-1) | st.integers(0, 2**41), st.integers(-(2**40), 2**40)
    if api_key in _NO_NULL_TIMES:
        times = st.integers(0, 2**41)
    overrides = {
        name: strategy
        for kind, strategy in (("error_code", _ERROR_CODES), ("timedelta_i64", spans), ("datetime_i64", times))
        for cls in (request_cls, response_cls)
        for name in typed_fields(cls, kind)
    }

    request = data.draw(body_of(api.request, version, flexible, overrides))
    frame = _joined(encode_request(api_key, version, 1, None, request))
    header = 4 + 10 + (1 if api.request_header_version(version) == 2 else 0)
    _check(request_cls, frame[header:], decode_request(frame[4:]).body)

    response = data.draw(body_of(api.response, version, flexible, overrides))
    frame = _joined(encode_response(api_key, version, 1, response))
    header = 8 + (1 if api.response_header_version(version) == 1 else 0)
    _check(response_cls, frame[header:], decode_response(api_key, version, frame[4:]))
