"""One Kafka connection, sans-IO: bytes in, typed events out, and bytes to send (h11's shape).

Everything about a connection that is protocol rather than I/O is written here once, for
both sides: the size-prefixed framing and its limit, request and response headers by
version, correlation ids, responses in request order, and version negotiation
(ApiVersions). The broker's socket server runs a ``ServerConnection`` per client; every
client of seglog (the inter-broker channels, the controller's channel, the tools, Spark)
runs a ``ClientConnection`` per broker (``seglog.client`` does the I/O around it).

    a frame on the wire   size int32, then ``size`` bytes: a header (header.py), a body

Receiving is the same on both sides: bytes go in with ``receive_data`` (or straight into
the frame being received: ``frame_buffer`` / ``frame_received``, one copy from the kernel
for a large frame), whole frames come out decoded from ``next_event``. A size prefix is
checked against the limit before any byte of its frame is kept, and a frame's buffer grows
only as its bytes arrive, so a prefix that promises a large frame costs only what is
really sent (at most twice over).

The states, per connection (every side)::

    state     event                                        next state
    OPEN      bytes of frames (next_event: one per frame)  OPEN
    OPEN      end of stream (receive_data(b""))            CLOSED    next_event: CLOSED
    OPEN      a frame that breaks the protocol             BROKEN    the error is raised
    BROKEN    anything                                     BROKEN    LocalProtocolError
    CLOSED    anything but next_event                      CLOSED    LocalProtocolError

A server answers requests in the order they came (Kafka's guarantee per connection):
``send_response`` refuses any request but the oldest unanswered one, and a request the
broker leaves unanswered (acks=0, a request Kafka never answers) is let go with
``forget``. A client matches each response to its oldest request in flight by correlation
id; a response that does not match is the peer's error (``InvalidResponseError``), as is a
response larger than ``max_frame_size`` or one that does not decode.

Version negotiation: a server serves the versions its ``served`` table gives (cut to what
this package encodes) and answers ApiVersions at a version it does not know at v0, with
UNSUPPORTED_VERSION and its ranges, so that any client can read it (KIP-511); a client asks
ApiVersions at its highest version, reads such a v0 answer, and then sends each request at
the highest version both sides speak (``version_for``).
"""

from __future__ import annotations

import collections
import enum
import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from seglog.errors import (
    ErrorCode,
    InvalidRequestError,
    InvalidResponseError,
    LocalProtocolError,
    SeglogError,
    UnsupportedVersionError,
)
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
from seglog.protocol.message_data import ApiVersionsRequestData, ApiVersionsResponseData

_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")
_ERROR_CODE = struct.Struct(">h")
# bytes received at once between frames, and the first size of a frame's own buffer
RECEIVE_CHUNK = 64 * 1024
# a frame's first room when it grows as it comes: a produce request of up to this size is received
# into one buffer (Kafka allocates every request whole from its size prefix); a larger one doubles on
FIRST_FRAME_ROOM = 1024 * 1024
# ApiVersions' versions: what a client asks first, and what every broker reads (KIP-511)
API_VERSIONS_VERSION = 3
API_VERSIONS_FALLBACK = 0
DEFAULT_MAX_RESPONSE = 1 << 30
# the API keys tested on every request, as globals: an attribute of the enum class costs more
_API_VERSIONS = ApiKey.API_VERSIONS
_PRODUCE = ApiKey.PRODUCE


class State(enum.Enum):
    OPEN = "open"
    BROKEN = "broken"  # a frame broke the protocol: nothing more is read or sent
    CLOSED = "closed"  # the peer ended the stream


# enum members as module constants, asked on every request: on Python 3.11 an Enum class's
# attribute is a call through EnumType.__getattr__'s hook (~340 ns, a global ~25)
_OPEN, _BROKEN, _CLOSED = State.OPEN, State.BROKEN, State.CLOSED


class _Need(enum.Enum):
    NEED_DATA = "need data"
    CLOSED = "closed"


# next_event's answers when no whole frame is there: more bytes are needed, or the peer has
# ended the stream (and every frame before the end was handed out)
NEED_DATA = _Need.NEED_DATA
CLOSED = _Need.CLOSED


class Response(NamedTuple):
    """A response, decoded at the version of the request it answers."""

    correlation_id: int
    api_key: ApiKey
    api_version: int
    body: Any


