"""The client's connections against a real broker, and against peers that break the protocol
(a socket server of the test's that answers wrong bytes)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest

from seglog.client import AsyncConnection, BlockingConnection, parse_address
from seglog.errors import BrokerNotAvailableError, InvalidResponseError
from seglog.protocol import ApiKey
from seglog.protocol.message_data import CreateTopicsRequestData, MetadataRequestData, ProduceRequestData
from seglog.records import build_batch


def _address(broker: object) -> tuple[str, int]:
    return parse_address(broker.bootstrap_servers)  # type: ignore[attr-defined]


def test_a_blocking_connection_negotiates_and_asks(seglog_broker: object) -> None:
    host, port = _address(seglog_broker)
    with BlockingConnection(host, port, "test") as conn:
        assert conn.versions[ApiKey.METADATA][1] >= 12
        assert conn.version_for(ApiKey.METADATA) == 12
        assert conn.version_for(ApiKey.METADATA, highest=1) == 1
        answer = conn.call(ApiKey.METADATA, MetadataRequestData(topics=None), 4)
        assert answer.api_version == 4 and answer.body.brokers[0].port == port


def test_acks_0_is_sent_and_the_next_answer_is_the_next_requests(seglog_broker: object) -> None:
    host, port = _address(seglog_broker)
    with BlockingConnection(host, port, "test") as conn:
        conn.request(
            ApiKey.CREATE_TOPICS,
            CreateTopicsRequestData(
                topics=[CreateTopicsRequestData.CreatableTopic(name="acks0", num_partitions=1, replication_factor=1)],
                timeout_ms=5000,
            ),
        )
        batch = bytes(build_batch([(b"k", b"v", 1)]))
        conn.send_only(
            ApiKey.PRODUCE,
            ProduceRequestData(
                acks=0,
                timeout_ms=1000,
                topic_data=[
                    ProduceRequestData.TopicProduceData(
                        name="acks0", partition_data=[ProduceRequestData.PartitionProduceData(index=0, records=batch)]
                    )
                ],
            ),
        )
        body = conn.request(
            ApiKey.METADATA, MetadataRequestData(topics=[MetadataRequestData.MetadataRequestTopic(name="acks0")])
        )
        assert [t.name for t in body.topics] == ["acks0"]


def test_an_async_connection_connects_on_first_use_and_again_after_a_failure(seglog_broker: object) -> None:
    host, port = _address(seglog_broker)

    async def run() -> None:
        conn = AsyncConnection(host, port, "test", timeout_s=10)
        first = await conn.request(ApiKey.METADATA, MetadataRequestData(topics=None))
        assert first.api_version == 12
        conn.close()  # as a failure leaves it
        again = await conn.call(ApiKey.METADATA, lambda version: MetadataRequestData(topics=None), highest=9)
        assert again.api_version == 9
        conn.close()

    asyncio.run(run())


def test_nobody_listening_is_a_broker_not_available() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(BrokerNotAvailableError, match=f"cannot connect to 127.0.0.1:{port}"):
        BlockingConnection("127.0.0.1", port, "test", timeout=5)

    async def run() -> None:
        with pytest.raises(BrokerNotAvailableError, match=f"127.0.0.1:{port}"):
            await AsyncConnection("127.0.0.1", port, "test", timeout_s=5).request(
                ApiKey.METADATA, MetadataRequestData()
            )

    asyncio.run(run())


def test_an_address_that_is_not_host_port_is_refused() -> None:
    for text in ("nohost", "host:", ":9092", "host:port"):
        with pytest.raises(BrokerNotAvailableError, match="is not HOST:PORT"):
            parse_address(text)
    assert parse_address("[::1]:9092") == ("::1", 9092)


# --- peers that break the protocol -----------------------------------------------------------------


@pytest.fixture
def bad_peer() -> Iterator[Callable[[Callable[[int], bytes]], int]]:
    """A server that reads one request and answers what ``reply(correlation id)`` gives."""
    servers: list[socket.socket] = []

    def start(reply: Callable[[int], bytes]) -> int:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                size = struct.unpack(">i", conn.recv(4, socket.MSG_WAITALL))[0]
                frame = conn.recv(size, socket.MSG_WAITALL)
                conn.sendall(reply(struct.unpack_from(">i", frame, 4)[0]))
                conn.recv(1)  # until the client closes

        threading.Thread(target=serve, daemon=True).start()
        return int(server.getsockname()[1])

    yield start
    for server in servers:
        server.close()


def _answer(correlation: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), correlation) + body


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (lambda c: _answer(c + 1, b"\x00\x00" + bytes(8)), "came with correlation id"),
        (lambda c: _answer(c, b"\x00"), "cut short"),
        (lambda c: struct.pack(">i", 2**31 - 1), "larger than the limit"),
        (lambda c: struct.pack(">i", -5), "invalid frame size"),
    ],
)
def test_a_broken_answer_is_the_peers_error_and_names_it(
    bad_peer: Callable[[Callable[[int], bytes]], int], reply: Callable[[int], bytes], message: str
) -> None:
    port = bad_peer(reply)
    with pytest.raises(InvalidResponseError, match=message) as e:
        BlockingConnection("127.0.0.1", port, "test", timeout=5, max_response_size=1 << 20)
    assert f"127.0.0.1:{port}" in str(e.value)


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (lambda c: _answer(c + 1, b"\x00\x00" + bytes(8)), "came with correlation id"),
        (lambda c: _answer(c, b"\x00"), "cut short"),
        (lambda c: struct.pack(">i", 2**31 - 1), "larger than the limit"),
    ],
)
def test_an_async_connection_blames_a_broken_answer_on_the_peer(
    bad_peer: Callable[[Callable[[int], bytes]], int], reply: Callable[[int], bytes], message: str
) -> None:
    """Not BrokerNotAvailableError, and never InvalidRequestError: the request was fine."""
    port = bad_peer(reply)

    async def run() -> None:
        conn = AsyncConnection("127.0.0.1", port, "test", timeout_s=5)
        with pytest.raises(InvalidResponseError, match=message) as e:
            await conn.request(ApiKey.METADATA, MetadataRequestData())
        assert f"127.0.0.1:{port}" in str(e.value)

    asyncio.run(run())


def test_an_async_connection_names_how_long_it_waited(bad_peer: Callable[[Callable[[int], bytes]], int]) -> None:
    port = bad_peer(lambda c: struct.pack(">ii", 100, c))  # promises 100 bytes, sends 4, waits

    async def run() -> None:
        conn = AsyncConnection("127.0.0.1", port, "test", timeout_s=0.5)
        with pytest.raises(BrokerNotAvailableError, match=rf"127.0.0.1:{port} failed: no answer within 0.5 s"):
            await conn.request(ApiKey.METADATA, MetadataRequestData())

    asyncio.run(run())


def test_a_peer_closing_mid_answer_is_a_broker_not_available(
    bad_peer: Callable[[Callable[[int], bytes]], int],
) -> None:
    port = bad_peer(lambda c: struct.pack(">ii", 100, c))  # promises 100 bytes, sends 4, waits
    with pytest.raises(BrokerNotAvailableError, match=rf"127.0.0.1:{port}: no answer within 1 s"):
        BlockingConnection("127.0.0.1", port, "test", timeout=1)
