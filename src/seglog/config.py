"""Every configuration key seglog knows: Kafka's names, types, defaults and docs.

Two levels, as in Kafka: broker keys (``log.segment.bytes``) give the
defaults, topic keys (``segment.bytes``) override them per topic. A topic key's
broker synonyms are listed in order of precedence (``log.retention.ms`` beats
``log.retention.minutes`` beats ``log.retention.hours``), each with the factor
that turns its unit into the topic key's.

``LogConfig`` is the resolved, typed view a partition log reads on its hot
path: one attribute per topic key, with dots turned into underscores
(``config.segment_bytes``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidConfigurationError

HIDDEN = "[hidden]"  # what a secret value shows as
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise ValueError(f"not a boolean: {value!r}")


def _list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value)
    return tuple(v.strip() for v in str(value).split(",") if v.strip())


def _int(value: Any) -> int:
    """Kafka's LONG: an int64, or a string holding one (a float is refused, as Kafka does)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"not an integer: {value!r}")
    return int(value)


def _int32(value: Any) -> int:
    """Kafka's INT: parsed as ``_int``, its range checked by ``Key.coerce``."""
    return _int(value)


def _int16(value: Any) -> int:
    """Kafka's SHORT: parsed as ``_int``, its range checked by ``Key.coerce``."""
    return _int(value)


def _double(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"not a number: {value!r}")
    parsed = float(value)
    if parsed != parsed:
        raise ValueError("not a number: NaN")
    return parsed


def _host_counts(value: Any) -> dict[str, int]:
    """``host:count,host:count`` (max.connections.per.ip.overrides, Kafka's ``getMap``): a host
    name or address (an IPv6 one as written: the count follows its last colon) and a count."""
    if isinstance(value, Mapping):
        pairs = [(str(host), count) for host, count in value.items()]
    else:
        pairs = []
        for part in (p.strip() for p in str(value).split(",")):
            host, sep, count = part.rpartition(":")
            if part and (not sep or not host.strip()):
                raise ValueError(f"not host:count: {part!r}")
            if part:
                pairs.append((host.strip(), count.strip()))
    found = {}
    for host, count in pairs:
        parsed = _int(count)
        if not 0 <= parsed <= INT_MAX:
            raise ValueError(f"the count of {host} is not in [0, {INT_MAX}]")
        found[host] = parsed
    return found


def _paths(value: Any) -> tuple[str, ...]:
    """log.dirs: a list of directories, none of them an empty path (which would make the
    current directory a log dir)."""
    if isinstance(value, list | tuple) and any(not str(v).strip() for v in value):
        raise ValueError("a log dir path is empty")
    paths = _list(value)
    if not paths:
        raise ValueError("no log dir given")
    return paths


def _path(value: Any) -> str:
    text = str(value)
    if not text.strip():
        raise ValueError("the log dir path is empty")
    return text


