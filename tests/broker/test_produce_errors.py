"""Produce errors per partition, with Kafka's codes, and a corrupt batch appending nothing."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.client import BlockingConnection, connect
from seglog.errors import BrokerNotAvailableError
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    ApiVersionsRequestData,
    CreateTopicsRequestData,
    ListOffsetsRequestData,
    ProduceRequestData,
)
from seglog.records import Compression, Record
from seglog.records.batch import build_batch


def _produce(
    client: BlockingConnection, parts: dict[tuple[str, int], bytes], acks: int = 1, version: int | None = None
) -> dict[tuple[str, int], Any]:
    by_topic: dict[str, list[ProduceRequestData.PartitionProduceData]] = {}
    for (topic, p), records in parts.items():
        by_topic.setdefault(topic, []).append(ProduceRequestData.PartitionProduceData(index=p, records=records))
    body = ProduceRequestData(
        transactional_id=None,
        acks=acks,
        timeout_ms=10_000,
        topic_data=[ProduceRequestData.TopicProduceData(name=t, partition_data=ps) for t, ps in by_topic.items()],
    )
    answer = client.request(ApiKey.PRODUCE, body, version)
    return {(t.name, r.index): r for t in answer.responses for r in t.partition_responses}


def _end(client: BlockingConnection, topic: str) -> int:
    body = ListOffsetsRequestData(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequestData.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequestData.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    )
                ],
            )
        ],
    )
    return client.request(ApiKey.LIST_OFFSETS, body).topics[0].partitions[0].offset


@pytest.fixture(scope="module")
def client(seglog_broker):
    with connect(seglog_broker.bootstrap_servers) as c:
        for topic in ("ok", "small"):
            configs = (
                [CreateTopicsRequestData.CreatableTopicConfig(name="max.message.bytes", value="200")]
                if topic == "small"
                else []
            )
            body = CreateTopicsRequestData(
                topics=[
                    CreateTopicsRequestData.CreatableTopic(
                        name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=configs
                    )
                ],
                timeout_ms=10_000,
                validate_only=False,
            )
            assert c.request(ApiKey.CREATE_TOPICS, body).topics[0].error_code == 0
        yield c


def test_a_corrupt_batch_appends_nothing(client: BlockingConnection) -> None:
    good = build_batch([Record(None, b"a")])
    bad = bytearray(build_batch([Record(None, b"b")]))
    bad[-1] ^= 0xFF  # the CRC no longer matches
    before = _end(client, "ok")
    answer = _produce(client, {("ok", 0): good + bytes(bad)})
    assert answer[("ok", 0)].error_code == 2  # CORRUPT_MESSAGE
    assert _end(client, "ok") == before  # not even the good batch before it


def test_errors_are_per_partition(client: BlockingConnection) -> None:
    big = build_batch([Record(None, b"x" * 500)])
    answer = _produce(
        client,
        {("ok", 0): build_batch([Record(None, b"fine")]), ("small", 0): big, ("ok", 9): big, ("nope", 0): big},
    )
    assert answer[("ok", 0)].error_code == 0 and answer[("ok", 0)].base_offset >= 0
    assert answer[("small", 0)].error_code == 10  # MESSAGE_TOO_LARGE
    assert answer[("ok", 9)].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert answer[("nope", 0)].error_code == 3


def test_bad_acks_and_timestamps(client: BlockingConnection) -> None:
    answer = _produce(client, {("ok", 0): build_batch([Record(None, b"v")])}, acks=2)
    assert answer[("ok", 0)].error_code == 21  # INVALID_REQUIRED_ACKS
    future = build_batch([Record(None, b"v", 10**13 * 4)])  # year 3237: past message.timestamp.after.max.ms
    assert _produce(client, {("ok", 0): future})[("ok", 0)].error_code == 32  # INVALID_TIMESTAMP


def test_a_failed_acks_0_produce_closes_the_connection(seglog_broker) -> None:
    with connect(seglog_broker.bootstrap_servers) as c:
        body = ProduceRequestData(
            transactional_id=None,
            acks=0,
            timeout_ms=1000,
            topic_data=[
                ProduceRequestData.TopicProduceData(
                    name="nowhere",
                    partition_data=[
                        ProduceRequestData.PartitionProduceData(index=0, records=build_batch([Record(None, b"v")]))
                    ],
                )
            ],
        )
        c.send_only(ApiKey.PRODUCE, body)
        with pytest.raises(BrokerNotAvailableError, match="closed the connection"):
            c.request(ApiKey.API_VERSIONS, ApiVersionsRequestData())


def test_zstd_needs_produce_v7(client: BlockingConnection) -> None:
    """Kafka refuses zstd batches in Produce v3-6 (clients older than KIP-110 cannot read them back
    either); Sarama 1.22 sends them at v3."""
    zstd = build_batch([Record(None, b"z")], compression=Compression.ZSTD)
    before = _end(client, "ok")
    old = _produce(client, {("ok", 0): zstd}, version=6)
    assert old[("ok", 0)].error_code == 76  # UNSUPPORTED_COMPRESSION_TYPE
    assert _end(client, "ok") == before
    assert (
        _produce(client, {("ok", 0): build_batch([Record(None, b"g")], compression=Compression.GZIP)}, version=6)[
            ("ok", 0)
        ].error_code
        == 0
    )
    assert _produce(client, {("ok", 0): zstd}, version=7)[("ok", 0)].error_code == 0
