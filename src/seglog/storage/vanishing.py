"""A reader racing the owner of a log dir: files that go between a listing and a read.

Retention, a truncation or a cleaner's swap removes segment files (after
file.delete.delay.ms) while readers that listed them earlier may still open or
read them: a log's own reads, a read-only opener in another process (the command
line, Spark's driver and tasks). What such a reader meets is a ``KafkaStorageError``
of a file gone; the answer is always to look again at what is there now, a few
times at most, and only for that error::

    for attempt in retry_while_vanishing(5):
        with attempt:
            return read()
        # a file went: what the caller does before looking again (attempt.error)

A ``with attempt`` block swallows a vanished-file error unless it is the last
attempt, and the loop ends after the first attempt that raises nothing.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from types import TracebackType

from ..errors import KafkaStorageError


def vanished(e: KafkaStorageError) -> bool:
    """Whether a storage error is a file that its owner deleted after a reader listed it:
    the open or read failed with ENOENT, or the file it names is gone."""
    return getattr(e, "errno", None) == errno.ENOENT or (e.file is not None and not os.path.exists(e.file))


class Attempt:
    """One attempt of ``retry_while_vanishing``: a context manager that keeps a vanished
    file's error (``error``) instead of raising it, unless it is the last attempt."""

    def __init__(self, last: bool) -> None:
        self.last = last
        self.error: KafkaStorageError | None = None

    def __enter__(self) -> Attempt:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> bool:
        if self.last or not isinstance(error, KafkaStorageError) or not vanished(error):
            return False
        self.error = error
        return True


def retry_while_vanishing(attempts: int) -> Iterator[Attempt]:
    """Up to ``attempts`` attempts, until one raises no vanished-file error."""
    for i in range(attempts):
        attempt = Attempt(last=i + 1 == attempts)
        yield attempt
        if attempt.error is None:
            return