class _Framing:
    """The framing both sides share: size prefixes checked, frames cut out of the bytes."""

    # a frame's buffer made whole from its size prefix (True) or grown as its bytes come (False)
    whole_frames = False

    def __init__(self, max_frame_size: int, peer_error: type[SeglogError]) -> None:
        self.state = _OPEN
        self.max_frame_size = max_frame_size
        self._peer_error = peer_error
        self._buffer = bytearray()  # bytes received past the last whole frame
        self._frames: collections.deque[bytearray] = collections.deque()
        self._frame: bytearray | None = None  # a frame being received straight into its buffer
        self._got = 0  # how much of ``_frame`` has come
        self._size = 0  # ``_frame``'s size, from its prefix
        self._ended = False

    # --- bytes in ----------------------------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes the peer sent; ``b""`` is the end of the stream. Whole frames are kept for
        ``next_event``; a frame larger than what came is then received into its own buffer
        (``frame_buffer``)."""
        if self.state is not _OPEN or self._ended:
            self._check_open("receive data")
        if not data:
            self._ended = True
            return
        if self._frame is not None:
            self._receive_into_frame(data)
            return
        buffer = self._buffer
        buffer += data
        frames, limit = self._frames, self.max_frame_size
        while len(buffer) >= 4:
            size = _SIZE.unpack_from(buffer)[0]
            if not 0 <= size <= limit:
                self._frame_size(buffer)  # raises the error that names the bound broken
            if len(buffer) - 4 < size:
                # the rest of the frame is received straight into it: one copy from the kernel
                del buffer[:4]
                self._frame, self._buffer, self._got, self._size = buffer, bytearray(), len(buffer), size
                self._grow_frame()
                return
            frames.append(buffer[4 : 4 + size])
            del buffer[: 4 + size]

    def _receive_into_frame(self, data: bytes | bytearray | memoryview) -> None:
        view = self.frame_buffer()
        assert view is not None
        n = min(len(view), len(data))
        view[:n] = memoryview(data)[:n]
        self.frame_received(n)
        if n < len(data):
            self.receive_data(memoryview(data)[n:])

    def frame_buffer(self) -> memoryview | None:
        """Where the next bytes of a frame under way go (``recv_into`` it, then
        ``frame_received``); None between frames (then ``receive_data``)."""
        if self._frame is None:
            return None
        return memoryview(self._frame)[self._got :]

    def frame_received(self, n: int) -> None:
        """``n`` bytes were written into ``frame_buffer()``."""
        frame = self._frame
        if frame is None or not 0 < n <= len(frame) - self._got:
            raise LocalProtocolError(f"{n} bytes received into a frame buffer that has room for none or fewer")
        self._got += n
        if self._got < self._size:
            self._grow_frame()
            return
        self._frame = None
        self._frames.append(frame)

    def _grow_frame(self) -> None:
        """Room for more of the frame: it grows as bytes arrive, doubling from FIRST_FRAME_ROOM,
        never past its size (or, ``whole_frames``, is made its size at once). A larger buffer takes
        the bytes so far (as a reallocation would copy them): the caller may still hold a view of
        the old one."""
        frame, got = self._frame, self._got
        assert frame is not None
        if got == len(frame):
            grown = bytearray(self._size if self.whole_frames else min(self._size, max(FIRST_FRAME_ROOM, 2 * got)))
            grown[:got] = frame
            self._frame = grown

    def _frame_size(self, buffer: bytearray) -> int:
        try:
            return frame_size(bytes(buffer[:4]), self.max_frame_size)
        except InvalidRequestError as e:
            raise self._broken(self._peer_error(e.message, position=0)) from None

    # --- frames out ----------------------------------------------------------------------------------

    def _next_frame(self) -> bytearray | _Need:
        if self._frames and self.state is _OPEN:
            return self._frames.popleft()
        return self._no_frame()

    def _no_frame(self) -> _Need:
        """next_event's answer when it has no frame to decode (or must not decode one)."""
        if self.state is _BROKEN:
            raise LocalProtocolError("this connection broke the protocol: it can only be closed")
        if self._ended:
            self.state = _CLOSED
            return CLOSED
        return NEED_DATA

    def _broken(self, error: SeglogError) -> SeglogError:
        self.state = _BROKEN
        return error

    def _check_open(self, what: str) -> None:
        if self.state is not _OPEN or self._ended:
            raise LocalProtocolError(f"cannot {what} on a connection that is {self.state.value}")


