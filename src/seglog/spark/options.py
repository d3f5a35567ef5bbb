"""The options of the ``seglog`` Spark source, with the semantics of Spark's Kafka source.

Parsing only: this module turns option strings into values and says clearly
which option is wrong; resolving them against a log dir happens in
``offsets.py``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..client import ClientSecurity, client_security
from ..common import TopicPartition
from ..errors import ErrorCode, SeglogError
from ..records import Compression

log = logging.getLogger(__name__)

EARLIEST = -2
LATEST = -1


class OptionError(SeglogError, ValueError):
    """A source or sink option that is missing, conflicting or malformed."""

    error_code = ErrorCode.INVALID_REQUEST


@dataclass(frozen=True)
class OffsetSpec:
    """Where to start or end: earliest, latest, offsets or timestamps, global or per partition."""

    kind: str  # "earliest" | "latest" | "offsets" | "timestamp" | "timestamps"
    per_partition: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = 0
    option: str = ""  # the option that gave it, for its errors (startingOffsetsByTimestamp ...)


@dataclass(frozen=True)
class Subscription:
    kind: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    assigned: tuple[TopicPartition, ...] = ()


def _get(options: Mapping[str, str], name: str) -> str | None:
    # Spark passes options as a case-insensitive dict; plain dicts work too
    for key, value in options.items():
        if key.lower() == name.lower():
            return value
    return None


def parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    text = _get(options, name)
    if text is None:
        return default
    if text.strip().lower() not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {text!r}")
    return text.strip().lower() == "true"


def parse_int(options: Mapping[str, str], name: str, default: int | None = None, minimum: int = 0) -> int | None:
    text = _get(options, name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise OptionError(f"option {name} must be an integer, not {text!r}") from None
    if value < minimum:
        raise OptionError(f"option {name} must be at least {minimum}, not {value}")
    return value


def parse_duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """Spark's duration strings: ``15m``, ``30s``, ``500ms``, ``1h``, or plain milliseconds."""
    text = _get(options, name)
    if text is None:
        return default_ms
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", text.lower())
    if m is None:
        raise OptionError(f"option {name} must be a duration such as 15m or 30s, not {text!r}")
    unit = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
    return int(m.group(1)) * unit[m.group(2)]


def log_dirs(options: Mapping[str, str]) -> list[str]:
    path = _get(options, "path")
    if not path:
        raise OptionError('option "path" (the seglog log dir) is required')
    return [p for p in path.split(",") if p]


def has_path(options: Mapping[str, str]) -> bool:
    return bool(_get(options, "path"))


# Kafka's consumer defaults (ConsumerConfig)
_REQUEST_TIMEOUT_MS = 30_000
_FETCH_MAX_BYTES = 50 * 1024 * 1024
_MAX_PARTITION_FETCH_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ClientOptions:
    """What the ``kafka.*`` consumer options mean to a read through the brokers."""

    bootstrap_servers: str
    client_id: str
    request_timeout_ms: int  # a request's answer, and a task's retries of a moved leader
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    # the kafka.security.protocol, kafka.sasl.* and kafka.ssl.* options, ``kafka.`` taken off: what
    # each task's connections are made from (files such as a truststore are read where tasks run)
    security_properties: tuple[tuple[str, str], ...] = ()

    def security(self) -> ClientSecurity:
        """The client's TLS and SASL settings (an SSL context: made on each executor, never pickled)."""
        return client_security(dict(self.security_properties))


