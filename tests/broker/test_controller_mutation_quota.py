"""KIP-599's controller_mutation_rate on a real broker: partitions created and deleted counted
in a token bucket per client (a burst of quota x 10 s here: two samples of 10 s). CreateTopics
from v6 (and DeleteTopics from v5, CreatePartitions from v3) refuses a topic with
THROTTLING_QUOTA_EXCEEDED while its client is over the quota; older versions, which
confluent-kafka sends, go through and the client is throttled (its throttle callback says so)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from seglog.broker.embedded import EmbeddedBroker
from seglog.cli import main
from seglog.client import BlockingConnection
from seglog.errors import ErrorCode
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    CreatePartitionsRequestData,
    CreateTopicsRequestData,
    DeleteTopicsRequestData,
)


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {"quota.window.num": 2, "quota.window.size.seconds": 10, "num.partitions": 1}


def limit(broker: EmbeddedBroker, client_id: str, rate: float) -> None:
    argv = ["--entity-type", "clients", "--entity-name", client_id, "--add-config", f"controller_mutation_rate={rate}"]
    assert main(["configs", "--bootstrap-server", broker.bootstrap_servers, "--alter", *argv]) == 0


def create_topics(conn: BlockingConnection, version: int, **partitions: int) -> Any:
    Topic = CreateTopicsRequestData.CreatableTopic
    topics = [Topic(name=name, num_partitions=n, replication_factor=1) for name, n in partitions.items()]
    return conn.request(ApiKey.CREATE_TOPICS, CreateTopicsRequestData(topics=topics, timeout_ms=30_000), version)


def test_a_strict_request_is_refused_topic_by_topic_once_over_the_quota(seglog_broker: EmbeddedBroker) -> None:
    limit(seglog_broker, "strict", 1)  # a burst of 10 partitions, refilled at 1 a second
    with BlockingConnection(seglog_broker.host, seglog_broker.port, "strict") as conn:
        answer = create_topics(conn, 7, strict_a=10, strict_b=10, strict_c=1)
        errors = {t.name: t.error_code for t in answer.topics}
        # a took the burst, b was let through while the bucket was not below zero and took it to
        # -10, c came while it was
        assert errors == {"strict_a": 0, "strict_b": 0, "strict_c": ErrorCode.THROTTLING_QUOTA_EXCEEDED}
        assert 0 < answer.throttle_time_ms <= 10_000
        messages = {t.name: t.error_message for t in answer.topics}
        assert messages["strict_c"] == "The throttling quota has been exceeded."
    # DeleteTopics from v5 and CreatePartitions from v3 alike, each on a connection of its own (a
    # throttled one is muted: its next request would wait the throttle out); nothing was made
    with BlockingConnection(seglog_broker.host, seglog_broker.port, "strict") as conn:
        deleted = conn.request(
            ApiKey.DELETE_TOPICS,
            DeleteTopicsRequestData(topic_names=["strict_a"], timeout_ms=30_000),
            5,
        )
        assert [t.error_code for t in deleted.responses] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED]
    with BlockingConnection(seglog_broker.host, seglog_broker.port, "strict") as conn:
        grown = conn.request(
            ApiKey.CREATE_PARTITIONS,
            CreatePartitionsRequestData(
                topics=[CreatePartitionsRequestData.CreatePartitionsTopic(name="strict_b", count=11, assignments=None)],
                timeout_ms=30_000,
            ),
            3,
        )
        assert [r.error_code for r in grown.results] == [ErrorCode.THROTTLING_QUOTA_EXCEEDED]
    with BlockingConnection(seglog_broker.host, seglog_broker.port, "free") as conn:  # another client
        assert [t.error_code for t in create_topics(conn, 7, free_a=20).topics] == [0]
    admin = AdminClient({"bootstrap.servers": seglog_broker.bootstrap_servers})
    topics = admin.list_topics(timeout=30).topics
    assert {"strict_a", "strict_b", "free_a"} <= set(topics) and "strict_c" not in topics
    assert len(topics["strict_b"].partitions) == 10


def test_older_versions_go_through_and_their_client_is_throttled(seglog_broker: EmbeddedBroker) -> None:
    limit(seglog_broker, "permissive", 1)
    throttles: list[int] = []
    admin = AdminClient(
        {
            "bootstrap.servers": seglog_broker.bootstrap_servers,
            "client.id": "permissive",
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    # confluent-kafka's CreateTopics is older than v6: 12 partitions against a burst of 10 pass
    admin.create_topics([NewTopic("permissive_a", 12, 1)], request_timeout=30)["permissive_a"].result()
    admin.poll(1)  # the throttle callback is served here
    assert throttles and 0 < throttles[0] <= 2.0  # seconds: the bucket 2 below zero, refilled at 1/s
    # while over it the client is throttled again, the partitions still made
    admin.create_partitions([NewPartitions("permissive_a", 13)], request_timeout=30)["permissive_a"].result()
    assert len(admin.list_topics(timeout=30).topics["permissive_a"].partitions) == 13
