"""Which partition of ``__consumer_offsets`` or ``__transaction_state`` holds a group or a
transactional id: Kafka's ``partitionFor``, ``Utils.abs(id.hashCode) % partitions``.

The hash is Java's ``String.hashCode``: over the string's UTF-16 code units,
``h = 31 * h + unit`` in 32-bit two's complement. ``Utils.abs`` maps
``Integer.MIN_VALUE`` to 0 (not to itself, as ``Math.abs`` would), so every id lands
where a Kafka broker puts it and a Kafka-written partition is read by the right
coordinator.

The hash is a Python loop over the id's code units, asked for on every group and
transaction request: it is cached per id (a broker sees few distinct ids again and
again; a synchronous OffsetCommit spent 12 % of its broker time hashing without), and so
is the partition, per id and partition count (a cached call runs no Python frame: an
offset commit asks three times).
"""

from __future__ import annotations

import functools

from ..errors import InvalidConfigurationError

_INT_MIN = -(2**31)
_CACHED_IDS = 65_536  # at most ~10 MiB of ids and their hashes


@functools.lru_cache(maxsize=_CACHED_IDS)
def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` of ``s`` (a signed 32-bit int)."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@functools.lru_cache(maxsize=_CACHED_IDS)
def partition_for(key: str, num_partitions: int) -> int:
    """The partition of a group id (``offsets.topic.num.partitions``) or a transactional id
    (``transaction.state.log.num.partitions``)."""
    if num_partitions < 1:
        raise InvalidConfigurationError(f"a coordinator topic needs at least 1 partition, not {num_partitions}")
    h = java_string_hash(key)
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
