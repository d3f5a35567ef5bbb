"""The referee of the read_committed tests: a log's transactions as the header walk finds
them (``producer_state.producer_state``, the cleaner's walk over every batch header and
marker of the log), against which the Kafka way (the producer state's first unstable
offset, the segments' ``.txnindex``) is held."""

from __future__ import annotations

from dataclasses import dataclass

from seglog.storage import PartitionLog
from seglog.storage.isolation import committed_batches
from seglog.storage.producer_state import producer_state
from seglog.storage.segment import LogSegment


@dataclass(frozen=True)
class Walked:
    last_stable_offset: int  # the first undecided transaction's first offset, or the high watermark
    aborted: tuple[tuple[int, int, int], ...]  # (first offset, marker offset, producer id), by first offset

    def overlapping(self, start: int, end: int) -> list[tuple[int, int]]:
        """(producer id, first offset) of the aborted transactions whose records may lie in
        [start, end): begun before ``end``, marker at or after ``start``."""
        return [(pid, first) for first, marker, pid in self.aborted if first < end and marker >= start]


def _read(segment: LogSegment, buffer: bytearray, position: int, size: int) -> int:
    return segment.handle.readinto(memoryview(buffer)[:size], position)


def walk(log: PartitionLog) -> Walked:
    state = producer_state(log.segments, _read, bytearray(1 << 16))
    hw = log.high_watermark
    first = state.first_unstable_offset
    return Walked(hw if first is None else min(first, hw), tuple(state.aborted))


def values(batches, aborted, start: int, end: int) -> list[tuple[int, bytes | None]]:
    """(offset, value) of the records a read_committed consumer keeps of ``batches``
    in [start, end), told of ``aborted`` as (producer id, first offset)."""
    return [
        (r.offset, r.value) for b in committed_batches(batches, aborted) for r in b.records() if start <= r.offset < end
    ]


def committed_by_walk(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes | None]]:
    """What a read_committed consumer from ``start`` keeps, by the walk's view."""
    walked = walk(log)
    end = walked.last_stable_offset
    if start >= end:
        return []
    return values(log.batches(start, end), walked.overlapping(start, end), start, end)


def committed_by_fetches(log: PartitionLog, start: int = 0, max_bytes: int = 1 << 20) -> list[tuple[int, bytes | None]]:
    """What a read_committed consumer from ``start`` keeps when it fetches as a broker's
    consumer does: ``read(read_committed=True)`` from one position to the next, each
    fetch's records filtered by the aborted transactions that fetch carries."""
    out: list[tuple[int, bytes | None]] = []
    offset = start
    end = log.last_stable_offset
    while offset < end:
        fetch = log.read(offset, max_bytes, read_committed=True)
        if fetch.records is None:
            break
        assert fetch.aborted_transactions is not None
        aborted = [(t.producer_id, t.first_offset) for t in fetch.aborted_transactions]
        batches = list(fetch.records.batches())
        out += values(batches, aborted, offset, end)
        offset = max(offset, batches[-1].last_offset + 1) if batches else end
    return out
