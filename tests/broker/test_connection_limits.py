"""The broker-wide and per-listener connection limits of Kafka's ConnectionQuotas on a real
broker: ``max.connections``, ``listener.name.<l>.max.connections``, the creation rates
(``max.connection.creation.rate``, per listener too) and the protected inter-broker listener.
A connection past a limit is accepted by the kernel but not served until a slot frees: the
tests count which connections were answered, not how long anything took."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from seglog.broker.connection_quotas import ConnectionQuotas, ConnectionThrottled
from seglog.broker.dynamic_config import DynamicBrokerConfig
from seglog.broker.embedded import EmbeddedBroker
from seglog.client import BlockingConnection
from seglog.config import BrokerConfig
from seglog.errors import SeglogError
from seglog.protocol import ApiKey
from seglog.protocol.message_data import MetadataRequestData

Factory = Callable[..., EmbeddedBroker]
TWO_LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
}


def connect(broker: EmbeddedBroker, listener: str = "PLAINTEXT") -> BlockingConnection:
    return BlockingConnection("127.0.0.1", broker.server.port_of(listener), "limits-test", timeout=60)


class Waiting:
    """A connection attempt in a thread of its own: ``served`` once the broker answered it."""

    def __init__(self, broker: EmbeddedBroker, listener: str = "PLAINTEXT") -> None:
        self.conn: BlockingConnection | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(broker, listener), daemon=True)
        self.thread.start()

    def _run(self, broker: EmbeddedBroker, listener: str) -> None:
        try:
            self.conn = connect(broker, listener)
        except BaseException as e:
            self.error = e

    def still_waiting(self) -> bool:
        self.thread.join(0.5)  # a wrong broker answers in milliseconds; a right one never, till a slot frees
        return self.thread.is_alive()

    def served(self) -> BlockingConnection:
        self.thread.join(60)
        assert self.conn is not None, self.error
        return self.conn


def alive(conn: BlockingConnection) -> bool:
    try:
        conn.request(ApiKey.METADATA, MetadataRequestData(topics=[]))
    except SeglogError:
        return False
    return True


def test_past_max_connections_a_new_connection_waits_for_one_to_close(seglog_broker_factory: Factory) -> None:
    broker = seglog_broker_factory(config={"max.connections": 3})
    held = [connect(broker) for _ in range(3)]
    waiting = Waiting(broker)
    assert waiting.still_waiting()
    held.pop().close()
    late = waiting.served()  # served once a place came free, not refused
    assert all(alive(c) for c in [*held, late])
    for conn in [*held, late]:
        conn.close()
    # a real client gets in once the connections are gone
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    assert admin.list_topics(timeout=30).brokers


def test_a_listener_s_own_limit_holds_only_that_listener(seglog_broker_factory: Factory) -> None:
    broker = seglog_broker_factory(config={**TWO_LISTENERS, "listener.name.plaintext.max.connections": 1})
    first = connect(broker)
    waiting = Waiting(broker)
    assert waiting.still_waiting()
    others = [connect(broker, "INTERNAL") for _ in range(3)]  # the other listener is not held back
    first.close()
    waiting.served().close()
    for conn in others:
        conn.close()


def test_the_inter_broker_listener_closes_another_listener_s_least_recently_active_connection(
    seglog_broker_factory: Factory,
) -> None:
    broker = seglog_broker_factory(config={**TWO_LISTENERS, "max.connections": 2})
    idle, busy = connect(broker), connect(broker)
    assert alive(busy)  # the more recently active
    waiting = Waiting(broker)
    assert waiting.still_waiting()  # the client listener is full
    # the inter-broker listener is not: its connection is served and one client connection makes room
    inter_broker = connect(broker, "INTERNAL")
    assert alive(inter_broker)
    assert not alive(idle)
    assert alive(busy)
    assert waiting.still_waiting()  # the broker is at max.connections still
    busy.close()
    waiting.served().close()
    inter_broker.close()


def test_connections_past_the_creation_rates_wait_and_are_all_served(seglog_broker_factory: Factory) -> None:
    # 1 a second over at least 10 s: past 10 at once, each waits its turn rather than being refused
    config = {**TWO_LISTENERS, "quota.window.num": 2, "quota.window.size.seconds": 10}
    broker = seglog_broker_factory(config={**config, "listener.name.internal.max.connection.creation.rate": 1})
    attempts = [Waiting(broker, "INTERNAL") for _ in range(12)]
    served = [a.served() for a in attempts]
    assert all(alive(c) for c in served)
    for conn in served:
        conn.close()


# --- the gates themselves, sans-IO, with the time given ----------------------------------------------


def quotas(config: dict[str, Any], ip_rates: dict[str, float] | None = None) -> ConnectionQuotas:
    base = {"quota.window.num": 2, "quota.window.size.seconds": 10}
    return ConnectionQuotas(BrokerConfig({**base, **config}), ip_rates or {}, ("CLIENT", "BROKER"), "BROKER")


def test_the_creation_rates_give_the_acceptor_its_wait() -> None:
    gates = quotas({"max.connection.creation.rate": 1, "listener.name.client.max.connection.creation.rate": 2})
    # 1 a second over 10 s: ten free, the eleventh waits until the rate is back (1 s), capped at a window
    assert [gates.record_connection("CLIENT", 0) for _ in range(10)] == [0] * 10
    assert gates.record_connection("CLIENT", 0) == 1000
    assert gates.record_connection("CLIENT", 0) == 2000
    # the protected inter-broker listener does not count in (nor wait for) the broker-wide rate
    assert gates.record_connection("BROKER", 0) == 0
    assert gates.broker_rate.total == 12


def test_an_ip_throttled_connection_is_taken_back_from_every_rate() -> None:
    gates = quotas({}, {"10.0.0.1": 1})
    for _ in range(10):
        gates.record_connection("CLIENT", 0)
        gates.accept("CLIENT", "10.0.0.1", 0)
    gates.record_connection("CLIENT", 0)
    with pytest.raises(ConnectionThrottled):
        gates.accept("CLIENT", "10.0.0.1", 0)
    assert gates.broker_rate.total == gates.listeners["CLIENT"].rate.total == 10
    assert gates.total == gates.listeners["CLIENT"].count == 10


def test_slots_by_broker_and_listener() -> None:
    gates = quotas({"max.connections": 2, "listener.name.broker.max.connections": 3})
    for _ in range(2):
        gates.accept("CLIENT", "10.0.0.1", 0)
    assert not gates.slot_available("CLIENT")
    assert gates.slot_available("BROKER") and not gates.excess("CLIENT")
    gates.accept("BROKER", "10.0.0.2", 0)
    assert gates.excess("CLIENT") and not gates.excess("BROKER")
    gates.release("CLIENT", "10.0.0.1")
    assert not gates.excess("CLIENT") and not gates.slot_available("CLIENT")
    gates.release("BROKER", "10.0.0.2")
    assert gates.slot_available("CLIENT")


def test_a_listener_s_own_value_at_any_level_beats_the_broker_wide_one() -> None:
    static = BrokerConfig({"listener.name.client.max.connections": 5, "max.connections": 50})
    config = DynamicBrokerConfig(static, 0)
    config.set_level(False, {"max.connections": "100"})
    assert (config.for_listener("CLIENT", "max.connections"), config["max.connections"]) == (5, 100)
    assert config.for_listener("BROKER", "max.connections") == 100
    config.set_level(True, {"listener.name.client.max.connections": "7", "max.connections": "200"})
    assert config.for_listener("CLIENT", "max.connections") == 7
    assert config.for_listener("BROKER", "max.connections") == 200
    assert config.for_listener("BROKER", "max.connection.creation.rate") == 2**31 - 1
