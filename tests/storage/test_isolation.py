"""What a read_committed reader needs of a log: the last stable offset (the producer
state's), the aborted transactions of a range (Kafka's .txnindex), and the consumer's rule
that drops aborted records; held to the header walk (``txn_walk``)."""

from __future__ import annotations

import struct

import pytest

import seglog
from seglog.records import build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage.isolation import committed_batches
from seglog.storage.txn_index import AbortedTxn, read_txn_index, txn_index_path

from .txn_walk import committed_by_fetches, committed_by_walk, walk

MS = 1_700_000_000_000


class Producer:
    """Appends as a transactional producer and its coordinator do."""

    def __init__(self, log, pid: int) -> None:
        self.log, self.pid, self.sequence = log, pid, 0

    def send(self, *values: bytes) -> tuple[int, int]:
        first, last = self.log.append(
            [seglog.Record(None, v, MS) for v in values],
            producer_id=self.pid,
            producer_epoch=0,
            base_sequence=self.sequence,
            transactional=True,
        )
        self.sequence += len(values)
        return first, last

    def end(self, commit: bool) -> int:
        marker = build_batch(
            [end_transaction_marker(commit, timestamp=MS)],
            producer_id=self.pid,
            producer_epoch=0,
            transactional=True,
            control=True,
        )
        return self.log.append_batches(marker, origin="coordinator").first_offset


def committed_values(log, start=0, end=None):
    end = log.last_stable_offset if end is None else end
    aborted = [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(start, end)]
    return [
        r.value
        for b in committed_batches(log.batches(start, end), aborted)
        for r in b.records()
        if start <= r.offset < end
    ]


@pytest.fixture
def interleaved(tmp_path):
    """Two producers' transactions interleaved over several segments, a plain producer
    between them, and one transaction still open at the end."""
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("t", 1, {"segment.bytes": 400})
        log = logs.partition("t", 0)
        a, b, c = Producer(log, 10), Producer(log, 11), Producer(log, 12)
        a.send(b"a1")
        b.send(b"b1")
        log.append([seglog.Record(None, b"plain1", MS)])
        a.send(b"a2", b"a3")
        a.end(commit=False)  # a's first transaction aborted
        b.send(b"b2")
        b.end(commit=True)
        a.send(b"a4")
        a.end(commit=True)
        open_at = c.send(b"c1")[0]  # c's transaction, undecided
        b.send(b"b3")
        b.end(commit=False)
        c.send(b"c2")
        log.append([seglog.Record(None, b"plain2", MS)])
        yield log, open_at
        assert len(log.segments) >= 3


def test_aborted_records_are_dropped_and_reads_stop_at_the_last_stable_offset(interleaved):
    log, open_at = interleaved
    assert log.last_stable_offset == open_at < log.high_watermark
    # a's first transaction and b's second (b's first was committed)
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    assert [(t.producer_id, t.first_offset) for t in aborted] == [(10, 0), (11, open_at + 1)]
    assert [(pid, first) for first, _, pid in walk(log).aborted] == [(10, 0), (11, open_at + 1)]
    assert walk(log).last_stable_offset == open_at
    assert committed_values(log) == [b"b1", b"plain1", b"b2", b"a4"]
    assert committed_by_fetches(log) == committed_by_walk(log)
    assert [v for _, v in committed_by_fetches(log, max_bytes=1)] == [b"b1", b"plain1", b"b2", b"a4"]
    # a range starting inside a's aborted transaction still drops its records
    assert committed_values(log, start=3) == [b"b2", b"a4"]
    # a read_uncommitted reader sees everything up to the high watermark
    assert [r.value for r in log.records()][-1] == b"plain2"


def test_aborted_transactions_overlapping_a_range(interleaved):
    log, _ = interleaved
    aborted = log.collect_aborted_transactions(0, log.log_end_offset)
    b_abort = next(t for t in aborted if t.producer_id == 11)
    assert log.collect_aborted_transactions(0, 1) == [aborted[0]]  # a's begins at 0
    assert log.collect_aborted_transactions(b_abort.last_offset + 1, log.high_watermark) == []
    assert b_abort in log.collect_aborted_transactions(b_abort.last_offset, b_abort.last_offset + 1)


@pytest.fixture
def log(tmp_path):
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("t", 1)
        yield logs.partition("t", 0)


def test_committed_and_open_transactions_only(log):
    p = Producer(log, 5)
    p.send(b"x")
    p.end(commit=True)
    assert log.last_stable_offset == log.high_watermark
    p.send(b"y")
    assert log.last_stable_offset == 2
    assert committed_values(log) == [b"x"]


def write_txn_index(log_path: str, entries: list[AbortedTxn]) -> None:
    """A .txnindex as Kafka writes it: version 0, producer id, first, last, LSO."""
    with open(txn_index_path(log_path), "wb") as f:
        for t in entries:
            f.write(struct.pack(">hqqqq", 0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset))


@pytest.mark.parametrize("read_only", [False, True])
def test_a_txnindex_left_by_kafka_is_read(tmp_path, read_only):
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("t", 1)
        log = logs.partition("t", 0)
        p = Producer(log, 3)
        p.send(b"gone1")
        p.send(b"gone2")
        marker = p.end(commit=False)
        log.append([seglog.Record(None, b"kept", MS)])
        path = txn_index_path(log.segments[0].log_path)
    # closed: a snapshot at the log end, so a reopening replays no marker. The index (not
    # the marker) is where the transaction's first offset comes from
    write_txn_index(path[: -len(".txnindex")] + ".log", [AbortedTxn(1, marker, 3, marker)])
    assert read_txn_index(path) == [AbortedTxn(1, marker, 3, marker)]
    with seglog.open(str(tmp_path), background=False, read_only=read_only) as logs:
        log = logs.partition("t", 0)
        assert [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(0, 9)] == [(3, 1)]
        assert committed_values(log) == [b"gone1", b"kept"]  # offset 0 was before the indexed txn
    # a corrupt index (another version) is made again from the markers (by the owner, on disk)
    with open(path, "r+b") as f:
        f.write(struct.pack(">h", 7))
    with seglog.open(str(tmp_path), background=False, read_only=read_only) as logs:
        log = logs.partition("t", 0)
        assert [(t.producer_id, t.first_offset) for t in log.collect_aborted_transactions(0, 9)] == [(3, 0)]
        assert committed_values(log) == [b"kept"]
    if read_only:
        with pytest.raises(seglog.errors.CorruptIndexError):
            read_txn_index(path)
    else:
        assert read_txn_index(path) == [AbortedTxn(0, marker, 3, marker + 1)]