# Kafka's types and the values each holds: a key's minimum and maximum narrow these
_TYPE_RANGES: dict[Callable[[Any], Any], tuple[str, float, float]] = {
    _int16: ("an int16", -(1 << 15), (1 << 15) - 1),
    _int32: ("an int32", INT_MIN, INT_MAX),
    _int: ("an int64", LONG_MIN, LONG_MAX),
    _double: ("a number", float("-inf"), float("inf")),
}


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str
    minimum: float | None = None
    choices: tuple[str, ...] | None = None
    maximum: float | None = None
    secret: bool = False  # Kafka's PASSWORD type: its value is never shown (errors, logs, DescribeConfigs)

    def bounds(self) -> tuple[float, float] | None:
        """The lowest and highest value of a numeric key: its type's, narrowed by the key's."""
        kind = _TYPE_RANGES.get(self.parse)
        if kind is None:
            return None
        _, low, high = kind
        low = low if self.minimum is None else max(low, self.minimum)
        high = high if self.maximum is None else min(high, self.maximum)
        return low, high

    def allowed(self) -> str:
        """The values this key takes, as an error message says them."""
        if self.choices is not None:
            return f"one of {', '.join(c or '(empty)' for c in self.choices)}"
        if self.parse is _bool:
            return "true or false"
        if self.parse in (_path, _paths):
            return "a directory path, not empty"
        if self.parse is _list:
            return "a comma-separated list"
        if self.parse is _host_counts:
            return "host:count pairs, comma-separated"
        bounds = self.bounds()
        if bounds is None:
            return "a string"
        return f"{_TYPE_RANGES[self.parse][0]} in [{_number(bounds[0])}, {_number(bounds[1])}]"

    def shown(self, value: Any) -> str:
        """``value`` as an error message or a log line may show it: a secret's as Kafka's
        ``Password.toString``, [hidden]."""
        return HIDDEN if self.secret else repr(value)

    def coerce(self, value: Any) -> Any:
        try:
            parsed = self.parse(value)
        except (TypeError, ValueError) as e:
            reason = "" if self.secret else f": {e}"  # the parser's message may quote the value
            raise InvalidConfigurationError(
                f"invalid value {self.shown(value)} for {self.name}{reason}; must be {self.allowed()}"
            ) from None
        bounds = self.bounds()
        if bounds is not None and not bounds[0] <= parsed <= bounds[1]:
            raise InvalidConfigurationError(
                f"invalid value {self.shown(value)} for {self.name}: must be {self.allowed()}"
            )
        if self.choices is not None:
            values = parsed if isinstance(parsed, tuple) else (parsed,)
            bad = [v for v in values if v not in self.choices]
            if bad:
                raise InvalidConfigurationError(
                    f"invalid value {self.shown(value)} for {self.name}: must be {self.allowed()}"
                )
        return parsed


def _number(bound: float) -> str:
    if isinstance(bound, float) and bound.is_integer():
        return str(int(bound))
    return str(bound)


# --- topic-level keys, each with its broker synonyms (name, unit factor) -----

TOPIC_KEYS: dict[str, Key] = {}
SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {}


def _topic(
    name: str, parse: Callable[[Any], Any], default: Any, doc: str, *synonyms: tuple[str, int], **kw: Any
) -> None:
    TOPIC_KEYS[name] = Key(name, parse, default, doc, **kw)
    SYNONYMS[name] = synonyms


_HOUR, _MINUTE = 3_600_000, 60_000

