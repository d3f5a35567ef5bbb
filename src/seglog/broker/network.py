"""The broker's socket server: connections, framing, in-order responses, sendfile.

Kafka's ``SocketServer`` in asyncio. Each connection has two tasks:

    reader:    recv -> frames (size prefix checked by protocol.frame_size before any
               body byte is read) -> a small queue
    processor: frame -> handler -> response parts -> socket (bytes with sendall,
               storage FileSlices with os.sendfile), one request at a time

so responses leave in the order their requests came, as Kafka guarantees per
connection. A client that stops reading its socket blocks only its own processor (its
sends wait for the socket), whose queue then fills and stops its reader: no other
connection notices. A frame is received straight into its own buffer, which grows as
bytes arrive, so a size prefix that promises a large request costs only what is really
sent (at most twice over).

A request parked in a purgatory (a long-polling fetch) is abandoned when its client
disconnects (``abandoned_on_disconnect``): it would otherwise wait out its
``max_wait_ms`` for nobody.

Sockets are used through the loop's ``sock_*`` calls, not transports: with no write
buffer of asyncio's own in between, ``os.sendfile`` can follow the bytes before it
directly, with an explicit offset that leaves the segment file's position alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any, Protocol

from ..errors import BrokerNotAvailableError

log = logging.getLogger(__name__)

_RECV_CHUNK = 64 * 1024
_READ_AHEAD = 8  # requests read from one connection ahead of the one being answered


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


# a request handler: the frame (without its size prefix) -> response parts, or None
Handler = Callable[[bytearray, "Connection"], Awaitable[list[Any] | None]]


class Connection:
    def __init__(self, sock: socket.socket, server: SocketServer) -> None:
        self.sock = sock
        self.server = server
        self.peer = _peer(sock)
        self.closed = False
        self.lost = False  # the reader met the end of the stream (or an error): the client is gone
        self.waiting: set[Abandonable] = set()
        self._buffer = bytearray()
        self._queue: asyncio.Queue[bytearray | None] = asyncio.Queue(_READ_AHEAD)
        self._tasks: list[asyncio.Task[None]] = []

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        reader = loop.create_task(self._read_frames())
        processor = loop.create_task(self._process())
        self._tasks = [reader, processor]
        try:
            # the processor ends at the reader's end-of-stream mark, after the requests read
            # before it (a client that sends acks=0 produces and closes still has them appended),
            # or on a send that fails, when the reader has nothing left to read for
            await processor
        finally:
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()
            self.server.connection_closed(self)

    # --- reading ------------------------------------------------------------------------------------

    async def _recv_more(self) -> None:
        loop = asyncio.get_running_loop()
        data = await loop.sock_recv(self.sock, _RECV_CHUNK)
        if not data:
            raise ConnectionClosed
        self.server.metrics.bytes_in(len(data))
        self._buffer += data

    async def _recv_frame(self, size: int) -> bytearray:
        """The rest of a frame of ``size`` bytes, received straight into it (the bytes read
        with its size prefix begin it): one copy from the kernel, as much a call as has come.
        The frame grows as bytes arrive, doubling from _RECV_CHUNK, never past ``size``."""
        loop = asyncio.get_running_loop()
        frame, self._buffer = self._buffer, bytearray()
        got = len(frame)
        while got < size:
            if got == len(frame):
                frame.extend(bytes(min(size, max(_RECV_CHUNK, 2 * got)) - got))
            with memoryview(frame)[got:] as rest:
                n = await loop.sock_recv_into(self.sock, rest)
            if not n:
                raise ConnectionClosed
            self.server.metrics.bytes_in(n)
            got += n
        return frame

    async def _read_frames(self) -> None:
        try:
            while True:
                while len(self._buffer) < 4:
                    await self._recv_more()
                size = self.server.frame_size(bytes(self._buffer[:4]))
                del self._buffer[:4]
                if len(self._buffer) >= size:
                    frame = self._buffer[:size]
                    del self._buffer[:size]
                else:
                    frame = await self._recv_frame(size)
                await self._queue.put(frame)
        except ConnectionClosed:
            pass
        except OSError as e:
            log.debug("connection from %s: %s", self.peer, e)
        except Exception as e:  # a size prefix out of bounds: this connection only
            log.warning("closing the connection from %s: %s", self.peer, e)
        self.lost = True
        for op in list(self.waiting):
            op.abandon(ConnectionClosed())
        await self._queue.put(None)

    # --- answering ----------------------------------------------------------------------------------

    async def _process(self) -> None:
        _current.set(self)
        while True:
            frame = await self._queue.get()
            if frame is None:
                return
            try:
                parts = await self.server.handler(frame, self)
            except ConnectionClosed:  # a wait abandoned, the client gone: the requests read before go on
                continue
            except Exception as e:  # a malformed request, or a fault of ours: this connection only
                log.warning("closing the connection from %s: %s", self.peer, e)
                return
            if parts is None:
                continue
            try:
                await self.send(parts)
            except OSError as e:
                log.debug("connection from %s: %s", self.peer, e)
                return

    async def send(self, parts: list[Any]) -> None:
        loop = asyncio.get_running_loop()
        pending: list[Any] = []
        for part in parts:
            if isinstance(part, bytes | bytearray | memoryview):
                pending.append(part)
                continue
            if pending:
                await loop.sock_sendall(self.sock, b"".join(pending))
                pending = []
            await self._sendfile(part)
        if pending:
            await loop.sock_sendall(self.sock, b"".join(pending) if len(pending) > 1 else pending[0])
        self.server.metrics.bytes_out(sum(_size(p) for p in parts))

    async def _sendfile(self, region: FileRegion) -> None:
        loop = asyncio.get_running_loop()
        out, in_fd = self.sock.fileno(), region.handle.fd
        position, left = region.position, region.size
        while left > 0:
            try:
                sent = os.sendfile(out, in_fd, position, left)
            except BlockingIOError:
                await _writable(loop, out)
                continue
            except OSError as e:
                if e.errno == errno.EINTR:
                    continue
                raise
            if sent == 0:  # the file is shorter than its slice (truncated meanwhile): the frame cannot be kept
                raise OSError(errno.EIO, "segment file ended inside a fetch response")
            position += sent
            left -= sent


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
    """Accepts connections on one listener and runs a ``Connection`` for each."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        frame_size: Callable[[bytes], int],
        metrics: Any,
    ) -> None:
        self.handler = handler
        self.frame_size = frame_size
        self.metrics = metrics
        self.connections: set[Connection] = set()
        try:
            self._listen = socket.create_server((host, port), family=_family(host), backlog=1024, reuse_port=False)
        except OSError as e:  # the port is taken, the address is not this machine's ...
            raise BrokerNotAvailableError(f"cannot listen on {host or '0.0.0.0'}:{port}: {e.strerror or e}") from None
        self._listen.setblocking(False)
        self.port = int(self._listen.getsockname()[1])  # the one bound, when asked for port 0
        self._accepting: asyncio.Task[None] | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(self._listen)
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE):  # out of fds: wait for some to close
                    log.error("cannot accept a connection: %s", e.strerror)
                    await asyncio.sleep(0.1)
                    continue
                raise
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = Connection(sock, self)
            self.connections.add(conn)
            self.metrics.connection_opened()
            task = loop.create_task(conn.run())
            self._conn_tasks.add(task)
            task.add_done_callback(self._conn_tasks.discard)

    def connection_closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.metrics.connection_closed()

    async def stop(self) -> None:
        """Stop accepting, then close every connection (their current request ends first)."""
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
        self._listen.close()
        for task in list(self._conn_tasks):
            task.cancel()
        deadline = time.monotonic() + 5
        if self._conn_tasks:
            await asyncio.wait(list(self._conn_tasks), timeout=max(0.0, deadline - time.monotonic()))


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
