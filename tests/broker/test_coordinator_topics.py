"""The coordinators' topics and the topics they keep offsets of, on one broker: Metadata asking
for ``__consumer_offsets`` or ``__transaction_state`` by name makes it as its coordinator does
(``offsets.topic.num.partitions`` / ``transaction.state.log.num.partitions``, compacted,
internal), never with ``num.partitions`` (Kafka's AutoTopicCreationManager); and a deleted
topic's committed offsets are dropped with tombstones, so that they do not come back after a
restart nor for a new topic of the same name (Kafka's GroupCoordinator.onPartitionsDeleted)."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import seglog.broker
from seglog.client import connect
from seglog.protocol import ApiKey
from seglog.protocol.message_data import DescribeConfigsRequestData, MetadataRequestData

CONFIG = {"num.partitions": 2, "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 5}
NO_OFFSET = -1001  # confluent-kafka's OFFSET_INVALID: nothing committed


@pytest.mark.parametrize(("topic", "partitions"), [("__consumer_offsets", 3), ("__transaction_state", 5)])
def test_metadata_makes_an_internal_topic_as_its_coordinator_does(tmp_path: Path, topic: str, partitions: int) -> None:
    with seglog.broker.start(str(tmp_path), config=CONFIG) as broker, connect(broker.bootstrap_servers) as client:
        asked = MetadataRequestData([MetadataRequestData.MetadataRequestTopic(name=topic)], True)
        (found,) = client.request(ApiKey.METADATA, asked).topics
        assert (found.error_code, found.is_internal, len(found.partitions)) == (0, True, partitions)
        resource = DescribeConfigsRequestData.DescribeConfigsResource(2, topic, ["cleanup.policy"])
        described = client.request(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequestData([resource]))
        assert described.results[0].configs[0].value == "compact"


def committed(bootstrap: str, group: str, tps: list[tuple[str, int]]) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30)]
    finally:
        consumer.close()


def commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def test_a_deleted_topic_loses_its_committed_offsets(tmp_path: Path) -> None:
    tps = [("gone", 0), ("gone", 1), ("kept", 0)]

    with seglog.broker.start(str(tmp_path), config=CONFIG) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic("gone", 2, 1), NewTopic("kept", 1, 1)]).values():
            future.result(30)
        commit(broker.bootstrap_servers, "readers", {("gone", 0): 5, ("gone", 1): 6, ("kept", 0): 7})
        assert committed(broker.bootstrap_servers, "readers", tps) == [5, 6, 7]
        admin.delete_topics(["gone"])["gone"].result(30)
        assert committed(broker.bootstrap_servers, "readers", tps) == [NO_OFFSET, NO_OFFSET, 7]

    # the tombstones were written: a restart does not bring them back, nor does a new "gone"
    with seglog.broker.start(str(tmp_path), config=CONFIG) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic("gone", 2, 1)])["gone"].result(30)
        assert committed(broker.bootstrap_servers, "readers", tps) == [NO_OFFSET, NO_OFFSET, 7]