_topic(
    "segment.bytes",
    _int32,
    1 << 30,
    "Roll a new segment once the active one would exceed this size.",
    ("log.segment.bytes", 1),
    minimum=14,
)
_topic(
    "segment.ms",
    _int,
    7 * 24 * _HOUR,
    "Roll a new segment once the active one's first record is this old.",
    ("log.roll.ms", 1),
    ("log.roll.hours", _HOUR),
    minimum=1,
)
_topic(
    "segment.jitter.ms",
    _int,
    0,
    "Random jitter subtracted from segment.ms, so partitions do not roll at once.",
    ("log.roll.jitter.ms", 1),
    ("log.roll.jitter.hours", _HOUR),
    minimum=0,
)
_topic(
    "segment.index.bytes",
    _int32,
    10 * 1024 * 1024,
    "Size preallocated for each offset and time index.",
    ("log.index.size.max.bytes", 1),
    minimum=4,
)
_topic(
    "index.interval.bytes",
    _int32,
    4096,
    "Bytes of batches between two index entries.",
    ("log.index.interval.bytes", 1),
    minimum=0,
)
_topic(
    "flush.messages",
    _int,
    LONG_MAX,
    "fsync the log after this many records.",
    ("log.flush.interval.messages", 1),
    minimum=1,
)
_topic(
    "flush.ms",
    _int,
    LONG_MAX,
    "fsync the log once unflushed data is this old.",
    ("log.flush.interval.ms", 1),
    ("log.flush.scheduler.interval.ms", 1),
    minimum=0,
)
_topic(
    "retention.ms",
    _int,
    7 * 24 * _HOUR,
    "Delete segments whose newest record is older than this; -1 keeps all.",
    ("log.retention.ms", 1),
    ("log.retention.minutes", _MINUTE),
    ("log.retention.hours", _HOUR),
    minimum=-1,
)
_topic(
    "retention.bytes",
    _int,
    -1,
    "Delete the oldest segments while the partition is larger; -1 is no limit.",
    ("log.retention.bytes", 1),
)
_topic(
    "max.message.bytes",
    _int32,
    1024 * 1024 + 12,
    "The largest record batch the log accepts.",
    ("message.max.bytes", 1),
    minimum=0,
)
_topic(
    "cleanup.policy",
    _list,
    ("delete",),
    "delete, compact, or both.",
    ("log.cleanup.policy", 1),
    choices=("delete", "compact"),
)
_topic(
    "delete.retention.ms",
    _int,
    24 * _HOUR,
    "How long tombstones survive compaction.",
    ("log.cleaner.delete.retention.ms", 1),
    minimum=0,
)
_topic(
    "min.compaction.lag.ms",
    _int,
    0,
    "Records younger than this are never compacted.",
    ("log.cleaner.min.compaction.lag.ms", 1),
    minimum=0,
)
_topic(
    "max.compaction.lag.ms",
    _int,
    LONG_MAX,
    "Records older than this make a log eligible whatever its ratio.",
    ("log.cleaner.max.compaction.lag.ms", 1),
    minimum=1,
)
_topic(
    "min.cleanable.dirty.ratio",
    _double,
    0.5,
    "Dirty share of a log above which it is cleaned.",
    ("log.cleaner.min.cleanable.ratio", 1),
    minimum=0,
    maximum=1,
)
_topic(
    "file.delete.delay.ms",
    _int,
    60_000,
    "Delay between renaming a segment .deleted and removing it.",
    ("log.segment.delete.delay.ms", 1),
    minimum=0,
)
_topic(
    "compression.type",
    str,
    "producer",
    "Codec of stored batches; producer keeps the producer's.",
    ("compression.type", 1),
    choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
)
_topic(
    "message.timestamp.type",
    str,
    "CreateTime",
    "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches on append.",
    ("log.message.timestamp.type", 1),
    choices=("CreateTime", "LogAppendTime"),
)
_topic(
    "message.timestamp.before.max.ms",
    _int,
    LONG_MAX,
    "How far in the past a CreateTime timestamp may be.",
    ("log.message.timestamp.before.max.ms", 1),
    minimum=0,
)
_topic(
    "message.timestamp.after.max.ms",
    _int,
    _HOUR,
    "How far in the future a CreateTime timestamp may be.",
    ("log.message.timestamp.after.max.ms", 1),
    minimum=0,
)
_topic(
    "min.insync.replicas",
    _int32,
    1,
    "Replicas that must have a record before an acks=all produce is acknowledged.",
    ("min.insync.replicas", 1),
    minimum=1,
)
_topic(
    "unclean.leader.election.enable",
    _bool,
    False,
    "Let a replica outside the ISR lead when no ISR member is alive (acknowledged records may be lost).",
    ("unclean.leader.election.enable", 1),
)

# --- broker-only keys ------------------------------------------------------------

