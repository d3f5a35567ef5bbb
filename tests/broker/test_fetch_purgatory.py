"""Long-polling fetches in the purgatory: what wakes them and what they hold while they wait.

A read_committed fetch is woken only by records below the last stable offset (an open
transaction's records do not answer it early and empty); a waiting fetch holds no segment
file open; a client that disconnects takes its waiting fetch out of the purgatory at once."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

import seglog.broker
from seglog.broker import EmbeddedBroker
from seglog.protocol import ApiKey, decode_response, encode_request
from seglog.protocol.message_data import FetchRequestData, FetchResponseData
from seglog.records import Record, build_batch

from .conftest import PRODUCER, wait_for

FETCH_VERSION = 11  # topics by name, isolation level


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    config = {"num.partitions": 1, "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
    with seglog.broker.start(str(tmp_path / "data"), config=config) as b:
        yield b


def on_loop(broker: EmbeddedBroker, coro: Any) -> Any:
    return asyncio.run_coroutine_threadsafe(coro, broker._loop).result(30)


def waiting_fetches(broker: EmbeddedBroker) -> int:
    async def count() -> int:
        assert broker.server.replicas is not None
        return len(broker.server.replicas.fetch_purgatory)

    return int(on_loop(broker, count()))


def send_fetch(sock: socket.socket, topic: str, offset: int, *, min_bytes: int, read_committed: bool = False) -> None:
    body = FetchRequestData(
        replica_id=-1,
        max_wait_ms=60_000,  # longer than any test waits: only the purgatory's wake answers in time
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=1 if read_committed else 0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequestData.FetchTopic(
                topic=topic,
                partitions=[
                    FetchRequestData.FetchPartition(
                        partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    sock.sendall(b"".join(encode_request(ApiKey.FETCH, FETCH_VERSION, 1, "test", body)))


def read_fetch_response(sock: socket.socket) -> FetchResponseData.PartitionData:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "the broker closed the connection"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    response = decode_response(ApiKey.FETCH, FETCH_VERSION, memoryview(exactly(size)))
    return response.responses[0].partitions[0]


def test_read_committed_fetch_waits_for_records_below_the_last_stable_offset(broker: EmbeddedBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": "t1", "linger.ms": 1})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("orders", b"first")
    assert producer.flush(30) == 0  # appended, its transaction open: the LSO stays at 0
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        send_fetch(sock, "orders", 0, min_bytes=1, read_committed=True)
        wait_for(lambda: waiting_fetches(broker) == 1, what="the fetch to wait")
        producer.produce("orders", b"second")
        assert producer.flush(30) == 0  # more bytes past the LSO: the fetch must go on waiting
        producer.commit_transaction(30)
        answer = read_fetch_response(sock)
    assert answer.error_code == 0
    assert answer.last_stable_offset == 3  # two records and the COMMIT marker
    assert len(answer.records) > 0  # answered by the commit, not early and empty by the second record


def test_a_waiting_fetch_holds_no_segment_file(broker: EmbeddedBroker, tmp_path: Path) -> None:
    assert broker.server.replicas is not None
    replicas = broker.server.replicas
    on_loop(broker, replicas.create_topic("rolled", 1, {"segment.bytes": 1024, "file.delete.delay.ms": 0}))
    batch = build_batch([Record(None, b"x" * 600)])
    for _ in range(3):  # one batch a segment
        on_loop(broker, replicas.append_records({("rolled", 0): memoryview(batch)}))
    first_segment = str(replicas.partition_log("rolled", 0).segments[0].log_path)
    with socket.create_connection(("127.0.0.1", broker.port)) as sock:
        send_fetch(sock, "rolled", 0, min_bytes=1 << 20)  # reads the first segment's batch, then waits for more
        wait_for(lambda: waiting_fetches(broker) == 1, what="the fetch to wait")
        on_loop(broker, replicas.delete_records([("rolled", 0, 1)]))
        wait_for(lambda: not os.path.exists(first_segment), what="the first segment to be deleted")
        assert not [fd for fd in os.listdir("/proc/self/fd") if _names(fd, first_segment)]
        assert waiting_fetches(broker) == 1


def test_a_disconnected_clients_fetch_leaves_the_purgatory(broker: EmbeddedBroker) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **PRODUCER})
    producer.produce("idle", b"one")
    assert producer.flush(30) == 0
    sock = socket.create_connection(("127.0.0.1", broker.port))
    send_fetch(sock, "idle", 1, min_bytes=1)
    wait_for(lambda: waiting_fetches(broker) == 1, what="the fetch to wait")
    sock.close()
    wait_for(lambda: waiting_fetches(broker) == 0, timeout=20, what="the fetch to be abandoned")
    # the broker serves on: a new connection's fetch is answered
    with socket.create_connection(("127.0.0.1", broker.port)) as again:
        send_fetch(again, "idle", 0, min_bytes=1)
        assert len(read_fetch_response(again).records) > 0


def _names(fd: str, path: str) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(path)
    except OSError:
        return False
