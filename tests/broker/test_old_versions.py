"""What only the oldest versions Kafka 3.9 serves ask, spoken by a raw client: ListOffsets v0's
offsets arrays (segment base offsets, ``max_num_offsets`` of them), Produce v0-2's message sets
appended as v2 batches, Fetch v0-3's records in their message format (a zstd batch refused)."""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import BlockingConnection, connect
from seglog.protocol import ApiKey, ErrorCode
from seglog.protocol.message_data import (
    DeleteRecordsRequestData,
    FetchRequestData,
    ListOffsetsRequestData,
    ProduceRequestData,
)
from seglog.records import BatchIterator, Compression, Record, build_batch, build_message_set

MS = int(time.time() * 1000)


def create(bootstrap: str, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(30)


def produce(client: BlockingConnection, topic: str, records: bytes, version: int) -> int:
    partition = ProduceRequestData.PartitionProduceData(index=0, records=records)
    body = ProduceRequestData(
        acks=1,
        timeout_ms=10_000,
        topic_data=[ProduceRequestData.TopicProduceData(name=topic, partition_data=[partition])],
    )
    (answer,) = client.request(ApiKey.PRODUCE, body, version).responses[0].partition_responses
    assert answer.error_code == 0, answer
    base: int = answer.base_offset
    return base


def old_style_offsets(client: BlockingConnection, topic: str, timestamp: int, count: int, partition: int = 0) -> Any:
    part = ListOffsetsRequestData.ListOffsetsPartition(
        partition_index=partition, timestamp=timestamp, max_num_offsets=count
    )
    body = ListOffsetsRequestData(
        replica_id=-1, topics=[ListOffsetsRequestData.ListOffsetsTopic(name=topic, partitions=[part])]
    )
    (answer,) = client.request(ApiKey.LIST_OFFSETS, body, 0).topics[0].partitions
    return answer.error_code, answer.old_style_offsets


def fetch(client: BlockingConnection, topic: str, offset: int, version: int) -> Any:
    part = FetchRequestData.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    body = FetchRequestData(
        replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[FetchRequestData.FetchTopic(topic=topic, partitions=[part])]
    )
    (answer,) = client.request(ApiKey.FETCH, body, version).responses[0].partitions
    return answer


def test_list_offsets_v0_answers_segment_base_offsets(seglog_broker) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "v0-offsets", **{"segment.bytes": "200"})  # a segment per produce
    with connect(bootstrap) as client:
        bases = [produce(client, "v0-offsets", build_message_set([Record(b"k", b"v" * 60, MS)] * 2, magic=1), 2)]
        for _ in range(3):
            bases.append(
                produce(client, "v0-offsets", build_message_set([Record(b"k", b"v" * 60, MS)] * 2, magic=1), 2)
            )
        assert bases == [0, 2, 4, 6]
        assert old_style_offsets(client, "v0-offsets", -1, 1) == (0, [8])
        assert old_style_offsets(client, "v0-offsets", -1, 3) == (0, [8, 6, 4])
        assert old_style_offsets(client, "v0-offsets", -1, 100) == (0, [8, 6, 4, 2, 0])
        assert old_style_offsets(client, "v0-offsets", -2, 100) == (0, [0])
        assert old_style_offsets(client, "v0-offsets", 1000, 100) == (0, [])  # before every segment was written
        assert old_style_offsets(client, "v0-offsets", -3, 1)[0] == ErrorCode.UNSUPPORTED_VERSION  # max timestamp: v7
        assert old_style_offsets(client, "v0-offsets", -1, 1, partition=5)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_message_sets_in_and_out(seglog_broker) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "v0-sets")
    with connect(bootstrap) as client:
        plain = build_message_set([Record(b"a", b"1", MS), Record(b"b", b"2", MS + 1)], magic=0)
        gzip = build_message_set([Record(b"c", b"3", MS + 2)], magic=1, compression=Compression.GZIP)
        assert produce(client, "v0-sets", plain, 0) == 0 and produce(client, "v0-sets", gzip, 1) == 2
        latest = fetch(client, "v0-sets", 0, 4)  # the log's own format: one v2 batch per produce
        assert [(b.magic, b.compression, b.record_count) for b in BatchIterator(latest.records)] == [
            (2, Compression.NONE, 2),
            (2, Compression.GZIP, 1),
        ]
        for version, magic in ((0, 0), (1, 0), (2, 1), (3, 1)):
            answer = fetch(client, "v0-sets", 1, version)
            assert answer.error_code == 0 and answer.high_watermark == 3
            batches = list(BatchIterator(answer.records))
            assert {(b.magic, b.compression) for b in batches} == {(magic, 0), (magic, Compression.GZIP)}
            got = [(r.offset, r.key, r.timestamp) for b in batches for r in b.records()]
            assert got == [(1, b"b", -1), (2, b"c", MS + 2 if magic else -1)], version  # from the fetch offset


def test_a_zstd_batch_cannot_be_fetched_below_v10(seglog_broker) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "v0-zstd")
    with connect(bootstrap) as client:
        produce(client, "v0-zstd", bytes(build_batch([Record(b"k", b"v", MS)], compression=Compression.ZSTD)), 7)
        assert fetch(client, "v0-zstd", 0, 3).error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        assert fetch(client, "v0-zstd", 0, 4).error_code == 0


def test_list_offsets_earliest_local_and_latest_tiered_without_tiered_storage(seglog_broker) -> None:
    """v8's -4 (earliest local) is the log start offset, v9's -5 (latest tiered) none: there is
    no remote storage, as Kafka's log without it answers."""
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "v9-offsets")
    with connect(bootstrap) as client:
        produce(client, "v9-offsets", bytes(build_batch([Record(b"k", b"v", MS)] * 5)), 9)
        client.request(
            ApiKey.DELETE_RECORDS,
            DeleteRecordsRequestData(
                topics=[
                    DeleteRecordsRequestData.DeleteRecordsTopic(
                        name="v9-offsets",
                        partitions=[DeleteRecordsRequestData.DeleteRecordsPartition(partition_index=0, offset=2)],
                    )
                ],
                timeout_ms=5000,
            ),
            2,
        )
        for timestamp, version, offset in ((-2, 9, 2), (-4, 8, 2), (-4, 9, 2), (-5, 9, -1), (-1, 9, 5)):
            part = ListOffsetsRequestData.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
            body = ListOffsetsRequestData(
                replica_id=-1, topics=[ListOffsetsRequestData.ListOffsetsTopic(name="v9-offsets", partitions=[part])]
            )
            (answer,) = client.request(ApiKey.LIST_OFFSETS, body, version).topics[0].partitions
            assert (answer.error_code, answer.offset) == (0, offset), (timestamp, version)
