"""The read_committed tests' writer and referee. ``Writer`` appends as transactional
producers and their coordinator do; ``walk`` is a log's transactions as the header walk
finds them (``producer_state.producer_state``, the cleaner's walk over every batch header
and marker of the log), against which the Kafka way (the producer state's first unstable
offset, the segments' ``.txnindex``) is held. (Imports seglog only: the crash child, a
process of its own, uses the writer too.)"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from seglog.records import Record, build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage import PartitionLog
from seglog.storage.isolation import committed_batches
from seglog.storage.producer_state import producer_state
from seglog.storage.segment import LogSegment

PIDS = (100, 101, 102)
MS = 1_700_000_000_000


class Writer:
    """Appends as transactional producers and their coordinator do, and a plain producer
    between them; every record's key is its offset (so compaction keeps every committed one)."""

    def __init__(self, log: PartitionLog, pids: Sequence[int] = PIDS) -> None:
        self.log = log
        self.pids = tuple(pids)
        self.sequence = dict.fromkeys(self.pids, 0)
        self.open: set[int] = set()

    def _records(self, n: int) -> list[Record]:
        start = self.log.log_end_offset
        return [Record(b"k%d" % i, b"v%d" % i, MS) for i in range(start, start + n)]

    def send(self, pid: int, n: int) -> None:
        self.log.append(
            self._records(n), producer_id=pid, producer_epoch=0, base_sequence=self.sequence[pid], transactional=True
        )
        self.sequence[pid] += n
        self.open.add(pid)

    def end(self, pid: int, commit: bool) -> None:
        marker = build_batch(
            [end_transaction_marker(commit, 1, MS)], producer_id=pid, producer_epoch=0, transactional=True, control=True
        )
        self.log.append_batches(marker, origin="coordinator")
        self.open.discard(pid)

    def plain(self, n: int) -> None:
        self.log.append(self._records(n))

    def run(self, ops: Sequence[tuple]) -> None:
        """("send", pid, n), ("end", pid, commit), ("plain", n) or ("roll",), in turn."""
        for op in ops:
            if op[0] == "send":
                self.send(op[1], op[2])
            elif op[0] == "end":
                self.end(op[1], op[2])
            elif op[0] == "plain":
                self.plain(op[1])
            else:
                self.log.roll()

    def step(self, rng: random.Random) -> None:
        """One random step: a producer's open transaction ended (committed or aborted, even
        odds) a time in three, else a batch of one or two records to it, or a plain one."""
        pid = rng.choice(self.pids)
        if pid in self.open and rng.random() < 0.35:
            self.end(pid, commit=rng.random() < 0.5)
        elif rng.random() < 0.8:
            self.send(pid, rng.randint(1, 2))
        else:
            self.plain(1)


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
