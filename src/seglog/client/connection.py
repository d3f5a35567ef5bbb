"""One connection to a broker, with its I/O: ``protocol.ClientConnection`` over a socket.

Two shapes, for the two kinds of callers:

- ``BlockingConnection``: a blocking socket, a request at a time (the command-line tools, the
  controller's sender threads, a stopping broker's ControlledShutdown);
- ``AsyncConnection``: the event loop's, a request at a time, connecting on first use and
  again after a failure (a broker's replica fetchers, its AlterPartition and transaction
  marker channels).

Both learn the broker's versions with ApiVersions as they connect (over TLS and then
authenticated with SASL when their ``ClientSecurity`` says so: SaslHandshake v1 and
SaslAuthenticate, as Kafka's clients), and send each request at
the highest version both sides speak unless told otherwise. What the protocol refuses (a
response that does not decode, another correlation id) is InvalidResponseError; a broker
that cannot be reached, closes the connection or does not answer in time ("no answer within N s") is
BrokerNotAvailableError, naming its address. Either way the connection is closed after.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Generator
from typing import Any

from ..errors import (
    BrokerNotAvailableError,
    InvalidResponseError,
    SaslAuthenticationError,
    SeglogError,
    UnsupportedVersionError,
    error_for,
)
from ..protocol import CLOSED, NEED_DATA, ApiKey, ClientConnection, Response
from ..protocol.connection import DEFAULT_MAX_RESPONSE, RECEIVE_CHUNK
from ..protocol.message_data import SaslAuthenticateRequestData, SaslHandshakeRequestData
from ..security.sasl import SaslError
from .security import PLAINTEXT, ClientSecurity


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``) as (host, port); BrokerNotAvailableError when it is not one."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise BrokerNotAvailableError(f"{address!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def connect(
    bootstrap: str,
    *,
    client_id: str = "seglog",
    timeout: float = 30.0,
    source_host: str | None = None,
    security: ClientSecurity = PLAINTEXT,
) -> BlockingConnection:
    """A blocking connection to the first broker of a ``--bootstrap-server`` list (``h:p,h:p``)."""
    first = bootstrap.split(",")[0]
    host, port = parse_address(first)
    return BlockingConnection(host, port, client_id, timeout=timeout, source_host=source_host, security=security)


# a request of the SASL exchange: (API, body, version or None for the highest both speak)
_Step = tuple[ApiKey, Any, int | None]


def _sasl_exchange(security: ClientSecurity, versions: ClientConnection) -> Generator[_Step, Any, None]:
    """The requests that authenticate a connection, each sent by the caller, who sends its
    answer's body back in; SaslAuthenticationError (or the broker's error) when refused."""
    if versions.version_for(ApiKey.SASL_HANDSHAKE) < 1:  # v0 sends bare tokens: Kafka 0.10's, not spoken here
        raise UnsupportedVersionError(
            "the broker speaks SaslHandshake v0 only (Kafka before 1.0)", api_key=ApiKey.SASL_HANDSHAKE, api_version=0
        )
    handshake = yield ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism=security.mechanism), 1
    if handshake.error_code:
        offered = ", ".join(handshake.mechanisms) or "none"
        raise error_for(handshake.error_code, f"the broker offers SASL mechanisms {offered}", security.mechanism)
    client = security.sasl_client()
    token: bytes | None = client.first_token()
    while token is not None:
        answer = yield ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequestData(auth_bytes=token), None
        if answer.error_code:
            raise error_for(answer.error_code, answer.error_message)
        try:
            token = client.evaluate(answer.auth_bytes)
        except SaslError as e:  # the broker's answer did not hold (a server signature not its own)
            raise SaslAuthenticationError(f"{security.mechanism}: {e}") from None


def _bytes(parts: list[Any]) -> list[bytes | bytearray | memoryview]:
    # a request's parts are bytes-like (records may be memoryviews of the caller's buffers)
    return [p if isinstance(p, bytes | bytearray | memoryview) else memoryview(p) for p in parts]


class BlockingConnection:
    """A blocking connection to one broker: each ``request`` sends and waits for its answer."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str,
        *,
        timeout: float = 30.0,
        source_host: str | None = None,
        max_response_size: int = DEFAULT_MAX_RESPONSE,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.address = f"{host}:{port}"
        self._timeout = timeout
        self._protocol = ClientConnection(client_id, max_response_size)
        self._closed = False
        try:
            source = (source_host, 0) if source_host is not None else None  # a test cuts others, not this one
            self._sock = socket.create_connection((host, port), timeout=timeout, source_address=source)
        except OSError as e:
            raise BrokerNotAvailableError(f"cannot connect to {self.address}: {e.strerror or e}") from None
        if security.ssl_context is not None:
            self._sock = _wrap(security.ssl_context, self._sock, host, self.address)
        try:
            self._send(self._protocol.api_versions_request()[1])
            versions = self._receive()
            if self._protocol.versions is None:  # the fallback answer at v0: ask again at a version it serves
                self._send(self._protocol.api_versions_request(_fallback(versions.body))[1])
                versions = self._receive()
            if self._protocol.versions is None:
                raise SeglogError(f"{self.address} refused ApiVersions (error {versions.body.error_code})")
            if security.sasl:
                self._authenticate(security)
        except BaseException:
            self._sock.close()
            raise

    def _authenticate(self, security: ClientSecurity) -> None:
        steps = _sasl_exchange(security, self._protocol)
        try:
            step = next(steps)
            while True:
                step = steps.send(self.request(*step))
        except StopIteration:
            return

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        """The broker's version ranges, by API key."""
        assert self._protocol.versions is not None
        return self._protocol.versions

    def version_for(self, api_key: ApiKey, highest: int | None = None) -> int:
        """The highest version of ``api_key`` both sides speak (at most ``highest``)."""
        return self._protocol.version_for(api_key, highest)

    def request(self, api_key: ApiKey, body: Any, version: int | None = None) -> Any:
        """Send ``body`` (at ``version``, else the highest both speak) and return the answer's body."""
        return self.call(api_key, body, version).body

    def call(self, api_key: ApiKey, body: Any, version: int | None = None) -> Response:
        """``request``, with the version and correlation id of the answer."""
        self._check_open()
        self._send(self._protocol.send_request(api_key, body, version)[1])
        return self._receive()

    def send_only(self, api_key: ApiKey, body: Any, version: int | None = None) -> None:
        """A request the broker does not answer (Produce with acks=0)."""
        self._check_open()
        self._send(self._protocol.send_request(api_key, body, version, expects_response=False)[1])

    def _check_open(self) -> None:
        """A request on a connection closed before (the broker's close met by an earlier request, or
        ours) is BrokerNotAvailableError, as the close was: a caller that reconnects on it then
        reconnects on this one too (the protocol would refuse it as its caller's mistake)."""
        if self._closed:
            raise BrokerNotAvailableError(f"the connection to {self.address} was closed")

    def _send(self, parts: list[Any]) -> None:
        try:
            self._sock.sendall(b"".join(_bytes(parts)))
        except OSError as e:
            self.close()
            raise BrokerNotAvailableError(f"lost the connection to {self.address}: {e.strerror or e}") from None

    def _receive(self) -> Response:
        protocol = self._protocol
        try:
            while True:
                event = protocol.next_event()
                if isinstance(event, Response):
                    return event
                if event is CLOSED:
                    self.close()
                    raise BrokerNotAvailableError(f"{self.address} closed the connection")
                view = protocol.frame_buffer()
                if view is None:
                    protocol.receive_data(self._sock.recv(RECEIVE_CHUNK))
                else:
                    n = self._sock.recv_into(view)
                    if n:
                        protocol.frame_received(n)
                    else:
                        protocol.receive_data(b"")
        except TimeoutError:  # the socket's timeout (an OSError too)
            self.close()
            raise BrokerNotAvailableError(f"{self.address}: no answer within {self._timeout:g} s") from None
        except OSError as e:
            self.close()
            raise BrokerNotAvailableError(f"lost the connection to {self.address}: {e.strerror or e}") from None
        except InvalidResponseError as e:
            self.close()
            raise InvalidResponseError(f"{self.address}: {e.message}", position=e.position) from None

    def close(self) -> None:
        self._closed = True
        self._sock.close()

    def __enter__(self) -> BlockingConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncConnection:
    """A connection to one broker on the event loop: one request at a time, each answered within
    ``timeout_s``. It connects on first use; any failure closes it, and the next request connects
    again. A response the protocol refuses raises InvalidResponseError (the peer's fault, not the
    request's); anything else (unreachable, closed, no answer in time, no version in common)
    raises BrokerNotAvailableError. Both name the broker's address."""

    def __init__(
        self, host: str, port: int, client_id: str, timeout_s: float, security: ClientSecurity = PLAINTEXT
    ) -> None:
        self.host = host
        self.port = port
        self.client_id = client_id
        self.timeout_s = timeout_s
        self.security = security
        self._protocol: ClientConnection | None = None
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AsyncConnection({self.host}:{self.port})"

    async def request(self, api_key: ApiKey, body: Any, highest: int | None = None) -> Response:
        """Send ``body`` at the highest version both sides speak (at most ``highest``) and
        return the answer (its ``api_version`` is the version used)."""
        return await self.call(api_key, lambda version: body, highest)

    async def call(self, api_key: ApiKey, make_body: Any, highest: int | None = None) -> Response:
        """Like ``request``, for a body that depends on the version: ``make_body(version)``."""
        async with self._lock:
            try:
                if self._protocol is None:
                    await asyncio.wait_for(self._connect(), self.timeout_s)
                assert self._protocol is not None
                version = self._protocol.version_for(api_key, highest)
                return await asyncio.wait_for(self._call(api_key, make_body(version), version), self.timeout_s)
            except InvalidResponseError as e:
                self.close()
                raise InvalidResponseError(
                    f"{api_key.name} to {self.host}:{self.port}: {e.message}", position=e.position
                ) from None
            except TimeoutError:
                self.close()
                raise BrokerNotAvailableError(
                    f"request {api_key.name} to {self.host}:{self.port} failed: no answer within {self.timeout_s:g} s"
                ) from None
            except (OSError, asyncio.IncompleteReadError, SeglogError) as e:
                self.close()
                raise BrokerNotAvailableError(
                    f"request {api_key.name} to {self.host}:{self.port} failed: {e}"
                ) from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = self._protocol = None

    async def _connect(self) -> None:
        context = self.security.ssl_context
        if context is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        else:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, ssl=context, server_hostname=self.host
            )
        self._protocol = ClientConnection(self.client_id)
        answer = await self._exchange(self._protocol.api_versions_request()[1])
        if self._protocol.versions is None:  # the fallback answer at v0: ask again at a version it serves
            answer = await self._exchange(self._protocol.api_versions_request(_fallback(answer.body))[1])
        if self._protocol.versions is None:
            raise BrokerNotAvailableError(
                f"{self.host}:{self.port} refused ApiVersions (error {answer.body.error_code})"
            )
        if self.security.sasl:
            steps = _sasl_exchange(self.security, self._protocol)
            try:
                step = next(steps)
                while True:
                    key, body, version = step
                    version = self._protocol.version_for(key) if version is None else version
                    step = steps.send((await self._call(key, body, version)).body)
            except StopIteration:
                pass

    async def _call(self, api_key: ApiKey, body: Any, version: int) -> Response:
        assert self._protocol is not None
        return await self._exchange(self._protocol.send_request(api_key, body, version)[1])

    async def _exchange(self, parts: list[Any]) -> Response:
        assert self._protocol is not None and self._reader is not None and self._writer is not None
        self._writer.writelines(_bytes(parts))
        await self._writer.drain()
        protocol = self._protocol
        while True:
            event = protocol.next_event()
            if isinstance(event, Response):
                return event
            if event is CLOSED:
                raise BrokerNotAvailableError(f"{self.host}:{self.port} closed the connection")
            assert event is NEED_DATA
            protocol.receive_data(await self._reader.read(RECEIVE_CHUNK))


def _wrap(context: ssl.SSLContext, sock: socket.socket, host: str, address: str) -> ssl.SSLSocket:
    """``sock`` with TLS on, its handshake done; BrokerNotAvailableError naming why when it fails."""
    try:
        return context.wrap_socket(sock, server_hostname=host)
    except (ssl.SSLError, ssl.CertificateError, OSError) as e:
        sock.close()
        reason = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
        raise BrokerNotAvailableError(f"TLS with {address} failed: {reason}") from None


def _fallback(body: Any) -> int:
    """The ApiVersions version to ask again at, from a broker's v0 refusal: the highest it serves."""
    found = next((k for k in body.api_keys if k.api_key == ApiKey.API_VERSIONS), None)
    if found is None:
        raise SeglogError("the broker refused ApiVersions and serves no version of it")
    return int(found.max_version)
