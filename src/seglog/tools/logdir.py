"""What the log-dir commands share: opening the dirs (as their owner, or read-only beside
it), reading a topic from them, and the JSON shape of a record."""

from __future__ import annotations

import argparse
import base64
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import KafkaStorageError
from ..records import AnyBatch, Record
from ..storage import LogManager, PartitionLog, open
from .arguments import log_dir


def add_log_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir",
        required=True,
        action="append",
        type=log_dir,
        help="a log directory (repeat for several log.dirs)",
    )


def open_log_dirs(args: argparse.Namespace) -> LogManager:
    """Open the dirs as their owner (making those missing); a dir another process owns
    raises LogDirLockedError. For the commands that write: ``topics --create`` and the like,
    ``produce``."""
    _check_log_dirs(args.log_dir, must_exist=False)
    return open(args.log_dir, background=False)


def open_log_dirs_read_only(args: argparse.Namespace) -> LogManager:
    """Open dirs that must exist, read-only: no lock is taken and nothing is written, so a
    command that only reads runs beside the dir's owner and never makes a dir of a typo."""
    _check_log_dirs(args.log_dir, must_exist=True)
    return open(args.log_dir, background=False, read_only=True)


def _check_log_dirs(paths: list[str], must_exist: bool) -> None:
    for path in paths:
        if os.path.isdir(path):
            continue
        if os.path.exists(path):
            raise KafkaStorageError(f"{path} is a file, not a log dir")
        if must_exist:
            raise KafkaStorageError(f"no log dir at {path}")


class LogDirTopic:
    """A topic read from log dirs opened read-only, as ``consume`` and ``get-offsets`` read
    it: the commands ask this for partitions, offsets and batches, and would ask a broker's
    client the same way."""

    POLL_S = 0.1  # how often a follower looks for new records (Kafka's fetch.max.wait.ms is 0.5 s)

    def __init__(self, logs: LogManager, topic: str) -> None:
        self.logs = logs
        self.topic = topic

    def partitions(self) -> list[int]:
        return self.logs.partitions(self.topic)

    def _log(self, partition: int) -> PartitionLog:
        return self.logs.partition(self.topic, partition)

    def offsets(self, partition: int) -> tuple[int, int]:
        """(log start offset, high watermark): the offsets a consumer may start at."""
        pl = self._log(partition)
        return pl.log_start_offset, pl.high_watermark

    def offset_for_timestamp(self, partition: int, timestamp: int) -> int | None:
        """Kafka's ListOffsets, with its special timestamps (-1 latest, -2 earliest, -3 max)."""
        found = self._log(partition).offset_for_timestamp(timestamp)
        return None if found is None else found[0]

    def batches(self, partition: int, offset: int) -> Iterator[AnyBatch]:
        """The whole batches from the one holding ``offset`` up to the high watermark."""
        return self._log(partition).batches(offset)

    def wait(self, partitions: list[int], seconds: float | None) -> None:
        """Sleep a while (at most ``seconds``, if given), then take in what the dir's owner
        appended to the partitions meanwhile."""
        time.sleep(self.POLL_S if seconds is None else max(0.0, min(seconds, self.POLL_S)))
        for p in partitions:
            self._log(p).refresh()


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def record_json(
    record: Record, timestamp_type: str, data: Callable[[bytes | None], Any] = b64, **extra: Any
) -> dict[str, Any]:
    """The JSON shape of a record, shared by ``consume --json``, ``dump-log --json`` and the web
    console; ``data`` writes keys and values (base64 by default; the console's text or hex)."""
    return {
        "type": "record",
        **extra,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": timestamp_type,
        "key": data(record.key),
        "value": data(record.value),
        "headers": [{"key": _text(k), "value": data(v)} for k, v in record.headers],
    }


def _text(key: str) -> str:
    """A header key as Java reads it (UTF-8, bad bytes replaced): a key that is not UTF-8 on disk
    reads back with lone surrogates, which strict JSON parsers refuse."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
