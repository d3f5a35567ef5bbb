"""Client quotas: Kafka's ``ClientQuotaManager``, sans-IO (the caller gives the time).

Three quotas, each a rate per second over a sampled window, per user and client id:

    producer_byte_rate   bytes of Produce requests           (Kafka's QuotaType.Produce)
    consumer_byte_rate   bytes of Fetch responses            (QuotaType.Fetch)
    request_percentage   handler time, in % of one thread    (QuotaType.Request)

and a fourth, KIP-599's, of another kind:

    controller_mutation_rate   partitions created or deleted   (CreateTopics, CreatePartitions,
                               a second                          DeleteTopics)

measured with Kafka's ``TokenBucket``: credits refilled at the quota's rate up to a burst of
``quota.window.num - 1`` windows' worth; a mutation takes its partitions' count, possibly below
zero, and while the bucket is below zero the client waits for it to refill to zero.

A quota is set on an entity: a user, a client id, or a user and a client id, either of them
possibly ``<default>``. A request matches the most specific entity that sets the key, in
Kafka's order (``ClientQuotaManager``'s ``DefaultQuotaCallback``):

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

An ``ip`` entity (``/config/ips/<address>`` or ``<default>``) has one quota of another kind,
``connection_creation_rate`` (connections a second), which the connection quotas enforce as
connections are accepted (``connection_quotas``); it combines with no user or client id.

The entity matched also decides whose usage is summed: a user's quota is shared by all that
user's client ids (one sensor tagged ``(user, "")``), a client id's by all users of that id
(``("", client-id)``). An unauthenticated client is the user ``ANONYMOUS``, which the
``<default>`` user's quotas cover as any other.

A rate is Kafka's ``Rate`` over a ``SampledStat`` of sums: ``quota.window.num`` samples of
``quota.window.size.seconds`` each (11 of 1 s: ten whole windows and the current one). A
value recorded over the quota gives the time that brings the rate back to it if nothing more
came: with O the observed rate, T the quota and W the window the rate is measured over,
``O * W / (W + X) = T``, so ``X = (O - T) / T * W``. Request-time throttles are capped at one
window (``ClientRequestQuotaManager``).
"""

from __future__ import annotations

import ipaddress
import math
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from ..errors import InvalidRequestError

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONNECTION_CREATION_RATE = "connection_creation_rate"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
# the keys quotas are set with, and whether each is a whole number (Kafka's LONG and INT) or not
# (DOUBLE): a user's or client id's (Kafka's DynamicConfig.User/Client), an ip's (DynamicConfig.Ip)
CLIENT_QUOTA_KEYS = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
    CONTROLLER_MUTATION_RATE: False,
}
IP_QUOTA_KEYS = {CONNECTION_CREATION_RATE: True}
QUOTA_KEYS = {**CLIENT_QUOTA_KEYS, **IP_QUOTA_KEYS}
DEFAULT = "<default>"  # Kafka's ConfigEntityName.Default: the default user, client id or ip

USER = "user"  # the entity types of DescribeClientQuotas and AlterClientQuotas
CLIENT_ID = "client-id"
IP = "ip"

INACTIVE_SENSOR_EXPIRY_MS = 3600 * 1000  # Kafka's: a client's usage is forgotten after an idle hour
NANOS_TO_PERCENTAGE = 100.0 / 1e9  # handler time in ns -> % of one thread over a second


class QuotaEntity(NamedTuple):
    """Whom a quota is set on: a user, a client id or both, or an ip (None: not part of the
    entity; ``DEFAULT``: the default one)."""

    user: str | None
    client_id: str | None
    ip: str | None = None

    @property
    def keys(self) -> dict[str, bool]:
        """The quota keys it may have."""
        return IP_QUOTA_KEYS if self.ip is not None else CLIENT_QUOTA_KEYS

    @property
    def path(self) -> str:
        """Its path under /config, as ZooKeeper and config change notifications name it:
        ``users/alice``, ``clients/c1``, ``users/alice/clients/c1``, ``ips/10.0.0.1`` (names sanitized)."""
        if self.ip is not None:
            return f"ips/{sanitize(self.ip)}"
        parts = []
        if self.user is not None:
            parts.append(f"users/{sanitize(self.user)}")
        if self.client_id is not None:
            parts.append(f"clients/{sanitize(self.client_id)}")
        return "/".join(parts)

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity:
        """The entity of ``users/<u>``, ``clients/<c>``, ``users/<u>/clients/<c>`` or ``ips/<ip>``;
        ValueError for any other path."""
        parts = path.split("/")
        if len(parts) == 2 and parts[0] == "ips":
            return cls(None, None, desanitize(parts[1]))
        if len(parts) == 2 and parts[0] == "users":
            return cls(desanitize(parts[1]), None)
        if len(parts) == 2 and parts[0] == "clients":
            return cls(None, desanitize(parts[1]))
        if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
            return cls(desanitize(parts[1]), desanitize(parts[3]))
        raise ValueError(f"not a quota entity's path: {path!r}")

    def __str__(self) -> str:
        return self.path or "<no entity>"