class ServerConnection(_Framing):
    """The broker's side of one client's connection."""

    def __init__(self, served: Mapping[int, tuple[int, int]], max_frame_size: int) -> None:
        super().__init__(max_frame_size, InvalidRequestError)
        self.served = served
        self._unanswered: collections.deque[RequestHeader] = collections.deque()

    def next_event(self) -> Request | _Need:
        """The next request, decoded; NEED_DATA, or CLOSED once the peer ended the stream.

        A request the server does not serve (an unknown API key, a version outside ``served``)
        raises UnsupportedVersionError, the caller then closes the connection as Kafka does;
        but ApiVersions at any version is handed out (with an empty body when its version is
        unknown), to be answered at v0. Anything malformed raises InvalidRequestError with the
        byte position; both leave the connection BROKEN."""
        if not self._frames or self.state is not _OPEN:
            # no frame (as after each request: the caller asks until this), without a call
            return NEED_DATA if self.state is _OPEN and not self._ended else self._no_frame()
        frame = self._frames.popleft()
        if len(frame) >= 8:  # the header's key and version decide before the body is decoded
            api_key, version, correlation_id = _REQUEST_HEADER.unpack_from(frame)
            if api_key != _API_VERSIONS and not self._serves(api_key, version):
                raise self._broken(
                    UnsupportedVersionError(
                        f"{_api_name(api_key)} v{version} is not served by this broker",
                        api_key=api_key,
                        api_version=version,
                        correlation_id=correlation_id,
                    )
                )
        try:
            request = decode_request(frame)
        except UnsupportedVersionError as e:
            if e.api_key != ApiKey.API_VERSIONS or e.correlation_id is None:
                raise self._broken(e) from None
            # a version newer than this package knows: answered at v0 (its header is all we read)
            header = RequestHeader(ApiKey.API_VERSIONS, e.api_version, e.correlation_id, None)
            request = Request(header, ApiVersionsRequestData(), len(frame))
        except SeglogError as e:
            raise self._broken(e) from None
        if _expects_response(request):
            self._unanswered.append(request.header)
        return request

    def next_token(self) -> bytearray | _Need:
        """The next frame as it came, not decoded: a SASL token of the v0 exchange (after
        SaslHandshake v0 the client sends its tokens size-prefixed, without a request header);
        NEED_DATA, or CLOSED once the peer ended the stream."""
        return self._next_frame()

    def send_token(self, token: bytes) -> bytes:
        """A SASL token of the v0 exchange as its frame: size-prefixed, no response header."""
        self._check_open("send a SASL token")
        return _SIZE.pack(len(token)) + token

    def send_response(self, request: Request, body: Any) -> list[Any]:
        """The response frame to ``request`` as parts to write in order (bytes, and records
        too large to copy: a FileSlice goes by sendfile). Requests are answered in the order
        they came; ApiVersions at a version this server does not know is answered at v0."""
        api_key, version, correlation_id, _ = header = request.header
        self._take(header)
        if api_key == _API_VERSIONS and not self._serves(api_key, version):
            version = API_VERSIONS_FALLBACK
        return encode_response(api_key, version, correlation_id, body)

    def forget(self, request: Request) -> None:
        """``request`` gets no response (Kafka leaves some requests unanswered): the next one
        may be answered. A request that expects none (an acks=0 produce) needs nothing."""
        if _expects_response(request):
            self._take(request.header)

    def api_versions_body(self, request: Request) -> Any:
        """ApiVersions' answer: the served ranges, and UNSUPPORTED_VERSION when the request's
        version is not one of them."""
        served = self._serves(ApiKey.API_VERSIONS, request.header.api_version)
        return ApiVersionsResponseData(
            error_code=ErrorCode.NONE if served else ErrorCode.UNSUPPORTED_VERSION,
            api_keys=[
                ApiVersionsResponseData.ApiVersion(api_key=int(key), min_version=low, max_version=high)
                for key, (low, high) in sorted(self.served.items())
            ],
        )

    @property
    def unanswered(self) -> int:
        """Requests read and not yet answered (or forgotten)."""
        return len(self._unanswered)

    def _serves(self, api_key: int, version: int) -> bool:
        served = self.served.get(api_key)
        return served is not None and served[0] <= version <= served[1]

    def _take(self, header: RequestHeader) -> None:
        if self.state is _BROKEN:
            raise LocalProtocolError("this connection broke the protocol: it can only be closed")
        if not self._unanswered or self._unanswered[0] is not header:
            raise LocalProtocolError(
                f"{header.api_key.name} (correlation id {header.correlation_id}) is not the oldest unanswered request"
            )
        self._unanswered.popleft()


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"API key {api_key}"


def _expects_response(request: Request) -> bool:
    # Produce with acks=0 is the one request no broker answers
    return request.header.api_key != _PRODUCE or request.body.acks != 0


