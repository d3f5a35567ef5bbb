"""The coordinators' broker keys: Kafka's defaults and ranges, read into GroupConfig."""

from __future__ import annotations

import re

import pytest

from seglog.config import BrokerConfig
from seglog.coordinator.group_coordinator import GroupConfig
from seglog.errors import InvalidConfigurationError


def test_kafka_defaults_reach_the_group_config():
    config = GroupConfig.from_broker(BrokerConfig())
    assert config == GroupConfig()
    assert config.offsets_topic_num_partitions == 50
    assert config.offsets_retention_ms == 7 * 24 * 3600 * 1000
    broker = BrokerConfig()
    assert broker["transaction.state.log.num.partitions"] == 50
    assert broker["transaction.max.timeout.ms"] == 900_000
    assert broker["transactional.id.expiration.ms"] == 604_800_000
    assert broker["transaction.abort.timed.out.transaction.cleanup.interval.ms"] == 10_000
    assert broker["producer.id.expiration.ms"] == 86_400_000
    assert broker["offsets.topic.segment.bytes"] == 104_857_600


def test_set_keys_reach_the_group_config():
    broker = BrokerConfig(
        {
            "group.min.session.timeout.ms": "1000",
            "group.max.session.timeout.ms": 5000,
            "group.initial.rebalance.delay.ms": 0,
            "group.max.size": 3,
            "offsets.topic.num.partitions": 4,
            "offsets.retention.minutes": 2,
            "offsets.retention.check.interval.ms": 500,
            "offset.metadata.max.bytes": 10,
        }
    )
    assert GroupConfig.from_broker(broker) == GroupConfig(1000, 5000, 0, 3, 4, 120_000, 500, 10)


@pytest.mark.parametrize(
    "key",
    [
        "offsets.topic.num.partitions",
        "offsets.retention.minutes",
        "offsets.retention.check.interval.ms",
        "group.max.size",
        "transaction.state.log.num.partitions",
        "transaction.max.timeout.ms",
        "transactional.id.expiration.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "producer.id.expiration.ms",
    ],
)
def test_keys_below_kafkas_minimum_are_refused(key):
    with pytest.raises(InvalidConfigurationError, match=re.escape(key)):
        BrokerConfig({key: 0})


def test_a_min_session_timeout_above_the_max_is_refused():
    broker = BrokerConfig({"group.min.session.timeout.ms": 10_000, "group.max.session.timeout.ms": 5_000})
    with pytest.raises(InvalidConfigurationError, match=r"group\.min\.session\.timeout\.ms"):
        GroupConfig.from_broker(broker)