def ip_entity_name(name: str) -> str:
    """An ip entity's name as the connections' addresses are written (``127.0.0.1``, ``::1``);
    InvalidRequestError, with Kafka's words (its ``DynamicConfig.Ip.isValidIpEntity``), for
    one that is no address (Kafka resolves a host name there: seglog takes addresses only, so
    that a quota does not hang on what a DNS answer said once)."""
    if name == DEFAULT:
        return name
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        raise InvalidRequestError(f"{name} is not a valid IP or resolvable host.") from None


def checked_value(entity: QuotaEntity, key: str, value: float) -> float:
    """A quota value to set, as Kafka's ``ZkAdminManager.alterClientQuotas`` takes it (a whole
    number for a LONG or INT key) and above 0; InvalidRequestError for a key the entity has no
    use for or a value it refuses."""
    whole = entity.keys.get(key)
    if whole is None:
        raise InvalidRequestError(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidRequestError(f"Configuration {key} must be a number greater than 0, not {value}")
    if not whole:
        return value
    rounded = round(value)
    if abs(rounded - value) > 1e-6:
        raise InvalidRequestError(f"Configuration {key} must be a {'INT' if entity.ip else 'LONG'} value")
    return float(rounded)


def sanitize(name: str) -> str:
    """A user or client id as Kafka's ``Sanitizer`` writes it in a znode's name: URL-encoded
    as Java's URLEncoder does (``~`` too), a space as %20 (``<default>`` stays as it is)."""
    return name if name == DEFAULT else urllib.parse.quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return name if name == DEFAULT else urllib.parse.unquote(name)


def precedence(user: str, client_id: str) -> list[tuple[QuotaEntity, tuple[str, str]]]:
    """The entities a request of ``user`` and ``client_id`` matches, most specific first, each
    with the tags of the sensor its usage is summed in."""
    both, user_only, client_only = (user, client_id), (user, ""), ("", client_id)
    return [
        (QuotaEntity(user, client_id), both),
        (QuotaEntity(user, DEFAULT), both),
        (QuotaEntity(user, None), user_only),
        (QuotaEntity(DEFAULT, client_id), both),
        (QuotaEntity(DEFAULT, DEFAULT), both),
        (QuotaEntity(DEFAULT, None), user_only),
        (QuotaEntity(None, client_id), client_only),
        (QuotaEntity(None, DEFAULT), client_only),
    ]


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat`` of sums: per second, over ``samples`` windows of
    ``window_ms`` each.

    A sample is [start, last event, sum]. A value goes to the current sample, or to the next
    one (the oldest recycled) once the current is ``window_ms`` old; ``samples + 1`` are kept,
    the extra one because a sample is dropped only when its last event is ``samples`` windows
    old, not its start. The rate divides the samples' sum by the time since the oldest one
    began, and counts at least ``samples - 1`` whole windows: a client's first burst is
    measured as if the windows before it had been empty (otherwise its first request alone
    would be a rate over a few milliseconds).
    """

    __slots__ = ("_current", "_samples", "last_record_ms", "least_window_ms", "samples", "total", "window_ms")

    def __init__(self, samples: int, window_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self.least_window_ms = max((samples - 1) * window_ms, 1)  # what any rate is measured over
        self._samples: list[list[float]] = []
        self._current = 0
        self.last_record_ms = 0
        self.total = 0.0  # the samples' sum, obsolete ones included until they are reset

    def record(self, value: float, now_ms: int) -> None:
        self.last_record_ms = now_ms
        if not self._samples:
            self._samples.append([now_ms, now_ms, 0.0])
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(self._samples):
                self._samples.append([now_ms, now_ms, 0.0])
            sample = self._samples[self._current]
            sample[0] = sample[1] = now_ms
            self.total -= sample[2]
            sample[2] = 0.0
        sample[2] += value
        sample[1] = now_ms
        self.total += value

    def sum_and_window(self, now_ms: int) -> tuple[float, int]:
        """The samples' sum and the time, ms, it is measured over now (in one pass: the
        samples whose last value is a whole window old reset first, as Kafka purges them)."""
        expiry = self.samples * self.window_ms
        total = 0.0
        oldest: float = now_ms
        for sample in self._samples:
            if now_ms - sample[1] >= expiry:
                sample[0] = sample[1] = now_ms
                self.total -= sample[2]
                sample[2] = 0.0
                continue
            total += sample[2]
            if sample[0] < oldest:
                oldest = sample[0]
        elapsed = now_ms - oldest
        whole, least = elapsed // self.window_ms, self.samples - 1
        if whole < least:
            elapsed += (least - whole) * self.window_ms
        return total, max(int(elapsed), 1)

    def window_size(self, now_ms: int) -> int:
        """The time, ms, the rate is measured over now."""
        return self.sum_and_window(now_ms)[1]

    def measure(self, now_ms: int) -> float:
        """The rate, per second."""
        total, window = self.sum_and_window(now_ms)
        return total * 1000 / window


def throttle_time_ms(rate: Rate, quota: float, now_ms: int, cap_ms: int | None = None) -> int:
    """How long the client must wait for ``rate`` to come back to ``quota`` (0: it is within it)."""
    if rate.total * 1000 <= quota * rate.least_window_ms:  # within it over the shortest window: no need to look
        return 0
    total, window = rate.sum_and_window(now_ms)
    observed = total * 1000 / window
    if observed <= quota:
        return 0
    # Java's Math.round: halves up
    throttle = int((observed - quota) / quota * window + 0.5)
    return throttle if cap_ms is None else min(throttle, cap_ms)


class TokenBucket:
    """Kafka's ``TokenBucket`` stat (KIP-599): credits refilled at the quota's rate, up to a burst
    of ``burst_s`` seconds of it; it starts full."""

    __slots__ = ("_tokens", "burst_s", "last_record_ms")

    def __init__(self, burst_s: float) -> None:
        self.burst_s = burst_s
        self._tokens: float | None = None
        self.last_record_ms = 0

    def tokens(self, quota: float, now_ms: int) -> float:
        """The credits now (refilled since the last look)."""
        burst = quota * self.burst_s
        elapsed = now_ms - self.last_record_ms
        self._tokens = burst if self._tokens is None else min(burst, self._tokens + quota * elapsed / 1000)
        self.last_record_ms = now_ms
        return self._tokens

    def record(self, value: float, quota: float, now_ms: int) -> None:
        self._tokens = self.tokens(quota, now_ms) - value

    def throttle_time_ms(self, quota: float, now_ms: int) -> int:
        """How long until the bucket is back to zero (0: it is not below); Kafka's
        ``ControllerMutationQuotaManager.throttleTime``, rounded as Java's Math.round."""
        tokens = self.tokens(quota, now_ms)
        return int(-tokens / quota * 1000 + 0.5) if tokens < 0 else 0


