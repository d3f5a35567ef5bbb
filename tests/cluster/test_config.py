"""The cluster's config keys: Kafka's names, defaults and ranges."""

from __future__ import annotations

import pytest

from seglog.config import BrokerConfig, LogConfig, validate_topic_config
from seglog.errors import InvalidConfigurationError

KAFKA_DEFAULTS = {
    "zookeeper.connect": None,
    "zookeeper.session.timeout.ms": 18_000,
    "zookeeper.connection.timeout.ms": None,
    "broker.rack": None,
    "controlled.shutdown.enable": True,
    "controlled.shutdown.max.retries": 3,
    "controlled.shutdown.retry.backoff.ms": 5_000,
    "auto.leader.rebalance.enable": True,
    "leader.imbalance.per.broker.percentage": 10,
    "leader.imbalance.check.interval.seconds": 300,
    "replica.lag.time.max.ms": 30_000,
    "default.replication.factor": 1,
    "num.replica.fetchers": 1,
    "controller.socket.timeout.ms": 30_000,
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
    "transaction.state.log.min.isr": 2,
}


@pytest.mark.parametrize(("name", "default"), KAFKA_DEFAULTS.items())
def test_broker_defaults(name: str, default: object) -> None:
    assert BrokerConfig()[name] == default


def test_values_are_parsed() -> None:
    config = BrokerConfig(
        {
            "zookeeper.connect": "127.0.0.1:2181/seglog",
            "broker.rack": "r1",
            "auto.leader.rebalance.enable": "false",
            "leader.imbalance.check.interval.seconds": "5",
        }
    )
    assert config["zookeeper.connect"] == "127.0.0.1:2181/seglog"
    assert config["broker.rack"] == "r1"
    assert config["auto.leader.rebalance.enable"] is False
    assert config["leader.imbalance.check.interval.seconds"] == 5


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("leader.imbalance.check.interval.seconds", 0),
        ("offsets.topic.replication.factor", 0),
        ("transaction.state.log.replication.factor", 0),
        ("transaction.state.log.min.isr", 0),
        ("min.insync.replicas", 0),
        ("controlled.shutdown.enable", "maybe"),
        ("zookeeper.session.timeout.ms", "soon"),
    ],
)
def test_out_of_range(name: str, value: object) -> None:
    with pytest.raises(InvalidConfigurationError, match=name.replace(".", r"\.")):
        BrokerConfig({name: value})


def test_topic_level_keys_resolve_against_the_broker() -> None:
    assert LogConfig().min_insync_replicas == 1
    assert LogConfig().unclean_leader_election_enable is False
    broker = BrokerConfig({"min.insync.replicas": 2, "unclean.leader.election.enable": "true"})
    assert LogConfig(broker).min_insync_replicas == 2
    assert LogConfig(broker).unclean_leader_election_enable is True
    topic = LogConfig(broker, {"min.insync.replicas": "3", "unclean.leader.election.enable": False})
    assert (topic.min_insync_replicas, topic.unclean_leader_election_enable) == (3, False)
    with pytest.raises(InvalidConfigurationError, match=r"min\.insync\.replicas"):
        validate_topic_config({"min.insync.replicas": 0})
