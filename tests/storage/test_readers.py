"""Readers: one range rule for read, batches and records; CRCs checked on the way out;
file slices that stay readable while the log truncates or deletes under them."""

from __future__ import annotations

import errno
import os
import sys
import threading
import time

import pytest

from seglog.errors import CorruptRecordError, KafkaStorageError, OffsetOutOfRangeError
from seglog.records import BatchIterator
from seglog.storage import LATEST_TIMESTAMP, MAX_TIMESTAMP, fileio
from seglog.storage.segment import LogSegment

from .conftest import MS, new_log, open_logs, records


def test_batches_records_and_read_share_one_range_rule(tmp_path):
    """Kafka's: a fetch at the log end is fine and empty; past it, or below the log
    start, is out of range — for all three readers alike, raised at the call."""
    manager, log = new_log(tmp_path)
    log.append(records(5))
    log.append(records(5, start=5))
    assert log.read(10).slice is None
    assert list(log.batches(10)) == []
    assert list(log.records(10)) == []
    for past in (11, 1000):
        with pytest.raises(OffsetOutOfRangeError) as read_error:
            log.read(past)
        with pytest.raises(OffsetOutOfRangeError) as batches_error:
            log.batches(past)
        with pytest.raises(OffsetOutOfRangeError) as records_error:
            log.records(past)
        for e in (read_error.value, batches_error.value, records_error.value):
            assert (e.log_start_offset, e.log_end_offset, e.offset) == (0, 10, past)
    manager.delete_records("t", 0, 5)
    with pytest.raises(OffsetOutOfRangeError):
        log.records(4)
    assert [r.offset for r in log.records()] == list(range(5, 10))
    manager.close()


def test_records_and_batches_check_crcs(tmp_path):
    """A value byte flipped on disk below the recovery point, in a dir that was shut down
    cleanly (nothing recovers it): the record-level readers refuse the batch, naming the
    file, position and offset, as Kafka's consumer does with check.crcs=true."""
    manager, log = new_log(tmp_path)
    log.append(records(4, size=40))
    log.append(records(4, start=4, size=40))
    log.roll()
    log.append(records(4, start=8, size=40))
    log.flush()
    first = log.segments[0]
    position = [h.position for h in first.scan_headers()][1]
    path = first.log_path
    manager.close()
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        at = data.index(b"v5-", position)
        data[at + 1] ^= 0x01
        f.seek(0)
        f.write(data)
    with open_logs(tmp_path) as reopened:
        log = reopened.partition("t", 0)
        for read in (lambda: list(log.records()), lambda: list(log.batches(2))):
            with pytest.raises(CorruptRecordError) as e:
                read()
            assert (e.value.file, e.value.position, e.value.offset) == (path, position, 4)
        # before the damaged batch all is served; without the check the bytes come back
        assert [r.offset for r in log.records(0, 4)] == [0, 1, 2, 3]
        values = [r.value for r in log.records(check_crcs=False)]
        assert len(values) == 12 and values[5].startswith(b"v4-")
        assert [b.base_offset for b in log.batches(check_crcs=False)] == [0, 4, 8]


def _segmented(tmp_path, **kw) -> tuple:
    """A log of several small segments: 10 records a batch, a few batches a segment."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 2048, **kw.pop("config", {})}, **kw)
    for i in range(30):
        log.append(records(10, start=10 * i, size=30))
    assert len(log.segments) >= 5
    return manager, log


def _slices(log, offsets) -> list:
    out = []
    for offset in offsets:
        fetch = log.read(offset, 1 << 20)
        assert fetch.slice is not None
        out.append((fetch.slice, fetch.slice.read()))
    return out


@pytest.mark.parametrize("how", ["truncate_to", "truncate_fully_and_start_at"])
def test_a_file_slice_taken_before_a_truncation_still_reads_its_bytes(tmp_path, how):
    """The broker hands slices to sendfile after the log's lock is released: a truncation
    meanwhile must not close or reuse their fds. Segments truncated away go the way of
    retention's, through .deleted and file.delete.delay.ms."""
    manager, log = _segmented(tmp_path, config={"file.delete.delay.ms": 60_000}, background=True)
    later = [s.base_offset for s in log.segments[2:]]
    slices = _slices(log, later)
    if how == "truncate_to":
        log.truncate_to(later[0] - 5)
    else:
        log.truncate_fully_and_start_at(0)
    gone = {int(f[:20]) for f in os.listdir(log.dir) if f.endswith(".log.deleted")}
    assert set(later) <= gone  # kept until file.delete.delay.ms has passed
    for fetch_slice, data in slices:
        assert fetch_slice.read() == data
        assert [b.base_offset for b in fetch_slice.batches()] == [b.base_offset for b in BatchIterator(data)]
        os.fstat(fetch_slice.handle.fd)  # a real fd still: sendfile can take it
    manager.close()


