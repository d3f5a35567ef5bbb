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

``lastStableOffset`` is Kafka's ``ProducerStateManager.lastStableOffset(completedTxn)``:
the first offset of the earliest transaction of another producer still open when the
marker was written, else the marker's offset + 1. It is what lets a search stop: an
entry whose LSO reaches a fetch's upper bound says that every transaction beginning
below that bound had its marker written by then, so its entry lies at or before this
one (``TransactionIndex.collect_aborted_txns``, Kafka's ``TxnIndexSearchResult``).

Who writes it (``TransactionIndex``, one per ``LogSegment``): the partition's producer
state when an append (a leader's, a follower's, the coordinator's markers) ends an
aborted transaction (``producer_state_manager.on_append``); recovery after a crash, for
the markers its replay meets again; truncation, which cuts the entries whose marker
goes; the cleaner, for the cleaned segment of a group. A segment with no aborted
transaction has no file (Kafka creates it on the first entry). The file is appended
to in place; the owner keeps its entries in memory (readers of the log never lock), a
read-only reader in another process reads the file each time.
"""

from __future__ import annotations

import bisect
import errno
import os
import struct
import threading
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import CorruptIndexError, KafkaStorageError
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


class TxnIndexSearchResult(NamedTuple):
    """Kafka's: the aborted transactions of one index that overlap a range, and whether
    the search is complete (no later segment's index can hold another)."""

    aborted_transactions: list[AbortedTxn]
    is_complete: bool


def txn_index_path(log_path: str) -> str:
    """The transaction index beside a segment's ``.log``."""
    return log_path[: -len(".log")] + SUFFIX if log_path.endswith(".log") else log_path + SUFFIX


def decode(data: bytes, path: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes, in file order. An entry of another
    version, or one that ends before it begins, is corrupt; a partial entry at the end is
    left out (Kafka sizes the file by whole entries)."""
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


def read_txn_index(path: str) -> list[AbortedTxn]:
    """The entries of the ``.txnindex`` file at ``path``, in file order (see ``decode``)."""
    handle = fileio.open_file(path, writable=False)
    try:
        data = handle.pread(handle.size(), 0)
    finally:
        handle.close()
    return decode(data, path)


def encode_entry(entry: AbortedTxn) -> bytes:
    return _ENTRY.pack(VERSION, entry.producer_id, entry.first_offset, entry.last_offset, entry.last_stable_offset)


class TransactionIndex:
    """A segment's ``.txnindex`` (Kafka's ``TransactionIndex``).

    The owner of the log (``read_only`` False) is the file's only writer: its entries
    are read once and kept, every change made here to both. Readers take the list
    without a lock (appends only add to it; a truncation or a rewrite replaces it); the
    writers (the log's lock held) and the first load take ``_lock``, so that a load
    racing an append cannot keep the file as it was before the append. A read-only
    reader's index reads the file on every call: its owner in another process changes it."""

    def __init__(self, path: str, start_offset: int, *, read_only: bool = False) -> None:
        self.path = path
        self.start_offset = start_offset
        self.read_only = read_only
        # the owner's entries and the running maximum of their last stable offsets (a search
        # starting past the first entries still stops where Kafka's, which reads them all,
        # would), in one attribute: readers take both at once
        self._state: tuple[list[AbortedTxn], list[int]] | None = None
        self._lock = threading.Lock()

    # --- reading -----------------------------------------------------------------------------

    def _read(self) -> list[AbortedTxn]:
        try:
            return read_txn_index(self.path)
        except KafkaStorageError as e:
            if getattr(e, "errno", None) == errno.ENOENT:
                return []  # no aborted transaction: Kafka creates the file with its first entry
            raise

    def _loaded(self) -> tuple[list[AbortedTxn], list[int]]:
        """The owner's entries and their running LSO maximum, read from the file on first
        use (under the lock)."""
        state = self._state
        if state is None:
            with self._lock:
                state = self._load_locked()
        return state

    def _load_locked(self) -> tuple[list[AbortedTxn], list[int]]:
        if self._state is None:
            entries = self._read()
            self._state = (entries, _running_max(entries))
        return self._state

    def _replace(self, entries: list[AbortedTxn]) -> None:
        self._state = (entries, _running_max(entries))

    def entries(self) -> list[AbortedTxn]:
        """Every entry, in marker order (Kafka's ``allAbortedTxns``). Not to be changed."""
        if self.read_only:
            return self._read()
        return self._loaded()[0]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Kafka's ``collectAbortedTxns``: the entries of transactions that overlap
        [``fetch_offset``, ``upper_bound_offset``): marker at or after the fetch offset,
        first offset below the bound. Complete once an entry's last stable offset reaches
        the bound (see the module's docstring); entries are in marker order, so those whose
        marker lies before the fetch offset are stepped over by bisection."""
        if self.read_only:
            entries = self._read()
            max_lso = _running_max(entries)
        else:
            entries, max_lso = self._loaded()
        return _search(entries, max_lso, fetch_offset, upper_bound_offset)

    # --- writing (the owner, under the log's lock) ------------------------------------------

    def append(self, entry: AbortedTxn) -> None:
        """Add an aborted transaction, its marker after every entry's (Kafka's check)."""
        with self._lock:
            entries, max_lso = self._load_locked()
            if entries and entries[-1].last_offset >= entry.last_offset:
                raise CorruptIndexError(
                    f"the last offset of an appended transaction must increase: {entry.last_offset} "
                    f"is not greater than {entries[-1].last_offset}",
                    file=self.path,
                )
            whole = len(entries) * ENTRY_SIZE
            handle = fileio.open_file(self.path, create=True, append=True)
            try:
                if handle.size() != whole:
                    handle.truncate(whole)  # a partial entry a crash left: the next one must start on a whole one
                try:
                    handle.write(encode_entry(entry))
                except KafkaStorageError:
                    handle.truncate(whole)  # no partial entry left (a full disk)
                    raise
            finally:
                handle.close()
            max_lso.append(max(entry.last_stable_offset, max_lso[-1] if max_lso else -1))
            entries.append(entry)  # last: a reader counts the entries both lists hold

    def write(self, entries: list[AbortedTxn]) -> None:
        """Replace the index whole with ``entries`` (none: no file), crash-safely."""
        with self._lock:
            if entries:
                fileio.write_atomically(self.path, b"".join(map(encode_entry, entries)))
            else:
                fileio.unlink(self.path)
            self._replace(list(entries))

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose ABORT marker lies at ``offset`` or after (Kafka's
        ``truncateTo``); the file goes when none is left."""
        with self._lock:
            entries = self._load_locked()[0]
            kept = [e for e in entries if e.last_offset < offset]
            if len(kept) == len(entries):
                return
            if kept:
                handle = fileio.open_file(self.path)
                try:
                    handle.truncate(len(kept) * ENTRY_SIZE)
                finally:
                    handle.close()
            else:
                fileio.unlink(self.path)
            self._replace(kept)

    def flush(self) -> None:
        """fsync the file, if there is one (a segment's flush: the index is as durable as
        the markers it holds)."""
        if self.read_only or not self._loaded()[0]:
            return
        handle = fileio.open_file(self.path)
        try:
            handle.fsync()
        finally:
            handle.close()

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path!r})"


def search_aborted_txns(entries: list[AbortedTxn], fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
    """``TransactionIndex.collect_aborted_txns`` over entries in marker order that are held
    elsewhere (an index made again in memory)."""
    return _search(entries, _running_max(entries), fetch_offset, upper_bound_offset)


def _search(
    entries: list[AbortedTxn], max_lso: list[int], fetch_offset: int, upper_bound_offset: int
) -> TxnIndexSearchResult:
    n = min(len(entries), len(max_lso))  # (an append under way adds to both, the running maximum first)
    start = bisect.bisect_left(entries, fetch_offset, 0, n, key=_last_offset)
    if start and max_lso[start - 1] >= upper_bound_offset:
        return TxnIndexSearchResult([], True)  # an entry before the range ends the search
    found = []
    for i in range(start, n):
        entry = entries[i]
        if entry.first_offset < upper_bound_offset:
            found.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return TxnIndexSearchResult(found, True)
    return TxnIndexSearchResult(found, False)


def _last_offset(entry: AbortedTxn) -> int:
    return entry.last_offset


def _running_max(entries: list[AbortedTxn]) -> list[int]:
    out, best = [], -1
    for entry in entries:
        best = max(best, entry.last_stable_offset)
        out.append(best)
    return out
