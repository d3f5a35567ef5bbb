"""Many connections: 1,000 idle ones do not stop active clients, and a client that stops
reading its socket stalls nobody else."""

from __future__ import annotations

import resource
import socket
import struct

from confluent_kafka import Producer

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