@pytest.mark.parametrize("error", [errno.ENOENT, errno.EIO])
def test_a_read_failing_on_a_file_its_log_still_lists_raises_without_a_second_attempt(tmp_path, error):
    """A file gone (ENOENT) while the log's segment list has not changed went behind the
    log's back, and any other error is no race with retention: either is raised from the
    first attempt (which runs outside the retry loop), not read again."""
    manager, log = new_log(tmp_path)
    log.append(records(5))
    fileio.faults.inject("read", error, path=".log", times=1)
    try:
        with pytest.raises(KafkaStorageError) as e:
            log.read(2, 1, min_one_message=False)
        assert e.value.errno == error
        assert log.read(2, 1, min_one_message=False).slice is not None
    finally:
        fileio.faults.clear()
    manager.close()


def _race_deletions(log, readers: list, delete, appends: int) -> list[BaseException]:
    """Each of ``readers`` called in a loop on a thread of its own while ``appends`` batches
    of 10 records go in, ``delete()`` after every third. Returns the errors the readers met
    but OffsetOutOfRangeError (a reader stops at its first)."""
    failures: list[BaseException] = []
    done = threading.Event()

    def loop(read) -> None:
        while not done.is_set():
            try:
                read()
            except OffsetOutOfRangeError:
                pass
            except BaseException as e:  # any other error is what the tests look for
                failures.append(e)
                return

    threads = [threading.Thread(target=loop, args=(read,)) for read in readers]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # the writer, its file calls releasing the GIL, gets it back soon
    for t in threads:
        t.start()
    try:
        for i in range(appends):
            log.append(records(10, start=10 * i, size=30))
            if i % 3 == 2:
                delete()
            if failures:
                break
    finally:
        done.set()
        for t in threads:
            t.join()
        sys.setswitchinterval(switch)
    return failures


