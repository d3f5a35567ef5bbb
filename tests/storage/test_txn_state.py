"""Transaction state the Kafka way, held to the header walk.

A read_committed reader's last stable offset comes from the partition's producer state
(``PartitionLog.last_stable_offset``) and the aborted transactions of what it reads from
the segments' ``.txnindex`` (``collect_aborted_transactions``, ``read(read_committed=True)``).
The header walk over every batch and marker of the log (``txn_walk``, the cleaner's) is
the referee: on logs of several producers' committed, aborted and open transactions
interleaved over several segments, the two must agree after rolls, truncations, a clean
reopening, a crash (the last entries lost), a kill of a real process, for a follower's
copy (appends of many batches, several markers at once), for a read-only reader, after
compaction, and on the dirs real Kafka brokers wrote.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import seglog
from seglog.config import BrokerConfig
from seglog.storage import LogManager, PartitionLog
from seglog.storage.producer_state_manager import aborted_txns_rebuilt
from seglog.storage.txn_index import read_txn_index

from ..conftest import KAFKA_DATA
from .conftest import MS, crash, open_logs
from .test_real_dirs import DIRS, copy_writable
from .txn_walk import PIDS, Writer, committed_by_fetches, committed_by_walk, walk

SMALL = {"segment.bytes": 400, "index.interval.bytes": 60}


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.sampled_from(PIDS), st.integers(1, 3)),
        st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans()),
        st.tuples(st.just("plain"), st.integers(1, 2)),
        st.tuples(st.just("roll")),
    ),
    min_size=1,
    max_size=40,
)


def check(log: PartitionLog, rng: random.Random | None = None, *, exact: bool = True) -> None:
    """The Kafka way equals the walk: the LSO; the aborted transactions of every range
    (the index search stops early only where no later one can overlap); what a consumer
    keeps fetching from any offset, with small and large fetches. Not ``exact`` (a
    compacted log, whose cleaner keeps a marker's entry while the batches the walk would
    start its transaction at are gone): the walk's transactions are among the index's."""
    walked = walk(log)
    lso = walked.last_stable_offset
    assert log.last_stable_offset == lso
    for start in range(log.log_start_offset, lso + 1):
        for end in {lso, start + 1, min(lso, start + 3), log.log_end_offset}:
            if end <= start:
                continue
            found = log.collect_aborted_transactions(start, end)
            assert len({t.last_offset for t in found}) == len(found)
            expected = [
                (first, marker, pid) for first, marker, pid in walked.aborted if first < end and marker >= start
            ]
            if exact:
                assert sorted((t.first_offset, t.last_offset, t.producer_id) for t in found) == expected, (start, end)
            else:
                assert {(m, pid) for _, m, pid in expected} <= {(t.last_offset, t.producer_id) for t in found}
    rng = rng or random.Random(0)
    for start in {log.log_start_offset, rng.randrange(log.log_start_offset, lso + 1), lso}:
        expected_values = committed_by_walk(log, start)
        assert committed_by_fetches(log, start) == expected_values
        assert committed_by_fetches(log, start, max_bytes=rng.choice((1, 100, 300))) == expected_values


def entries(log: PartitionLog) -> list[tuple[int, int, int, int]]:
    """Every .txnindex entry of the log, read from the files."""
    out = []
    for segment in log.segments:
        if os.path.exists(segment.txn_index_path):
            found = read_txn_index(segment.txn_index_path)
            out += [(e.producer_id, e.first_offset, e.last_offset, e.last_stable_offset) for e in found]
    return out


def copy_as_follower(leader: PartitionLog, follower: PartitionLog, rng: random.Random, start: int = 0) -> None:
    """The leader's batches from ``start`` appended to ``follower`` as a replica fetcher
    does: several at a time (several markers in one append, sometimes)."""
    batches = [bytes(b.buffer) for b in leader.batches(start, leader.log_end_offset, check_crcs=False)]
    while batches:
        n = rng.randint(1, 6)
        while n > 1 and sum(map(len, batches[:n])) > follower.config.segment_bytes:
            n -= 1
        follower.append_as_follower(b"".join(batches[:n]))
        del batches[:n]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, seed=st.integers(0, 2**32))
def test_the_kafka_way_equals_the_walk(ops, seed) -> None:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        leader_dir, follower_dir = os.path.join(tmp, "leader"), os.path.join(tmp, "follower")
        manager = open_logs(leader_dir)
        manager.create_topic("t", 1, SMALL)
        leader = manager.partition("t", 0)
        Writer(leader).run(ops)
        check(leader, rng)
        written = entries(leader)

        # a follower's copy: appends of several batches, so several markers in one append
        followers = open_logs(follower_dir)
        followers.create_topic("t", 1, SMALL)
        follower = followers.partition("t", 0)
        copy_as_follower(leader, follower, rng)
        check(follower, rng)
        assert [e[:3] for e in entries(follower)] == [e[:3] for e in written]
        # truncated (a diverged follower), then caught up again
        cut = rng.randrange(0, follower.log_end_offset + 1)
        follower.truncate_to(cut)
        check(follower, rng)
        assert [e[:3] for e in entries(follower)] == [e[:3] for e in written if e[2] < cut]
        copy_as_follower(leader, follower, rng, start=follower.log_end_offset)
        check(follower, rng)
        followers.close()

        # a read-only reader beside the owner
        with seglog.open(leader_dir, read_only=True) as readers:
            check(readers.partition("t", 0), rng)

        # a crash that lost the active segment's index (its entries come after the last
        # snapshot: recovery writes them again, each with the LSO its append wrote)
        active = leader.active_segment.txn_index_path
        if os.path.exists(active):
            os.unlink(active)
        crash(manager)
        manager = open_logs(leader_dir)
        leader = manager.partition("t", 0)
        check(leader, rng)
        assert entries(leader) == written
        # closed cleanly and opened again
        manager.close()
        with open_logs(leader_dir) as manager:
            check(manager.partition("t", 0), rng)


def test_an_append_of_several_markers_indexes_each_with_kafkas_last_stable_offset(tmp_path) -> None:
    """Kafka's ``UnifiedLog.append`` computes each completed transaction's LSO after the
    whole append's producer updates, a transaction ended later in the same append still
    open: a follower's append of two ABORT markers must not index the first with an LSO
    past the second transaction's start (a search would stop there and miss it)."""
    with open_logs(tmp_path / "leader") as leaders, open_logs(tmp_path / "follower") as followers:
        leaders.create_topic("t", 1, {})
        followers.create_topic("t", 1, {})
        leader, follower = leaders.partition("t", 0), followers.partition("t", 0)
        w = Writer(leader)
        w.send(100, 1)  # 0
        w.send(101, 1)  # 1
        w.end(100, commit=False)  # 2: 101's still open, LSO 1
        w.end(101, commit=False)  # 3: nothing open, LSO 4
        assert entries(leader) == [(100, 0, 2, 1), (101, 1, 3, 4)]
        follower.append_as_follower(b"".join(bytes(b.buffer) for b in leader.batches(0, 4)))
        assert entries(follower) == [(100, 0, 2, 1), (101, 1, 3, 4)]
        check(follower)


