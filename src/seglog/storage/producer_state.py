"""What the cleaner must know of a log's producers, read from its batch headers.

Kafka's cleaner asks the broker's producer state (ProducerStateManager) and the
transaction index for three things, which seglog, keeping neither, reads from
the batch headers of the log instead:

- each producer's last batch (its last data offset and its epoch), which the
  cleaner keeps so that the producer's sequence numbers survive;
- the aborted transactions (producer, first offset, marker offset), whose
  records the cleaner removes;
- the first unstable offset: the first offset of a transaction not decided
  yet, past which nothing is cleaned.

A segment is summed up once (``SegmentSummary``: per producer its last batch,
and the transaction events — a transaction's first batch, its marker — in
order), and the summary is kept for as long as the segment does not change, so
a round reads only what was appended since the last one. Summaries compose in
segment order into a ``ProducerState``. Their size grows with the producers
and transactions, never with the records.
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..records import RecordBatch
from ..records.batches import HEADER_PEEK, peek_frame
from ..records.layout import (
    CONTROL_FLAG_MASK,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_FLAG_MASK,
)
from . import _compact, fileio
from .segment import LogSegment

# Kafka's producer.id.expiration.ms default: a producer idle this long (and in no
# transaction) is forgotten, and its last batch no longer kept
PRODUCER_ID_EXPIRATION_MS = 86_400_000
ABORT, COMMIT = 0, 1
_TXN_START = -1

_CONTROL_KEY = struct.Struct(">hh")
_FINGERPRINT = CRC_START  # a batch's first bytes, through the v2 CRC: is it still the batch scanned?
_HEADER_READ = 4096  # what is read at a batch's start after a large batch
# a batch this large is stepped over rather than read: a step (a 4 KiB pread, 1.5 us, and a
# turn of the walk's loop) costs about as much as copying this many bytes of page cache in
# a large read (0.23 us a KiB), so smaller batches are read whole, by the buffer
_SKIP_READ_ABOVE = 24 * 1024
_LEGACY_MIN_MESSAGE = 26  # LOG_OVERHEAD + the smallest v0 message: bounds a wrapper's records


def control_type(batch: RecordBatch) -> int | None:
    """The type of a control batch's first record (0 ABORT, 1 COMMIT, ...); None for a
    control batch the cleaner emptied, -1 for one it cannot read."""
    records = batch.records()
    if not records:
        return None
    key = records[0].key
    if key is None or len(key) < _CONTROL_KEY.size:
        return -1
    return _CONTROL_KEY.unpack_from(key)[1]


@dataclass(frozen=True)
class LastBatch:
    """A producer's last batch, as Kafka's producer state knows it."""

    data_offset: int | None  # last offset of its last data batch (None: it has only markers)
    epoch: int
    timestamp: int  # max timestamp of its last batch
    in_transaction: bool


@dataclass
class SegmentSummary:
    """One segment's batches, reduced to what producer state needs."""

    last: dict[int, list] = field(default_factory=dict)  # pid -> [data offset | None, epoch, timestamp]
    events: list[tuple[int, int, int]] = field(default_factory=list)  # (offset, pid, _TXN_START|ABORT|COMMIT)
    records: int = 0  # an upper bound on the records of the segment
    scanned: int = 0  # bytes of the segment summed up
    fingerprint: tuple[int, bytes] | None = None  # position and first bytes of the last batch
    _open: set[int] = field(default_factory=set)  # producers inside a transaction begun in this segment

    def feed(self, header: tuple, control: int | None) -> None:
        """Add a v2 batch: ``header`` is its HEADER fields, ``control`` its control type."""
        base, attributes, delta, max_ts, pid, epoch, count = (
            header[0], header[5], header[6], header[8], header[9], header[10], header[12]
        )  # fmt: skip
        self.records += count
        if pid < 0:
            return
        entry = self.last.get(pid)
        if entry is None:
            entry = self.last[pid] = [None, epoch, max_ts]
        entry[1], entry[2] = epoch, max_ts
        if attributes & CONTROL_FLAG_MASK:
            if control in (ABORT, COMMIT):
                self.events.append((base + delta, pid, control))
                self._open.discard(pid)
        else:
            entry[0] = base + delta
            if attributes & TRANSACTIONAL_FLAG_MASK and pid not in self._open:
                self._open.add(pid)
                self.events.append((base, pid, _TXN_START))


@dataclass
class ProducerState:
    producers: dict[int, LastBatch] = field(default_factory=dict)
    aborted: list[tuple[int, int, int]] = field(default_factory=list)  # (first offset, marker offset, pid)
    first_unstable_offset: int | None = None
    records: dict[int, int] = field(default_factory=dict)  # segment base offset -> records (upper bound)

    def active_producers(self, now: int) -> dict[int, LastBatch]:
        """The producers Kafka would still remember at ``now``."""
        return {
            pid: p
            for pid, p in self.producers.items()
            if p.in_transaction or now - p.timestamp < PRODUCER_ID_EXPIRATION_MS
        }


_summaries: weakref.WeakKeyDictionary[LogSegment, SegmentSummary] = weakref.WeakKeyDictionary()
_summaries_lock = threading.Lock()

Reader = Callable[[LogSegment, bytearray, int, int], int]  # (segment, buffer, position, size) -> bytes read


def summarize(segment: LogSegment, read: Reader, buffer: bytearray) -> SegmentSummary:
    """The segment's summary, continuing a kept one when the segment only grew since."""
    size = segment.size
    with _summaries_lock:
        summary = _summaries.get(segment)
    if summary is not None and not _still_valid(segment, summary, size, read):
        summary = None
    if summary is None:
        summary = SegmentSummary()

    def feed(header: tuple, marker: RecordBatch | None) -> None:
        summary.feed(header, None if marker is None else control_type(marker))

    summary.scanned = _walk(segment, read, buffer, summary, size, feed)
    with _summaries_lock:
        _summaries[segment] = summary
    return summary


