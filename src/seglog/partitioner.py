"""Kafka's default partitioner, so seglog and Kafka agree on a key's partition.

A keyed record goes to ``toPositive(murmur2(key)) % partitions`` (Kafka's
``Utils.murmur2`` with seed 0x9747b28c, and ``toPositive`` = ``& 0x7fffffff``);
a record without a key goes to the "sticky" partition, kept for a whole batch
and changed when a batch is done (KIP-480), so keyless records fill batches.

``partitions_for_keys`` is the same rule over a whole Arrow column of keys, in C
(``_partitioner.c``, beside this module), for the Spark sink.
"""

from __future__ import annotations

import random

from ._partitioner import partitions_for_keys

__all__ = ["StickyPartitioner", "murmur2", "partition_for_key", "partitions_for_keys"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as a signed 32-bit int, as Java computes it."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length & ~3
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Chooses partitions as Kafka's default partitioner does."""

    def __init__(self, partitions: int, rng: random.Random | None = None) -> None:
        if partitions < 1:
            raise ValueError("a topic has at least one partition")
        self.partitions = partitions
        self._rng = rng or random.Random()
        self._sticky = self._rng.randrange(partitions)

    def partition(self, key: bytes | None) -> int:
        if key is not None:
            return partition_for_key(key, self.partitions)
        return self._sticky

    def batch_done(self) -> None:
        """A batch was sent: keyless records move to another partition."""
        if self.partitions > 1:
            self._sticky = (self._sticky + 1 + self._rng.randrange(self.partitions - 1)) % self.partitions
