"""Frames in, values out, and back: the four entry points and the size prefix.

A frame on the wire is ``size int32`` then ``size`` bytes: a header (header.py) and a body
(the API's schema at the header's version). ``frame_size`` checks the prefix before the body
is read; ``decode_request`` takes the bytes after it. Encoders give the whole frame, prefix
included, as a list of parts to write in order (records may be parts of their own).
"""

from __future__ import annotations

import struct
from typing import Any

from seglog.errors import InvalidRequestError, InvalidResponseError, SeglogError, UnsupportedVersionError
from seglog.protocol import message_data, primitives
from seglog.protocol.api_key import ApiKey
from seglog.protocol.compiler import (
    Classes,
    Decoder,
    Encoder,
    class_name,
    compile_decoder,
    compile_encoder,
    message_classes,
)
from seglog.protocol.header import Request, RequestHeader
from seglog.protocol.message import Message
from seglog.protocol.messages import SCHEMAS
from seglog.protocol.schema import Api, Struct

_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_CLIENT_ID_LENGTH = struct.Struct(">h")
_API_KEYS = {int(k): k for k in ApiKey}
# makes a named tuple from its fields without the call of its Python ``__new__`` (half the cost
# of ``Request(...)``, paid on every request)
_tuple_new = tuple.__new__

_DECODE_REQUEST, _ENCODE_REQUEST, _DECODE_RESPONSE, _ENCODE_RESPONSE = range(4)
_codecs: dict[tuple[int, int, int], Any] = {}


def supported_versions(api_key: int) -> tuple[int, int]:
    """(min, max) of the versions declared for an API; UnsupportedVersionError if none are."""
    api = SCHEMAS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported", api_key=api_key, api_version=-1)
    return api.versions.lo, api.versions.hi


def _api(api_key: int, api_version: int, correlation_id: int | None = None) -> Api:
    api = SCHEMAS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(
            f"API key {api_key} is not supported",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        )
    if api_version not in api.versions:
        raise UnsupportedVersionError(
            f"{api.key.name} version {api_version} is not supported (versions {api.versions.lo}-{api.versions.hi})",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        )
    return api


def _codec(api_key: int, api_version: int, kind: int, correlation_id: int | None = None) -> Any:
    key = (api_key, api_version, kind)
    codec = _codecs.get(key)
    if codec is None:
        api = _api(api_key, api_version, correlation_id)
        flexible = api_version in api.flexible
        message = api.request if kind in (_DECODE_REQUEST, _ENCODE_REQUEST) else api.response
        name = f"{api.key.name.lower()}_{'request' if message is api.request else 'response'}_v{api_version}"
        classes = _classes(api, message)
        if kind in (_DECODE_REQUEST, _DECODE_RESPONSE):
            codec = compile_decoder(message, api_version, flexible, "decode_" + name, classes)
        else:
            codec = compile_encoder(message, api_version, flexible, "encode_" + name, classes)
        _codecs[key] = codec
    return codec


_message_classes: dict[int, Classes] = {}


def _classes(api: Api, message: Struct) -> Classes:
    classes = _message_classes.get(id(message))
    if classes is None:
        classes = _message_classes[id(message)] = message_classes(
            api, message, getattr(message_data, class_name(api, message))
        )
    return classes


def message_class(api_key: int, response: bool) -> type[Message]:
    """The data class of an API's request or response (``ProduceRequestData`` ...)."""
    api = SCHEMAS.get(api_key)
    if api is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported", api_key=api_key, api_version=-1)
    cls: type[Message] = getattr(message_data, class_name(api, api.response if response else api.request))
    return cls


def frame_size(prefix: bytes | memoryview, max_size: int) -> int:
    """The size a 4-byte big-endian prefix announces, refused before any body is read when it
    is negative or larger than ``max_size`` (``socket.request.max.bytes``)."""
    if len(prefix) < 4:
        raise InvalidRequestError(f"size prefix of {len(prefix)} bytes, 4 needed", position=0)
    size: int = _SIZE.unpack_from(prefix)[0]
    if size < 0:
        raise InvalidRequestError(f"invalid frame size {size}", position=0)
    if size > max_size:
        raise InvalidRequestError(
            f"frame size {size} is larger than the limit of {max_size} bytes (socket.request.max.bytes)", position=0
        )
    return size


def _view(frame: bytes | bytearray | memoryview) -> memoryview:
    try:
        view = memoryview(frame)
    except TypeError:
        raise InvalidRequestError(f"a frame must be bytes-like, not {type(frame).__name__}") from None
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """The header and body of a request frame (the bytes after the size prefix).

    UnsupportedVersionError for an undeclared API key or version (with the header's
    correlation id); InvalidRequestError, with the byte position, for anything malformed.
    Bytes after the body are ignored, as Kafka does."""
    b = memoryview(frame) if type(frame) is bytearray else _view(frame)  # a received frame: no checks
    end = len(b)
    if end < 8:
        raise primitives.short(0, 8, end)
    api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(b)
    entry = _request_decoders.get((api_key, api_version))
    if entry is None:
        entry = _request_decoder(api_key, api_version, correlation_id)
    decode, header_version, name = entry
    p, client_id = 8, None
    if header_version >= 1:
        if end < 10:
            raise primitives.short(8, 2, end)
        n = _CLIENT_ID_LENGTH.unpack_from(b, 8)[0]
        p = 10
        if n >= 0:
            if n > end - p:
                raise primitives.short(p, n, end)
            client_id = primitives.utf8(b[p : p + n])
            p += n
        elif n != -1:
            raise primitives.bad_count(8, n, end - p)
        if header_version == 2:
            if p < end and b[p] == 0:  # no tagged fields, as nearly always
                p += 1
            else:
                p = _skip_tagged_fields(b, p, end)
    try:
        body, _ = decode(b, p, end)
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as exc:  # a gap in the checks
        raise InvalidRequestError(f"malformed {name} request: {exc}") from exc
    header = _tuple_new(RequestHeader, (_API_KEYS[api_key], api_version, correlation_id, client_id))
    return _tuple_new(Request, (header, body, end))


