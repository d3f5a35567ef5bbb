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

A leader appends an entry when it appends an ABORT marker (``producer_state_manager``);
a truncation cuts the entries whose marker goes, and recovery after a crash adds the
markers its replay meets again, as Kafka's segment recovery does. A segment without
the file has its aborted transactions read from its control batches
(``producer_state.py``).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from ..errors import CorruptIndexError
from . import fileio
from .naming import TXN_INDEX_SUFFIX

_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34
VERSION = 0
SUFFIX = TXN_INDEX_SUFFIX


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


def encode_entry(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset)


def append_txn_index(log_path: str, entry: AbortedTxn) -> None:
    """Add an aborted transaction to the index of the segment whose ``.log`` is ``log_path``."""
    handle = fileio.open_file(txn_index_path(log_path), create=True, append=True)
    try:
        handle.write(encode_entry(entry))
    finally:
        handle.close()


def write_txn_index(log_path: str, entries: list[AbortedTxn]) -> None:
    """Replace the segment's index whole with ``entries`` (none: no file)."""
    path = txn_index_path(log_path)
    if entries:
        fileio.write_atomically(path, b"".join(map(encode_entry, entries)))
    else:
        fileio.unlink(path)


def truncate_txn_index(log_path: str, offset: int) -> None:
    """Drop the entries whose ABORT marker lies at ``offset`` or after (a truncated log)."""
    path = txn_index_path(log_path)
    if os.path.exists(path):
        entries = read_txn_index(path)
        kept = [e for e in entries if e.last_offset < offset]
        if len(kept) != len(entries):
            write_txn_index(log_path, kept)
