"""Dynamic broker configs (Kafka's DynamicBrokerConfig) for the connection limits, on a real
broker alone (kept in its log dir): set and removed with ``seglog configs --entity-type
brokers`` and confluent-kafka's AdminClient, per broker and as the cluster's ``<default>``,
taking effect on the listeners at once, told by DescribeConfigs with their sources, refused
with Kafka's messages when Kafka refuses them, and kept across a restart."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from seglog.broker.embedded import EmbeddedBroker
from seglog.cli import main
from seglog.client import BlockingConnection
from seglog.errors import ErrorCode
from seglog.protocol import ApiKey
from seglog.protocol.message_data import IncrementalAlterConfigsRequestData, IncrementalAlterConfigsResponseData

from .test_connection_limits import TWO_LISTENERS, Waiting, alive, connect

Factory = Callable[..., EmbeddedBroker]


def configs(broker: EmbeddedBroker, *argv: str) -> int:
    return main(["configs", "--bootstrap-server", broker.bootstrap_servers, *argv])


def admin(broker: EmbeddedBroker) -> AdminClient:
    """A client of the broker's inter-broker listener when it has one (a full broker still
    serves it), else of its only listener."""
    ports = {s.listener: s.port for s in broker.server.socket_servers}
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{ports.get('INTERNAL', broker.port)}"})


def set_config(broker: EmbeddedBroker, name: str, key: str, value: str | None) -> None:
    """A broker's ``key`` set (None: deleted) with confluent-kafka."""
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    entry = ConfigEntry(key, value, incremental_operation=op)
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[entry])
    client = admin(broker)  # held until the answer came: its handle ends with it
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def described(broker: EmbeddedBroker, name: str = "0") -> dict[str, ConfigEntry]:
    resource = ConfigResource(ResourceType.BROKER, name)
    client = admin(broker)
    (future,) = client.describe_configs([resource]).values()
    entries: dict[str, ConfigEntry] = future.result(timeout=30)
    return entries


def test_max_connections_set_and_removed_while_the_broker_runs(seglog_broker_factory: Factory) -> None:
    broker = seglog_broker_factory(config=TWO_LISTENERS)
    # the tool goes through the inter-broker listener, which a full broker still serves
    internal = f"127.0.0.1:{broker.server.port_of('INTERNAL')}"
    tool = ["configs", "--bootstrap-server", internal, "--entity-type", "brokers", "--entity-name", "0", "--alter"]
    assert main([*tool, "--add-config", "max.connections=2"]) == 0
    held = [connect(broker) for _ in range(2)]
    waiting = Waiting(broker)
    assert waiting.still_waiting()
    # removed: the broker-wide limit is Kafka's default again, and the waiting connection is
    # served (the tool's inter-broker connection took the broker past the limit meanwhile: the
    # held client connections made room for it, as Kafka's closeExcessConnections)
    assert main([*tool, "--delete-config", "max.connections"]) == 0
    more = [connect(broker) for _ in range(3)]
    for conn in [waiting.served(), *more]:
        assert alive(conn)
        conn.close()
    for conn in held:
        conn.close()


