"""Kafka's wire protocol, sans-IO: bytes in, values out; no sockets, no clock.

Schemas are declared per API (messages/) in a small language (schema.py) written from
Kafka's message specs, and compiled per (API, version) on first use into struct-based codecs
(compiler.py). Bodies are dicts keyed by the spec's field names in snake_case; arrays are lists
of dicts; records are memoryview slices of the frame when decoded, and may be bytes-like or
any object with an int ``size`` (storage's FileSlice) when encoded.
"""

from seglog.errors import ErrorCode
from seglog.protocol.api_key import ApiKey
from seglog.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    frame_size,
    supported_versions,
)
from seglog.protocol.header import Request, RequestHeader
from seglog.protocol.messages import SCHEMAS

__all__ = [
    "SCHEMAS",
    "ApiKey",
    "ErrorCode",
    "Request",
    "RequestHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "frame_size",
    "supported_versions",
]