# a v2 batch's HEADER fields, and the batch itself when it is a producer's control batch
# (a view of the walk's buffer: valid during the call only)
Visitor = Callable[[tuple, RecordBatch | None], None]


def producer_batches(segment: LogSegment, read: Reader, buffer: bytearray, visit: Visitor) -> None:
    """Every v2 batch of ``segment`` that may carry a producer id, in order, to ``visit``
    (the walk the summaries use, for the idempotence state's rebuild)."""
    _walk(segment, read, buffer, SegmentSummary(), segment.size, visit)


def _walk(
    segment: LogSegment, read: Reader, buffer: bytearray, summary: SegmentSummary, size: int, visit: Visitor
) -> int:
    """Walk the batches from ``summary.scanned``, counting records and fingerprinting
    into ``summary``; returns where the whole batches end. Only batch headers are
    needed: after a large batch, C steps over the large ones that follow reading their
    headers alone, and the next read asks for a few KiB, not for the whole batch."""
    position = summary.scanned
    chunk = len(buffer)
    while position < size:
        n = read(segment, buffer, position, min(chunk, size - position))
        at = total = 0
        while True:
            # batches without a producer add their records and nothing else: skimmed in C
            at, records, last, last_total = _compact.skim_batches(buffer, n, at, size - position)
            if last >= 0:
                summary.records += records
                summary.fingerprint = (position + last, bytes(buffer[last : last + _FINGERPRINT]))
                total = last_total
            if n - at < HEADER_PEEK:
                break
            _offset, length, magic = peek_frame(buffer, at, position)
            total = LOG_OVERHEAD + length
            if position + at + total > size:
                size = position + at  # a partial batch at the end: the log ends before it
                break
            if n - at < (HEADER_SIZE if magic == 2 else _FINGERPRINT):
                break
            if magic == 2:
                header = HEADER.unpack_from(buffer, at)
                marker = None
                if header[5] & CONTROL_FLAG_MASK and header[9] >= 0:  # a marker: its type is in its record
                    if n - at >= total:
                        whole: bytes | bytearray | memoryview = memoryview(buffer)[at : at + total]
                    else:
                        whole = bytearray(total)
                        read(segment, whole, position + at, total)
                    marker = RecordBatch(whole, position + at)
                visit(header, marker)
            else:
                summary.records += max(1, length // _LEGACY_MIN_MESSAGE)
            summary.fingerprint = (position + at, bytes(buffer[at : at + _FINGERPRINT]))
            at += total  # may step past what was read: the rest of a large batch is not needed
        if at == 0:
            break  # the end of the segment (or of its whole batches)
        position += at
        if total > _SKIP_READ_ABOVE:
            position, total = _skim_large(segment, position, size, summary)
        # a large batch's header, or one C left to this loop (0: a producer's, the end), is read alone
        chunk = len(buffer) if 0 < total <= _SKIP_READ_ABOVE else _HEADER_READ
    return position


def _skim_large(segment: LogSegment, position: int, size: int, summary: SegmentSummary) -> tuple[int, int]:
    """Step over the large batches from ``position`` that tell producer state nothing,
    in C, reading only their headers: a header read from Python costs some 6 us of
    interpreter and reader around a 1.5 us ``pread`` (12-07: the walk of a 64 MiB lz4
    log of 35 KiB batches 9-10 ms -> 2-3 ms). Returns where it stopped and the size of
    the batch there when it is a smaller one to step over (else 0)."""
    handle = segment.handle
    try:
        position, records, last, fingerprint, next_size = _compact.skim_file(
            handle.fd, position, size, _SKIP_READ_ABOVE
        )
    except OSError as e:
        raise fileio.storage_error("read", handle.path, e) from None
    if fingerprint is not None:
        summary.records += records
        summary.fingerprint = (last, fingerprint)
    return position, next_size


def _still_valid(segment: LogSegment, summary: SegmentSummary, size: int, read: Reader) -> bool:
    """A kept summary holds if the segment did not shrink and its last batch summed up
    is still there (a truncation that grew back writes other batches)."""
    if size < summary.scanned:
        return False
    if summary.fingerprint is None:
        return summary.scanned == 0
    position, first_bytes = summary.fingerprint
    probe = bytearray(_FINGERPRINT)
    return read(segment, probe, position, _FINGERPRINT) == _FINGERPRINT and probe == first_bytes


def producer_state(segments: Sequence[LogSegment], read: Reader, buffer: bytearray) -> ProducerState:
    """Compose the summaries of a log's segments, oldest first."""
    state = ProducerState()
    last: dict[int, list] = {}
    ongoing: dict[int, int] = {}
    for segment in segments:
        summary = summarize(segment, read, buffer)
        state.records[segment.base_offset] = summary.records
        for offset, pid, kind in summary.events:
            if kind == _TXN_START:
                ongoing.setdefault(pid, offset)
            else:
                first = ongoing.pop(pid, None)
                if kind == ABORT and first is not None:
                    state.aborted.append((first, offset, pid))
        for pid, (data_offset, epoch, ts) in summary.last.items():
            entry = last.setdefault(pid, [None, epoch, ts])
            if data_offset is not None:
                entry[0] = data_offset
            entry[1], entry[2] = epoch, ts
    state.producers = {pid: LastBatch(e[0], e[1], e[2], pid in ongoing) for pid, e in last.items()}
    state.aborted.sort()
    state.first_unstable_offset = min(ongoing.values()) if ongoing else None
    return state
