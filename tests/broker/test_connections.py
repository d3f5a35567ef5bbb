"""Many connections: 1,000 idle ones do not stop active clients, and a client that stops
reading its socket stalls nobody else."""

from __future__ import annotations

import resource
import socket
import struct
import time

from confluent_kafka import Producer

from seglog.client import BlockingConnection
from seglog.errors import ErrorCode
from seglog.protocol import ApiKey
from seglog.protocol.message_data import FetchRequestData, MetadataRequestData

from .conftest import PRODUCER, consume_assigned, wait_for
from .test_hostile import API_VERSIONS_V0, _connect, _read_frame, _request


def test_idle_connections_and_a_stalled_reader(seglog_broker) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    idle = []
    try:
        for _ in range(1000):
            idle.append(socket.create_connection((seglog_broker.host, seglog_broker.port), timeout=10))
        wait_for(lambda: seglog_broker.server.metrics.connections >= 1000, what="1,000 connections")

        # a reader that never reads: it pipelines requests whose answers fill its socket
        stalled = _connect(seglog_broker)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        request = _request(18, 0, 1)
        try:
            stalled.settimeout(0.01)
            for _ in range(200_000):
                stalled.send(request)
        except (TimeoutError, BlockingIOError):
            pass  # its send buffer is full too: the broker stopped reading it

        producer = Producer({"bootstrap.servers": seglog_broker.bootstrap_servers, **PRODUCER})
        for i in range(500):
            producer.produce("busy", b"b%d" % i, partition=0)
        assert producer.flush(30) == 0
        got = consume_assigned(seglog_broker.bootstrap_servers, "busy", 0, 0, 500)
        assert [m.value() for m in got] == [b"b%d" % i for i in range(500)]
        with _connect(seglog_broker) as fresh:
            fresh.sendall(API_VERSIONS_V0)
            assert struct.unpack_from(">ih", _read_frame(fresh)) == (7, 0)
        stalled.close()
    finally:
        for s in idle:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _closed_by_the_broker(sock: socket.socket) -> bool:
    """The broker closed it: the read sees the end of the stream (or a reset)."""
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_connections_idle_past_connections_max_idle_ms_are_closed(seglog_broker_factory) -> None:
    """Kafka's idle expiry: a client that connects and sends nothing, or stops half way through a
    SASL exchange, is closed after connections.max.idle.ms; one that keeps asking, or waits for a
    long-polling fetch longer than the limit, is not."""
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_u="p";'
    broker = seglog_broker_factory(
        config={
            "connections.max.idle.ms": 1500,  # wide: a loaded machine may pause the busy client a while
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        }
    )
    silent = socket.create_connection(("127.0.0.1", broker.server.port_of("PLAINTEXT")), timeout=0.2)
    half_way = socket.create_connection(("127.0.0.1", broker.server.port_of("SASL_PLAINTEXT")), timeout=0.2)
    half_way.sendall(API_VERSIONS_V0)  # then no SaslHandshake
    assert struct.unpack_from(">i", _read_frame(half_way))[0] == 7
    with BlockingConnection("127.0.0.1", broker.server.port_of("PLAINTEXT"), "busy") as busy:
        started = time.monotonic()
        while time.monotonic() - started < 4.5:  # three limits, asking all along
            busy.request(ApiKey.METADATA, MetadataRequestData(topics=[]))
            time.sleep(0.05)
        # a fetch that waits 3 s at the broker (an empty partition at its end): under way, not idle
        made = MetadataRequestData.MetadataRequestTopic(name="idle-wait")
        busy.request(ApiKey.METADATA, MetadataRequestData(topics=[made], allow_auto_topic_creation=True))
        at_end = FetchRequestData.FetchPartition(partition=0, fetch_offset=0)
        fetch = FetchRequestData(
            max_wait_ms=3000, min_bytes=1, topics=[FetchRequestData.FetchTopic(topic="idle-wait", partitions=[at_end])]
        )
        answer = busy.request(ApiKey.FETCH, fetch, 4)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.NONE
        busy.request(ApiKey.METADATA, MetadataRequestData(topics=[]))
    wait_for(lambda: _closed_by_the_broker(silent), what="the silent connection closed")
    wait_for(lambda: _closed_by_the_broker(half_way), what="the half-authenticated connection closed")
    silent.close()
    half_way.close()
