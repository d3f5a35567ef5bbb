"""The socket server's two ways of answering: in the reader's turn of the loop when a
request needs no wait and nothing is ahead of it, else in the connection's processor
task, with responses in request order either way (real sockets, a real event loop)."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

from seglog.broker.metrics import BrokerMetrics
from seglog.broker.network import ConnectionClosed, SocketServer, abandoned_on_disconnect
from seglog.protocol import NEED_DATA, ApiKey, ClientConnection, Request, Response
from seglog.protocol.message_data import FetchRequestData, FetchResponseData

tag: contextvars.ContextVar[str] = contextvars.ContextVar("tag", default="")
FETCH_VERSION = 4


class Server:
    """A SocketServer whose handler answers a Fetch from client ``name`` with ``name`` as
    its records, after awaiting ``gates[name]`` when there is one; it records the task each
    request began in."""

    def __init__(self, at_once: bool = True) -> None:
        self.gates: dict[bytes, asyncio.Future[None]] = {}
        self.began_in: dict[bytes, asyncio.Task[Any] | None] = {}
        self.tags: dict[bytes, str] = {}
        self.abandoned: list[bytes] = []
        self.big = b""
        self.region: Any = None
        served = {int(ApiKey.FETCH): (FETCH_VERSION, FETCH_VERSION)}
        self.server = SocketServer("127.0.0.1", 0, self.handle, served, 1 << 20, BrokerMetrics(), lambda r: at_once)

    async def handle(self, request: Request, conn: Any) -> FetchResponseData:
        name = (request.header.client_id or "").encode()
        self.began_in[name] = asyncio.current_task()
        tag.set(name.decode())
        gate = self.gates.get(name)
        if gate is not None:
            op = _Op(gate)
            with abandoned_on_disconnect(op):
                try:
                    await gate
                except ConnectionClosed:
                    self.abandoned.append(name)
                    raise
        self.tags[name] = tag.get()  # the context set before the wait, after it
        records: Any = self.big if name == b"big" else self.region if name == b"region" else name
        partition = FetchResponseData.PartitionData(partition_index=0, records=records)
        return FetchResponseData(
            responses=[FetchResponseData.FetchableTopicResponse(topic="t", partitions=[partition])]
        )


class _Op:
    def __init__(self, gate: asyncio.Future[None]) -> None:
        self.gate = gate

    def abandon(self, error: BaseException) -> None:
        if not self.gate.done():
            self.gate.set_exception(error)


class Client:
    """Fetches, each sent with its name as the client id; the records of their responses read back."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.protocol = ClientConnection(None)

    def send(self, *names: bytes) -> None:
        for name in names:
            self.protocol.client_id = name.decode()
            _, parts = self.protocol.send_request(ApiKey.FETCH, FetchRequestData(), FETCH_VERSION)
            self.writer.write(b"".join(parts))

    async def answer(self) -> bytes:
        while True:
            response = self.protocol.next_event()
            if isinstance(response, Response):
                return bytes(response.body.responses[0].partitions[0].records)
            assert response is NEED_DATA
            data = await self.reader.read(1 << 20)
            self.protocol.receive_data(data)


def run(test: Callable[[Server, Client], Awaitable[None]], **kw: Any) -> Server:
    server = Server(**kw)

    async def main() -> None:
        server.server.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", server.server.port)
        try:
            await test(server, Client(reader, writer))
        finally:
            writer.close()
            await server.server.stop()

    asyncio.run(asyncio.wait_for(main(), 30))
    return server


def test_a_request_that_needs_no_wait_is_answered_in_the_readers_turn() -> None:
    async def test(server: Server, client: Client) -> None:
        client.send(b"a")
        assert await client.answer() == b"a"

    assert run(test).began_in == {b"a": None}  # no task: the loop's callback for the socket answered it


def test_without_at_once_every_request_goes_through_the_processor_task() -> None:
    async def test(server: Server, client: Client) -> None:
        client.send(b"a")
        assert await client.answer() == b"a"

    assert run(test, at_once=False).began_in[b"a"] is not None


def test_a_request_that_waits_goes_on_in_the_processor_and_keeps_its_place() -> None:
    async def test(server: Server, client: Client) -> None:
        server.gates[b"slow"] = asyncio.get_running_loop().create_future()
        client.send(b"slow", b"b", b"c")  # pipelined behind the one that waits
        await asyncio.sleep(0.05)
        assert b"b" not in server.began_in  # queued behind "slow", not answered ahead of it
        server.gates[b"slow"].set_result(None)
        assert [await client.answer() for _ in range(3)] == [b"slow", b"b", b"c"]
        client.send(b"d")  # the processor is idle again: answered at once
        assert await client.answer() == b"d"

    server = run(test)
    assert server.began_in[b"slow"] is None and server.began_in[b"d"] is None
    assert server.began_in[b"b"] is not None  # the processor's
    assert server.tags[b"slow"] == "slow"  # what the handler set before its wait, still set after it


def test_a_client_gone_during_a_wait_abandons_it() -> None:
    async def test(server: Server, client: Client) -> None:
        server.gates[b"slow"] = asyncio.get_running_loop().create_future()
        client.send(b"slow")
        await client.writer.drain()
        while b"slow" not in server.began_in:
            await asyncio.sleep(0.01)
        client.writer.close()
        while not server.abandoned:
            await asyncio.sleep(0.01)

    assert run(test).abandoned == [b"slow"]


def test_a_response_the_socket_cannot_take_at_once_is_finished_by_the_processor() -> None:
    big = bytes(range(256)) * (32 << 10)  # 8 MiB: more than the two socket buffers hold

    async def test(server: Server, client: Client) -> None:
        server.big = big
        sock = client.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 256 << 10)  # fixed: no autotuning to 32 MiB
        client.send(b"big", b"after")
        await asyncio.sleep(0.1)  # the client reads nothing meanwhile: the broker's send stops short
        assert await client.answer() == big
        assert await client.answer() == b"after"

    server = run(test)
    assert server.began_in[b"big"] is None  # begun at once; its tail went out from the processor
    assert server.began_in[b"after"] is not None


def _data_segments_sent(sock: socket.socket) -> int:
    """Linux's tcp_info.tcpi_data_segs_out: segments with data this socket sent."""
    return int(struct.unpack_from("I", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256), 156)[0])


class _Region(NamedTuple):
    handle: Any
    position: int
    size: int


def test_bytes_before_a_small_file_region_leave_with_it_in_one_segment(tmp_path: Path) -> None:
    """A small fetch's response (its header, then its records by sendfile) is one TCP segment,
    not two: the header goes with MSG_MORE. Before a large region it goes at once."""
    path = tmp_path / "records"
    path.write_bytes(bytes(range(256)) * 1024)  # 256 KiB
    with open(path, "rb") as f:
        handle = SimpleNamespace(fd=f.fileno())
        segments: dict[int, int] = {}

        async def test(server: Server, client: Client) -> None:
            while not server.server.connections:
                await asyncio.sleep(0.01)
            conn = next(iter(server.server.connections))
            for size in (1000, 200 << 10):
                server.region = _Region(handle, 0, size)
                before = _data_segments_sent(conn.sock)
                client.send(b"region")
                assert await client.answer() == (bytes(range(256)) * 1024)[:size]
                segments[size] = _data_segments_sent(conn.sock) - before

        run(test)
    assert segments[1000] == 1
    assert segments[200 << 10] > 1
