"""Connection quotas: Kafka's ``ConnectionQuotas``, sans-IO (the caller gives the time and
does the waiting).

A new connection on a listener passes three gates, in Kafka's order:

1. the broker's and the listener's slots and creation rates (Kafka's ``waitForConnectionSlot``):
   the acceptor waits, the connection accepted by the kernel but not served, while
   - the listener holds ``listener.name.<l>.max.connections`` connections, or
   - the broker holds ``max.connections`` (all listeners together; default Int.MaxValue), or
   - the connection came faster than ``max.connection.creation.rate`` (broker-wide) or
     ``listener.name.<l>.max.connection.creation.rate`` allows: it is recorded in both rates
     and the acceptor waits the longer throttle time (at most ``quota.window.size.seconds``,
     Kafka's ``maxThrottleTimeMs``) before it goes on (KIP-402, KIP-612).
   The inter-broker listener is protected when the broker has more than one listener: it
   neither waits for the broker-wide count nor counts in the broker-wide rate; one of its
   connections may take the broker past ``max.connections``, and then each other listener
   closes its least recently active connection until the broker is back at the limit
   (Kafka's ``maxConnectionsExceeded`` and ``closeExcessConnections``), so that brokers can
   always reach each other.
2. the client address's ``connection_creation_rate`` (its ``ip`` entity's, else the
   ``<default>`` ip's, AlterClientQuotas, /config/ips/<ip>): a connection past it is not
   counted (it is taken back from the broker's and the listener's rates too), not served, and
   closed once the rate is back within the quota, so that a client retrying in a loop backs
   off (Kafka's ConnectionThrottledException and delayed close).
3. how many connections one address may hold open: ``max.connections.per.ip``, or its own
   count in ``max.connections.per.ip.overrides`` (``host:count,host:count``, a host name
   resolved when set). One past it is closed at once (Kafka's TooManyConnectionsException).

Rates are measured as the client quotas are (``quotas.Rate`` over ``quota.window.num`` samples
of ``quota.window.size.seconds``). Every limit but the ip rates (client quotas) is a dynamic
broker config: ``reconfigure`` takes the new values, and whoever waits for a slot is told
(``on_change``) to look again.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Mapping
from typing import Any

from ..config import INT_MAX
from ..errors import InvalidConfigurationError
from ..security.quotas import DEFAULT, INACTIVE_SENSOR_EXPIRY_MS, Rate, throttle_time_ms

MAX_CONNECTIONS = "max.connections"
MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
# the keys a listener has its own value of (Kafka's SocketServer.ListenerReconfigurableConfigs)
LISTENER_KEYS = (MAX_CONNECTIONS, MAX_CONNECTION_CREATION_RATE)
# every connection quota key a broker reconfigures (Kafka's SocketServer.ReconfigurableConfigs)
BROKER_KEYS = ("max.connections.per.ip", "max.connections.per.ip.overrides", *LISTENER_KEYS)


class TooManyConnections(Exception):
    def __init__(self, ip: str, limit: int) -> None:
        super().__init__(f"too many connections from {ip} (the most allowed: {limit})")


class ConnectionThrottled(Exception):
    def __init__(self, ip: str, throttle_ms: int) -> None:
        super().__init__(f"{ip} opens connections faster than its connection_creation_rate: closed in {throttle_ms} ms")
        self.throttle_ms = throttle_ms


def resolved_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address (Kafka's ``InetAddress.getByName`` of each
    host); InvalidConfigurationError for a host that does not resolve."""
    found = {}
    for host, count in overrides.items():
        try:
            address = str(ipaddress.ip_address(host))
        except ValueError:
            try:
                address = socket.gethostbyname(host)
            except OSError as e:
                raise InvalidConfigurationError(
                    f"max.connections.per.ip.overrides: cannot resolve host {host!r}: {e}"
                ) from None
        found[address] = count
    return found


def check_per_ip(values: Any) -> None:
    """Kafka's KafkaConfig rule on ``max.connections.per.ip`` (``values``: a config, read by key)."""
    if values["max.connections.per.ip"] == 0 and not values["max.connections.per.ip.overrides"]:
        raise InvalidConfigurationError(
            "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."
        )


class _ListenerQuota:
    """One listener's count, limits and creation rate (Kafka's ListenerConnectionQuota)."""

    __slots__ = ("count", "max_connections", "max_rate", "rate")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.count = 0
        self.max_connections = INT_MAX  # set by ``reconfigure``
        self.max_rate = INT_MAX
        self.rate = Rate(samples, window_ms)


