"""The cleaner's map from record key to latest offset (Kafka's SkimpyOffsetMap).

Keys are never stored: a key stands for itself by its 128-bit hash (SipHash-2-4
with a 128-bit output, keyed by a seed drawn per map, where Kafka uses MD5), so
an entry costs 24 bytes whatever the key's size, and the whole map is one
``bytearray`` allocated up front: ``slots`` entries of three words each::

    entry i at byte 24*i
      +0   lo      uint64  low 64 bits of the hash, bit 0 forced to 1
      +8   hi      uint64  high 64 bits of the hash
      +16  offset  int64   the latest offset put for the key

A slot whose ``lo`` is 0 is empty (bit 0 of a real ``lo`` is always 1). Words
are in native byte order: the map never leaves memory. The three words sit
together so that a probe touches one cache line, or two.

Open addressing. The first probe of a key is ``hi * slots >> 64`` (``hi``
scaled to the table); the second the slot after it, in the same cache line or
the next, which C prefetches with the first (a probe elsewhere waits for
memory: the map is larger than the caches); then up to 16 probes by double
hashing from the first with step ``1 + lo mod (slots - 1)``; then linear
probing, which reaches every slot.
Nothing is ever deleted, so a probe sequence stops at the first empty slot.
The map accepts at most ``load_factor * slots`` keys
(``log.cleaner.io.buffer.load.factor``), which keeps probe sequences short and
always leaves an empty slot; a new key beyond that is refused, which is how
the cleaner learns that the dirty section needs more than one pass. A lower
``limit`` makes the map refuse keys earlier: the cleaner then moves them to a
larger map (the entries hold whole hashes, so no key is needed to rehash).

Two keys with the same 128-bit hash would be taken for one, as in Kafka, and
the older key's latest record lost; SipHash is a keyed pseudorandom function,
so without the seed nobody can choose keys that collide.

The loops over records are C (``storage/_compact.c``): hashing, probing and
marking a whole batch per call, or a run of batches.

``OffsetMarks`` is seglog's addition: while the map is built, one bit per
offset of the dirty section records which records lose (a later record has
their key, or they have none). The rewrite then decides a dirty record by its
bit instead of hashing its key again.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from . import _compact

ENTRY_SIZE = 24
_MASK64 = (1 << 64) - 1


class OffsetMarks:
    """One bit for each offset of [first, first + count): the record loses."""

    def __init__(self, first: int, count: int) -> None:
        self.first = first
        self.count = max(count, 0)
        self.superseded = bytearray((self.count + 7) // 8)

    @property
    def memory(self) -> int:
        return len(self.superseded)

    def is_superseded(self, offset: int) -> bool:
        rel = offset - self.first
        return 0 <= rel < self.count and bool(self.superseded[rel >> 3] >> (rel & 7) & 1)

    def mark(self, offset: int) -> None:
        rel = offset - self.first
        if 0 <= rel < self.count:
            self.superseded[rel >> 3] |= 1 << (rel & 7)


_NO_MARKS = OffsetMarks(0, 0)


class OffsetMap:
    """A fixed-size key → offset map over ``memory`` bytes; see the module docstring."""

    def __init__(self, memory: int, load_factor: float = 0.9, *, seed: int | None = None) -> None:
        slots = memory // ENTRY_SIZE
        if slots < 2:
            raise ValueError(f"an offset map needs at least {2 * ENTRY_SIZE} bytes, not {memory}")
        self.slots = slots
        self.max_entries = max(1, min(int(slots * load_factor), slots - 1))
        self.limit = self.max_entries  # keys taken before a put says full (lower: the owner grows the map)
        self.seed = random.getrandbits(128) if seed is None else seed
        self.k0, self.k1 = self.seed & _MASK64, (self.seed >> 64) & _MASK64
        self.table = bytearray(slots * ENTRY_SIZE)
        self.entries = 0
        self.latest_offset = -1  # the latest offset put (or declared mapped)

    @property
    def memory(self) -> int:
        return len(self.table)

    @property
    def utilization(self) -> float:
        return self.entries / self.slots

    @property
    def room(self) -> int:
        """How many new keys the map still accepts (up to ``limit``)."""
        return max(0, self.limit - self.entries)

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def clear(self) -> None:
        _compact.map_clear(self.table)
        self.entries = 0
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (and nothing changed) if it is a new key and the map is full."""
        added = _compact.map_put(self.table, self.k0, self.k1, key, offset, self.room)
        if added < 0:
            return False
        self.entries += added
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The offset mapped to ``key``, or -1."""
        return _compact.map_get(self.table, self.k0, self.k1, key)

    def absorb(self, other: OffsetMap) -> None:
        """Take every entry of ``other``, a smaller map with the same seed (a map grows
        by rehashing into a larger one: the entries hold the whole hash)."""
        if other.seed != self.seed:
            raise ValueError("maps with different seeds hash keys differently")
        if other.entries > self.max_entries - self.entries:
            raise ValueError("the map has no room for the entries absorbed")
        self.entries += _compact.map_absorb(self.table, other.table)
        self.latest_offset = max(self.latest_offset, other.latest_offset)

    # --- whole batches: the cleaner's hot loops, in C ------------------------------------------

    def put_batch(
        self, batch: Any, section: Any, start_offset: int, marks: OffsetMarks | None = None, skip: int = 0,
        position: int = 0,
    ) -> int:  # fmt: skip
        """Put the keys of a v2 batch's records (from index ``skip``) whose offset is >=
        ``start_offset``, marking in ``marks`` the records that lose; ``section`` holds
        the records decompressed (None: the batch is not compressed). Returns -1, or the
        index of the first record whose key did not fit (the map is then full and
        ``latest_offset`` is the offset of the last record put)."""
        marks = marks or _NO_MARKS
        added, full_at, self.latest_offset = _compact.map_batch(
            batch, section, table=self.table, k0=self.k0, k1=self.k1, room=self.room, start_offset=start_offset,
            marks=marks.superseded, marks_first=marks.first, marks_count=marks.count, skip=skip,
            latest=self.latest_offset, position=position,
        )  # fmt: skip
        self.entries += added
        return full_at

    def put_batches(
        self,
        view: memoryview,
        position: int,
        origin: int,
        start_offset: int,
        marks: OffsetMarks | None = None,
        section: bytearray | None = None,
    ) -> tuple[int, bool, int, int]:
        """``put_batch`` over the whole batches of ``view`` from ``position`` for as long
        as they are plain data batches (non-transactional, non-control v2; uncompressed, or
        lz4 as the Java client writes it when ``section`` is given to decompress into)
        that fit the room left. Returns (where it stopped, whether a batch there needs
        Python, records mapped, bytes mapped); ``latest_offset`` also takes the last
        offset of each batch mapped."""
        marks = marks or _NO_MARKS
        position, stop, added, self.latest_offset, records, size = _compact.map_batches(
            view, position, origin, table=self.table, k0=self.k0, k1=self.k1, room=self.room,
            start_offset=start_offset, marks=marks.superseded, marks_first=marks.first, marks_count=marks.count,
            latest=self.latest_offset, section=section,
        )  # fmt: skip
        self.entries += added
        return position, bool(stop), records, size

    def put_records(self, records: Sequence[Any], start_offset: int, marks: OffsetMarks | None = None) -> int:
        """``put_batch`` for decoded records (``Record``-shaped: key at index 0, offset
        at 4): legacy messages."""
        marks = marks or _NO_MARKS
        for index, record in enumerate(records):
            offset, key = record[4], record[0]
            if offset < start_offset:
                continue
            if key is None:  # dropped by the cleaner: a compacted log's records need keys
                marks.mark(offset)
                continue
            previous = self.get(key)
            if not self.put(key, offset):
                return index
            if previous >= 0:
                marks.mark(previous)  # the key's earlier record loses
        return -1

    def offsets_of(self, records: Sequence[Any], upto: int) -> list[int]:
        """For each record, the offset mapped to its key; -1 for a record without a key,
        one not in the map, or one whose offset is above ``upto`` (not looked up)."""
        return [-1 if r[0] is None or r[4] > upto else self.get(r[0]) for r in records]

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self.slots}, entries={self.entries}, latest_offset={self.latest_offset})"
