"""What a read_committed reader needs of a log: the last stable offset, the aborted
transactions of a range (from control batches, and from Kafka's .txnindex where one is
left), and the consumer's rule that drops aborted records."""

from __future__ import annotations

import struct

import pytest

import seglog
from seglog.records import build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage.isolation import committed_batches, transaction_state
from seglog.storage.txn_index import AbortedTxn, read_txn_index, txn_index_path

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
    state = transaction_state(log)
    end = state.last_stable_offset if end is None else end
    aborted = [(t.producer_id, t.first_offset) for t in state.aborted_transactions(start, end)]
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
    state = transaction_state(log)
    assert state.last_stable_offset == open_at < log.high_watermark
    # a's first transaction and b's second (b's first was committed)
    assert [(t.producer_id, t.first_offset) for t in state.aborted] == [(10, 0), (11, open_at + 1)]
    assert committed_values(log) == [b"b1", b"plain1", b"b2", b"a4"]
    # a range starting inside a's aborted transaction still drops its records
    assert committed_values(log, start=3) == [b"b2", b"a4"]
    # a read_uncommitted reader sees everything up to the high watermark
    assert [r.value for r in log.records()][-1] == b"plain2"


def test_aborted_transactions_overlapping_a_range(interleaved):
    log, _ = interleaved
    state = transaction_state(log)
    b_abort = next(t for t in state.aborted if t.producer_id == 11)
    assert state.aborted_transactions(0, 1) == [state.aborted[0]]  # a's begins at 0
    assert state.aborted_transactions(b_abort.last_offset + 1, log.high_watermark) == []
    assert b_abort in state.aborted_transactions(b_abort.last_offset, b_abort.last_offset + 1)


@pytest.fixture
def log(tmp_path):
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("t", 1)
        yield logs.partition("t", 0)


def test_committed_and_open_transactions_only(log):
    p = Producer(log, 5)
    p.send(b"x")
    p.end(commit=True)
    assert transaction_state(log).last_stable_offset == log.high_watermark
    p.send(b"y")
    assert transaction_state(log).last_stable_offset == 2
    assert committed_values(log) == [b"x"]


def write_txn_index(log_path: str, entries: list[AbortedTxn]) -> None:
    """A .txnindex as Kafka writes it: version 0, producer id, first, last, LSO."""
    with open(txn_index_path(log_path), "wb") as f:
        for t in entries:
            f.write(struct.pack(">hqqqq", 0, t.producer_id, t.first_offset, t.last_offset, t.last_stable_offset))


def test_a_txnindex_left_by_kafka_is_read(log):
    p = Producer(log, 3)
    p.send(b"gone1")
    p.send(b"gone2")
    marker = p.end(commit=False)
    log.append([seglog.Record(None, b"kept", MS)])
    segment = log.segments[0]
    # the index (not the marker) is where the transaction's first offset comes from
    write_txn_index(segment.log_path, [AbortedTxn(1, marker, 3, marker)])
    assert read_txn_index(txn_index_path(segment.log_path)) == [AbortedTxn(1, marker, 3, marker)]
    assert [(t.producer_id, t.first_offset) for t in transaction_state(log).aborted] == [(3, 1)]
    assert committed_values(log) == [b"gone1", b"kept"]  # offset 0 was before the indexed txn
    # a corrupt index (another version) is passed over: the markers decide
    with open(txn_index_path(segment.log_path), "r+b") as f:
        f.write(struct.pack(">h", 7))
    assert [(t.producer_id, t.first_offset) for t in transaction_state(log).aborted] == [(3, 0)]
    assert committed_values(log) == [b"kept"]