BROKER_KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("log.dirs", _paths, ("/tmp/kafka-logs",), "Directories holding the partition logs."),
        Key("log.dir", _path, "/tmp/kafka-logs", "The log directory, when log.dirs is not set."),
        Key("broker.id", _int32, 0, "This broker's id, kept in meta.properties.", minimum=-1),
        Key("num.partitions", _int32, 1, "Partitions of a topic created without a count.", minimum=1),
        Key(
            "num.recovery.threads.per.data.dir",
            _int32,
            1,
            "Threads that load and recover logs per dir.",
            minimum=1,
        ),
        Key(
            "log.flush.offset.checkpoint.interval.ms",
            _int32,
            60_000,
            "How often recovery points are checkpointed.",
            minimum=0,
        ),
        Key(
            "log.flush.start.offset.checkpoint.interval.ms",
            _int32,
            60_000,
            "How often log start offsets are checkpointed.",
            minimum=0,
        ),
        Key(
            "replica.high.watermark.checkpoint.interval.ms",
            _int,
            5_000,
            "How often high watermarks are checkpointed.",
            minimum=0,
        ),
        Key("log.retention.check.interval.ms", _int, 5 * _MINUTE, "How often retention runs.", minimum=1),
        Key("log.cleaner.enable", _bool, True, "Run the log cleaner for compacted topics."),
        Key("log.cleaner.threads", _int32, 1, "Threads cleaning logs.", minimum=0),
        Key(
            "log.cleaner.dedupe.buffer.size",
            _int,
            128 * 1024 * 1024,
            "Memory for the cleaner's key map, all threads.",
            minimum=0,
        ),
        Key(
            "log.cleaner.io.buffer.size",
            _int32,
            512 * 1024,
            "I/O buffer of the cleaner, all threads.",
            minimum=0,
        ),
        Key(
            "log.cleaner.io.buffer.load.factor",
            _double,
            0.9,
            "How full the cleaner's key map may get.",
            minimum=0,
            maximum=1,
        ),
        Key(
            "log.cleaner.io.max.bytes.per.second",
            _double,
            float("inf"),
            "Throttle of the cleaner's I/O.",
            minimum=0,
        ),
        Key(
            "log.cleaner.backoff.ms",
            _int,
            15_000,
            "Sleep of a cleaner thread with nothing to clean.",
            minimum=0,
        ),
    )
}
# the cluster's keys (ZooKeeper, controller, replication), with Kafka's defaults and ranges
BROKER_KEYS.update(
    (k.name, k)
    for k in (
        Key("zookeeper.connect", str, None, "ZooKeeper's host:port list, with an optional /chroot."),
        Key("zookeeper.session.timeout.ms", _int32, 18_000, "ZooKeeper session timeout."),
        Key(
            "zookeeper.connection.timeout.ms",
            _int32,
            None,
            "How long to wait to connect to ZooKeeper; zookeeper.session.timeout.ms when not set.",
        ),
        Key("broker.rack", str, None, "This broker's rack, for rack-aware replica assignment."),
        Key("delete.topic.enable", _bool, True, "Let topics be deleted; when false, deletion requests are dropped."),
        Key("controlled.shutdown.enable", _bool, True, "Move leadership off this broker before it stops."),
        Key("controlled.shutdown.max.retries", _int32, 3, "Attempts of a controlled shutdown before stopping anyway."),
        Key("controlled.shutdown.retry.backoff.ms", _int, 5_000, "Wait between controlled shutdown attempts."),
        Key("auto.leader.rebalance.enable", _bool, True, "Move leadership back to preferred replicas periodically."),
        Key(
            "leader.imbalance.per.broker.percentage",
            _int32,
            10,
            "Leader imbalance per broker (percent) above which preferred replicas are elected.",
        ),
        Key(
            "leader.imbalance.check.interval.seconds",
            _int,
            300,
            "How often the controller checks the leader imbalance.",
            minimum=1,
        ),
        Key(
            "replica.lag.time.max.ms",
            _int,
            30_000,
            "A follower not caught up with the leader for this long leaves the ISR.",
            # the ISR check runs every half of it: no period of 0 or less (a busy loop)
            minimum=1,
        ),
        Key("default.replication.factor", _int32, 1, "Replication factor of topics created without one."),
        Key("num.replica.fetchers", _int32, 1, "Fetcher threads per source broker."),
        Key("replica.fetch.max.bytes", _int32, 1024 * 1024, "Bytes a follower fetches per partition.", minimum=0),
        Key("replica.fetch.response.max.bytes", _int32, 10 * 1024 * 1024, "Bytes of a follower's fetch.", minimum=0),
        Key("replica.fetch.wait.max.ms", _int32, 500, "How long a follower's fetch waits for min bytes."),
        Key("replica.fetch.min.bytes", _int32, 1, "Bytes a follower's fetch waits for."),
        Key("replica.fetch.backoff.ms", _int32, 1_000, "A follower's pause after a failed fetch.", minimum=0),
        Key("replica.socket.timeout.ms", _int32, 30_000, "Socket timeout of a follower's requests to its leader."),
        Key("controller.socket.timeout.ms", _int32, 30_000, "Socket timeout of controller-to-broker requests."),
        Key(
            "request.timeout.ms",
            _int32,
            30_000,
            "How long a transaction marker's request to another broker, and its append, may wait for the ISR.",
            minimum=0,
        ),
        Key(
            "offsets.topic.replication.factor",
            _int16,
            3,
            "Replication factor of __consumer_offsets.",
            minimum=1,
        ),
        Key(
            "transaction.state.log.replication.factor",
            _int16,
            3,
            "Replication factor of __transaction_state.",
            minimum=1,
        ),
        Key("transaction.state.log.min.isr", _int32, 2, "min.insync.replicas of __transaction_state.", minimum=1),
    )
)


