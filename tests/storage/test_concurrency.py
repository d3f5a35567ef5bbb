"""One writer thread appending (and rolling, and deleting old segments) while reader
threads read: readers never see a partial or corrupt batch, a batch that does not
hold the offset they asked for, or anything past the bound they read under."""

from __future__ import annotations

import functools
import random
import sys
import threading

import pytest

from seglog.errors import OffsetOutOfRangeError
from seglog.records import Record

from .conftest import check_log, crash, new_log


def value_of(offset: int) -> bytes:
    return b"%d-" % offset * (1 + offset % 17)


@pytest.fixture
def fast_switching():
    """Switch threads every 10 µs instead of 5 ms: many more interleavings."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(old)


def run_all(*targets, errors: list[BaseException]) -> None:
    """Start one thread per target, wait for all, and fail with the first error any raised."""
    threads = [threading.Thread(target=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]


def test_readers_never_see_partial_or_foreign_data(tmp_path, clock, fast_switching):
    config = {"segment.bytes": 4000, "index.interval.bytes": 200, "segment.index.bytes": 800}
    manager, log = new_log(tmp_path, config=config, clock=clock, background=True)
    total = 3000
    done = threading.Event()
    errors: list[BaseException] = []
    reads = [0]

    def writer() -> None:
        try:
            rng = random.Random(1)
            offset = 0
            while offset < total:
                n = rng.choice((1, 2, 5, 9))
                batch = [Record(b"%d" % o, value_of(o), clock.now + o) for o in range(offset, offset + n)]
                first, last = log.append(batch)
                assert first == offset
                offset = last + 1
                if rng.random() < 0.05:
                    # retention: segments go to .deleted, removed after file.delete.delay.ms
                    keep = max(0, len(log.segments) - 4)
                    log.delete_old_segments(lambda s, _n, k=[keep]: k.__setitem__(0, k[0] - 1) or k[0] >= 0)
        except BaseException as e:
            errors.append(e)
        finally:
            done.set()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not done.is_set():
                start, bound = log.log_start_offset, log.log_end_offset
                if bound == start:
                    continue
                offset = rng.randrange(start, bound)
                try:
                    fetch = log.read(offset, rng.choice((1, 300, 5000)), upper_bound=bound)
                except OffsetOutOfRangeError:
                    assert offset < log.log_start_offset  # retention moved the start meanwhile
                    continue
                assert fetch.slice is not None, (offset, bound)
                batches = list(fetch.slice.batches())
                assert batches, "not even one whole batch"
                assert batches[0].base_offset <= offset <= batches[0].last_offset, (offset, batches[0])
                for batch in batches:
                    batch.validate()
                    assert batch.base_offset < bound, f"batch {batch.base_offset} read past the bound {bound}"
                    for record in batch.records():
                        assert record.key == b"%d" % record.offset and record.value == value_of(record.offset)
                found = log.offset_for_timestamp(clock.now + offset)
                assert found is None or found[0] >= offset or found[0] >= log.log_start_offset
                reads[0] += 1
        except BaseException as e:
            errors.append(e)

    run_all(writer, *(functools.partial(reader, s) for s in range(3)), errors=errors)
    assert reads[0] > 100
    assert log.log_end_offset == total or log.log_end_offset >= total
    assert [r.offset for r in log.records()] == list(range(log.log_start_offset, log.log_end_offset))
    check_log(log)
    manager.close()


def test_records_iterated_while_appending_are_dense_and_whole(tmp_path, clock, fast_switching):
    manager, log = new_log(tmp_path, config={"segment.bytes": 3000}, clock=clock)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(1500):
                log.append([Record(b"%d" % i, value_of(i), clock.now)])
        except BaseException as e:
            errors.append(e)
        finally:
            stop.set()

    def reader() -> None:
        try:
            while not stop.is_set():
                got = [(r.offset, r.key, r.value) for r in log.records()]
                assert got == [(o, b"%d" % o, value_of(o)) for o in range(len(got))]
        except BaseException as e:
            errors.append(e)

    run_all(writer, reader, reader, errors=errors)
    manager.close()


def test_lookups_by_timestamp_while_appending_find_every_appended_record(tmp_path, clock, fast_switching):
    """Many segments make the segments' timestamp summary slow to build: a summary built
    before an append must not be kept after it."""
    manager, log = new_log(tmp_path, config={"segment.bytes": 300, "segment.index.bytes": 64}, clock=clock)
    base = clock.now
    for i in range(200):
        log.append([Record(b"%d" % i, b"v" * 200, base + i)])
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(200, 500):
                log.append([Record(b"%d" % i, b"v" * 200, base + i)])
        except BaseException as e:
            errors.append(e)
        finally:
            stop.set()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        try:
            while not stop.is_set():
                end = log.log_end_offset  # every offset below was appended, with timestamp base + offset
                target = rng.randrange(max(0, end - 5), end)
                assert log.offset_for_timestamp(base + target) == (target, base + target)
        except BaseException as e:
            errors.append(e)

    run_all(writer, *(functools.partial(reader, s) for s in range(2)), errors=errors)
    crash(manager)  # a clean close would fsync 500 segments: slow, and not what is tested
