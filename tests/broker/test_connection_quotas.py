"""Connection quotas per client address (Kafka's ConnectionQuotas) on a real broker:
``max.connections.per.ip`` and its overrides, and an ip entity's ``connection_creation_rate``
set with ``seglog configs --entity-type ips``; clients are confluent-kafka's and seglog's own
connection, which can connect from a chosen loopback address (127.0.0.2)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from seglog.broker.embedded import EmbeddedBroker
from seglog.cli import main
from seglog.client import BlockingConnection
from seglog.errors import BrokerNotAvailableError

Factory = Callable[..., EmbeddedBroker]


def connect(broker: EmbeddedBroker, source: str = "127.0.0.1", timeout: float = 30) -> BlockingConnection:
    """A connection from ``source`` that the broker answered (ApiVersions)."""
    return BlockingConnection(broker.host, broker.port, "quota-test", timeout=timeout, source_host=source)


def refusal(broker: EmbeddedBroker, source: str = "127.0.0.1", timeout: float = 30) -> str:
    """Why a new connection from ``source`` got no answer (the test fails if it got one)."""
    with pytest.raises(BrokerNotAvailableError) as refused:
        connect(broker, source, timeout).close()
    return str(refused.value)


def closed(refused: str) -> bool:
    """Whether the broker closed the connection (a reset when the client's request was unread)."""
    return "closed the connection" in refused or "Connection reset" in refused


def eventually_connects(broker: EmbeddedBroker, source: str = "127.0.0.1") -> BlockingConnection:
    """A connection once the broker has counted a closed one out (its close is the broker's
    event loop's to notice)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return connect(broker, source)
        except BrokerNotAvailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_one_connection_past_max_connections_per_ip_is_closed(seglog_broker_factory: Factory) -> None:
    broker = seglog_broker_factory(
        config={"max.connections.per.ip": 2, "max.connections.per.ip.overrides": "127.0.0.2:3"}
    )
    held = [connect(broker) for _ in range(2)]
    assert closed(refusal(broker))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "reconnect.backoff.max.ms": 200})
    with pytest.raises(KafkaException):  # a real client from the same address gets nowhere either
        admin.list_topics(timeout=2)
    # the override's address has its own limit, and the first address's count is not its
    others = [connect(broker, "127.0.0.2") for _ in range(3)]
    assert closed(refusal(broker, "127.0.0.2"))
    # closed connections free their places: the waiting client gets in
    for conn in held:
        conn.close()
    assert admin.list_topics(timeout=30).brokers
    for conn in others:
        conn.close()
    eventually_connects(broker, "127.0.0.2").close()


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"max.connections.per.ip": 0}, "can be set to zero only if max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "not host:count"),
        ({"max.connections.per.ip.overrides": "127.0.0.1:many"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip": -1}, "max.connections.per.ip"),
        ({"max.connections": -1}, "max.connections"),
        ({"max.connection.creation.rate": "fast"}, "max.connection.creation.rate"),
        ({"listener.name.plaintext.max.connections": -5}, "listener.name.plaintext.max.connections"),
    ],
)
def test_bad_connection_limits_stop_the_broker_with_their_key(
    seglog_broker_factory: Factory, config: dict[str, Any], error: str
) -> None:
    with pytest.raises(Exception, match=error):
        seglog_broker_factory(config=config)


def configs(broker: EmbeddedBroker, *argv: str) -> int:
    return main(["configs", "--bootstrap-server", broker.bootstrap_servers, *argv])


def test_an_ip_over_its_connection_creation_rate_is_not_served(
    seglog_broker_factory: Factory, capsys: pytest.CaptureFixture[str]
) -> None:
    # a rate measured over at least 10 s (two samples of 10 s): 10 connections are 1 a second
    broker = seglog_broker_factory(config={"quota.window.num": 2, "quota.window.size.seconds": 10})
    ip = ("--entity-type", "ips", "--entity-name", "127.0.0.2")
    assert configs(broker, "--alter", *ip, "--add-config", "connection_creation_rate=1") == 0
    assert capsys.readouterr().out == "Completed updating config for ip 127.0.0.2.\n"
    assert configs(broker, "--describe", *ip) == 0
    assert capsys.readouterr().out == "Quota configs for ip '127.0.0.2' are connection_creation_rate=1.0\n"
    for _ in range(10):
        connect(broker, "127.0.0.2").close()
    # the 11th is neither answered nor closed at once, but once the rate is back within the
    # quota (a second here), so that a client retrying at once waits
    assert "no answer within" in refusal(broker, "127.0.0.2", timeout=0.3)
    assert closed(refusal(broker, "127.0.0.2"))
    connect(broker, "127.0.0.1").close()  # another address is not held back
    assert configs(broker, "--alter", *ip, "--delete-config", "connection_creation_rate") == 0
    connect(broker, "127.0.0.2").close()


def test_the_default_ip_quota_covers_the_addresses_without_their_own(seglog_broker_factory: Factory) -> None:
    broker = seglog_broker_factory(config={"quota.window.num": 2, "quota.window.size.seconds": 10})
    assert configs(broker, "--alter", "--entity-type", "ips", "--entity-default", "--add-config",
                   "connection_creation_rate=1") == 0  # fmt: skip
    assert configs(broker, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1", "--add-config",
                   "connection_creation_rate=1000") == 0  # fmt: skip
    for _ in range(10):
        connect(broker, "127.0.0.2").close()
    assert "no answer within" in refusal(broker, "127.0.0.2", timeout=0.3)
    for _ in range(20):  # its own quota, not the default's
        connect(broker, "127.0.0.1").close()


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (("--entity-type", "ips", "--entity-name", "no-such-host", "--add-config", "connection_creation_rate=1"),
         "The entity name for ips must be a valid IP or resolvable host, but it is: no-such-host"),
        (("--entity-type", "ips", "--entity-name", "10.0.0.1", "--add-config", "producer_byte_rate=1"),
         "not quota configs: producer_byte_rate"),
        (("--entity-type", "ips", "--entity-name", "10.0.0.1", "--add-config", "connection_creation_rate=0.5"),
         "must be a INT value"),
        (("--entity-type", "users", "--entity-name", "u", "--add-config", "producer_byte_rate=fast"),
         "Cannot parse quota configuration value for producer_byte_rate"),
        (("--entity-type", "users", "--entity-name", "u", "--add-config", "producer_byte_rate=1.5"),
         "must be a LONG value"),
        (("--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=-1"),
         "must be a number greater than 0"),
        (("--entity-type", "ips", "--entity-name", "10.0.0.1", "--entity-type", "users", "--entity-name", "u",
          "--add-config", "connection_creation_rate=1"), "combine with each other only"),
    ],
)  # fmt: skip
def test_quota_mistakes_are_refused_before_any_broker_is_asked(argv: tuple[str, ...], error: str) -> None:
    # port 1: nothing listens there, so a connection attempt would say "cannot connect"
    with pytest.raises(SystemExit) as refused:
        main(["configs", "--bootstrap-server", "127.0.0.1:1", "--alter", *argv])
    assert error in str(refused.value.code)
