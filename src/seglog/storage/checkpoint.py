"""Kafka's text checkpoint files.

Format (Kafka's CheckpointFile)::

    0                      version
    2                      number of entries
    events 0 1042          one entry per line
    events 1 977

Offset checkpoints (``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint``,
``cleaner-offset-checkpoint``) hold ``topic partition offset``;
``leader-epoch-checkpoint`` holds ``epoch startOffset``. A file is replaced
whole: written to a temp file, fsynced, renamed over the old one, so a crash
leaves the old file or the new one, never half of each. An empty file means
no entries (real Kafka directories have them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from ..common import TopicPartition
from ..errors import KafkaStorageError
from ..records.limits import INT32_MAX, INT64_MAX
from . import fileio

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

VERSION = 0

T = TypeVar("T")


class CorruptCheckpointError(KafkaStorageError):
    """A checkpoint file that does not parse."""


def _read(path: str, parse: Callable[[list[str]], T]) -> list[T]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError(f"not text: byte {e.start} is not UTF-8", file=path, position=e.start) from None
    except OSError as e:
        raise KafkaStorageError(f"cannot read checkpoint: {e.strerror}", file=path) from None
    if not lines or (len(lines) == 1 and not lines[0].strip()):
        return []
    if lines[0].strip() != str(VERSION):
        raise CorruptCheckpointError(f"unknown checkpoint version {lines[0]!r}", file=path)
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CorruptCheckpointError("malformed entry count", file=path) from None
    entries = [line for line in lines[2:] if line.strip()]
    if count != len(entries):
        raise CorruptCheckpointError(f"expected {count} entries, found {len(entries)}", file=path)
    out = []
    for n, line in enumerate(entries, start=3):
        try:
            out.append(parse(line.split()))
        except (ValueError, IndexError):
            raise CorruptCheckpointError(f"malformed line {n}: {line!r}", file=path) from None
    return out


def _write(path: str, lines: Iterable[str]) -> None:
    body = list(lines)
    text = f"{VERSION}\n{len(body)}\n" + "".join(line + "\n" for line in body)
    fileio.write_atomically(path, text.encode("utf-8"))


def _number(text: str, high: int) -> int:
    """A partition, epoch or offset of an entry: no negative or out-of-range value is
    written, so one read means the file is corrupt."""
    value = int(text)
    if not 0 <= value <= high:
        raise ValueError(f"{value} is not in [0, {high}]")
    return value


def _offset_entry(fields: list[str]) -> tuple[TopicPartition, int]:
    topic, partition, offset = fields  # a topic name has no whitespace
    return TopicPartition(topic, _number(partition, INT32_MAX)), _number(offset, INT64_MAX)


def read_offsets(path: str) -> dict[TopicPartition, int]:
    """``{(topic, partition): offset}`` of an offset checkpoint file."""
    return dict(_read(path, _offset_entry))


def write_offsets(path: str, offsets: Mapping[TopicPartition, int]) -> None:
    _write(path, (f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))


def read_offsets_or_empty(path: str) -> dict[TopicPartition, int]:
    """Like read_offsets, but a corrupt file is logged and read as empty: every
    caller then falls back to the safe side (recover from the start, keep data)."""
    try:
        return read_offsets(path)
    except CorruptCheckpointError as e:
        log.warning("ignoring corrupt checkpoint: %s", e)
        return {}


def read_epochs(path: str) -> list[tuple[int, int]]:
    """``[(epoch, start offset), ...]`` of a leader-epoch-checkpoint file."""
    return _read(path, _epoch_entry)


def _epoch_entry(fields: list[str]) -> tuple[int, int]:
    epoch, offset = fields
    return _number(epoch, INT32_MAX), _number(offset, INT64_MAX)


def write_epochs(path: str, entries: Iterable[tuple[int, int]]) -> None:
    _write(path, (f"{e} {o}" for e, o in entries))
