"""Readers: one range rule for read, batches and records; CRCs checked on the way out;
file slices that stay readable while the log truncates or deletes under them."""

from __future__ import annotations

import pytest

from seglog.errors import CorruptRecordError, OffsetOutOfRangeError

from .conftest import new_log, open_logs, records


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