# --- the broker's network and topic defaults (seglog.broker) -------------------------
for _key in (
    Key("listeners", _list, ("PLAINTEXT://:9092",), "Addresses the broker listens on, PLAINTEXT://host:port."),
    Key(
        "advertised.listeners",
        _list,
        None,
        "Addresses given to clients in metadata; the listeners when unset.",
    ),
    Key("auto.create.topics.enable", _bool, True, "Create a topic when a client asks metadata of it."),
    Key(
        "socket.request.max.bytes",
        _int32,
        100 * 1024 * 1024,
        "The largest request the broker reads; a larger size prefix closes the connection.",
        minimum=1,
    ),
    Key("num.io.threads", _int32, 8, "Threads that run storage calls for requests.", minimum=1),
    Key(
        "connections.max.idle.ms",
        _int,
        600_000,
        "A connection with no request under way and no bytes in or out for this long is closed "
        "(one still in its TLS handshake or SASL exchange too); negative: never.",
    ),
    Key(
        "max.connections.per.ip",
        _int32,
        INT_MAX,
        "The most connections one client address may have open (on all listeners); one more is closed at once.",
        minimum=0,
    ),
    Key(
        "max.connections.per.ip.overrides",
        _host_counts,
        {},
        "Per host or address, its own max.connections.per.ip: host:count,host:count.",
    ),
    Key(
        "max.connections",
        _int32,
        INT_MAX,
        "The most connections the broker holds open (all listeners); past it the listeners wait to serve "
        "new ones. listener.name.<l>.max.connections limits one listener.",
        minimum=0,
    ),
    Key(
        "max.connection.creation.rate",
        _int32,
        INT_MAX,
        "The most new connections a second the broker serves (all listeners); faster ones wait. "
        "listener.name.<l>.max.connection.creation.rate limits one listener.",
        minimum=0,
    ),
):
    BROKER_KEYS[_key.name] = _key


# client quotas' sampling (Kafka's QuotaConfig): a rate over num windows of size.seconds each
for _key in (
    Key("quota.window.num", _int32, 11, "Samples a client quota's rate is measured over.", minimum=1),
    Key("quota.window.size.seconds", _int32, 1, "The time span of each client quota sample.", minimum=1),
):
    BROKER_KEYS[_key.name] = _key


# Kafka's security protocols; a listener's name maps to one (listener.security.protocol.map)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_STORE_TYPES = ("JKS", "PKCS12", "PEM")

