"""Looking again when a file goes under a reader (vanishing.py): only for that error, at
most so many times, and not once more after an attempt that succeeded."""

from __future__ import annotations

import errno

import pytest

from seglog.errors import CorruptRecordError, KafkaStorageError
from seglog.storage import retry_while_vanishing, vanished


def gone(tmp_path) -> KafkaStorageError:
    return KafkaStorageError("open failed", file=str(tmp_path / "00000000000000000000.log"))


def test_a_file_gone_is_vanished_and_an_io_error_on_a_file_there_is_not(tmp_path):
    there = tmp_path / "x.log"
    there.write_bytes(b"")
    assert vanished(gone(tmp_path))
    assert not vanished(KafkaStorageError("read failed", file=str(there)))
    enoent = KafkaStorageError("the segment was deleted", file=str(there))
    enoent.errno = errno.ENOENT
    assert vanished(enoent)


def test_attempts_go_on_while_files_vanish_and_stop_at_the_first_success(tmp_path):
    tries = []
    for attempt in retry_while_vanishing(5):
        with attempt:
            tries.append(attempt)
            if len(tries) < 3:
                raise gone(tmp_path)
    assert len(tries) == 3 and tries[0].error is not None and tries[2].error is None


def test_the_last_attempt_and_other_errors_are_raised(tmp_path):
    tries = 0
    with pytest.raises(KafkaStorageError, match="open failed"):
        for attempt in retry_while_vanishing(3):
            with attempt:
                tries += 1
                raise gone(tmp_path)
    assert tries == 3
    with pytest.raises(CorruptRecordError):
        for attempt in retry_while_vanishing(3):
            with attempt:
                raise CorruptRecordError("bad CRC")