def test_the_cluster_default_and_the_broker_s_own_value_and_their_sources(
    seglog_broker_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    broker = seglog_broker_factory(config={**TWO_LISTENERS, "max.connections": 1000})
    assert configs(broker, "--entity-type", "brokers", "--entity-default", "--alter",
                   "--add-config", "max.connections=50,max.connection.creation.rate=100") == 0  # fmt: skip
    assert capsys.readouterr().out == "Completed updating default config for brokers in the cluster.\n"
    entry = described(broker)["max.connections"]
    assert (entry.value, entry.source) == ("50", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert not entry.is_read_only
    set_config(broker, "0", "max.connections", "40")
    entry = described(broker)["max.connections"]
    assert (entry.value, entry.source) == ("40", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    capsys.readouterr()
    assert configs(broker, "--entity-type", "brokers", "--entity-default", "--describe") == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0] == "Default configs for brokers in the cluster are:"
    assert [line.split(" ")[2] for line in shown[1:]] == ["max.connection.creation.rate=100", "max.connections=50"]
    assert described(broker)["log.retention.hours"].is_read_only  # a static one
    # a listener's own limit, as Kafka's listener.name.<l>.max.connections
    set_config(broker, "0", "listener.name.plaintext.max.connections", "1")
    assert described(broker)["listener.name.plaintext.max.connections"].value == "1"
    first = connect(broker)
    waiting = Waiting(broker)
    assert waiting.still_waiting()
    set_config(broker, "0", "listener.name.plaintext.max.connections", None)
    waiting.served().close()
    first.close()


def test_the_dynamic_configs_are_kept_across_a_restart(seglog_broker_factory: Factory, tmp_path: object) -> None:
    log_dir = str(tmp_path)
    broker = seglog_broker_factory(log_dir=log_dir, config=TWO_LISTENERS)
    set_config(broker, "0", "max.connections", "1")
    internal = f"127.0.0.1:{broker.server.port_of('INTERNAL')}"
    assert main(["configs", "--bootstrap-server", internal, "--entity-type", "brokers", "--entity-default",
                 "--alter", "--add-config", "max.connections.per.ip=7"]) == 0  # fmt: skip
    broker.stop()
    again = seglog_broker_factory(log_dir=log_dir, config=TWO_LISTENERS)
    entries = described(again)
    assert (entries["max.connections"].value, entries["max.connections.per.ip"].value) == ("1", "7")
    held = connect(again)
    waiting = Waiting(again)
    assert waiting.still_waiting()
    held.close()
    waiting.served().close()


def alter_broker(broker: EmbeddedBroker, name: str, key: str, value: str) -> tuple[int, str | None]:
    Op = IncrementalAlterConfigsRequestData.AlterableConfig
    resource = IncrementalAlterConfigsRequestData.AlterConfigsResource(
        resource_type=4, resource_name=name, configs=[Op(name=key, config_operation=0, value=value)]
    )
    with BlockingConnection(broker.host, broker.port, "dyn-test") as conn:
        answer: IncrementalAlterConfigsResponseData = conn.request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequestData(resources=[resource])
        )
    r = answer.responses[0]
    return r.error_code, r.error_message


RESOURCE = "Invalid config value for resource ConfigResource(type=BROKER, name='0'): "


@pytest.mark.parametrize(
    ("name", "key", "value", "message"),
    [
        ("0", "max.connections", "-1",
         RESOURCE + "Invalid value -1 for configuration max.connections: Value must be at least 0"),
        ("0", "max.connection.creation.rate", "fast",
         RESOURCE + "Invalid value fast for configuration max.connection.creation.rate: Not a number of type INT"),
        ("0", "log.retention.ms", "1000", RESOURCE + "Cannot update these configs dynamically: Set(log.retention.ms)"),
        ("0", "listener.name.plaintext.max.connections", "0", RESOURCE + "Invalid max.connections 0"),
        ("0", "max.connections.per.ip", "0",
         RESOURCE + "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property "
         "is set."),
        ("7", "max.connections", "10", "Unexpected broker id, expected 0, but received 7"),
        ("b0", "max.connections", "10", "Broker id must be an integer, but it is: b0"),
    ],
)  # fmt: skip
def test_bad_dynamic_configs_are_refused_with_kafka_s_messages(
    seglog_broker: EmbeddedBroker, name: str, key: str, value: str, message: str
) -> None:
    assert alter_broker(seglog_broker, name, key, value) == (ErrorCode.INVALID_REQUEST, message)
    assert "max.connections" not in {k for k, e in described(seglog_broker).items() if e.source != 5}
    assert all(alive(c) for c in [connect(seglog_broker)])  # the broker goes on serving