def test_readers_racing_retention_read_the_data_or_are_out_of_range(tmp_path):
    """With file.delete.delay.ms=0 the files of a deleted segment go at once, while
    readers that took the segment list before may still be opening them: a reader
    either reads the records or learns that the offset is now below the log start."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 1024, "file.delete.delay.ms": 0})
    reads = {"data": 0}

    def read() -> None:
        start = log.log_start_offset
        got = [r.offset for r in log.records(start, start + 30)]
        assert got == list(range(start, start + len(got))), got
        reads["data"] += bool(got)

    failures = _race_deletions(log, [read, read], lambda: manager.delete_records("t", 0, log.log_end_offset - 20), 150)
    assert not failures, failures[0]
    assert reads["data"] > 0
    manager.close()


def test_a_full_truncation_leaves_a_segment_listed_at_every_moment(tmp_path):
    """A reader in another process (a Spark task) lists the partition dir: while the log
    is truncated fully, the dir holds a segment at every moment (the new one is made
    before the old ones go)."""
    manager, log = _segmented(tmp_path)
    listed: list[list[str]] = []

    def observe(path: str) -> bool:  # the fault layer as a vantage point: it fails nothing
        if path.endswith(".log") or path.endswith(".deleted"):
            listed.append([f for f in os.listdir(log.dir) if f.endswith(".log")])
        return False

    fileio.faults.inject("open", path=observe, times=-1)
    fileio.faults.inject("rename", path=observe, times=-1)
    fileio.faults.inject("unlink", path=observe, times=-1)
    try:
        log.truncate_fully_and_start_at(5000)
    finally:
        fileio.faults.clear()
    assert listed and all(listed)
    assert [f for f in os.listdir(log.dir) if f.endswith(".log")] == [f"{5000:020d}.log"]
    manager.close()


def test_a_reader_takes_the_owners_index_after_a_truncation_without_rebuilding_it(tmp_path, caplog):
    """A follower's truncation leaves the active segment's index preallocated: a reader in
    another process (here read-only, in this one) counts its entries up to the first all-zero
    slot, so dropped entries left in place read as live, fail the load checks, and the reader
    rebuilds the index from the log (a warning and a scan of the segment) every time it opens."""
    logs, log = new_log(tmp_path, config={"index.interval.bytes": 0})
    try:
        for i in range(20):
            log.append(records(1, start=i))
        log.truncate_to(10)
        log.append(records(1, start=10))
        with caplog.at_level("WARNING"), open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            assert [b.base_offset for b in seen.batches(8)] == [8, 9, 10]
        assert "rebuilding" not in caplog.text
    finally:
        logs.close()


def test_a_reader_following_a_rolling_writer_returns_every_offset_once_in_order(tmp_path):
    """A reader of a live dir (a Spark task beside a broker) follows a writer that rolls at
    every append, reading from where it stopped up to the end each refresh found: it gets
    every offset the writer appended once, in order, none skipped. (Each listing of the dir
    races the writer's rolls, and may name a segment without the one made before it: the
    more so, the longer the listing, so the log starts with a thousand segments.)"""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400, "index.interval.bytes": 0})
    for i in range(1000):
        log.append(records(5, start=5 * i, size=30))
    done = threading.Event()

    def write() -> None:
        i = 1000
        while not done.is_set():
            log.append(records(5, start=5 * i, size=30))
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    position = refreshes = 0
    try:
        with open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline:
                seen.refresh()
                end = seen.log_end_offset
                got = [r.offset for r in seen.records(position, end)]
                assert got == list(range(position, end)), sorted(set(range(position, end)) - set(got))[:10]
                position, refreshes = end, refreshes + 1
            done.set()
            writer.join()
            seen.refresh()
            assert [r.offset for r in seen.records()] == list(range(log.log_end_offset))
    finally:
        done.set()
        writer.join()
        manager.close()
    assert refreshes > 1 and len(log.segments) > 10


def _listing_without_once(monkeypatch, dir: str, base: int) -> list[str]:
    """``os.listdir`` as a readdir racing the owner's rolls may answer (ext4 names files in
    hash order, and a file made during the listing may or may not be named): the first
    listing of ``dir`` that holds segment ``base`` leaves its files out, later ones name them.
    Returns the listings so changed (the test checks that the race was met)."""
    real, stem, changed = os.listdir, f"{base:020d}.", []

    def listdir(path: str = ".") -> list[str]:
        names = real(path)
        if os.fspath(path) == dir and not changed and any(n.startswith(stem) for n in names):
            changed.append(path)
            return [n for n in names if not n.startswith(stem)]
        return names

    monkeypatch.setattr(os, "listdir", listdir)
    return changed


def test_a_reader_opening_beside_a_roll_skips_no_segment(tmp_path, monkeypatch):
    """A read-only open lists the dir while its owner rolls: the listing may name the newest
    segments without one made just before them. The reader takes no such hole for the log."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400})
    for i in range(6):
        log.append(records(5, start=5 * i, size=30))
    assert [s.base_offset for s in log.segments] == [0, 5, 10, 15, 20, 25]
    try:
        changed = _listing_without_once(monkeypatch, log.dir, 15)
        with open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            assert changed
            assert [s.base_offset for s in seen.segments] == [0, 5, 10, 15, 20, 25]
            assert [r.offset for r in seen.records()] == list(range(30))
    finally:
        manager.close()


