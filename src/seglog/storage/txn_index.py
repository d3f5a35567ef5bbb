"""Kafka's transaction index (``.txnindex``): the aborted transactions a segment ends.

A broker appends an entry when it writes an ABORT marker, to the index of the
segment holding the marker, so that a read_committed fetch learns which
producers' records to drop without reading the markers. 34-byte entries,
big-endian, in marker order::

    version            int16   0
    producerId         int64
    firstOffset        int64   the transaction's first offset (maybe in an earlier segment)
    lastOffset         int64   the offset of its ABORT marker
    lastStableOffset   int64   the partition's LSO once the marker was written

seglog reads these files where Kafka left them; it does not write them (the
aborted transactions of its own segments are found from their control
batches, ``producer_state.py``).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from ..errors import CorruptIndexError
from . import fileio

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0
SUFFIX = ".txnindex"


@dataclass(frozen=True, order=True)
class AbortedTxn:
    """An aborted transaction: Kafka's ``AbortedTxn``."""

    first_offset: int
    last_offset: int  # the offset of its ABORT marker
    producer_id: int
    last_stable_offset: int = -1


def txn_index_path(log_path: str) -> str:
    """The transaction index beside a segment's ``.log``."""
    return log_path[: -len(".log")] + SUFFIX if log_path.endswith(".log") else log_path + SUFFIX


def read_txn_index(path: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file, in file order. An entry of another version,
    or one that ends before it begins, is corrupt; a partial entry at the end is left
    out (Kafka sizes the file by whole entries)."""
    handle = fileio.open_file(path, writable=False)
    try:
        data = handle.pread(handle.size(), 0)
    finally:
        handle.close()
    entries = []
    for position in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, producer_id, first, last, lso = _ENTRY.unpack_from(data, position)
        if version != VERSION:
            raise CorruptIndexError(f"transaction index entry of version {version}", file=path, position=position)
        if first > last:
            raise CorruptIndexError(
                f"aborted transaction of producer {producer_id} ends ({last}) before it begins ({first})",
                file=path,
                position=position,
            )
        entries.append(AbortedTxn(first, last, producer_id, lso))
    return entries


def exists(log_path: str) -> bool:
    return os.path.exists(txn_index_path(log_path))