def _security_properties(options: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The security options as Spark's Kafka connector takes them: Kafka's client properties,
    ``kafka.``-prefixed; refused at once, naming the option, when they do not make a client."""
    found = tuple(
        (name[len("kafka.") :], value)
        for name, value in sorted((k.lower(), v) for k, v in options.items())
        if name == "kafka.security.protocol" or name.startswith(("kafka.sasl.", "kafka.ssl."))
    )
    try:
        client_security(dict(found))
    except SeglogError as e:
        raise OptionError(f"the kafka.security.protocol, kafka.sasl.* and kafka.ssl.* options: {e.message}") from None
    return found


def client_options(options: Mapping[str, str]) -> ClientOptions | None:
    """The brokers to read through (``kafka.bootstrap.servers``), or None to read the log dirs of
    ``path`` alone. Given both, the brokers plan and serve the reads, and a task running beside a
    replica's log dir of ``path`` reads that replica's files instead (``source.py``)."""
    servers = _get(options, "kafka.bootstrap.servers")
    if servers is None:
        log_dirs(options)
        return None
    if not [a for a in servers.split(",") if a.strip()]:
        raise OptionError("option kafka.bootstrap.servers names no broker (HOST:PORT[,HOST:PORT...])")
    for address in servers.split(","):
        host, sep, port = address.strip().rpartition(":")
        if address.strip() and (not sep or not host or not port.isdigit()):
            raise OptionError(f"option kafka.bootstrap.servers: {address.strip()!r} is not HOST:PORT")
    return ClientOptions(
        bootstrap_servers=servers,
        client_id=_get(options, "kafka.client.id") or "seglog-spark",
        request_timeout_ms=parse_int(options, "kafka.request.timeout.ms", _REQUEST_TIMEOUT_MS, minimum=1)
        or _REQUEST_TIMEOUT_MS,
        fetch_max_bytes=parse_int(options, "kafka.fetch.max.bytes", _FETCH_MAX_BYTES, minimum=1) or _FETCH_MAX_BYTES,
        max_partition_fetch_bytes=parse_int(
            options, "kafka.max.partition.fetch.bytes", _MAX_PARTITION_FETCH_BYTES, minimum=1
        )
        or _MAX_PARTITION_FETCH_BYTES,
        security_properties=_security_properties(options),
    )


def _json(options: Mapping[str, str], name: str) -> Any:
    text = _get(options, name)
    try:
        return json.loads(text or "")
    except ValueError as e:
        raise OptionError(f"option {name} is not valid JSON ({e}): {text!r}") from None


def _per_partition(options: Mapping[str, str], name: str) -> dict[TopicPartition, int]:
    """``{"topic": {"0": 23, "1": -1}}`` → ``{("topic", 0): 23, ("topic", 1): -1}``."""
    obj = _json(options, name)
    out: dict[TopicPartition, int] = {}
    if not isinstance(obj, dict):
        raise OptionError(f'option {name} must be a JSON object like {{"topic": {{"0": 23}}}}')
    for topic, parts in obj.items():
        if not isinstance(parts, dict):
            raise OptionError(f"option {name}: topic {topic!r} must map partitions to numbers")
        for p, value in parts.items():
            try:
                out[TopicPartition(topic, int(p))] = int(value)
            except (TypeError, ValueError):
                raise OptionError(f"option {name}: bad entry {topic}/{p}: {value!r}") from None
    return out


def subscription(options: Mapping[str, str]) -> Subscription:
    given = [k for k in ("subscribe", "subscribePattern", "assign") if _get(options, k) is not None]
    if len(given) != 1:
        raise OptionError(
            "exactly one of the options subscribe, subscribePattern and assign must be given"
            + (f" (got {', '.join(given)})" if given else "")
        )
    kind = given[0]
    text = _get(options, kind) or ""
    if kind == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionError("option subscribe names no topic")
        return Subscription(kind, topics=topics)
    if kind == "subscribePattern":
        try:
            return Subscription(kind, pattern=re.compile(text))
        except re.error as e:
            raise OptionError(f"option subscribePattern is not a valid pattern: {e}") from None
    obj = _json(options, "assign")
    if not isinstance(obj, dict) or not all(isinstance(v, list) for v in obj.values()):
        raise OptionError('option assign must be a JSON object like {"topic": [0, 1]}')
    try:
        assigned = tuple(TopicPartition(t, int(p)) for t, ps in obj.items() for p in ps)
    except (TypeError, ValueError):
        raise OptionError(f"option assign holds a partition that is not a number: {text!r}") from None
    return Subscription(kind, assigned=assigned)


def starting_spec(options: Mapping[str, str], streaming: bool) -> OffsetSpec:
    """startingTimestamp > startingOffsetsByTimestamp > startingOffsets, as in Spark."""
    return _spec(options, "starting", LATEST if streaming else EARLIEST, streaming)


def ending_spec(options: Mapping[str, str]) -> OffsetSpec:
    """endingTimestamp > endingOffsetsByTimestamp > endingOffsets (batch queries only)."""
    return _spec(options, "ending", LATEST, streaming=False)


def _spec(options: Mapping[str, str], which: str, default: int, streaming: bool) -> OffsetSpec:
    ts = parse_int(options, f"{which}Timestamp", minimum=0)
    if ts is not None:
        return OffsetSpec("timestamp", timestamp=ts, option=f"{which}Timestamp")
    if _get(options, f"{which}OffsetsByTimestamp") is not None:
        name = f"{which}OffsetsByTimestamp"
        return OffsetSpec("timestamps", _per_partition(options, name), option=name)
    text = _get(options, f"{which}Offsets")
    name = f"{which}Offsets"
    if text is None:
        return OffsetSpec("earliest" if default == EARLIEST else "latest", option=name)
    word = text.strip().lower()
    if word in ("earliest", "latest"):
        spec = OffsetSpec(word, option=name)
    else:
        spec = OffsetSpec("offsets", _per_partition(options, name), option=name)
    if not streaming and which == "starting" and (spec.kind == "latest" or LATEST in spec.per_partition.values()):
        raise OptionError("startingOffsets cannot be latest (-1) for batch queries")
    if which == "ending" and (spec.kind == "earliest" or EARLIEST in spec.per_partition.values()):
        raise OptionError("endingOffsets cannot be earliest (-2) for batch queries")
    return spec


def by_timestamp_strategy(options: Mapping[str, str]) -> str:
    text = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if text not in ("error", "latest"):
        raise OptionError(f"option startingOffsetsByTimestampStrategy must be error or latest, not {text!r}")
    return text


def reject_streaming_only(options: Mapping[str, str]) -> None:
    for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
        if _get(options, name) is not None:
            raise OptionError(f"option {name} applies to streaming queries only")


def reject_batch_only(options: Mapping[str, str]) -> None:
    for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        if _get(options, name) is not None:
            raise OptionError(f"option {name} applies to batch queries only")


def reject_save_mode(overwrite: bool) -> None:
    """Spark's Kafka sink appends only; PySpark tells a writer nothing but whether it
    should overwrite (Spark itself refuses ErrorIfExists and Ignore for Python sources)."""
    if overwrite:
        raise OptionError(
            'Save mode Overwrite not allowed for seglog (nor for Kafka): a log is only appended to; use mode("append")'
        )


READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"


def isolation_level(options: Mapping[str, str]) -> str:
    """``kafka.isolation.level``: the consumer's, read_uncommitted by default."""
    text = (_get(options, "kafka.isolation.level") or READ_UNCOMMITTED).strip().lower()
    if text not in (READ_UNCOMMITTED, READ_COMMITTED):
        raise OptionError(f"option kafka.isolation.level must be read_uncommitted or read_committed, not {text!r}")
    return text


# Spark's Kafka source refuses these consumer options, and says what to use instead
_SOURCE_REFUSED = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead",
    "key.deserializer": "keys are always read as bytes; cast the key column",
    "value.deserializer": "values are always read as bytes; cast the value column",
    "enable.auto.commit": "the query's offsets live in its checkpoint, not in a consumer group",
    "interceptor.classes": "there is no consumer to intercept",
}


