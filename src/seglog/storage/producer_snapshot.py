"""Kafka's producer state snapshot files (``<offset>.snapshot`` in a partition dir).

A snapshot holds the producer state of a partition up to (not including) the
offset in its name: Kafka writes one at each segment roll and at shutdown, and
on recovery loads the latest and replays the log from its offset on. Layout
(Kafka's ``ProducerSnapshot.json``, version 1, big-endian, not flexible)::

    version                int16   1
    crc                    uint32  CRC32C of every byte after this field
    producerEntries        int32 count, then per entry (46 bytes):
      producerId           int64
      epoch                int16
      lastSequence         int32   -1 when no batch is kept
      lastOffset           int64   -1 when no batch is kept
      offsetDelta          int32   lastOffset - first offset of that batch
      timestamp            int64   max timestamp of the producer's last batch
      coordinatorEpoch     int32
      currentTxnFirstOffset int64  -1 when no transaction is open

Only the last of a producer's five kept batches is written, so after a restart a
retried batch older than that one is no longer recognised as a duplicate: Kafka's
trade-off, kept for its files to read both ways.
"""

from __future__ import annotations

import os
import struct
from collections import deque
from collections.abc import Iterable

from ..errors import CorruptSnapshotError
from ..records import crc32c
from . import fileio
from .naming import SNAPSHOT_SUFFIX, offset_file_name, parse_offset_file
from .producer_entry import BatchMetadata, ProducerStateEntry

VERSION = 1
_PREFIX = struct.Struct(">hI")  # version, crc
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_FROM = _PREFIX.size  # the CRC covers the entries, count included


def encode(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    items = list(entries)
    body += _COUNT.pack(len(items))
    for e in items:
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_data_offset,
            e.last_offset_delta,
            e.last_timestamp,
            e.coordinator_epoch,
            txn,
        )
    return _PREFIX.pack(VERSION, crc32c(body)) + bytes(body)


def decode(data: bytes | bytearray | memoryview, *, file: str | None = None) -> list[ProducerStateEntry]:
    """The entries of a snapshot's bytes; ``CorruptSnapshotError`` naming ``file`` when
    the version, the length or the CRC is wrong."""
    view = memoryview(data)
    if len(view) < _PREFIX.size + _COUNT.size:
        raise CorruptSnapshotError(f"producer snapshot of {len(view)} bytes is too short", file=file, position=0)
    version, crc = _PREFIX.unpack_from(view)
    if version != VERSION:
        raise CorruptSnapshotError(f"producer snapshot has unknown version {version}", file=file, position=0)
    (count,) = _COUNT.unpack_from(view, _CRC_FROM)
    expected = _PREFIX.size + _COUNT.size + max(count, 0) * _ENTRY.size
    if count < 0 or len(view) != expected:
        raise CorruptSnapshotError(
            f"producer snapshot of {len(view)} bytes cannot hold {count} entries", file=file, position=_CRC_FROM
        )
    computed = crc32c(view[_CRC_FROM:])
    if computed != crc:
        raise CorruptSnapshotError(
            f"producer snapshot CRC is {crc:#010x}, its bytes give {computed:#010x}", file=file, position=2
        )
    return [_entry(*fields) for fields in _ENTRY.iter_unpack(view[_CRC_FROM + _COUNT.size :])]


def _entry(
    pid: int, epoch: int, last_seq: int, last_offset: int, delta: int, timestamp: int, coordinator: int, txn: int
) -> ProducerStateEntry:
    batches = deque([BatchMetadata(last_seq, last_offset, delta, timestamp)] if last_offset >= 0 else [])
    return ProducerStateEntry(pid, epoch, coordinator, timestamp, txn if txn >= 0 else None, batches)


def read(path: str) -> list[ProducerStateEntry]:
    handle = fileio.open_file(path, writable=False)
    try:
        data = handle.pread(handle.size(), 0)
    finally:
        handle.close()
    return decode(data, file=path)


def write(dir: str, offset: int, entries: Iterable[ProducerStateEntry]) -> str:
    """Write ``<offset>.snapshot`` in ``dir`` whole (temp file, fsync, rename): a crash
    leaves the old file or the new one, never a torn one Kafka would have to drop."""
    path = os.path.join(dir, offset_file_name(offset, SNAPSHOT_SUFFIX))
    fileio.write_atomically(path, encode(entries))
    return path


def snapshot_offsets(dir: str) -> list[int]:
    """The offsets of the snapshot files in a partition dir, in order."""
    offsets = []
    for name in os.listdir(dir):
        if not name.endswith(SNAPSHOT_SUFFIX):
            continue  # (most of a dir's names: segments' files, thousands of them)
        parsed = parse_offset_file(name)
        if parsed is not None and parsed[1] == SNAPSHOT_SUFFIX:
            offsets.append(parsed[0])
    return sorted(offsets)