# the listeners' names and protocols, and TLS (Kafka's SocketServerConfigs and SslConfigs)
BROKER_KEYS.update(
    (k.name, k)
    for k in (
        Key(
            "listener.security.protocol.map",
            _list,
            tuple(f"{p}:{p}" for p in SECURITY_PROTOCOLS),
            "Each listener name's security protocol, NAME:PROTOCOL pairs.",
        ),
        Key(
            "inter.broker.listener.name",
            str,
            None,
            "The listener brokers reach each other on; security.inter.broker.protocol's name when unset.",
        ),
        Key(
            "security.inter.broker.protocol",
            str,
            "PLAINTEXT",
            "The protocol brokers reach each other with, when inter.broker.listener.name is unset.",
            choices=SECURITY_PROTOCOLS,
        ),
        Key("ssl.keystore.type", str, "JKS", "The keystore's format; seglog reads PEM.", choices=_STORE_TYPES),
        Key("ssl.keystore.location", str, None, "A PEM file holding the private key and its certificate chain."),
        Key("ssl.keystore.password", str, None, "The keystore's password (JKS and PKCS12 only).", secret=True),
        Key("ssl.keystore.certificate.chain", str, None, "The certificate chain, PEM text.", secret=True),
        Key("ssl.keystore.key", str, None, "The private key, PEM text (PKCS#8, encrypted or not).", secret=True),
        Key("ssl.key.password", str, None, "The password of an encrypted private key.", secret=True),
        Key("ssl.truststore.type", str, "JKS", "The truststore's format; seglog reads PEM.", choices=_STORE_TYPES),
        Key(
            "ssl.truststore.location",
            str,
            None,
            "A PEM file of the CA certificates client certificates are checked against.",
        ),
        Key("ssl.truststore.password", str, None, "The truststore's password (JKS and PKCS12 only).", secret=True),
        Key("ssl.truststore.certificates", str, None, "The trusted CA certificates, PEM text.", secret=True),
        Key(
            "ssl.client.auth",
            str,
            "none",
            "Whether a client must (required), may (requested) or need not (none) present a certificate.",
            choices=("none", "requested", "required"),
        ),
        Key(
            "ssl.enabled.protocols",
            _list,
            ("TLSv1.2", "TLSv1.3"),
            "The TLS versions a listener accepts.",
            choices=("TLSv1.2", "TLSv1.3"),
        ),
        Key("ssl.cipher.suites", _list, None, "The TLS 1.2 cipher suites a listener accepts; OpenSSL's when unset."),
        Key(
            "ssl.principal.mapping.rules",
            str,
            "DEFAULT",
            "Rules mapping a client certificate's distinguished name to a principal's name.",
        ),
    )
)
# ACLs (Kafka's AclAuthorizer): the authorizer Kafka names turns them on; none, every request passes
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
for _key in (
    Key("authorizer.class.name", str, "", "The authorizer: empty for none.", choices=("", ACL_AUTHORIZER)),
    Key("super.users", str, "", "Principals every ACL check allows, ';'-separated: User:admin;User:broker."),
    Key("allow.everyone.if.no.acl.found", _bool, False, "Allow a resource no ACL covers to everyone."),
):
    BROKER_KEYS[_key.name] = _key

# SASL (Kafka's BrokerSecurityConfigs and SaslConfigs)
BROKER_KEYS.update(
    (k.name, k)
    for k in (
        Key(
            "sasl.enabled.mechanisms",
            _list,
            ("GSSAPI",),
            "The SASL mechanisms a SASL listener offers; seglog serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.",
        ),
        Key(
            "sasl.mechanism.inter.broker.protocol",
            str,
            "GSSAPI",
            "The SASL mechanism brokers authenticate to each other with.",
        ),
        Key(
            "sasl.jaas.config",
            str,
            None,
            "A JAAS login module, set per listener and mechanism as "
            'listener.name.<listener>.<mechanism>.sasl.jaas.config (PLAIN\'s users: user_<name>="<password>").',
            secret=True,
        ),
        Key(
            "connections.max.reauth.ms",
            _int,
            0,
            "A SASL session's lifetime: past it a connection closes unless it re-authenticated (0: forever).",
            minimum=0,
        ),
        Key(
            "connection.failed.authentication.delay.ms",
            _int32,
            100,
            "How long a failed authentication waits before its answer and the connection's close.",
            minimum=0,
        ),
    )
)
# Keys a listener may override for itself as listener.name.<name in lowercase>.<key>: those of
# these prefixes, and these keys
LISTENER_KEY_PREFIXES = ("ssl.", "sasl.")
_LISTENER_KEYS = ("connections.max.reauth.ms", "max.connections", "max.connection.creation.rate")
_LISTENER_PREFIX = "listener.name."
# keys set per listener and SASL mechanism too: listener.name.<listener>.<mechanism>.<key> (Kafka's
# SaslChannelBuilder reads the mechanism's before the listener's)
_MECHANISM_KEYS = ("sasl.jaas.config", "connections.max.reauth.ms")


