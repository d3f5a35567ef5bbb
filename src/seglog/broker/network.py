"""The broker's socket server: connections, in-order responses, sendfile.

Kafka's ``SocketServer`` in asyncio. What a connection is as a protocol (framing and its
size limit, request headers, the order responses leave in, ApiVersions' ranges) is
``protocol.ServerConnection``'s; this module moves its bytes. Each connection has a
reader and a processor:

    reader:    a callback of the loop while the socket has bytes (``add_reader``): recv
               into the protocol (a frame under way straight into its own buffer) ->
               decoded requests -> answered at once, or queued for the processor
    processor: a task: queued request -> handler -> response body -> the protocol's
               response parts -> socket (bytes with send, storage FileSlices with
               os.sendfile), one request at a time

A request the reader receives while nothing is queued or being answered is answered in
the same turn of the loop when its handler needs no wait (the server says which APIs may
try: ``answers_at_once``): the handler's coroutine is stepped once in the callback and,
if it finished, its response is written while the socket takes it. A fetch of the log's
tail is served so without a task switch, a queue or a second turn of the loop (against
the reader task and the processor task each woken in turn before: 36 µs less broker CPU
a fetch). A handler that does wait (an I/O thread, a purgatory) is handed to the
processor, which goes on with the same coroutine (``_resume``), and a response the
socket could not take whole is finished by the processor too; requests that come
meanwhile queue behind them. So responses leave in the order their requests came, as
Kafka guarantees per connection. Both run in one context per connection, so what a
handler set before a wait (the request context) is there after it.

A client that stops reading its socket blocks only its own processor (its sends wait for
the socket), whose queue then fills and stops its reader: no other connection notices. A
frame that breaks the protocol (a size out of bounds, an API or version not served, a
body that does not decode) closes its connection, as Kafka's does.

A request parked in a purgatory (a long-polling fetch) is abandoned when its client
disconnects (``abandoned_on_disconnect``): it would otherwise wait out its
``max_wait_ms`` for nobody.

Sockets are used directly (non-blocking ``send``, ``recv``), not through transports: with
no write buffer of asyncio's own in between, ``os.sendfile`` can follow the bytes before
it directly, with an explicit offset that leaves the segment file's position alone.

A SASL listener's connection has an ``Authenticator`` (sasl.py's): the server asks it about
every request before answering (an unauthenticated client gets nothing but ApiVersions and
the SASL requests). After SaslHandshake v0 the client's SASL tokens come as bare frames
(no request header): the reader hands them to the processor, which answers each with the
authenticator's token, in order with the responses before it. A response the server marks
``close_after_response`` (a failed authentication) is the connection's last.

A TLS listener's connection has a ``Transport`` (tls.py's): it is read through the
transport's SSL socket as a plain one is (once its handshake is done), and written
through the transport, which encrypts what sendfile would have sent. A plaintext
connection has none and goes the paths above unchanged.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import errno
import logging
import os
import socket
import ssl
import time
import types
from collections.abc import Callable, Coroutine, Generator, Iterator, Mapping
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol, TypeVar, cast

from ..errors import BrokerNotAvailableError
from ..protocol import CLOSED, NEED_DATA, Request, ServerConnection
from ..protocol.connection import RECEIVE_CHUNK, State
from .connection_quotas import ConnectionQuotas, ConnectionThrottled, TooManyConnections

log = logging.getLogger(__name__)

_READ_AHEAD = 8  # requests read from one connection ahead of the one being answered
# Bytes followed by a file region smaller than this go with MSG_MORE: they leave in one
# packet with the region's data (a small fetch's response: 14 µs sooner at the client and
# 4 µs less broker CPU, one packet and one wake-up fewer). Before a larger region they go
# at once: the client wakes on them and is ready by the time the data comes (1 MiB fetches
# with MSG_MORE: 88 % of raw sendfile against 114 %, alternated rounds; first byte 150 µs
# after the request against 116).
_MORE_BELOW = 64 * 1024
T = TypeVar("T")


class FileRegion(Protocol):
    """What a response part sent with sendfile looks like (storage's FileSlice)."""

    @property
    def size(self) -> int: ...
    @property
    def position(self) -> int: ...
    @property
    def handle(self) -> Any: ...


class ConnectionClosed(Exception):
    pass


class Transport(Protocol):
    """What a connection of a TLS listener reads and writes through (tls.py's TlsTransport)."""

    @property
    def sock(self) -> socket.socket: ...  # its socket, read as a plain one (TLS inside)

    async def handshake(self, peer: str) -> Any: ...  # the client's principal; None: failed, close
    def pending(self) -> int: ...  # bytes decrypted that the socket will not signal
    def write(self, parts: list[Any]) -> list[Any]: ...  # as _write: what is left to write


class Authenticator(Protocol):
    """What a connection of a SASL listener authenticates through (sasl.py's SaslAuthenticator)."""

    @property
    def raw_tokens(self) -> bool: ...  # the next frames are bare SASL tokens (after SaslHandshake v0)

    def takes(self, request: Request) -> bool: ...  # the request is the authenticator's to answer (or refuse)
    async def handle(self, request: Request, conn: Connection) -> Any: ...  # its answer; an error closes

    async def token(self, token: bytes, conn: Connection) -> bytes | None: ...  # the answer; None: close


# what a read of a TLS socket with nothing to read raises (a plain socket's BlockingIOError)
_NOTHING_YET = (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


class Abandonable(Protocol):
    """A wait a request is in that its client's disconnection ends (a purgatory's operation)."""

    def abandon(self, error: BaseException) -> None: ...


# the connection whose requests the running task answers (set by each connection's processor)
_current: ContextVar[Connection | None] = ContextVar("connection", default=None)


@contextlib.contextmanager
def abandoned_on_disconnect(op: Abandonable) -> Iterator[None]:
    """While the block runs, the client of the request being answered disconnecting
    abandons ``op`` with ConnectionClosed, which drops that request unanswered: the wait
    lets go of what it holds at once, not at its deadline. Outside a connection
    (a test calling a handler) nothing watches."""
    conn = _current.get()
    if conn is None:
        yield
        return
    if conn.lost:
        raise ConnectionClosed
    conn.waiting.add(op)
    try:
        yield
    finally:
        conn.waiting.discard(op)


# a request handler: the decoded request -> its response body, or None for no response
Handler = Callable[[Request, "Connection"], Coroutine[Any, Any, Any]]


class Connection:
    def __init__(self, sock: socket.socket, server: SocketServer, ip: str = "") -> None:
        self.ip = ip  # the client's address, as the connection quotas count it
        self.transport = None if server.transport is None else server.transport(sock)
        self.sock = sock if self.transport is None else self.transport.sock
        self.server = server
        self.peer = _peer(self.sock)
        self.principal: Any = None  # who the client authenticated as (a TLS transport's handshake, SASL)
        self.authenticator = None if server.authenticator is None else server.authenticator(self.peer)
        self.close_after_response = False  # the response being sent is the last (a failed authentication)
        self.closed = False
        self.lost = False  # the reader met the end of the stream (or an error): the client is gone
        self.waiting: set[Abandonable] = set()
        self.request_context: Any = None  # the server's: who sent the last request
        # the protocol of the connection (framing, headers, response order, ApiVersions): this
        # class only moves its bytes
        self.protocol = ServerConnection(server.served, server.max_frame_size)
        self._loop = asyncio.get_running_loop()
        self._fd = self.sock.fileno()
        self._jobs: collections.deque[_Job] = collections.deque()  # the processor's, in request order
        self._busy = False  # the processor is on a job: a new request waits its turn
        self._reading = False
        self._wakeup: asyncio.Future[None] | None = None
        self._muted: asyncio.TimerHandle | None = None  # a quota's throttle: nothing read nor answered till then
        self.last_active = time.monotonic()  # bytes in or out (connections.max.idle.ms)
        self.task: asyncio.Task[None] | None = None  # ``run``'s, which an idle expiry cancels
        # one context for the requests of this connection, whoever runs them (the reader's
        # callback or the processor task): the request context a handler sets stays set
        # when its second half runs in the processor
        self._context = contextvars.copy_context()
        self._context.run(_current.set, self)

    async def run(self) -> None:
        if self.transport is not None and not await self._handshake(self.transport):
            return
        processor = self._loop.create_task(self._process(), context=self._context)
        self._resume_reading()
        try:
            # the processor ends at the reader's end-of-stream mark, after the requests read
            # before it (a client that sends acks=0 produces and closes still has them appended),
            # or on a send that fails, when the reader has nothing left to read for
            await processor
        finally:
            self._pause_reading()
            processor.cancel()
            await asyncio.gather(processor, return_exceptions=True)
            for job in self._jobs:  # handlers begun in the reader that the processor never took up
                if isinstance(job, _Started):
                    job.take()[0].close()  # their ``finally`` blocks run now (a purgatory's unwatch)
            self._jobs.clear()
            self.close()

    async def _handshake(self, transport: Transport) -> bool:
        """A TLS connection's handshake; False when it failed and the connection is closed."""
        try:
            self.principal = await transport.handshake(self.peer)
        finally:
            if self.principal is None:  # failed, or the server stopped meanwhile
                self.close()
        return self.principal is not None

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._pause_reading()
            self.sock.close()
            self.server.connection_closed(self)

    # --- reading ------------------------------------------------------------------------------------

    def mute(self, seconds: float) -> None:
        """KIP-219's throttled channel: the client's next requests are neither read nor
        answered for ``seconds`` (the response to the one that broke its quota leaves at once)."""
        if self._muted is not None:
            if self._muted.when() >= self._loop.time() + seconds:
                return
            self._muted.cancel()
        self._pause_reading()
        self._muted = self._loop.call_later(seconds, self._unmute)

    def _unmute(self) -> None:
        self._muted = None
        self._resume_reading()
        self._wake_processor()

    def _resume_reading(self) -> None:
        if not self._reading and not self.lost and not self.closed and self._muted is None:
            self._reading = True
            self._loop.add_reader(self._fd, self._on_readable)
            if self.transport is not None:
                self._read_pending(self.transport)

    def _pause_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def idle(self, now: float) -> float:
        """Seconds without bytes in or out and with nothing under way (no request being handled
        or waiting, not muted by a quota): 0 while anything is."""
        if self._busy or self._jobs or self._muted is not None or self.protocol.unanswered:
            return 0.0
        return now - self.last_active

    def _on_readable(self) -> None:
        """The loop's callback while the socket has bytes: one receive, and each request it
        completes answered at once or handed to the processor."""
        self.last_active = time.monotonic()
        try:
            self._receive()
        except _NOTHING_YET:
            return
        except ConnectionClosed:
            pass
        except OSError as e:
            log.debug("connection from %s: %s", self.peer, e)
        except Exception as e:  # a frame that breaks the protocol (or a fault of ours): closed, as Kafka does
            log.warning("closing the connection from %s: %s", self.peer, e)
        else:
            if self.transport is not None:
                self._read_pending(self.transport)
            return
        self._end_of_stream()

    def _read_pending(self, transport: Transport) -> None:
        """Read on in the loop's next turn while TLS holds decrypted bytes: the socket has
        nothing to say about them."""
        if self._reading and transport.pending():
            self._loop.call_soon(self._on_buffered)

    def _on_buffered(self) -> None:
        if self._reading:
            self._on_readable()

    def _receive(self) -> None:
        """One receive into the protocol: straight into the buffer of a frame under way (one
        copy from the kernel), else a chunk; then every request it completed."""
        protocol = self.protocol
        view = protocol.frame_buffer()
        if view is not None:
            with view:
                n = self.sock.recv_into(view)
            if n:
                protocol.frame_received(n)
            else:
                protocol.receive_data(b"")  # the end of the stream, inside a frame
        else:
            data = self.sock.recv(RECEIVE_CHUNK)
            n = len(data)
            protocol.receive_data(data)  # b"": the end of the stream
        self.server.metrics.bytes_in(n)
        while not self.lost:
            # after SaslHandshake v0 a frame is a bare SASL token, not a request
            raw = self.authenticator is not None and self.authenticator.raw_tokens
            event = protocol.next_token() if raw else protocol.next_event()
            if event is NEED_DATA:
                return
            if event is CLOSED:
                raise ConnectionClosed
            if isinstance(event, Request):
                self._request_received(event)
            else:
                assert isinstance(event, bytearray)
                self._push(_Token(bytes(event)))  # answered by the processor, in order

    def _request_received(self, request: Request) -> None:
        """A whole request: answered here when nothing is ahead of it and its handler needs
        no wait (the loop's turn that received it sends its response: no task woken, no
        queue), else queued for the processor, in order. Reading pauses while _READ_AHEAD
        requests wait."""
        if self._busy or self._jobs or self._muted is not None or not self.server.answers_at_once(request):
            self._push(request)
            if len(self._jobs) >= _READ_AHEAD:
                self._pause_reading()
            return
        coroutine = self.server.handler(request, self)
        try:
            waited = self._context.run(coroutine.send, None)
        except StopIteration as done:
            body = done.value
        except ConnectionClosed:
            self.protocol.forget(request)
            return
        except Exception as e:  # a fault of ours: this connection only
            log.warning("closing the connection from %s: %s", self.peer, e)
            self._end_of_stream()
            return
        else:  # it waits (a long poll, an I/O thread): the processor goes on with it
            self._push(_Started(request, coroutine, waited))
            return
        try:
            parts = self._response(request, body)
        except Exception as e:  # a response that does not encode: a fault of ours, this connection only
            log.warning("closing the connection from %s: %s", self.peer, e)
            self._end_of_stream()
            return
        if parts is None:
            return
        try:
            left = self._write(parts)
        except OSError as e:
            log.debug("connection from %s: %s", self.peer, e)
            self._end_of_stream()
            return
        if left:  # the socket is full: the processor waits for room
            self._push(_Unsent(left, parts))
        else:
            self._sent(parts)

    def _response(self, request: Request, body: Any) -> list[Any] | None:
        """The response frame's parts, encoded by the protocol (None: the request is left
        unanswered, as Kafka leaves an acks=0 produce)."""
        if body is None:
            self.protocol.forget(request)
            return None
        return self.protocol.send_response(request, body)

    def _end_of_stream(self) -> None:
        self._pause_reading()
        self.lost = True
        for op in list(self.waiting):
            op.abandon(ConnectionClosed())
        self._push(None)

    def _push(self, job: _Job) -> None:
        self._jobs.append(job)
        self._wake_processor()

    def _wake_processor(self) -> None:
        wakeup = self._wakeup
        if wakeup is not None and not wakeup.done():
            wakeup.set_result(None)

    # --- answering ----------------------------------------------------------------------------------

    async def _process(self) -> None:
        while True:
            while not self._jobs or self._muted is not None:
                self._wakeup = self._loop.create_future()
                await self._wakeup
            job = self._jobs.popleft()
            if job is None:
                return
            if len(self._jobs) < _READ_AHEAD:
                self._resume_reading()
            self._busy = True
            try:
                if not await self._do(job):
                    return
            finally:
                self._busy = False

    async def _do(self, job: Request | _Started | _Unsent | _Token) -> bool:
        """One job of the processor; False when the connection must close."""
        if self.protocol.state is State.BROKEN:  # a later frame broke the protocol: nothing more is sent
            return False
        if isinstance(job, _Unsent):
            return await self._send(job.left, job.parts)
        if isinstance(job, _Token):
            return await self._answer_token(job.token)
        request = job.request if isinstance(job, _Started) else job
        try:
            if isinstance(job, _Started):
                body = await _resume(*job.take())
            else:
                body = await self.server.handler(job, self)
        except ConnectionClosed:  # a wait abandoned, the client gone: the requests read before go on
            self.protocol.forget(request)
            return True
        except Exception as e:  # a fault of ours: this connection only
            log.warning("closing the connection from %s: %s", self.peer, e)
            return False
        try:
            parts = self._response(request, body)
        except Exception as e:  # a response that does not encode: a fault of ours, this connection only
            log.warning("closing the connection from %s: %s", self.peer, e)
            return False
        return parts is None or await self._send(parts, parts)

    async def _answer_token(self, token: bytes) -> bool:
        """A bare SASL token (the v0 exchange) answered with the authenticator's; False when
        the connection must close (the authentication failed)."""
        assert self.authenticator is not None
        answer = await self.authenticator.token(token, self)
        if answer is None:
            return False
        parts = [self.protocol.send_token(answer)]
        return await self._send(parts, parts)

    async def _send(self, left: list[Any], parts: list[Any]) -> bool:
        """``left`` of the response ``parts`` written, waiting for room in the socket as
        needed; False when the connection must close."""
        try:
            while left:
                left = self._write(left)
                if left:
                    await _writable(self._loop, self._fd)
        except OSError as e:
            log.debug("connection from %s: %s", self.peer, e)
            return False
        self._sent(parts)
        return True

    def _sent(self, parts: list[Any]) -> None:
        self.last_active = time.monotonic()
        # a response of one part is one bytearray (the protocol encodes any other with its records apart)
        self.server.metrics.bytes_out(len(parts[0]) if len(parts) == 1 else sum(_size(p) for p in parts))
        if self.close_after_response:
            self._end_of_stream()

    def _write(self, parts: list[Any]) -> list[Any]:
        """As much of ``parts`` as the socket takes now (bytes with send, storage
        FileSlices with os.sendfile, at an explicit offset that leaves the segment file's
        position alone); what is left, as parts to write once there is room."""
        if self.transport is not None:
            return self.transport.write(parts)
        if len(parts) == 1 and type(parts[0]) is bytearray:  # a response with no file region in it
            left = self._send_bytes(parts, 0)
            return [] if left is None else [left]
        pending: list[Any] = []
        for i, part in enumerate(parts):
            if isinstance(part, bytes | bytearray | memoryview):
                pending.append(part)
                continue
            if pending:
                left = self._send_bytes(pending, socket.MSG_MORE if part.size < _MORE_BELOW else 0)
                if left is not None:
                    return [left, *parts[i:]]
                pending = []
            region = self._sendfile(part)
            if region is not None:
                return [region, *parts[i + 1 :]]
        if pending:
            left = self._send_bytes(pending, 0)
            if left is not None:
                return [left]
        return []

    def _send_bytes(self, pending: list[Any], flags: int) -> memoryview | None:
        data = b"".join(pending) if len(pending) > 1 else pending[0]
        try:
            sent = self.sock.send(data, flags)
        except (BlockingIOError, InterruptedError):
            sent = 0
        return memoryview(data)[sent:] if sent < len(data) else None

    def _sendfile(self, region: FileRegion) -> FileRegion | None:
        out, in_fd = self._fd, region.handle.fd
        position, left = region.position, region.size
        while left > 0:
            try:
                sent = os.sendfile(out, in_fd, position, left)
            except BlockingIOError:
                return _Region(region.handle, position, left)
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            if sent == 0:  # the file is shorter than its slice (truncated meanwhile): the frame cannot be kept
                raise OSError(errno.EIO, "segment file ended inside a fetch response")
            position += sent
            left -= sent
        return None


class _Region(NamedTuple):
    """The rest of a FileSlice that the socket did not take at once."""

    handle: Any
    position: int
    size: int


class _Started:
    """A request whose handler began in the reader's callback and waits on ``waited``."""

    __slots__ = ("coroutine", "request", "waited")

    def __init__(self, request: Request, coroutine: Coroutine[Any, Any, Any], waited: Any) -> None:
        self.request = request
        self.coroutine: Coroutine[Any, Any, Any] | None = coroutine
        self.waited = waited

    def take(self) -> tuple[Coroutine[Any, Any, Any], Any]:
        """The coroutine and its wait, handed over once: the job keeps no reference to the
        future, whose result (a read's FileSlices) must go when the coroutine lets it go."""
        coroutine, waited = self.coroutine, self.waited
        assert coroutine is not None
        self.coroutine = self.waited = None
        return coroutine, waited


class _Unsent(NamedTuple):
    """A response begun in the reader's callback: ``left`` of ``parts`` still to send."""

    left: list[Any]
    parts: list[Any]


class _Token(NamedTuple):
    """A bare SASL token (after SaslHandshake v0), for the authenticator."""

    token: bytes


# the processor's jobs: a request, a request begun, a response begun, a SASL token, or the end of the stream
_Job = Request | _Started | _Unsent | _Token | None


@types.coroutine
def _resume(coroutine: Coroutine[Any, Any, T], waited: Any) -> Generator[Any, Any, T]:
    """Go on running ``coroutine`` in the task that awaits this: its first step ran outside
    any task and yielded ``waited`` (the future it awaits, or None for a bare yield), which
    is handed to the task as if the coroutine had been the task's from the start; once it
    is done the coroutine resumes, and is delegated to as ``await`` would. A cancellation
    of the task is thrown into the coroutine where it waits."""
    try:
        yield waited
    except BaseException as e:  # thrown in by the task (a cancellation): the coroutine's to handle
        del waited
        try:
            waited = coroutine.throw(e)
        except StopIteration as done:
            return cast(T, done.value)
        return (yield from _resume(coroutine, waited))
    del waited  # done: its result is the coroutine's to keep or drop
    return (yield from coroutine)


def _size(part: Any) -> int:
    return (
        part.nbytes if isinstance(part, memoryview) else len(part) if isinstance(part, bytes | bytearray) else part.size
    )


async def _writable(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    future = loop.create_future()
    loop.add_writer(fd, future.set_result, None)
    try:
        await future
    finally:
        loop.remove_writer(fd)


def _peer(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError:
        return "?"


class SocketServer:
    """Accepts connections on one listener and runs a ``Connection`` for each; ``transport``
    wraps each accepted socket on a TLS listener, ``authenticator`` authenticates each
    connection of a SASL listener."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        served: Mapping[int, tuple[int, int]],
        max_frame_size: int,
        metrics: Any,
        answers_at_once: Callable[[Request], bool] = lambda request: False,
        *,
        listener: str = "PLAINTEXT",
        transport: Callable[[socket.socket], Transport] | None = None,
        authenticator: Callable[[str], Authenticator] | None = None,
        max_idle_ms: int = -1,
        connection_quotas: ConnectionQuotas | None = None,
    ) -> None:
        self.listener = listener  # its name
        self.connection_quotas = connection_quotas  # the broker's, shared by its listeners
        self.max_idle_ms = max_idle_ms  # connections.max.idle.ms: negative, never
        self.transport = transport
        self.authenticator = authenticator  # a SASL listener's: one for each connection, given its peer
        self.handler = handler
        self.answers_at_once = answers_at_once
        # the versions served, by API key (the routing table's: it may grow while connections are open)
        self.served = served
        self.max_frame_size = max_frame_size
        self.metrics = metrics
        self.connections: set[Connection] = set()
        try:
            self._listen = socket.create_server((host, port), family=_family(host), backlog=1024, reuse_port=False)
        except OSError as e:  # the port is taken, the address is not this machine's ...
            raise BrokerNotAvailableError(f"cannot listen on {host or '0.0.0.0'}:{port}: {e.strerror or e}") from None
        self._listen.setblocking(False)
        self.port = int(self._listen.getsockname()[1])  # the one bound, when asked for port 0
        self._accepting: asyncio.Task[None] | None = None
        self._expiring: asyncio.Task[None] | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}  # refused, closed once their time is up
        self._slot_changed = asyncio.Event()  # a connection closed or the limits changed: look again
        if connection_quotas is not None:
            connection_quotas.on_change.append(self._on_quotas_changed)

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._accepting = loop.create_task(self._accept())
        if self.max_idle_ms >= 0:
            self._expiring = loop.create_task(self._expire_idle(self.max_idle_ms / 1000))

    async def _expire_idle(self, limit: float) -> None:
        """Kafka's idle expiry: a connection idle longer than ``limit`` is closed, checked a few
        times a limit (every 30 s at most), so that a client that connects and sends nothing (nor
        finishes its TLS handshake or SASL exchange) holds no socket for ever."""
        while True:
            await asyncio.sleep(min(30.0, max(limit / 4, 0.01)))
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.idle(now) > limit and conn.task is not None:
                    log.info(
                        "closing the connection from %s on %s: idle for %.0f ms", conn.peer, self.listener, limit * 1000
                    )
                    conn.task.cancel()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, address = await loop.sock_accept(self._listen)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):  # out of fds: wait for some to close
                    log.error("cannot accept a connection: %s", e.strerror)
                    await asyncio.sleep(0.1)
                    continue
                raise
            ip = str(address[0])
            try:
                await self._wait_for_slot()
            except BaseException:
                sock.close()
                raise
            if not self._admitted(sock, ip):
                continue
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(sock, self, ip)
            self.connections.add(conn)
            self.metrics.connection_opened()
            task = conn.task = loop.create_task(conn.run())
            self._conn_tasks.add(task)
            task.add_done_callback(self._conn_tasks.discard)

    async def _wait_for_slot(self) -> None:
        """Kafka's acceptor blocking in ``waitForConnectionSlot``: the connection just accepted
        waits, unserved, for its throttle time when it came faster than the broker's or the
        listener's creation rate, and for as long as the broker or the listener holds its
        most connections (until one closes or a dynamic change raises the limit). Meanwhile
        this listener accepts nothing else, as Kafka's acceptor thread."""
        quotas = self.connection_quotas
        if quotas is None:
            return
        now = time.monotonic()
        end = now + quotas.record_connection(self.listener, int(now * 1000)) / 1000
        while now < end or not quotas.slot_available(self.listener):
            self._slot_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_changed.wait(), end - now if now < end else None)
            now = time.monotonic()

    def _on_quotas_changed(self) -> None:
        """A connection closed somewhere or the limits changed: a waiting accept looks again,
        and while a protected listener's connection has the broker past ``max.connections``
        this listener closes its least recently active connections (Kafka's
        ``closeExcessConnections``)."""
        self._slot_changed.set()
        quotas = self.connection_quotas
        while quotas is not None and quotas.excess(self.listener):
            open_ = [c for c in self.connections if not c.closed]
            if not open_:
                return
            lru = min(open_, key=lambda c: c.last_active)
            log.info(
                "closing the connection from %s on %s: the broker is past max.connections", lru.peer, self.listener
            )
            lru.close()  # counted out at once; its task ends on the closed socket
            if lru.task is not None:
                lru.task.cancel()

    def _admitted(self, sock: socket.socket, ip: str) -> bool:
        """Whether the connection quotas let a new connection from ``ip`` be served; one they
        refuse is closed, at once when its address has too many open, when the rate is back
        within its quota when it opens them too fast (a client retrying at once would only
        be refused again)."""
        quotas = self.connection_quotas
        if quotas is None:
            return True
        try:
            quotas.accept(self.listener, ip, int(time.monotonic() * 1000))
        except TooManyConnections as e:
            log.info("refusing a connection on %s: %s", self.listener, e)
            sock.close()
            return False
        except ConnectionThrottled as e:
            log.debug("refusing a connection on %s: %s", self.listener, e)
            handle = asyncio.get_running_loop().call_later(e.throttle_ms / 1000, self._close_throttled, sock)
            self._throttled[sock] = handle
            return False
        return True

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        sock.close()

    def connection_closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.metrics.connection_closed()
            if self.connection_quotas is not None:
                self.connection_quotas.release(self.listener, conn.ip)

    async def stop(self) -> None:
        """Stop accepting, then close every connection (their current request ends first)."""
        for background in (self._accepting, self._expiring):
            if background is not None:
                background.cancel()
                await asyncio.gather(background, return_exceptions=True)
        self._listen.close()
        if self.connection_quotas is not None and self._on_quotas_changed in self.connection_quotas.on_change:
            self.connection_quotas.on_change.remove(self._on_quotas_changed)
        for sock, handle in self._throttled.items():
            handle.cancel()
            sock.close()
        self._throttled.clear()
        for task in list(self._conn_tasks):
            task.cancel()
        deadline = time.monotonic() + 5
        if self._conn_tasks:
            await asyncio.wait(list(self._conn_tasks), timeout=max(0.0, deadline - time.monotonic()))


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