def test_a_reader_refreshing_beside_a_roll_skips_no_segment(tmp_path, monkeypatch):
    """As at open, so at refresh: the segments rolled since the last refresh come in whole,
    without a hole where one a racing listing left out was (and not later behind the tail,
    where the next listing would no longer look)."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400})
    log.append(records(5, size=30))
    try:
        with open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            for i in range(1, 5):
                log.append(records(5, start=5 * i, size=30))
            changed = _listing_without_once(monkeypatch, log.dir, 10)
            assert seen.refresh() and changed
            for _ in range(2):  # and the next refresh, which lists it, keeps it
                assert [s.base_offset for s in seen.segments] == [0, 5, 10, 15, 20]
                assert [r.offset for r in seen.records()] == list(range(25))
                seen.refresh()
    finally:
        manager.close()


def test_a_reader_takes_an_index_preallocated_to_its_writers_size(tmp_path, caplog):
    """A broker run with log.index.size.max.bytes=65536 preallocates its active segment's
    indexes to that size; a reader with the default (10 MiB) takes them as they are."""
    manager = open_logs(tmp_path, {"log.index.size.max.bytes": 65536})  # the broker's, not the topic's
    manager.create_topic("t", 1, {"index.interval.bytes": 0})
    log = manager.partition("t", 0)
    try:
        for i in range(5):
            log.append(records(2, start=2 * i))
        log.flush()
        with caplog.at_level("WARNING"), open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            assert [r.offset for r in seen.records()] == list(range(10))
            assert seen.active_segment.offset_index.entries == 4
        assert "rebuilding" not in caplog.text, caplog.text[:500]
    finally:
        manager.close()


def test_a_reader_takes_the_indexes_of_a_segment_its_writer_is_rolling_away_from(tmp_path, caplog, monkeypatch):
    """The writer makes the next segment before it trims the last one's indexes: a reader
    opening in between lists that one as inactive, its indexes still preallocated. It takes
    them as they are (no warning, no rebuild) and reads every offset."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 400, "index.interval.bytes": 0})
    for i in range(4):
        log.append(records(1, start=i, size=30))
    rolling = log.active_segment
    trim = LogSegment.on_become_inactive
    seen_mid_roll: list[list[int]] = []

    def read_mid_roll(segment: LogSegment) -> None:  # the writer paused between the next segment and the trim
        if segment is not rolling or seen_mid_roll:  # (once: the trim of this roll)
            trim(segment)
            return
        assert os.path.getsize(rolling.index_path) > rolling.offset_index.size_in_bytes  # not trimmed yet
        with open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            seen_mid_roll.append([r.offset for r in seen.records()])
            assert seen_mid_roll[0] == list(range(log.log_end_offset))  # (the rolling append is not in yet)
            assert seen.segments[-2].base_offset == rolling.base_offset
            assert seen.segments[-2].offset_index.entries == 3
        trim(segment)

    monkeypatch.setattr(LogSegment, "on_become_inactive", read_mid_roll)  # (segments have slots: on the class)
    try:
        with caplog.at_level("WARNING"):
            while len(log.segments) == 1:
                log.append(records(1, start=log.log_end_offset, size=30))
    finally:
        manager.close()
    assert len(seen_mid_roll) == 1 and len(seen_mid_roll[0]) == 4
    assert "rebuilding" not in caplog.text, caplog.text[:500]


def test_a_reader_trusts_no_index_entry_past_the_bytes_it_knows_of(tmp_path, caplog):
    """A reader reads a segment's size when it refreshes, and copies the segment's indexes at
    its first lookup there: entries the writer added meanwhile name batches past that size.
    They are left out (the reader reads up to what it knows), not taken for damage."""
    manager, log = new_log(tmp_path, config={"index.interval.bytes": 0})
    log.append(records(2))
    try:
        with caplog.at_level("WARNING"), open_logs(tmp_path, read_only=True) as reader:
            seen = reader.partition("t", 0)
            log.roll()
            for i in range(1, 3):
                log.append(records(2, start=2 * i))
            assert seen.refresh() and seen.log_end_offset == 6
            for i in range(3, 6):  # indexed, past the size the reader read
                log.append(records(2, start=2 * i))
            assert not seen.active_segment.indexes_loaded
            assert [r.offset for r in seen.records()] == list(range(6))
            tail = seen.active_segment
            assert tail.offset_index.entries == 1 and tail.time_index.last_entry[1] < 6
            assert seen.refresh() and [r.offset for r in seen.records(4)] == list(range(4, 12))
        assert "rebuilding" not in caplog.text, caplog.text[:500]
    finally:
        manager.close()


def test_lookups_by_time_racing_retention_answer_or_are_out_of_range(tmp_path):
    """ListOffsets beside retention (file.delete.delay.ms=0, the files go at once): a lookup
    by time, of the largest timestamp, or by segment times (ListOffsets v0) that meets a
    segment deleted since it took the list looks again at the segments there now. It
    answers or is out of range; never a storage error, nor an OS one."""
    config = {"segment.bytes": 1024, "file.delete.delay.ms": 0, "retention.bytes": 3000}
    manager, log = new_log(tmp_path, config=config)
    answers = {"time": 0, "max": 0, "v0": 0}

    def by_time() -> None:
        start = log.log_start_offset
        found = log.offset_for_timestamp(MS + start + 5)
        assert found is None or found[0] >= start + 5, (found, start)
        answers["time"] += found is not None

    def largest() -> None:
        answers["max"] += log.offset_for_timestamp(MAX_TIMESTAMP) is not None

    def by_segment_times() -> None:
        answers["v0"] += bool(log.legacy_offsets_before(LATEST_TIMESTAMP, 10))  # (every segment's time read)

    failures = _race_deletions(log, [by_time, largest, by_segment_times], manager.enforce_retention, 300)
    assert not failures, repr(failures[0])
    assert all(answers.values()), answers
    assert log.log_start_offset > 0
    manager.close()
