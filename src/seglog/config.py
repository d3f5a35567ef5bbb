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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import InvalidConfigurationError

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


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
    if isinstance(value, bool):
        raise ValueError(f"not an integer: {value!r}")
    return int(value)


@dataclass(frozen=True)
class Key:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    doc: str
    minimum: float | None = None
    choices: tuple[str, ...] | None = None

    def coerce(self, value: Any) -> Any:
        try:
            parsed = self.parse(value)
        except (TypeError, ValueError) as e:
            raise InvalidConfigurationError(f"invalid value {value!r} for {self.name}: {e}") from None
        if self.minimum is not None and parsed < self.minimum:
            raise InvalidConfigurationError(f"invalid value {value!r} for {self.name}: below {self.minimum}")
        if self.choices is not None:
            values = parsed if isinstance(parsed, tuple) else (parsed,)
            bad = [v for v in values if v not in self.choices]
            if bad:
                raise InvalidConfigurationError(
                    f"invalid value {value!r} for {self.name}: must be one of {', '.join(self.choices)}"
                )
        return parsed


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
    _int,
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
    _int,
    10 * 1024 * 1024,
    "Size preallocated for each offset and time index.",
    ("log.index.size.max.bytes", 1),
    minimum=4,
)
_topic(
    "index.interval.bytes",
    _int,
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
    _int,
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
    float,
    0.5,
    "Dirty share of a log above which it is cleaned.",
    ("log.cleaner.min.cleanable.ratio", 1),
    minimum=0,
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
    choices=("producer", "uncompressed", "none", "gzip", "snappy", "lz4", "zstd"),
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

# --- broker-only keys ------------------------------------------------------------

BROKER_KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key("log.dirs", _list, ("/tmp/kafka-logs",), "Directories holding the partition logs."),
        Key("log.dir", str, "/tmp/kafka-logs", "The log directory, when log.dirs is not set."),
        Key("broker.id", _int, 0, "This broker's id, kept in meta.properties.", minimum=-1),
        Key("num.partitions", _int, 1, "Partitions of a topic created without a count.", minimum=1),
        Key(
            "num.recovery.threads.per.data.dir",
            _int,
            1,
            "Threads that load and recover logs per dir.",
            minimum=1,
        ),
        Key(
            "log.flush.offset.checkpoint.interval.ms",
            _int,
            60_000,
            "How often recovery points are checkpointed.",
            minimum=0,
        ),
        Key(
            "log.flush.start.offset.checkpoint.interval.ms",
            _int,
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
        Key("log.cleaner.threads", _int, 1, "Threads cleaning logs.", minimum=0),
        Key(
            "log.cleaner.dedupe.buffer.size",
            _int,
            128 * 1024 * 1024,
            "Memory for the cleaner's key map, all threads.",
            minimum=0,
        ),
        Key(
            "log.cleaner.io.buffer.size",
            _int,
            512 * 1024,
            "I/O buffer of the cleaner, all threads.",
            minimum=0,
        ),
        Key(
            "log.cleaner.io.buffer.load.factor",
            float,
            0.9,
            "How full the cleaner's key map may get.",
            minimum=0,
        ),
        Key(
            "log.cleaner.io.max.bytes.per.second",
            float,
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
# --- the broker's network and topic defaults (seglog.broker) -------------------------
for _key in (
    Key("listeners", _list, ("PLAINTEXT://:9092",), "Addresses the broker listens on, PLAINTEXT://host:port."),
    Key(
        "advertised.listeners",
        _list,
        None,
        "Addresses given to clients in metadata; the listeners when unset.",
    ),
    Key("default.replication.factor", _int, 1, "Replication factor of auto-created topics.", minimum=1),
    Key("auto.create.topics.enable", _bool, True, "Create a topic when a client asks metadata of it."),
    Key("delete.topic.enable", _bool, True, "Allow DeleteTopics."),
    Key(
        "socket.request.max.bytes",
        _int,
        100 * 1024 * 1024,
        "The largest request the broker reads; a larger size prefix closes the connection.",
        minimum=1,
    ),
    Key("num.io.threads", _int, 8, "Threads that run storage calls for requests.", minimum=1),
):
    BROKER_KEYS[_key.name] = _key
# the broker synonyms of topic keys are broker keys too
for _name, _syns in SYNONYMS.items():
    for _syn, _factor in _syns:
        if _syn not in BROKER_KEYS:
            base = TOPIC_KEYS[_name]
            BROKER_KEYS[_syn] = Key(_syn, base.parse, None, base.doc, base.minimum, base.choices)


class BrokerConfig:
    """Broker-level settings: Kafka's key names, validated, defaults filled in lazily."""

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self._values: dict[str, Any] = {}
        for name, value in (values or {}).items():
            key = BROKER_KEYS.get(name)
            if key is None:
                raise InvalidConfigurationError(f"unknown broker config {name!r}")
            self._values[name] = key.coerce(value)

    def __getitem__(self, name: str) -> Any:
        if name in self._values:
            return self._values[name]
        return BROKER_KEYS[name].default

    def is_set(self, name: str) -> bool:
        return name in self._values

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


def validate_topic_config(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Check topic-level overrides; return them coerced to their types."""
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

    def __init__(self, broker: BrokerConfig | None = None, overrides: Mapping[str, Any] | None = None) -> None:
        broker = broker or BrokerConfig()
        self.overrides = validate_topic_config(overrides or {})
        for name in TOPIC_KEYS:
            value = self.overrides[name] if name in self.overrides else broker.topic_default(name)
            setattr(self, _attr(name), value)

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