class _Match(NamedTuple):
    sensor: Any  # a Rate (a TokenBucket for controller mutations); None: no quota applies
    quota: float


_UNLIMITED = _Match(None, 0.0)


class ClientQuotaManager:
    """One quota key's sensors and limits: ``record`` a request's value and learn how long
    its client is throttled. Limits come from ``update`` (the entity's configs changed)."""

    def __init__(self, key: str, samples: int, window_s: int, *, cap_to_window: bool = False) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        # a quota times this: what it lets through in the window's whole samples (Kafka's getMaxValueInQuotaWindow)
        self.window_bytes_factor = (samples - 1) * window_s
        self._cap_ms = self.window_ms if cap_to_window else None
        self._quotas: dict[QuotaEntity, float] = {}
        self._sensors: dict[tuple[str, str], Rate] = {}  # by their tags (user, client id)
        self._matches: dict[tuple[str, str], _Match] = {}  # by (user, client id): the quota that applies

    @property
    def enabled(self) -> bool:
        """Whether any entity has this quota: when none does, nothing is recorded."""
        return bool(self._quotas)

    def update(self, entity: QuotaEntity, quota: float | None) -> None:
        """``entity``'s quota set (None: removed). The usage summed so far stays, as Kafka's
        sensors do."""
        if quota is None:
            self._quotas.pop(entity, None)
        else:
            self._quotas[entity] = quota
        self._matches.clear()

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota that applies to a request of ``user`` and ``client_id`` (None: none)."""
        for entity, _ in precedence(user, client_id):
            found = self._quotas.get(entity)
            if found is not None:
                return found
        return None

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """``value`` recorded for the client; its throttle time, ms (0: within its quota)."""
        if not self._quotas:
            return 0
        match = self._match(user, client_id, now_ms)
        if match.sensor is None:
            return 0
        match.sensor.record(value, now_ms)
        return throttle_time_ms(match.sensor, match.quota, now_ms, self._cap_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """``value`` taken back (a throttled fetch sends no records, so they do not count)."""
        match = self._match(user, client_id, now_ms)
        if match.sensor is not None:
            match.sensor.record(-value, now_ms)

    def _match(self, user: str, client_id: str, now_ms: int) -> _Match:
        found = self._matches.get((user, client_id))
        if found is not None:
            return found
        found = _UNLIMITED
        for entity, tags in precedence(user, client_id):
            quota = self._quotas.get(entity)
            if quota is not None:
                sensor = self._sensors.get(tags)
                if sensor is None:
                    self._expire(now_ms)
                    sensor = self._sensors[tags] = self._new_sensor()
                found = _Match(sensor, quota)
                break
        self._matches[(user, client_id)] = found
        return found

    def _new_sensor(self) -> Any:
        return Rate(self.samples, self.window_ms)

    def _expire(self, now_ms: int) -> None:
        """Sensors idle for an hour dropped (checked as a new one comes: clients come and go)."""
        idle = [t for t, s in self._sensors.items() if now_ms - s.last_record_ms >= INACTIVE_SENSOR_EXPIRY_MS]
        for tags in idle:
            del self._sensors[tags]
        if idle:
            self._matches.clear()


class ControllerMutationQuotaManager(ClientQuotaManager):
    """``controller_mutation_rate`` (Kafka's ``ControllerMutationQuotaManager``): partitions created
    and deleted, in a token bucket per client. ``throttle_time`` says whether a client is over
    its quota already (a strict request's next topic is then refused), ``record`` takes a
    mutation's partitions and says how long the client must wait."""

    def _new_sensor(self) -> TokenBucket:
        return TokenBucket((self.samples - 1) * self.window_ms / 1000)

    def throttle_time(self, user: str, client_id: str, now_ms: int) -> int:
        if not self._quotas:
            return 0
        match = self._match(user, client_id, now_ms)
        return 0 if match.sensor is None else int(match.sensor.throttle_time_ms(match.quota, now_ms))

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        match = self._match(user, client_id, now_ms) if self._quotas else _UNLIMITED
        if match.sensor is not None:
            match.sensor.record(value, match.quota, now_ms)
        return self.throttle_time(user, client_id, now_ms)


class ClientQuotas:
    """The broker's three quota managers, the quota configs they were given, by entity, and the
    connection_creation_rate of each ip (the connection quotas read them)."""

    def __init__(self, samples: int = 11, window_s: int = 1) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_s, cap_to_window=True)
        self.controller_mutation = ControllerMutationQuotaManager(CONTROLLER_MUTATION_RATE, samples, window_s)
        self.configs: dict[QuotaEntity, dict[str, float]] = {}
        self.ip_rates: dict[str, float] = {}  # by address, or DEFAULT

    def apply(self, entity: QuotaEntity, config: Mapping[str, float]) -> None:
        """``entity``'s quota configs are now ``config`` (keys not there: removed)."""
        if entity.ip is not None:
            rate = config.get(CONNECTION_CREATION_RATE)
            if rate is None:
                self.ip_rates.pop(entity.ip, None)
            else:
                self.ip_rates[entity.ip] = float(rate)
            return
        kept = {k: float(v) for k, v in config.items() if k in CLIENT_QUOTA_KEYS}
        if kept:
            self.configs[entity] = kept
        else:
            self.configs.pop(entity, None)
        for manager in (self.produce, self.fetch, self.request, self.controller_mutation):
            manager.update(entity, kept.get(manager.key))

    def load(self, entities: Iterable[tuple[QuotaEntity, Mapping[str, float]]]) -> None:
        for entity, config in entities:
            self.apply(entity, config)


def quota_values(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's stored config (a user's znode holds SCRAM credentials
    too), as numbers; a value that is not one is left out."""
    values = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                values[key] = float(config[key])
            except ValueError:
                continue
    return values
