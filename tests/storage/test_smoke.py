"""End-to-end smoke of the storage API as the README shows it."""

from __future__ import annotations

import pytest

import seglog
from seglog.errors import LogDirLockedError, OffsetOutOfRangeError

MS = 1_700_000_000_000


def test_append_read_reopen(tmp_path):
    clock = lambda: MS + 10_000  # noqa: E731
    with seglog.open(str(tmp_path), clock=clock, background=False) as logs:
        logs.create_topic("events", partitions=3, config={"segment.bytes": 4096})
        log = logs.partition("events", 0)
        for i in range(200):
            first, last = log.append(
                [seglog.Record(key=b"k%d" % i, value=b"v" * 50, timestamp=MS + i, headers=[("h", b"x")])]
            )
            assert first == last == i
        assert len(log.segments) > 3
        got = list(log.records(150))
        assert [r.offset for r in got] == list(range(150, 200))
        assert got[0].key == b"k150" and got[0].headers == (("h", b"x"),)
        assert log.offset_for_timestamp(MS + 77) == (77, MS + 77)
    with seglog.open(str(tmp_path), background=False) as logs:
        log = logs.partition("events", 0)
        assert log.log_end_offset == 200
        assert [r.value for r in log.records()] == [b"v" * 50] * 200
        with pytest.raises(OffsetOutOfRangeError):
            log.read(201)


def test_second_owner_is_refused(tmp_path):
    with seglog.open(str(tmp_path), background=False), pytest.raises(LogDirLockedError):
        seglog.open(str(tmp_path), background=False)
