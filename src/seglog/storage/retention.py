"""Retention: which old segments of a log go (Kafka's UnifiedLog.deleteOldSegments).

A pass walks a log's segments oldest first and deletes them while a rule holds,
stopping at the first segment a rule keeps: what goes is always a prefix of
the log, and the log start offset moves to the first segment kept. The rules,
in Kafka's order:

1. **Log start offset** (every policy): a segment whose successor starts at or
   below the log start offset, which DeleteRecords raises, holds nothing
   readable.
2. **Size** (``cleanup.policy`` with ``delete``): while the log minus its
   oldest segment is still at least ``retention.bytes`` (-1: no limit), the
   oldest segment goes.
3. **Time** (``cleanup.policy`` with ``delete``): a segment goes when its
   newest record is older than ``retention.ms`` (-1: forever). A segment's age
   is its largest record timestamp, or the mtime of its file when it has no
   timestamps (magic 0 data), as in Kafka.

Never the active segment (Kafka rolls a new one to delete it; seglog keeps it,
so a partition always keeps its newest data), and never a segment holding
offsets at or above the high watermark. Deleted segments are renamed
``.deleted`` at once and removed after ``file.delete.delay.ms``.

**Timestamps in the future.** Kafka judges a segment by its largest record
timestamp only, so one record stamped years ahead (a producer with a bad
clock, CreateTime) makes its segment look young for years, and since a pass
stops at the first segment it keeps, every newer segment stays with it.
seglog judges a segment whose largest timestamp is later than now by its
file's mtime instead, that is by when it last received data, as Kafka does for
a segment without timestamps: such a segment goes ``retention.ms`` after its
last write, and stops holding back the segments after it then.
(``message.timestamp.after.max.ms``, one hour by default, already refuses
most such records on append; data written by older brokers or followers
may still carry them.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .log import PartitionLog
from .segment import LogSegment

Rule = Callable[[LogSegment, LogSegment], bool]


@dataclass(frozen=True)
class RetentionResult:
    """What a retention pass deleted from one log."""

    topic: str
    partition: int
    segments_deleted: int
    bytes_deleted: int
    log_start_offset: int
    reasons: tuple[str, ...]  # of "log-start-offset", "size", "time"


def segment_timestamp(segment: LogSegment, now: int) -> int:
    """The time a segment's age counts from: its largest record timestamp; its file's
    mtime when it has none, or when that timestamp lies in the future."""
    ts = segment.max_timestamp
    if ts < 0 or ts > now:
        return segment.last_modified_ms
    return ts


def log_size(log: PartitionLog) -> int:
    return sum(s.size_without_opening for s in log.segments)


def below_log_start_offset(log: PartitionLog) -> Rule:
    return lambda _segment, following: following.base_offset <= log.log_start_offset


def over_retention_bytes(log: PartitionLog, retention_bytes: int) -> Rule | None:
    """The size rule, or None when the log is within ``retention.bytes``."""
    if retention_bytes < 0:
        return None
    excess = log_size(log) - retention_bytes
    if excess <= 0:
        return None

    def rule(segment: LogSegment, _following: LogSegment) -> bool:
        nonlocal excess
        size = segment.size_without_opening
        if excess - size < 0:
            return False
        excess -= size
        return True

    return rule


def older_than(retention_ms: int, now: int) -> Rule | None:
    if retention_ms < 0:
        return None
    return lambda segment, _following: now - segment_timestamp(segment, now) > retention_ms


def enforce_retention(log: PartitionLog, now: int) -> RetentionResult | None:
    """One retention pass over ``log``: what it deleted, or None if nothing."""
    deleted = 0
    deleted_bytes = 0
    reasons: list[str] = []

    def apply(reason: str, rule: Rule | None) -> None:
        nonlocal deleted, deleted_bytes
        if rule is None:
            return
        sizes: list[int] = []

        def counted(segment: LogSegment, following: LogSegment) -> bool:
            # sized before it goes: with no delay its file is gone right after
            if not rule(segment, following):
                return False
            sizes.append(segment.size_without_opening)
            return True

        gone = log.delete_old_segments(counted)
        if gone:
            deleted += len(gone)
            deleted_bytes += sum(sizes[: len(gone)])
            reasons.append(reason)

    config = log.config
    apply("log-start-offset", below_log_start_offset(log))
    if config.delete:
        apply("size", over_retention_bytes(log, config.retention_bytes))
        apply("time", older_than(config.retention_ms, now))
    if not deleted:
        return None
    return RetentionResult(log.topic, log.partition, deleted, deleted_bytes, log.log_start_offset, tuple(reasons))
