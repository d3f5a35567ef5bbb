"""Connection quotas per client address: Kafka's ``ConnectionQuotas`` for IPs, sans-IO (the
caller gives the time).

Two limits, checked as a connection is accepted, on every listener alike:

- how many connections one address may hold open: ``max.connections.per.ip``, or its own
  count in ``max.connections.per.ip.overrides`` (``host:count,host:count``, a host name
  resolved once, at start). One past it is closed at once (Kafka's TooManyConnectionsException).
- how many connections one address may open a second: the ``connection_creation_rate`` quota of
  its ``ip`` entity, else of the ``<default>`` ip (AlterClientQuotas, /config/ips/<ip>),
  measured as the client quotas are (``quotas.Rate`` over ``quota.window.num`` samples of
  ``quota.window.size.seconds``). A connection past it is not counted, not served, and closed
  once the rate is back within the quota (at most a window later), so that a client retrying
  in a loop backs off (Kafka's ConnectionThrottledException and delayed close, KIP-612).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Mapping

from ..config import BrokerConfig
from ..errors import InvalidConfigurationError
from .quotas import DEFAULT, INACTIVE_SENSOR_EXPIRY_MS, Rate, throttle_time_ms


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


class ConnectionQuotas:
    """Open connections counted by client address, and their creation rates."""

    def __init__(self, config: BrokerConfig, ip_rates: Mapping[str, float]) -> None:
        self.max_per_ip: int = config["max.connections.per.ip"]
        overrides = config["max.connections.per.ip.overrides"]
        if self.max_per_ip == 0 and not overrides:  # as Kafka's KafkaConfig requires
            raise InvalidConfigurationError(
                "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set."
            )
        self.overrides = resolved_overrides(overrides)
        # the connection_creation_rate quotas by address (DEFAULT: every other one's); the
        # client quotas' own dict, which AlterClientQuotas and the stores keep up to date
        self.ip_rates = ip_rates
        self.samples: int = config["quota.window.num"]
        self.window_ms: int = config["quota.window.size.seconds"] * 1000
        self.counts: dict[str, int] = {}
        self._sensors: dict[str, Rate] = {}

    def limit(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def accept(self, ip: str, now_ms: int) -> None:
        """A new connection from ``ip`` counted; ConnectionThrottled or TooManyConnections when
        it may not be served (then nothing is counted)."""
        quota = self.ip_rates.get(ip, self.ip_rates.get(DEFAULT))
        if quota is not None:
            sensor = self._sensor(ip, now_ms)
            sensor.record(1.0, now_ms)
            throttle_ms = throttle_time_ms(sensor, quota, now_ms, self.window_ms)
            if throttle_ms > 0:
                sensor.record(-1.0, now_ms)  # refused: it does not count towards the rate
                raise ConnectionThrottled(ip, throttle_ms)
        count = self.counts.get(ip, 0)
        limit = self.limit(ip)
        if count >= limit:
            raise TooManyConnections(ip, limit)
        self.counts[ip] = count + 1

    def release(self, ip: str) -> None:
        """A counted connection from ``ip`` closed."""
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1

    def _sensor(self, ip: str, now_ms: int) -> Rate:
        sensor = self._sensors.get(ip)
        if sensor is None:
            # addresses come and go: those idle an hour are forgotten as a new one comes
            for idle in [a for a, s in self._sensors.items() if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRY_MS]:
                del self._sensors[idle]
            sensor = self._sensors[ip] = Rate(self.samples, self.window_ms)
        return sensor
