"""Kafka's wire protocol, sans-IO: bytes in, values out; no sockets, no clock.

Schemas are declared per API (messages/) in a small language (schema.py) written from
Kafka's message specs, and compiled per (API, version) on first use into struct-based codecs
(compiler.py). Bodies are instances of the message data classes the compiler writes from the
same declarations (message_data.py: ``ProduceRequestData`` ..., Kafka's generated ``*Data``
classes), fields by the spec's names in snake_case; records are memoryview slices of the frame
when decoded, and may be bytes-like or any object with an int ``size`` (storage's FileSlice)
when encoded. A connection (connection.py) frames, correlates and negotiates versions, for a
server and for a client.
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
from seglog.protocol.connection import CLOSED, NEED_DATA, ClientConnection, Response, ServerConnection
from seglog.protocol.header import Request, RequestHeader
from seglog.protocol.message import Message
from seglog.protocol.messages import SCHEMAS

__all__ = [
    "CLOSED",
    "NEED_DATA",
    "SCHEMAS",
    "ApiKey",
    "ClientConnection",
    "ErrorCode",
    "Message",
    "Request",
    "RequestHeader",
    "Response",
    "ServerConnection",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "frame_size",
    "supported_versions",
]