def listener_override(name: str) -> tuple[str, Key] | None:
    """``listener.name.<listener>.<key>``: the listener (lowercased, as Kafka's prefix is) and
    the broker key overridden for it; None for any other name."""
    if not name.startswith(_LISTENER_PREFIX):
        return None
    listener, _, base = name[len(_LISTENER_PREFIX) :].partition(".")
    mechanism, _, rest = base.partition(".")
    if rest in _MECHANISM_KEYS:  # listener.name.<listener>.<mechanism>.sasl.jaas.config: the pair is the "listener"
        listener, base = f"{listener}.{mechanism}", rest
    key = BROKER_KEYS.get(base)
    if not listener or key is None or not (base.startswith(LISTENER_KEY_PREFIXES) or base in _LISTENER_KEYS):
        return None
    return listener.lower(), key


def is_broker_key(name: str) -> bool:
    return name in BROKER_KEYS or listener_override(name) is not None


# the group and transaction coordinators' keys, with Kafka's defaults and ranges
BROKER_KEYS.update(
    (k.name, k)
    for k in (
        Key("offsets.topic.num.partitions", _int32, 50, "Partitions of __consumer_offsets.", minimum=1),
        Key(
            "offsets.topic.segment.bytes", _int32, 100 * 1024 * 1024, "segment.bytes of __consumer_offsets.", minimum=1
        ),
        Key(
            "offsets.retention.minutes",
            _int32,
            7 * 24 * 60,
            "Committed offsets of a group this long empty (or, standalone, this long since the commit) expire.",
            minimum=1,
        ),
        Key("offsets.retention.check.interval.ms", _int, 600_000, "How often stale offsets are expired.", minimum=1),
        Key("offset.metadata.max.bytes", _int32, 4096, "The longest metadata string an offset commit may carry."),
        Key(
            "offsets.commit.timeout.ms",
            _int32,
            5_000,
            "How long a group coordinator's write waits for the ISR of its __consumer_offsets partition.",
            minimum=1,
        ),
        Key(
            "offsets.topic.compression.codec",
            _int32,
            0,
            "Compression of the records the group coordinator writes (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).",
            minimum=0,
            maximum=4,
        ),
        Key(
            "group.initial.rebalance.delay.ms",
            _int32,
            3_000,
            "How long the first rebalance of an empty group waits for more members.",
        ),
        Key("group.min.session.timeout.ms", _int32, 6_000, "The shortest session.timeout.ms a member may ask for."),
        Key("group.max.session.timeout.ms", _int32, 1_800_000, "The longest session.timeout.ms a member may ask for."),
        Key("group.max.size", _int32, INT_MAX, "The most members a consumer group may have.", minimum=1),
        Key("transaction.state.log.num.partitions", _int32, 50, "Partitions of __transaction_state.", minimum=1),
        Key(
            "transaction.state.log.segment.bytes",
            _int32,
            100 * 1024 * 1024,
            "segment.bytes of __transaction_state.",
            minimum=1,
        ),
        Key(
            "transaction.max.timeout.ms",
            _int32,
            900_000,
            "The longest transaction.timeout.ms a producer may ask for.",
            minimum=1,
        ),
        Key(
            "transactional.id.expiration.ms",
            _int32,
            7 * 24 * _HOUR,
            "A transactional id with no transaction for this long expires.",
            minimum=1,
        ),
        Key(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            _int32,
            10_000,
            "How often transactions past their timeout are aborted.",
            minimum=1,
        ),
        Key(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            _int32,
            3_600_000,
            "How often expired transactional ids are removed.",
            minimum=1,
        ),
        Key(
            "producer.id.expiration.ms",
            _int32,
            24 * _HOUR,
            "A producer id idle this long (and in no transaction) is forgotten by partitions.",
            minimum=1,
        ),
        Key(
            "producer.id.expiration.check.interval.ms",
            _int32,
            600_000,
            "How often partitions forget expired producer ids.",
            minimum=1,
        ),
    )
)
# the broker synonyms of topic keys are broker keys too
for _name, _syns in SYNONYMS.items():
    for _syn, _factor in _syns:
        if _syn not in BROKER_KEYS:
            base = TOPIC_KEYS[_name]
            # Kafka's keys in hours or minutes are INTs, whatever the type of the key they set
            parse = _int32 if _factor != 1 else base.parse
            BROKER_KEYS[_syn] = Key(_syn, parse, None, base.doc, base.minimum, base.choices, base.maximum)


