"""Resolving offset options on the driver: which partitions, which offset ranges, and where
to cut a range into several Spark tasks.

The driver plans over a ``Logs`` view: a log dir read read-only (``seglog.open(...,
read_only=True)``, so it plans beside a process that owns and writes the dir), or the brokers'
answers to Metadata and ListOffsets (``consumer.BrokerLogs``); both answer the same questions.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from ..common import INTERNAL_TOPICS, TopicPartition
from ..errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError
from ..storage import LogManager, open, retry_while_vanishing
from .options import EARLIEST, LATEST, READ_COMMITTED, OffsetSpec, OptionError, Subscription

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]
T = TypeVar("T")


class PartitionOffsets(Protocol):
    """What planning asks of one partition (a read-only ``PartitionLog`` answers it too)."""

    @property
    def name(self) -> str: ...
    @property
    def dir(self) -> str | None: ...  # where its files are; None through the brokers
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...


class Logs(Protocol):
    """The topics planning reads (a read-only ``LogManager`` answers it too)."""

    def topics(self) -> list[str]: ...
    def partitions(self, topic: str) -> list[int]: ...
    def partition(self, topic: str, partition: int) -> PartitionOffsets: ...


class DataLossError(OffsetOutOfRangeError):
    """Offsets a query needs were removed (retention, DeleteRecords) before it read them."""


class PartitionsGoneError(UnknownTopicOrPartitionError):
    """Partitions a streaming query was reading were deleted (with their topic): data loss."""


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def open_read_only(dirs: list[str]) -> LogManager:
    return open(dirs, read_only=True)


_RETRIES = 10  # how many times a reader looks again at a dir whose files go while it reads


def read_logs(dirs: list[str], question: Callable[[LogManager], T]) -> T:
    """Ask ``question`` of a read-only view of the dirs; if a file it needs goes under it,
    open the dirs again and ask again."""
    for attempt in retry_while_vanishing(_RETRIES + 1):
        with attempt, open_read_only(dirs) as logs:
            return question(logs)
        log.info("%s went while the dirs were read; looking again", attempt.error and attempt.error.file)
    raise AssertionError("unreachable: the last attempt raises")


# KRaft's metadata log lives in a log dir as partition __cluster_metadata-0, but it is no topic
METADATA_LOG = "__cluster_metadata"


def topic_partitions(logs: Logs, sub: Subscription) -> list[TopicPartition]:
    """The partitions a subscription names; an unknown topic is an error (not for a pattern).
    Internal topics are read only when named; the metadata log never."""
    named = [t for t, _ in sub.assigned] if sub.kind == "assign" else list(sub.topics)
    if METADATA_LOG in named:
        raise UnknownTopicOrPartitionError(f"option {sub.kind}: {METADATA_LOG} is KRaft's metadata log, not a topic")
    try:
        if sub.kind == "assign":
            for topic, p in sub.assigned:
                logs.partition(topic, p)  # UnknownTopicOrPartitionError names what exists
            return sorted(set(sub.assigned))
        if sub.kind == "subscribe":
            return sorted(TopicPartition(t, p) for t in sub.topics for p in logs.partitions(t))
    except UnknownTopicOrPartitionError as e:
        raise UnknownTopicOrPartitionError(f"option {sub.kind}: {e.message}") from e
    assert sub.pattern is not None
    # a pattern never matches Kafka's internal topics: the admin client Spark lists topics with leaves them out
    return sorted(
        TopicPartition(t, p)
        for t in logs.topics()
        if t not in INTERNAL_TOPICS and t != METADATA_LOG and sub.pattern.fullmatch(t)
        for p in logs.partitions(t)
    )


def readable_end(pl: PartitionOffsets, isolation: str) -> int:
    """Where a consumer's reads end: the high watermark, or with read_committed the last
    stable offset (what Kafka's ListOffsets gives each as "latest"). A read-only log's
    comes from its producer state as its owner keeps it: the owner's latest snapshot and
    the batch headers after it (``PartitionLog.last_stable_offset``)."""
    return pl.last_stable_offset if isolation == READ_COMMITTED else pl.high_watermark


def resolve(
    logs: Logs,
    spec: OffsetSpec,
    tps: Iterable[TopicPartition],
    *,
    starting: bool,
    strategy: str = "error",
    latest: Callable[[PartitionOffsets], int] = lambda pl: pl.high_watermark,
) -> Offsets:
    """The offset ``spec`` gives for each partition."""
    tps = list(tps)
    if spec.kind in ("offsets", "timestamps"):
        # as Spark's Kafka source: the partitions named must be exactly those subscribed
        what = spec.option
        missing = [f"{t}-{p}" for t, p in tps if (t, p) not in spec.per_partition]
        if missing:
            raise OptionError(
                f"{what} names specific offsets or timestamps but not partitions {', '.join(missing)}: "
                "give every partition (-2 for earliest, -1 for latest)"
            )
        extra = sorted(set(spec.per_partition) - set(tps))
        if extra:
            raise OptionError(
                f"{what} names partitions the query does not read: {', '.join(f'{t}-{p}' for t, p in extra)}"
            )
    return {tp: _resolve_one(logs.partition(*tp), spec, tp, starting, strategy, latest) for tp in tps}


def _resolve_one(
    pl: PartitionOffsets,
    spec: OffsetSpec,
    tp: TopicPartition,
    starting: bool,
    strategy: str,
    latest: Callable[[PartitionOffsets], int],
) -> int:
    if spec.kind == "earliest":
        return pl.log_start_offset
    if spec.kind == "latest":
        return latest(pl)
    if spec.kind == "offsets":
        value = spec.per_partition[tp]
        if value == EARLIEST:
            return pl.log_start_offset
        if value == LATEST:
            return latest(pl)
        if value < 0:
            raise OptionError(f"offset {value} for {tp[0]}-{tp[1]} is neither an offset, -2 nor -1")
        return value
    ts = spec.timestamp if spec.kind == "timestamp" else spec.per_partition[tp]
    found = pl.offset_for_timestamp(ts)
    if found is not None:
        return found[0]
    if starting and strategy == "error":
        raise OptionError(
            f"no offset matched timestamp {ts} in {tp[0]}-{tp[1]} "
            "(set startingOffsetsByTimestampStrategy=latest to start at the latest offset instead)"
        )
    return latest(pl)


def check_data_loss(pl: PartitionOffsets, start: int, fail_on_data_loss: bool) -> int:
    """Where reading from ``start`` can begin; raises or warns when offsets are gone."""
    first = pl.log_start_offset
    if start >= first:
        return start
    message = (
        f"offsets {start}..{first - 1} of {pl.name} were removed before they were read (retention or DeleteRecords)"
    )
    if fail_on_data_loss:
        raise DataLossError(
            message + "; set failOnDataLoss=false to skip them",
            log_start_offset=first,
            log_end_offset=pl.log_end_offset,
            file=pl.dir,
        )
    log.warning("%s; skipping to offset %d (failOnDataLoss=false)", message, first)
    return first


def split(start: int, end: int, pieces: int) -> list[tuple[int, int]]:
    """Cut [start, end) into ``pieces`` ranges of (nearly) equal numbers of offsets, as
    Spark's KafkaOffsetRangeCalculator does. A cut may fall inside a batch: the task after
    it reads from the index entry below its start and drops the records before it."""
    pieces = max(1, min(pieces, end - start))
    edges = [start + (end - start) * i // pieces for i in range(pieces + 1)]
    return [(a, b) for a, b in itertools.pairwise(edges) if b > a]


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's offset JSON: ``{"topic": {"0": 23}}``."""
    out: dict[str, dict[str, int]] = {}
    for (topic, p), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(p)] = offset
    return out


def from_json(obj: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {TopicPartition(topic, int(p)): int(o) for topic, parts in obj.items() for p, o in parts.items()}
