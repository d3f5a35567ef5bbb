"""Real clients from PyPI (librdkafka through confluent-kafka, kafka-python) talk to a stub
broker that answers ApiVersions and Metadata with seglog.protocol: their requests decode here,
and they read our flexible responses (old librdkafka misreads any layout but Kafka's)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient

from seglog.protocol import ApiKey, decode_request, encode_response, frame_size
from seglog.protocol.message import Message
from seglog.protocol.message_data import ApiVersionsResponseData, MetadataResponseData

ADVERTISED = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12)}


class StubBroker:
    """Answers ApiVersions and Metadata (one broker, itself; topic ``t`` of 2 partitions) on every
    connection, and records what it was asked."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.requests: list[tuple[str, int, Message]] = []
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while True:
                try:
                    prefix = conn.recv(4, socket.MSG_WAITALL)
                    if len(prefix) < 4:
                        return
                    request = decode_request(conn.recv(frame_size(prefix, 1 << 20), socket.MSG_WAITALL))
                except OSError:
                    return
                header = request.header
                self.requests.append((header.api_key.name, header.api_version, request.body))
                if header.api_key == ApiKey.API_VERSIONS:
                    keys = [
                        ApiVersionsResponseData.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                        for k, (lo, hi) in ADVERTISED.items()
                    ]
                    body: Message = ApiVersionsResponseData(api_keys=keys)
                else:
                    body = self._metadata()
                parts = encode_response(header.api_key, header.api_version, header.correlation_id, body)
                conn.sendall(b"".join(bytes(p) for p in parts))

    def _metadata(self) -> MetadataResponseData:
        partitions = [
            MetadataResponseData.MetadataResponsePartition(
                partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1]
            )
            for p in range(2)
        ]
        return MetadataResponseData(
            brokers=[MetadataResponseData.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=self.port)],
            cluster_id="stub",
            controller_id=1,
            topics=[MetadataResponseData.MetadataResponseTopic(name="t", partitions=partitions)],
        )

    def close(self) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def broker() -> Iterator[StubBroker]:
    stub = StubBroker()
    yield stub
    stub.close()


def test_librdkafka_reads_our_flexible_responses(broker: StubBroker) -> None:
    metadata = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"}).list_topics(timeout=20)
    assert metadata.cluster_id == "stub" and list(metadata.brokers) == [1]
    assert sorted(metadata.topics["t"].partitions) == [0, 1]
    asked = {(name, version) for name, version, _ in broker.requests}
    assert ("API_VERSIONS", 3) in asked and ("METADATA", 12) in asked  # flexible versions both ways
    versions: Any = next(body for name, _, body in broker.requests if name == "API_VERSIONS")
    assert versions.client_software_name == "confluent-kafka-python"


def test_kafka_python_reads_our_responses(broker: StubBroker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.port}", request_timeout_ms=20000)
    try:
        assert "t" in admin.list_topics()
    finally:
        admin.close()
    assert {name for name, _, _ in broker.requests} == {"API_VERSIONS", "METADATA"}