def validate_source(options: Mapping[str, str]) -> None:
    """Check every source option that means the same in batch and streaming queries, so
    that a mistake shows at ``load()`` (Spark calls the source's schema there), as Spark's
    Kafka source does, not when the query runs."""
    client_options(options)
    subscription(options)
    parse_bool(options, "includeHeaders", False)
    parse_bool(options, "failOnDataLoss", True)
    parse_int(options, "minPartitions", None, minimum=1)
    parse_int(options, "maxOffsetsPerTrigger", None, minimum=1)
    parse_int(options, "minOffsetsPerTrigger", None, minimum=1)
    parse_duration_ms(options, "maxTriggerDelay", 0)
    by_timestamp_strategy(options)
    isolation_level(options)
    for key in options:
        name = key[len("kafka.") :].lower() if key.lower().startswith("kafka.") else None
        if name in _SOURCE_REFUSED:
            raise OptionError(f"Kafka option '{name}' is not supported: {_SOURCE_REFUSED[name]}")
    for which in ("starting", "ending"):
        parse_int(options, f"{which}Timestamp", minimum=0)
        if _get(options, f"{which}OffsetsByTimestamp") is not None:
            _per_partition(options, f"{which}OffsetsByTimestamp")
        text = _get(options, f"{which}Offsets")
        if text is not None and text.strip().lower() not in ("earliest", "latest"):
            _per_partition(options, f"{which}Offsets")