class ConnectionQuotas:
    """Open connections counted by listener and client address, and their creation rates.

    ``config`` gives each key of ``BROKER_KEYS`` its value, and ``for_listener`` a listener's
    value of a ``LISTENER_KEYS`` key: its own ``listener.name.<l>.<key>``, else the broker-wide
    one (Kafka's ``valuesWithPrefixOverride``): a BrokerConfig, or the dynamic configs' view."""

    def __init__(
        self,
        config: Any,
        ip_rates: Mapping[str, float],
        listeners: tuple[str, ...] = (),
        inter_broker: str | None = None,
    ) -> None:
        self.samples: int = config["quota.window.num"]
        self.window_ms: int = config["quota.window.size.seconds"] * 1000
        # the connection_creation_rate quotas by address (DEFAULT: every other one's); the
        # client quotas' own dict, which AlterClientQuotas and the stores keep up to date
        self.ip_rates = ip_rates
        self.listeners = {name: _ListenerQuota(self.samples, self.window_ms) for name in listeners}
        # protected only beside other listeners: alone it would never wait for anything (Kafka's protectedListener)
        self.protected = inter_broker if len(self.listeners) > 1 else None
        self.total = 0
        self.counts: dict[str, int] = {}
        self.broker_rate = Rate(self.samples, self.window_ms)
        self.on_change: list[Callable[[], None]] = []  # told when a slot may have come free
        self._sensors: dict[str, Rate] = {}
        self.reconfigure(config)

    def reconfigure(self, config: Any) -> None:
        """The limits set anew from ``config`` (a dynamic change); those waiting look again."""
        check_per_ip(config)
        self.max_per_ip: int = config["max.connections.per.ip"]
        self.overrides = resolved_overrides(config["max.connections.per.ip.overrides"])
        self.max_connections: int = config[MAX_CONNECTIONS]
        self.max_rate: int = config[MAX_CONNECTION_CREATION_RATE]
        for name, quota in self.listeners.items():  # a listener's own value, else the broker-wide one, as Kafka's
            quota.max_connections = config.for_listener(name, MAX_CONNECTIONS)
            quota.max_rate = config.for_listener(name, MAX_CONNECTION_CREATION_RATE)
        self._changed()

    def limit(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    # --- the first gate: slots and creation rates ------------------------------------------------------

    def record_connection(self, listener: str, now_ms: int) -> int:
        """A connection on ``listener`` recorded in the broker's (unless the listener is
        protected) and the listener's rates; how long, ms, the acceptor waits before it goes on
        (0: no rate is over its limit)."""
        throttle = 0
        if listener != self.protected:
            throttle = self._record(self.broker_rate, self.max_rate, now_ms)
        quota = self.listeners.get(listener)
        if quota is not None:
            throttle = max(throttle, self._record(quota.rate, quota.max_rate, now_ms))
        return throttle

    def _record(self, rate: Rate, limit: int, now_ms: int) -> int:
        rate.record(1.0, now_ms)
        return throttle_time_ms(rate, limit, now_ms, self.window_ms)

    def slot_available(self, listener: str) -> bool:
        """Whether a connection on ``listener`` may be served now (Kafka's ``connectionSlotAvailable``)."""
        quota = self.listeners.get(listener)
        if quota is not None and quota.count >= quota.max_connections:
            return False
        return listener == self.protected or self.total < self.max_connections

    def excess(self, listener: str) -> bool:
        """Whether ``listener`` should close its least recently active connection: a protected
        listener's connection took the broker past ``max.connections``."""
        return self.total > self.max_connections and listener != self.protected

    # --- the second and third gates, and the count ---------------------------------------------------

    def accept(self, listener: str, ip: str, now_ms: int) -> None:
        """A new connection from ``ip`` on ``listener`` counted; ConnectionThrottled or
        TooManyConnections when it may not be served (then nothing is counted)."""
        quota = self.ip_rates.get(ip, self.ip_rates.get(DEFAULT))
        if quota is not None:
            sensor = self._sensor(ip, now_ms)
            sensor.record(1.0, now_ms)
            throttle_ms = throttle_time_ms(sensor, quota, now_ms, self.window_ms)
            if throttle_ms > 0:
                # refused: it counts towards no rate (Kafka's updateListenerMetrics)
                sensor.record(-1.0, now_ms)
                if listener != self.protected:
                    self.broker_rate.record(-1.0, now_ms)
                if listener in self.listeners:
                    self.listeners[listener].rate.record(-1.0, now_ms)
                raise ConnectionThrottled(ip, throttle_ms)
        count = self.counts.get(ip, 0)
        limit = self.limit(ip)
        if count >= limit:
            raise TooManyConnections(ip, limit)
        self.counts[ip] = count + 1
        self.total += 1
        if listener in self.listeners:
            self.listeners[listener].count += 1
        if self.total > self.max_connections:  # a protected listener's: the others make room
            self._changed()

    def release(self, listener: str, ip: str) -> None:
        """A counted connection from ``ip`` on ``listener`` closed."""
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total -= 1
        quota = self.listeners.get(listener)
        if quota is not None:
            quota.count -= 1
        self._changed()

    def _changed(self) -> None:
        for wake in self.on_change:
            wake()

    def _sensor(self, ip: str, now_ms: int) -> Rate:
        sensor = self._sensors.get(ip)
        if sensor is None:
            # addresses come and go: those idle an hour are forgotten as a new one comes
            for idle in [a for a, s in self._sensors.items() if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRY_MS]:
                del self._sensors[idle]
            sensor = self._sensors[ip] = Rate(self.samples, self.window_ms)
        return sensor