class _InFlight(NamedTuple):
    correlation_id: int
    api_key: ApiKey
    api_version: int


class ClientConnection(_Framing):
    """A client's side of one connection to a broker."""

    # a response was asked for, its size bounded by max_frame_size: one buffer, no regrowth
    # (a large fetch's copies and page faults halve); a server grows a client's frame as it comes,
    # so that a claimed size costs no memory before its bytes arrive
    whole_frames = True

    def __init__(self, client_id: str | None, max_frame_size: int = DEFAULT_MAX_RESPONSE) -> None:
        super().__init__(max_frame_size, InvalidResponseError)
        self.client_id = client_id
        # the broker's ranges, by API key, once its ApiVersions answer came (``negotiated``)
        self.versions: dict[int, tuple[int, int]] | None = None
        self._correlation = 0
        self._in_flight: collections.deque[_InFlight] = collections.deque()

    def send_request(
        self, api_key: ApiKey, body: Any, version: int | None = None, *, expects_response: bool = True
    ) -> tuple[int, list[Any]]:
        """(correlation id, the request frame as parts to write in order). ``version``: the
        highest both sides speak when not given (ApiVersions must have been answered first)."""
        self._check_open(f"send {api_key.name}")
        if version is None:
            version = self.version_for(api_key)
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        parts = encode_request(api_key, version, self._correlation, self.client_id, body)
        if expects_response:
            self._in_flight.append(_InFlight(self._correlation, api_key, version))
        return self._correlation, parts

    def api_versions_request(self, version: int = API_VERSIONS_VERSION) -> tuple[int, list[Any]]:
        """The ApiVersions request that opens a connection."""
        return self.send_request(
            ApiKey.API_VERSIONS,
            ApiVersionsRequestData(client_software_name="seglog", client_software_version="1"),
            version,
        )

    def next_event(self) -> Response | _Need:
        """The next response, decoded at the version of the request it answers; NEED_DATA, or
        CLOSED once the peer ended the stream. An ApiVersions answer is taken in
        (``versions``) on its way out."""
        frame = self._next_frame()
        if isinstance(frame, _Need):
            return frame
        if not self._in_flight:
            raise self._broken(InvalidResponseError("a response came with no request in flight", position=0))
        expected = self._in_flight.popleft()
        if len(frame) < 4 or _SIZE.unpack_from(frame)[0] != expected.correlation_id:
            got = _SIZE.unpack_from(frame)[0] if len(frame) >= 4 else None
            raise self._broken(
                InvalidResponseError(
                    f"the response to {expected.api_key.name} (correlation id {expected.correlation_id}) "
                    f"came with correlation id {got}",
                    position=0,
                )
            )
        version = expected.api_version
        if expected.api_key == _API_VERSIONS and _unsupported_api_versions(frame):
            version = API_VERSIONS_FALLBACK  # answered at v0, whatever was asked (KIP-511)
        try:
            body = decode_response(expected.api_key, version, frame)
        except SeglogError as e:
            raise self._broken(e) from None
        if expected.api_key == _API_VERSIONS and body.error_code == ErrorCode.NONE:
            self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        return Response(expected.correlation_id, expected.api_key, version, body)

    def version_for(self, api_key: ApiKey, highest: int | None = None) -> int:
        """The highest version of ``api_key`` both this package and the broker speak (at most
        ``highest``); UnsupportedVersionError when there is none."""
        if self.versions is None:
            raise LocalProtocolError(f"no version of {api_key.name} is known before ApiVersions is answered")
        theirs = self.versions.get(int(api_key))
        if theirs is None:
            raise UnsupportedVersionError(f"the broker does not serve {api_key.name}", api_key=api_key, api_version=-1)
        low, high = supported_versions(api_key)
        if highest is not None:
            high = min(high, highest)
        high = min(high, theirs[1])
        if high < max(low, theirs[0]):
            raise UnsupportedVersionError(
                f"no version of {api_key.name} in common with the broker (ours {low}-{high}, "
                f"the broker's {theirs[0]}-{theirs[1]})",
                api_key=api_key,
                api_version=-1,
            )
        return high

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not come."""
        return len(self._in_flight)


def _unsupported_api_versions(frame: bytearray) -> bool:
    """An ApiVersions response whose error is UNSUPPORTED_VERSION: a v0 body, whatever
    version was asked (its header is v0 at every version, so the error code follows the
    correlation id)."""
    return len(frame) >= 6 and _ERROR_CODE.unpack_from(frame, 4)[0] == ErrorCode.UNSUPPORTED_VERSION