class BrokerConfig:
    """Broker-level settings: Kafka's key names, validated, defaults filled in lazily."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {}
        for name, value in (values or {}).items():
            key = BROKER_KEYS.get(name)
            if key is None:
                override = listener_override(name)
                if override is None:
                    raise InvalidConfigurationError(f"unknown broker config {name!r}")
                listener, base = override
                name = f"{_LISTENER_PREFIX}{listener}.{base.name}"
                key = dataclasses.replace(base, name=name)  # its errors name the key as written
            self._values[name] = key.coerce(value)

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return BROKER_KEYS[name].default

    def is_set(self, name: str) -> bool:
        return name in self._values

    def listener_key(self, listener: str, name: str) -> str:
        """The key that gives ``name`` its value on ``listener``: the listener's own
        ``listener.name.<listener>.<name>`` when set, else the broker-wide ``name``."""
        own = f"{_LISTENER_PREFIX}{listener.lower()}.{name}"
        return own if own in self._values else name

    def for_listener(self, listener: str, name: str) -> Any:
        """``name``'s value on ``listener`` (see ``listener_key``)."""
        return self[self.listener_key(listener, name)]

    @property
    def log_dirs(self) -> tuple[str, ...]:
        if self.is_set("log.dirs"):
            return tuple(self["log.dirs"])
        return (self["log.dir"],)

    def topic_default(self, name: str) -> Any:
        """A topic key's value at broker level: its first synonym that is set."""
        for syn, factor in SYNONYMS[name]:
            if self.is_set(syn):
                value = self._values[syn]
                return value * factor if factor != 1 else value
        return TOPIC_KEYS[name].default


def topic_value(broker: BrokerConfig, overrides: Mapping[str, Any], name: str) -> Any:
    """A topic key's value: its override (validated), else the broker's default, else Kafka's; one
    key without the whole LogConfig (DescribeConfigs asking a few keys of many topics)."""
    return overrides[name] if name in overrides else broker.topic_default(name)


def validate_topic_config(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Check topic-level overrides; return them coerced to their types."""
    if not isinstance(overrides, Mapping):
        raise InvalidConfigurationError(f"a topic config must be a mapping of Kafka's keys, not {overrides!r}")
    out = {}
    for name, value in overrides.items():
        key = TOPIC_KEYS.get(name)
        if key is None:
            raise InvalidConfigurationError(f"unknown topic config {name!r}")
        out[name] = key.coerce(value)
    return out


def _attr(name: str) -> str:
    return name.replace(".", "_")


class LogConfig:
    """The resolved settings of one topic: overrides, else broker defaults, else Kafka's."""

    segment_bytes: int
    segment_ms: int
    segment_jitter_ms: int
    segment_index_bytes: int
    index_interval_bytes: int
    flush_messages: int
    flush_ms: int
    retention_ms: int
    retention_bytes: int
    max_message_bytes: int
    cleanup_policy: tuple[str, ...]
    delete_retention_ms: int
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    min_cleanable_dirty_ratio: float
    file_delete_delay_ms: int
    compression_type: str
    message_timestamp_type: str
    message_timestamp_before_max_ms: int
    message_timestamp_after_max_ms: int
    min_insync_replicas: int
    unclean_leader_election_enable: bool

    def __init__(self, broker: BrokerConfig | None = None, overrides: Mapping[str, Any] | None = None) -> None:
        broker = broker or BrokerConfig()
        self.overrides = validate_topic_config(overrides or {})
        for name in TOPIC_KEYS:
            setattr(self, _attr(name), topic_value(broker, self.overrides, name))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def __getitem__(self, name: str) -> Any:
        if name not in TOPIC_KEYS:
            raise KeyError(name)
        return getattr(self, _attr(name))

    def as_dict(self) -> dict[str, Any]:
        return {name: self[name] for name in TOPIC_KEYS}