# --- the sink's producer options -------------------------------------------------------------

# Kafka producer defaults (ProducerConfig)
_KAFKA_MAX_REQUEST_SIZE = 1024 * 1024
# Spark refuses these: its sink serializes keys and values as bytes itself
_REFUSED = {
    "key.serializer": "keys are written as bytes (a binary or string column)",
    "value.serializer": "values are written as bytes (a binary or string column)",
}
_ACKS = ("all", "-1", "0", "1")


@dataclass(frozen=True)
class ProducerOptions:
    """What the ``kafka.*`` producer options mean for a write into a log dir."""

    compression: Compression
    batch_size: int | None  # bytes a batch is filled to (the sink's own default when None; 0: a record a batch)
    max_request_size: int  # the largest record (and batch) accepted


def producer_options(options: Mapping[str, str], to_brokers: bool = False) -> ProducerOptions:
    """The ``kafka.*`` options Spark passes to its producer, where they mean something
    for a log dir; the others are logged as ignored (not ``to_brokers``: the producer
    takes them). ``compression`` (seglog's own name) is taken when
    ``kafka.compression.type`` is not given."""
    honoured = {"compression.type", "batch.size", "max.request.size", "acks"}
    for key in options:
        name = key[len("kafka.") :] if key.lower().startswith("kafka.") else None
        if name is None:
            continue
        if name.lower() in _REFUSED:
            raise OptionError(f"Kafka option '{name}' is not supported: {_REFUSED[name.lower()]}")
        if name not in honoured and not to_brokers:
            log.info("option %s means nothing to a log dir; ignored", key)
    codec = _get(options, "kafka.compression.type") or _get(options, "compression") or "none"
    try:
        compression = Compression.parse(codec)
    except SeglogError:
        raise OptionError(
            f"option kafka.compression.type must be none, gzip, snappy, lz4 or zstd, not {codec!r}"
        ) from None
    # every commit is on disk when it returns (acks=all): a weaker acks is accepted, not needed
    acks = (_get(options, "kafka.acks") or "all").strip().lower()
    if acks not in _ACKS:
        raise OptionError(f"option kafka.acks must be all, -1, 0 or 1, not {acks!r}")
    return ProducerOptions(
        compression=compression,
        batch_size=parse_int(options, "kafka.batch.size", None, minimum=0),
        max_request_size=parse_int(options, "kafka.max.request.size", _KAFKA_MAX_REQUEST_SIZE, minimum=1)
        or _KAFKA_MAX_REQUEST_SIZE,
    )
