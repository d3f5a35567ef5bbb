"""seglog.protocol against kio (PyPI), in the same run: microseconds per message and the ratio.

Messages a broker handles most: Produce v9 requests (one partition of 16 KiB records) decoded,
Fetch v12 requests (6 partitions) decoded, Fetch v12 responses (6 partitions of 64 KiB records)
and Produce v9 responses encoded, Metadata v12 responses (20 topics x 6 partitions) encoded. kio
reads and writes the same bodies (its entities made by its own reader from our bytes). Our
encoders hand large records over as parts of their own (written by the broker with sendfile or
writev); kio copies them into its buffer.
"""

from __future__ import annotations

import io
import sys
import timeit
import uuid
from collections.abc import Callable

from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from seglog.protocol import ApiKey, decode_request, encode_request, encode_response
from seglog.protocol.message_data import (
    FetchRequestData,
    FetchResponseData,
    MetadataResponseData,
    ProduceRequestData,
    ProduceResponseData,
)

REPEATS = 5


def best_us(fn: Callable[[], object]) -> float:
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(REPEATS, number)) / number * 1e6


def joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def produce_request() -> ProduceRequestData:
    partitions = [ProduceRequestData.PartitionProduceData(index=0, records=b"r" * 16384)]
    return ProduceRequestData(
        acks=-1,
        timeout_ms=30000,
        topic_data=[ProduceRequestData.TopicProduceData(name="events", partition_data=partitions)],
    )


def fetch_request() -> FetchRequestData:
    partitions = [
        FetchRequestData.FetchPartition(partition=p, fetch_offset=1000 * p, partition_max_bytes=1 << 20)
        for p in range(6)
    ]
    return FetchRequestData(
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=50 << 20,
        topics=[FetchRequestData.FetchTopic(topic="events", partitions=partitions)],
    )


def fetch_response() -> FetchResponseData:
    partitions = [
        FetchResponseData.PartitionData(
            partition_index=p, high_watermark=10**6, last_stable_offset=10**6, records=b"b" * 65536
        )
        for p in range(6)
    ]
    return FetchResponseData(
        responses=[FetchResponseData.FetchableTopicResponse(topic="events", partitions=partitions)]
    )


def produce_response() -> ProduceResponseData:
    partitions = [ProduceResponseData.PartitionProduceResponse(index=0, base_offset=12345, log_start_offset=0)]
    return ProduceResponseData(
        responses=[ProduceResponseData.TopicProduceResponse(name="events", partition_responses=partitions)]
    )


def metadata_response() -> MetadataResponseData:
    brokers = [MetadataResponseData.MetadataResponseBroker(node_id=1, host="localhost", port=9092)]
    topics = [
        MetadataResponseData.MetadataResponseTopic(
            name=f"topic-{t}",
            topic_id=uuid.UUID(int=t + 1),
            partitions=[
                MetadataResponseData.MetadataResponsePartition(
                    partition_index=p, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1]
                )
                for p in range(6)
            ],
        )
        for t in range(20)
    ]
    return MetadataResponseData(brokers=brokers, cluster_id="seglog", controller_id=1, topics=topics)


def kio_writer(cls: type) -> Callable[[object], bytes]:
    write = entity_writer(cls)

    def encode(entity: object) -> bytes:
        buf = io.BytesIO()
        write(buf, entity)
        return buf.getvalue()

    return encode


def main() -> None:
    rows = []

    for name, api_key, version, body in (
        ("Produce v9 request, 16 KiB, decode", ApiKey.PRODUCE, 9, produce_request()),
        ("Fetch v12 request, 6 partitions, decode", ApiKey.FETCH, 12, fetch_request()),
    ):
        frame = joined(encode_request(api_key, version, 1, "bench", body))[4:]
        header = 10 + len("bench") + 1  # key, version, correlation id, client id, tagged fields
        read = entity_reader(load_request_schema(api_key, version))
        view = memoryview(frame)[header:]
        rows.append((name, best_us(lambda f=frame: decode_request(f)), best_us(lambda r=read, v=view: r(v, 0))))

    for name, api_key, version, body in (
        ("Fetch v12 response, 6 x 64 KiB, encode", ApiKey.FETCH, 12, fetch_response()),
        ("Produce v9 response, encode", ApiKey.PRODUCE, 9, produce_response()),
        ("Metadata v12 response, 20 x 6, encode", ApiKey.METADATA, 12, metadata_response()),
    ):
        frame = joined(encode_response(api_key, version, 1, body))
        cls = load_response_schema(api_key, version)
        entity, _ = entity_reader(cls)(memoryview(frame)[9:], 0)  # after size, correlation id, tags
        write = kio_writer(cls)
        assert write(entity) == frame[9:], "kio and seglog encode differently"
        ours = best_us(lambda k=api_key, v=version, b=body: encode_response(k, v, 1, b))
        rows.append((name, ours, best_us(lambda w=write, e=entity: w(e))))

    width = max(len(r[0]) for r in rows)
    print(f"{'message':<{width}}  seglog us  kio us  kio/seglog")
    for name, ours, theirs in rows:
        print(f"{name:<{width}}  {ours:9.2f}  {theirs:6.2f}  {theirs / ours:9.1f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