def test_a_marker_the_high_watermark_has_not_passed_holds_the_last_stable_offset(tmp_path) -> None:
    """Kafka's ``firstUnstableOffset`` counts a transaction decided by a marker at or past
    the high watermark (``unreplicatedTxns``): until every replica has the marker, a
    read_committed reader stops at the transaction's start."""
    config = BrokerConfig({"log.dirs": [str(tmp_path)]})
    manager = LogManager(config, background=False, standalone=False)
    try:
        manager.create_topic("t", 1, {})
        log = manager.partition("t", 0)
        w = Writer(log)
        w.plain(1)  # 0
        w.send(100, 2)  # 1, 2
        log.maybe_increment_high_watermark(3)
        assert log.last_stable_offset == 1  # undecided
        w.end(100, commit=False)  # 3
        assert log.high_watermark == 3
        assert log.last_stable_offset == 1  # decided, but the high watermark is below the marker
        fetch = log.read(1, 1 << 20, read_committed=True)
        assert fetch.records is None and fetch.aborted_transactions == []
        log.maybe_increment_high_watermark(4)
        assert log.last_stable_offset == 4
        fetch = log.read(1, 1 << 20, read_committed=True)
        assert [(t.producer_id, t.first_offset) for t in fetch.aborted_transactions] == [(100, 1)]
        # the same after a restart: the replay's decided transactions wait for the high watermark
        w.send(101, 1)  # 4
        w.end(101, commit=True)  # 5
        log.update_high_watermark(5)
        assert log.last_stable_offset == 4
    finally:
        manager.close()
    manager = LogManager(config, background=False, standalone=False)
    try:
        log = manager.partition("t", 0)
        assert log.high_watermark == 5
        assert log.last_stable_offset == 5  # the snapshot at the close holds 101's transaction done
    finally:
        manager.close()


