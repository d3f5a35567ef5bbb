"""Every declared API at every declared version: bodies drawn from the schema go through our
encoder and decoder and come back whole, requests and responses, tagged fields and nulls."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.errors import InvalidRequestError, InvalidResponseError, UnsupportedVersionError
from seglog.protocol import SCHEMAS, ApiKey, decode_request, decode_response, encode_request, encode_response

from .strategies import body_of, expected, plain

CASES = [(api.key, v) for api in SCHEMAS.values() for v in range(api.versions.lo, api.versions.hi + 1)]


def joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


@pytest.mark.parametrize(("api_key", "version"), CASES, ids=[f"{k.name}-v{v}" for k, v in CASES])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip(api_key: ApiKey, version: int, data: st.DataObject) -> None:
    api = SCHEMAS[api_key]
    flexible = version in api.flexible
    request = data.draw(body_of(api.request, version, flexible))
    frame = joined(encode_request(api_key, version, 123, data.draw(st.none() | st.text(max_size=5)), request))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    decoded = decode_request(frame[4:])
    assert (decoded.header.api_key, decoded.header.api_version, decoded.header.correlation_id) == (
        api_key,
        version,
        123,
    )
    assert plain(decoded.body) == expected(api.request, request, version, flexible)
    _hostile_variants_raise_only_protocol_errors(frame[4:], data)

    response = data.draw(body_of(api.response, version, flexible))
    frame = joined(encode_response(api_key, version, 77, response))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    assert frame[4:8] == (77).to_bytes(4, "big")
    assert plain(decode_response(api_key, version, frame[4:])) == expected(api.response, response, version, flexible)
    # a response cut short, or with a byte changed, is the peer's fault: InvalidResponseError, nothing else
    with pytest.raises(InvalidResponseError):
        decode_response(api_key, version, frame[4 : data.draw(st.integers(4, len(frame) - 1))])
    mutated = bytearray(frame[4:])
    mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(InvalidResponseError):
        decode_response(api_key, version, bytes(mutated))


def _hostile_variants_raise_only_protocol_errors(frame: bytes, data: st.DataObject) -> None:
    """The frame cut short, and with a byte changed: every generated decoder ends in
    InvalidRequestError (or UnsupportedVersionError for a changed header), nothing else."""
    with pytest.raises(InvalidRequestError):
        decode_request(frame[: data.draw(st.integers(0, len(frame) - 1))])
    mutated = bytearray(frame)
    mutated[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(InvalidRequestError, UnsupportedVersionError):
        decode_request(bytes(mutated))