_request_decoders: dict[tuple[int, int], tuple[Decoder, int, str]] = {}


def _request_decoder(api_key: int, api_version: int, correlation_id: int) -> tuple[Decoder, int, str]:
    decode = _codec(api_key, api_version, _DECODE_REQUEST, correlation_id)
    api = SCHEMAS[api_key]
    entry = (decode, api.request_header_version(api_version), f"{api.key.name} v{api_version}")
    _request_decoders[(api_key, api_version)] = entry
    return entry


def _skip_tagged_fields(b: memoryview, p: int, end: int) -> int:
    count, p = primitives.read_uvarint(b, p, end)
    if count > end - p:
        raise primitives.bad_count(p, count, end - p)
    for _ in range(count):
        _, p = primitives.read_uvarint(b, p, end)
        size, p = primitives.read_uvarint(b, p, end)
        if size > end - p:
            raise primitives.short(p, size, end)
        p += size
    return p


def _encode(encode: Encoder, head: bytearray, body: Any, api_key: int, api_version: int, side: str) -> list[Any]:
    """The frame's parts, its size written into the prefix that ``head`` (a fresh buffer) begins with."""
    parts: list[Any] = []
    try:
        o = encode(body, head, parts)
    except SeglogError:
        raise
    except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise SeglogError(f"cannot encode {SCHEMAS[api_key].key.name} v{api_version} {side}: {exc}") from exc
    if not parts:  # all in one buffer, as any response without large records
        _SIZE.pack_into(o, 0, len(o) - 4)
        return [o]
    if o:
        parts.append(o)
    size = sum(len(p) if isinstance(p, bytes | bytearray) else primitives.records_size(p) for p in parts) - 4
    _SIZE.pack_into(parts[0], 0, size)
    return parts


# by (API key, version): the encoder, and the frame's first bytes: the size prefix (written
# last) and the response header with correlation id 0
_response_encoders: dict[tuple[int, int], tuple[Encoder, bytes]] = {}


def encode_response(api_key: int, api_version: int, correlation_id: int, body: Message) -> list[Any]:
    """The whole response frame, size prefix included, as parts to write in order: bytearrays
    and the records values too large to copy (bytes-like, or objects with an int ``size``,
    such as storage's FileSlice, for the broker to sendfile)."""
    encode, first = _response_encoders.get((api_key, api_version)) or _response_encoder(api_key, api_version)
    head = bytearray(first)
    _SIZE.pack_into(head, 4, correlation_id)
    return _encode(encode, head, body, api_key, api_version, "response")


def _response_encoder(api_key: int, api_version: int) -> tuple[Encoder, bytes]:
    encode = _codec(api_key, api_version, _ENCODE_RESPONSE)
    header = b"\x00" if SCHEMAS[api_key].response_header_version(api_version) == 1 else b""
    entry = _response_encoders[(api_key, api_version)] = (encode, bytes(8) + header)
    return entry


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Message,
) -> list[Any]:
    """The whole request frame, size prefix included, as parts to write in order."""
    encode: Encoder = _codecs.get((api_key, api_version, _ENCODE_REQUEST)) or _codec(
        api_key, api_version, _ENCODE_REQUEST
    )
    api = SCHEMAS[api_key]
    header_version = api.request_header_version(api_version)
    head = _SIZE.pack(0) + _REQUEST_HEADER.pack(api_key, api_version, correlation_id)
    if header_version >= 1:
        if client_id is None:
            head += b"\xff\xff"
        else:
            raw = client_id.encode()
            if len(raw) > 0x7FFF:
                raise SeglogError(f"client id of {len(raw)} bytes: at most 32767 fit a request header")
            head += _CLIENT_ID_LENGTH.pack(len(raw)) + raw
    if header_version >= 2:
        head += b"\x00"
    return _encode(encode, bytearray(head), body, api_key, api_version, "request")


def decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> Any:
    """The body of a response frame (the bytes after the size prefix: correlation id first);
    InvalidResponseError, with the byte position, for anything malformed: the peer's bytes are at
    fault, not a request (the decoders' primitives raise InvalidRequestError whichever way they read)."""
    try:
        return _decode_response(api_key, api_version, frame)
    except InvalidRequestError as exc:
        what = f"{SCHEMAS[api_key].key.name} v{api_version}"
        raise InvalidResponseError(f"malformed {what} response: {exc.message}", position=exc.position) from exc


def _decode_response(api_key: int, api_version: int, frame: bytes | bytearray | memoryview) -> Any:
    decode: Decoder = _codecs.get((api_key, api_version, _DECODE_RESPONSE)) or _codec(
        api_key, api_version, _DECODE_RESPONSE
    )
    api = SCHEMAS[api_key]
    b = _view(frame)
    end = len(b)
    if end < 4:
        raise primitives.short(0, 4, end)
    p = 4
    if api.response_header_version(api_version) == 1:
        p = _skip_tagged_fields(b, p, end)
    try:
        body, _ = decode(b, p, end)
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as exc:
        raise InvalidResponseError(f"malformed {api.key.name} v{api_version} response: {exc}") from exc
    return body