def test_the_log_start_offset_bounds_the_last_stable_offset(tmp_path) -> None:
    """Kafka's ``updateFirstUnstableOffset``: an open transaction that began below the log
    start offset (DeleteRecords) makes the LSO the log start offset, not an offset no one
    can read."""
    with open_logs(tmp_path) as manager:
        manager.create_topic("t", 1, {})
        log = manager.partition("t", 0)
        w = Writer(log)
        w.send(100, 1)  # 0
        w.plain(3)  # 1-3
        log.delete_records(2)
        assert log.last_stable_offset == 2


def test_a_reader_takes_markers_since_the_last_snapshot_from_the_log_not_the_index(tmp_path) -> None:
    """The owner writes an ABORT marker, then its .txnindex entry; a reader that comes
    between the two (or after a crash between them) must still drop the transaction:
    its producer state replayed the marker, and says so."""
    manager = open_logs(tmp_path)
    manager.create_topic("t", 1, SMALL)
    log = manager.partition("t", 0)
    w = Writer(log)
    w.send(100, 2)
    log.roll()  # a snapshot: the reader replays from here
    w.send(101, 1)
    w.end(100, commit=False)
    w.end(101, commit=False)
    Path(log.active_segment.txn_index_path).unlink()  # as if the reader came before the entries were written
    with seglog.open(str(tmp_path), read_only=True) as readers:
        reader = readers.partition("t", 0)
        found = reader.collect_aborted_transactions(0, 5)
        assert [(t.producer_id, t.first_offset) for t in found] == [(100, 0), (101, 2)]
        assert committed_by_fetches(reader) == committed_by_walk(reader) == []
    crash(manager)  # (its index file went behind its back: no clean close)


