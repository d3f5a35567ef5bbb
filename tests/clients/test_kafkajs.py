"""kafkajs 2.2.4 (npm, tests/clients/js) against an embedded broker: admin, produce with its
codecs (none, gzip, and snappy through kafkajs-snappy; its lz4 and zstd codecs are native add-ons
that npm does not build here) at acks 1 and all, Fetch decoded by kafkajs, offsets.

kafkajs consumes only in a consumer group, which these tests leave alone: records are fetched
through the client's own broker connection, the requests and decoder its consumer uses."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import BASE_TS, records, results, round_trip, run_ops


@pytest.fixture(scope="module")
def kafkajs(kafkajs_command: list[str], seglog_broker: Any):
    def run(*ops: dict[str, Any]) -> list[dict[str, Any]]:
        return run_ops(kafkajs_command, {"bootstrap": seglog_broker.bootstrap_servers, "ops": list(ops)})

    return run


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy"])
def test_produce_each_codec_and_acks_then_fetch(kafkajs, codec: str) -> None:
    ops, expected = round_trip(f"kafkajs-{codec}", codec, "fetch", 0)
    created, sent_1, sent_all, from_start, from_offset = results(kafkajs(*ops))
    assert created is True
    assert sent_1 == [{"partition": 1, "error_code": 0, "base_offset": 0}]
    assert sent_all == [{"partition": 1, "error_code": 0, "base_offset": 30}]
    assert from_start == expected
    assert from_offset == expected[37:]


def test_admin_topics_configs_and_partitions(kafkajs, seglog_broker: Any) -> None:
    topic = "kafkajs-admin"
    (
        created,
        listed,
        metadata,
        cluster,
        configs,
        altered,
        reconfigured,
        grown,
        regrown,
        deleted,
        relisted,
    ) = results(
        kafkajs(
            {"op": "create_topic", "topic": topic, "partitions": 2, "config": {"retention.ms": "123456"}},
            {"op": "list_topics"},
            {"op": "metadata", "topic": topic},
            {"op": "describe_cluster"},
            {"op": "describe_config", "topic": topic},
            {"op": "alter_config", "topic": topic, "config": {"cleanup.policy": "compact"}},
            {"op": "describe_config", "topic": topic},
            {"op": "create_partitions", "topic": topic, "partitions": 3},
            {"op": "metadata", "topic": topic},
            {"op": "delete_topic", "topic": topic},
            {"op": "list_topics"},
        )
    )
    assert created is True and topic in listed
    assert metadata == [{"partition": p, "leader": 0, "replicas": [0], "isr": [0]} for p in (0, 1)]
    host, port = seglog_broker.bootstrap_servers.rsplit(":", 1)
    assert cluster["brokers"] == [{"nodeId": 0, "host": host, "port": int(port)}]
    assert cluster["controller"] == 0
    assert configs["retention.ms"] == {"value": "123456", "default": False, "read_only": False}
    assert configs["cleanup.policy"] == {"value": "delete", "default": True, "read_only": False}
    # AlterConfigs replaces the topic's whole set: retention.ms falls back to its default
    assert altered == [0]
    assert reconfigured["cleanup.policy"]["value"] == "compact"
    assert reconfigured["retention.ms"] == {"value": "604800000", "default": True, "read_only": False}
    assert grown is None and [p["partition"] for p in regrown] == [0, 1, 2]
    assert deleted is None and topic not in relisted


def test_offsets_by_time_and_delete_records(kafkajs) -> None:
    topic = "kafkajs-offsets"
    sent = records(20, "offsets")
    produce = {"op": "produce", "topic": topic, "partition": 0, "compression": "gzip", "acks": 1}
    _, _, _, watermarks, at_time, past_all, deleted, after = results(
        kafkajs(
            {"op": "create_topic", "topic": topic, "partitions": 2},
            {**produce, "records": sent[:12]},  # two batches: the time lookup lands in the second
            {**produce, "records": sent[12:]},
            {"op": "offsets", "topic": topic},
            {"op": "offsets_for_time", "topic": topic, "timestamp": BASE_TS + 10 * 13 - 5},
            {"op": "offsets_for_time", "topic": topic, "timestamp": BASE_TS + 10_000},
            {"op": "delete_records", "topic": topic, "partition": 0, "offset": 7},
            {"op": "offsets", "topic": topic},
        )
    )
    assert watermarks == [{"partition": 0, "low": 0, "high": 20}, {"partition": 1, "low": 0, "high": 0}]
    # the first record at or after the time; where there is none Kafka answers -1, which kafkajs
    # turns into the partition's high watermark
    assert at_time == [{"partition": 0, "offset": 13}, {"partition": 1, "offset": 0}]
    assert past_all == [{"partition": 0, "offset": 20}, {"partition": 1, "offset": 0}]
    assert deleted is None
    assert after == [{"partition": 0, "low": 7, "high": 20}, {"partition": 1, "low": 0, "high": 0}]
