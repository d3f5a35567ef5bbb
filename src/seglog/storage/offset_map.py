"""The cleaner's map from record key to latest offset (Kafka's SkimpyOffsetMap).

Keys are never stored: a key stands for itself by its 128-bit hash (xxh3-128
with a seed drawn per map, where Kafka uses MD5), so an entry costs 24 bytes
whatever the key's size, and the whole map is one ``bytearray`` allocated up
front. Its layout, three arrays of ``slots`` words each::

    bytes [0, 8*slots)            lo      uint64  low 64 bits of the hash, bit 0 forced to 1
    bytes [8*slots, 16*slots)     hi      uint64  high 64 bits of the hash
    bytes [16*slots, 24*slots)    offset  int64   the latest offset put for the key

A slot whose ``lo`` is 0 is empty (bit 0 of a real ``lo`` is always 1).
Words are in native byte order: the map never leaves memory.

Open addressing. The first probe of a key is ``lo mod slots``; then up to 16
probes by double hashing with step ``1 + hi mod (slots - 1)`` (Kafka also
probes at positions read from the hash itself); then linear probing, which
reaches every slot. Nothing is ever deleted, so a probe sequence stops at the
first empty slot. The map accepts at most ``load_factor * slots`` keys
(``log.cleaner.io.buffer.load.factor``), which keeps probe sequences short and
always leaves an empty slot; a new key beyond that is refused, which is how
the cleaner learns that the dirty section needs more than one pass.

Two keys with the same 128-bit hash would be taken for one, as in Kafka; the
seed keeps anyone from choosing keys that collide.

``OffsetMarks`` is seglog's addition: while the map is built, two bits per
offset of the dirty section record which records lose (a later record has
their key, or they have none) and which are tombstones. The rewrite then
decides a dirty record by its bit instead of hashing its key again, and
copies a dirty batch with no bit set without even decoding it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import xxhash

ENTRY_SIZE = 24
_MASK64 = (1 << 64) - 1
_DOUBLE_HASH_PROBES = 16
_hash128 = xxhash.xxh3_128_intdigest


class OffsetMarks:
    """Two bits for each offset of [first, first + count): superseded, tombstone."""

    def __init__(self, first: int, count: int) -> None:
        self.first = first
        self.count = max(count, 0)
        self.superseded = bytearray((self.count + 7) // 8)
        self.tombstones = bytearray((self.count + 7) // 8)

    @property
    def memory(self) -> int:
        return 2 * len(self.superseded)

    def covers(self, first: int, last: int) -> bool:
        return self.first <= first and last < self.first + self.count

    def _any(self, bits: bytearray, first: int, last: int) -> bool:
        lo, hi = first - self.first, last - self.first
        chunk = int.from_bytes(bits[lo >> 3 : (hi >> 3) + 1], "little") >> (lo & 7)
        return chunk & ((1 << (hi - lo + 1)) - 1) != 0

    def any_superseded(self, first: int, last: int) -> bool:
        """Whether a record in [first, last] (covered) loses; so does ``any_tombstone``."""
        return self._any(self.superseded, first, last)

    def any_tombstone(self, first: int, last: int) -> bool:
        return self._any(self.tombstones, first, last)

    def superseded_bits(self, first: int, last: int) -> int:
        """The superseded bits of [first, last] (covered), bit 0 for ``first``."""
        lo, hi = first - self.first, last - self.first
        return int.from_bytes(self.superseded[lo >> 3 : (hi >> 3) + 1], "little") >> (lo & 7)


class OffsetMap:
    """A fixed-size key → offset map over ``memory`` bytes; see the module docstring."""

    def __init__(self, memory: int, load_factor: float = 0.9, *, seed: int | None = None) -> None:
        slots = memory // ENTRY_SIZE
        if slots < 2:
            raise ValueError(f"an offset map needs at least {2 * ENTRY_SIZE} bytes, not {memory}")
        self.slots = slots
        self.max_entries = max(1, min(int(slots * load_factor), slots - 1))
        self.seed = random.getrandbits(64) if seed is None else seed
        self._memory = bytearray(slots * ENTRY_SIZE)
        view = memoryview(self._memory)
        self._lo = view[: 8 * slots].cast("Q")
        self._hi = view[8 * slots : 16 * slots].cast("Q")
        self._offsets = view[16 * slots :].cast("q")
        self.entries = 0
        self.latest_offset = -1  # the latest offset put (or declared mapped)

    @property
    def memory(self) -> int:
        return len(self._memory)

    @property
    def utilization(self) -> float:
        return self.entries / self.slots

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def clear(self) -> None:
        self._memory[:] = bytes(len(self._memory))
        self.entries = 0
        self.latest_offset = -1

    def _slot(self, lo: int, hi: int) -> int:
        """The slot holding the hash (lo, hi), or the empty slot where it would go."""
        los, his, n = self._lo, self._hi, self.slots
        i = lo % n
        c = los[i]
        if c == 0 or (c == lo and his[i] == hi):
            return i
        step = 1 + hi % (n - 1)
        for _ in range(_DOUBLE_HASH_PROBES):
            i = (i + step) % n
            c = los[i]
            if c == 0 or (c == lo and his[i] == hi):
                return i
        for _ in range(n):
            i = i + 1 if i + 1 < n else 0
            c = los[i]
            if c == 0 or (c == lo and his[i] == hi):
                return i
        raise AssertionError("offset map has no empty slot")  # max_entries < slots prevents it

    def put(self, key: bytes, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (and nothing changed) if it is a new key and the map is full."""
        h = _hash128(key, self.seed)
        lo, hi = (h & _MASK64) | 1, h >> 64
        i = self._slot(lo, hi)
        if self._lo[i] == 0:
            if self.entries >= self.max_entries:
                return False
            self._lo[i], self._hi[i] = lo, hi
            self.entries += 1
        self._offsets[i] = offset
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The offset mapped to ``key``, or -1."""
        h = _hash128(key, self.seed)
        i = self._slot((h & _MASK64) | 1, h >> 64)
        return self._offsets[i] if self._lo[i] else -1

    def absorb(self, other: OffsetMap) -> None:
        """Take every entry of ``other``, a smaller map with the same seed (a map grows
        by rehashing into a larger one: the entries hold the whole hash)."""
        if other.seed != self.seed:
            raise ValueError("maps with different seeds hash keys differently")
        los, his, offsets = other._lo, other._hi, other._offsets
        for i in range(other.slots):
            lo = los[i]
            if lo:
                j = self._slot(lo, his[i])
                if not self._lo[j]:
                    self._lo[j], self._hi[j] = lo, his[i]
                    self.entries += 1
                self._offsets[j] = offsets[i]
        self.latest_offset = max(self.latest_offset, other.latest_offset)

    # --- whole batches: the cleaner's hot loops ----------------------------------------------
    # Both inline the hash and the first probe: a method call per record would cost as
    # much as the probe itself, and most probes end at the first slot.

    def put_records(self, records: Sequence[Any], start_offset: int, marks: OffsetMarks | None = None) -> int:
        """Put the key and offset of every record (``Record``-shaped: key at index 0,
        value at 1, offset at 4) with a key and an offset >= ``start_offset``, and mark
        the losers and tombstones in ``marks``. Returns -1, or the index of the first
        record whose key did not fit (the map is then full and ``latest_offset`` is the
        offset of the last record put)."""
        los, his, offsets = self._lo, self._hi, self._offsets
        n, seed, mask = self.slots, self.seed, _MASK64
        entries, limit, latest = self.entries, self.max_entries, self.latest_offset
        hash128 = _hash128
        if marks is None:
            marks = OffsetMarks(0, 0)
        superseded, tombstones, first, count = marks.superseded, marks.tombstones, marks.first, marks.count
        try:
            for index, record in enumerate(records):
                offset = record[4]
                if offset < start_offset:
                    continue
                key = record[0]
                if key is None:  # dropped by the cleaner: a compacted log's records need keys
                    rel = offset - first
                    if 0 <= rel < count:
                        superseded[rel >> 3] |= 1 << (rel & 7)
                    continue
                h = hash128(key, seed)
                lo = (h & mask) | 1
                hi = h >> 64
                i = lo % n
                c = los[i]
                if c != lo or his[i] != hi:
                    if c != 0:
                        i = self._slot(lo, hi)
                        c = los[i]
                    if c == 0:
                        if entries >= limit:
                            return index
                        los[i] = lo
                        his[i] = hi
                        entries += 1
                    else:
                        rel = offsets[i] - first  # the key's earlier record loses
                        if 0 <= rel < count:
                            superseded[rel >> 3] |= 1 << (rel & 7)
                else:
                    rel = offsets[i] - first
                    if 0 <= rel < count:
                        superseded[rel >> 3] |= 1 << (rel & 7)
                if record[1] is None:
                    rel = offset - first
                    if 0 <= rel < count:
                        tombstones[rel >> 3] |= 1 << (rel & 7)
                offsets[i] = offset
                latest = offset
            return -1
        finally:
            self.entries, self.latest_offset = entries, latest

    def offsets_of(self, records: Sequence[Any], upto: int) -> list[int]:
        """For each record, the offset mapped to its key; -1 for a record without a key,
        one not in the map, or one whose offset is above ``upto`` (not looked up)."""
        los, his, offsets = self._lo, self._hi, self._offsets
        n, seed, mask = self.slots, self.seed, _MASK64
        hash128 = _hash128
        out: list[int] = []
        append = out.append
        for record in records:
            key = record[0]
            if key is None or record[4] > upto:
                append(-1)
                continue
            h = hash128(key, seed)
            lo = (h & mask) | 1
            hi = h >> 64
            i = lo % n
            c = los[i]
            if c == lo and his[i] == hi:
                append(offsets[i])
            elif c == 0:
                append(-1)
            else:
                i = self._slot(lo, hi)
                append(offsets[i] if los[i] else -1)
        return out

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self.slots}, entries={self.entries}, latest_offset={self.latest_offset})"