def test_recovery_after_a_kill_rebuilds_the_transaction_index(tmp_path) -> None:
    """A real process appending transactions is killed (SIGKILL) at a random moment, a few
    times over; after each, the dir opened again agrees with the walk, and its .txnindex
    entries are those a rebuild from the markers gives."""
    child = Path(__file__).with_name("txn_crash_child.py")
    for seed in range(3):
        proc = subprocess.Popen(
            [sys.executable, str(child), str(tmp_path), str(seed)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
            time.sleep(random.Random(seed).uniform(0.2, 0.8))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        with open_logs(tmp_path) as manager:
            log = manager.partition("t", 0)
            assert log.log_end_offset > 0
            check(log)
            for segment in log.segments:
                rebuilt = aborted_txns_rebuilt(
                    log.dir, log.segments, segment, log.log_start_offset, log.log_end_offset, MS
                )
                assert segment.txn_index.entries() == rebuilt


def test_the_cleaner_keeps_the_index_of_the_markers_it_keeps(tmp_path) -> None:
    """Compaction rewrites segments: the cleaned one's .txnindex holds the entries of the
    ABORT markers it keeps (Kafka's CleanedTransactionMetadata), so read_committed readers
    still drop what is left of aborted transactions (a producer's last batch, emptied)."""
    config = {**SMALL, "cleanup.policy": "compact", "segment.bytes": 300}
    with open_logs(tmp_path) as manager:
        manager.create_topic("t", 1, config)
        log = manager.partition("t", 0)
        w = Writer(log)
        rng = random.Random(7)
        for _ in range(80):
            w.step(rng)
        for pid in sorted(w.open):
            w.end(pid, commit=False)
        w.plain(1)
        log.roll()
        check(log)
        before = committed_by_walk(log)
        aborted_before = entries(log)
        assert manager.clean(force=True)
        cleaned = [b for b in log.batches() if b.is_transactional and not b.is_control]
        assert any(b.record_count == 0 for b in cleaned)  # aborted batches left empty: the walk's case
        check(log, exact=False)
        assert committed_by_fetches(log) == before  # keys all differ: compaction removed only aborted records
        kept_markers = {b.base_offset for b in log.batches() if b.is_control}
        assert entries(log)  # the cleaned segments' indexes
        assert {e[2] for e in entries(log)} <= kept_markers
        assert set(entries(log)) <= set(aborted_before)


def test_a_swap_keeps_its_transaction_index(tmp_path) -> None:
    """A crash after a cleaned segment was renamed ``.swap`` (its ``.txnindex`` first):
    the loader completes the swap with the index, which the offset and time indexes are
    rebuilt beside."""
    with open_logs(tmp_path) as manager:
        manager.create_topic("t", 1, {})
        log = manager.partition("t", 0)
        w = Writer(log)
        w.send(100, 2)
        w.end(100, commit=False)
        w.plain(1)
        log.roll()
        written = entries(log)
        assert written
        segment = log.segments[0]
    part = Path(segment.log_path).parent
    base = Path(segment.log_path).stem
    for suffix in (".txnindex", ".log"):  # as replace_segments renames them, the index first
        shutil.copyfile(part / f"{base}{suffix}", part / f"{base}{suffix}.swap")
    with open_logs(tmp_path) as manager:
        log = manager.partition("t", 0)
        assert entries(log) == written
        assert not list(part.glob("*.swap"))
        check(log)


@pytest.mark.parametrize("name", sorted(DIRS))
def test_dirs_kafka_wrote(name, tmp_path) -> None:
    """Every partition of the real Kafka dirs, read only and as owner: its snapshots load
    (no transaction is open in any), no .txnindex entry, the LSO the high watermark, as
    the walk finds."""
    src = KAFKA_DATA / "real_segments" / DIRS[name]
    with seglog.open(str(src), read_only=True) as readers:
        for topic in readers.topics():
            for p in readers.partitions(topic):
                log = readers.partition(topic, p)
                assert log.last_stable_offset == walk(log).last_stable_offset == log.high_watermark
                assert log.collect_aborted_transactions(log.log_start_offset, log.log_end_offset) == []
    data = copy_writable(src, tmp_path / "data")
    with open_logs(data) as manager:
        for topic in manager.topics():
            for p in manager.partitions(topic):
                log = manager.partition(topic, p)
                assert log.last_stable_offset == walk(log).last_stable_offset == log.high_watermark
                end = log.log_end_offset
                assert log.read(log.log_start_offset, 1 << 16, read_committed=True).aborted_transactions in ([], None)
                assert log.collect_aborted_transactions(log.log_start_offset, end) == []


def test_a_corrupt_index_is_made_again_from_the_markers(tmp_path) -> None:
    """A .txnindex that does not read (another version, here) is made again from the
    segment's markers: the active segment's when the owner opens the log (an ABORT
    marker's append adds to it), a sealed one's when a truncation cuts it (once the log is
    cut) or a read meets it."""

    def corrupt(path: str) -> None:
        with open(path, "r+b") as f:
            f.write(b"\x00\x07")

    def three_segments_with_aborts(path: Path) -> tuple[list[str], list[tuple[int, int, int, int]]]:
        with open_logs(path) as manager:
            manager.create_topic("t", 1, SMALL)
            log = manager.partition("t", 0)
            w = Writer(log)
            w.run([("send", 100, 2), ("send", 101, 1), ("end", 100, False), ("roll",)])
            w.run([("end", 101, False), ("plain", 1), ("roll",)])
            w.run([("send", 102, 1), ("end", 102, False)])
            paths = [s.txn_index_path for s in log.segments]
            assert all(os.path.exists(p) for p in paths)
            written = entries(log)
        for p in paths:
            corrupt(p)
        return paths, written

    paths, written = three_segments_with_aborts(tmp_path / "read")
    with open_logs(tmp_path / "read") as manager:
        log = manager.partition("t", 0)
        assert [e.last_offset for e in read_txn_index(paths[-1])] == [7]  # the active segment's, at the open
        check(log)  # the sealed ones, as the reads meet them
        assert entries(log) == written

    paths, written = three_segments_with_aborts(tmp_path / "truncated")
    with open_logs(tmp_path / "truncated") as manager:
        log = manager.partition("t", 0)
        marker = written[1][2]  # the second segment's marker
        log.truncate_to(marker)
        assert len(log.segments) == 2
        assert not os.path.exists(paths[1])  # made again without the marker cut: no entry, no file
        check(log)
        assert entries(log) == written[:1]
