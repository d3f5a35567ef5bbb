"""Sarama 1.22 (Debian's golang-github-shopify-sarama-dev, built with Debian's Go) against an
embedded broker, configured as Kafka 2.1 (Produce v3, Fetch v4, ListOffsets v1, Metadata v5):
admin, a synchronous producer with every codec at acks 1 and all, a partition consumer from the
oldest offset and from an offset, ListOffsets. Then as Kafka 0.8.2 (Produce v0 and Fetch v0 with
magic 0 message sets, ListOffsets v0, Metadata v0) and 0.10.0 (Produce v2 and Fetch v2 with magic
1, ListOffsets v0, Metadata v1), which Kafka 3.x still serves: the broker converts their messages
to v2 batches on append and back on fetch."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import BASE_TS, records, results, round_trip, run_ops

VERSION = "2.1.0"


@pytest.fixture(scope="module")
def sarama(sarama_command: list[str], seglog_broker: Any):
    def run(*ops: dict[str, Any], version: str = VERSION) -> list[dict[str, Any]]:
        request = {"bootstrap": seglog_broker.bootstrap_servers, "version": version, "ops": list(ops)}
        return run_ops(sarama_command, request)

    return run


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_produce_each_codec_and_acks_then_consume(sarama, codec: str) -> None:
    ops, expected = round_trip(f"sarama-{codec}", codec, "consume", -2)  # -2: OffsetOldest
    _, sent_1, sent_all, oldest, from_offset = results(sarama(*ops))
    assert sent_1 == list(range(30)) and sent_all == list(range(30, 55))
    expected = [{**r, "partition": 1} for r in expected]
    assert oldest == expected
    assert from_offset == expected[37:]


def test_zstd_at_produce_v3_is_refused_as_kafka_does(sarama) -> None:
    """Sarama 1.22 sends zstd batches in Produce v3; Kafka accepts zstd from v7 only (Sarama 1.23
    moved to v7 for it) and so does seglog: the error comes back, nothing is appended."""
    topic = "sarama-zstd"
    outcomes = sarama(
        {"op": "create_topic", "topic": topic, "partitions": 1},
        {"op": "produce", "topic": topic, "partition": 0, "compression": "zstd", "acks": 1, "records": records(3, "z")},
        {"op": "offset", "topic": topic, "partition": 0, "timestamp": -1},
    )
    assert outcomes[1] == {
        "error": "kafka server: The requesting client does not support the compression type of given partition."
    }
    assert outcomes[2] == {"result": 0}


def test_admin_topics_configs_and_partitions(sarama, seglog_broker: Any) -> None:
    topic = "sarama-admin"
    _, listed, cluster, configs, _, reconfigured, _, partitions, _, relisted = results(
        sarama(
            {"op": "create_topic", "topic": topic, "partitions": 2, "config": {"retention.ms": "123456"}},
            {"op": "list_topics"},
            {"op": "describe_cluster"},
            {"op": "describe_config", "topic": topic},
            {"op": "alter_config", "topic": topic, "config": {"cleanup.policy": "compact"}},
            {"op": "describe_config", "topic": topic},
            {"op": "create_partitions", "topic": topic, "partitions": 3},
            {"op": "partitions", "topic": topic},
            {"op": "delete_topic", "topic": topic},
            {"op": "list_topics"},
        )
    )
    # ListTopics is Metadata plus DescribeConfigs: the topic's own settings only
    assert listed[topic] == {"partitions": 2, "replication_factor": 1, "config": {"retention.ms": "123456"}}
    # Sarama asks Metadata v0 here, which carries no controller id (-1)
    assert cluster == {"brokers": [f"0@{seglog_broker.bootstrap_servers}"], "controller": -1}
    assert configs["retention.ms"] == {"value": "123456", "default": False, "read_only": False}
    assert configs["segment.bytes"] == {"value": "1073741824", "default": True, "read_only": False}
    assert reconfigured["cleanup.policy"]["value"] == "compact"
    assert reconfigured["retention.ms"]["default"] is True  # AlterConfigs replaces the whole set
    assert partitions == [0, 1, 2]
    assert topic not in relisted


def test_offsets_and_delete_records(sarama) -> None:
    topic = "sarama-offsets"
    _, _, earliest, latest, _, moved, latest_after = results(
        sarama(
            {"op": "create_topic", "topic": topic, "partitions": 1},
            {
                "op": "produce",
                "topic": topic,
                "partition": 0,
                "compression": "gzip",
                "acks": 1,
                "records": records(20, "o"),
            },
            {"op": "offset", "topic": topic, "partition": 0, "timestamp": -2},
            {"op": "offset", "topic": topic, "partition": 0, "timestamp": -1},
            {"op": "delete_records", "topic": topic, "partition": 0, "offset": 7},
            {"op": "offset", "topic": topic, "partition": 0, "timestamp": -2},
            {"op": "offset", "topic": topic, "partition": 0, "timestamp": -1},
        )
    )
    assert (earliest, latest, moved, latest_after) == (0, 20, 7, 20)


def test_offsets_for_times(sarama) -> None:
    topic = "sarama-times"
    _, _, at_time, none_later = results(
        sarama(
            {"op": "create_topic", "topic": topic, "partitions": 1},
            {
                "op": "produce",
                "topic": topic,
                "partition": 0,
                "compression": "none",
                "acks": 1,
                "records": records(20, "t"),
            },
            {"op": "offset", "topic": topic, "partition": 0, "timestamp": BASE_TS + 10 * 13 - 5},
            {"op": "offset", "topic": topic, "partition": 0, "timestamp": BASE_TS + 10_000},
        )
    )
    assert (at_time, none_later) == (13, -1)


# lz4 came with Kafka 0.10's messages (Sarama refuses it before)
OLD = [
    (v, c) for v in ("0.8.2.0", "0.10.0.0") for c in ("none", "gzip", "snappy", "lz4") if (v, c) != ("0.8.2.0", "lz4")
]


@pytest.mark.parametrize(("version", "codec"), OLD)
def test_old_protocol_versions_produce_and_consume(sarama, version: str, codec: str) -> None:
    """Legacy message sets both ways; magic 0 (0.8.2) carries no timestamp, neither carries
    headers. ListOffsets v0 answers the log start and end."""
    topic = f"sarama-{version}-{codec}"
    (create, *ops), expected = round_trip(topic, codec, "consume", -2)
    results(sarama(create))  # Sarama's admin needs Kafka 0.10.1's CreateTopics
    # records before Kafka 0.11 have no headers: Sarama refuses to send them
    ops = [{**o, "records": [{**r, "headers": []} for r in o["records"]]} if "records" in o else o for o in ops]
    ops += [
        {"op": "offset", "topic": topic, "partition": 1, "timestamp": -2},
        {"op": "offset", "topic": topic, "partition": 1, "timestamp": -1},
        {"op": "partitions", "topic": topic},
    ]
    sent_1, sent_all, oldest, from_offset, earliest, latest, partitions = results(sarama(*ops, version=version))
    assert sent_1 == list(range(30)) and sent_all == list(range(30, 55))
    timestamps = version != "0.8.2.0"
    expected = [{**r, "partition": 1, "headers": []} for r in expected]
    got = [{**r, "timestamp": r["timestamp"] if timestamps else None} for r in oldest + from_offset]
    want = [{**r, "timestamp": r["timestamp"] if timestamps else None} for r in expected + expected[37:]]
    assert got == want
    assert (earliest, latest, partitions) == (0, 55, [0, 1])
