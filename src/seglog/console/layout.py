"""A partition's layout on disk, as the Partition layout page draws it: its segments (base offset,
size, first and last timestamp, offset and time index entry counts), the entries of one segment's
indexes, and where retention and compaction stand (log start offset, cleaner checkpoint).

Only a seglog broker can tell it, and only of the partitions it hosts: the broker's own console
(``seglog broker --http-port``) reads its live logs in-process. It never disturbs them: the live
log gives only its list of segments (an immutable tuple) and its offsets; each segment's files are
opened again read-only (``LogSegment(read_only=True)``: no lock, no write, a live index taken as
its writer left it) and closed after, so no index the broker has not loaded is loaded into it, and
nothing the broker holds is moved. A segment that retention, a truncation or the cleaner deletes
meanwhile is met as a vanished file, and the listing is taken again (``retry_while_vanishing``)."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..common import TopicPartition
from ..errors import SeglogError
from ..records.layout import BASE_TIMESTAMP_LENGTH, BASE_TIMESTAMP_OFFSET
from ..storage import LogSegment, PartitionLog, retry_while_vanishing
from ..storage.checkpoint import CLEANER_OFFSET_CHECKPOINT, read_offsets_or_empty
from ..storage.file_records import BatchHeader

MAX_ENTRIES = 10_000  # of one index, on one page: a 1 GiB segment indexed every 4 KiB has 262,144
LOOKS = 5  # listings taken again while segments vanish under them (retention, the cleaner)
_TIMESTAMP = struct.Struct(">q")
_V2 = 2  # the magic of batches whose header holds their first timestamp


class LayoutInputError(SeglogError):
    """A layout asked of a segment the partition does not have, or with a bad limit."""


def partition_layout(log: PartitionLog) -> dict[str, Any]:
    """The segments of ``log`` in offset order, with the log's offsets and cleaner checkpoint."""
    for attempt in retry_while_vanishing(LOOKS):
        with attempt:
            segments, start = log.segments, log.log_start_offset
            described = [_segment(log, s) for s in segments]
            return {
                "topic": log.topic,
                "partition": log.partition,
                "dir": log.dir,
                "logStartOffset": start,
                "highWatermark": log.high_watermark,
                "logEndOffset": log.log_end_offset,
                "cleanerCheckpoint": cleaner_checkpoint(log),
                "size": sum(s["size"] for s in described),
                "segments": described,
            }
    raise AssertionError("retry_while_vanishing raises on its last attempt")


def segment_indexes(log: PartitionLog, base_offset: int, limit: int = MAX_ENTRIES) -> dict[str, Any]:
    """The entries of the offset and time indexes of ``log``'s segment at ``base_offset``: at most
    ``limit`` of each (the first ones), with their counts."""
    if not 1 <= limit <= MAX_ENTRIES:
        raise LayoutInputError(f"limit is from 1 to {MAX_ENTRIES}, not {limit}")
    for attempt in retry_while_vanishing(LOOKS):
        with attempt:
            if base_offset not in {s.base_offset for s in log.segments}:
                raise LayoutInputError(f"{log.name} has no segment at base offset {base_offset}")
            with _read_only(log, base_offset) as segment:
                offsets, times = segment.offset_index, segment.time_index
                shown_offsets, shown_times = min(limit, offsets.entries), min(limit, times.entries)
                return {
                    "topic": log.topic,
                    "partition": log.partition,
                    "baseOffset": base_offset,
                    "offsetIndexEntries": offsets.entries,
                    "timeIndexEntries": times.entries,
                    "offsetIndex": [_pair("offset", "position", offsets.entry(i)) for i in range(shown_offsets)],
                    "timeIndex": [_pair("timestamp", "offset", times.entry(i)) for i in range(shown_times)],
                }
    raise AssertionError("retry_while_vanishing raises on its last attempt")


def cleaner_checkpoint(log: PartitionLog) -> int | None:
    """The partition's offset in its log dir's ``cleaner-offset-checkpoint`` (where the cleaner's
    next round starts), as last written; None when it was never cleaned."""
    path = os.path.join(os.path.dirname(os.path.abspath(log.dir)), CLEANER_OFFSET_CHECKPOINT)
    return read_offsets_or_empty(path).get(TopicPartition(log.topic, log.partition))


def _segment(log: PartitionLog, live: LogSegment) -> dict[str, Any]:
    with _read_only(log, live.base_offset) as segment:
        first = next(iter(segment.scan_headers(0)), None)
        last_timestamp, _ = segment.max_timestamp_and_offset
        return {
            "baseOffset": segment.base_offset,
            "size": segment.size,
            "firstTimestamp": None if first is None else _first_timestamp(segment, first),
            "lastTimestamp": last_timestamp if first is not None and last_timestamp >= 0 else None,
            "offsetIndexEntries": segment.offset_index.entries,
            "timeIndexEntries": segment.time_index.entries,
            "active": live is log.segments[-1],
        }


def _first_timestamp(segment: LogSegment, first: BatchHeader) -> int | None:
    """The first batch's first timestamp: a v2 batch's header holds it; an older batch has only one."""
    if first.magic < _V2:
        return first.max_timestamp if first.max_timestamp >= 0 else None
    raw = segment.handle.pread(BASE_TIMESTAMP_LENGTH, first.position + BASE_TIMESTAMP_OFFSET)
    found: int = _TIMESTAMP.unpack(raw)[0]
    return found if found >= 0 else None


@contextmanager
def _read_only(log: PartitionLog, base_offset: int) -> Iterator[LogSegment]:
    """The segment's files opened again read-only, released after (never trimmed nor written)."""
    segment = LogSegment(log.dir, base_offset, read_only=True)
    try:
        yield segment
    finally:
        segment.close_handlers()


def _pair(first: str, second: str, entry: tuple[int, int]) -> dict[str, int]:
    return {first: entry[0], second: entry[1]}
