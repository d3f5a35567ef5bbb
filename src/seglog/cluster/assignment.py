"""Which brokers hold the replicas of each partition: Kafka's ``AdminUtils.assignReplicasToBrokers``.

Rack-unaware (no broker has ``broker.rack``), with n brokers sorted by id::

    start, shift  random in [0, n) unless fixed (a fixed start is also the shift, as in Kafka)
    for each partition p, from start_partition_id:
        if p > 0 and p % n == 0: shift += 1          # a new round: followers move one further
        first = (p + start) % n                      # leaders round-robin
        replica j+1 = (first + 1 + (shift + j) % (n - 1)) % n

Rack-aware (every broker has a rack): the same round-robin over a broker list
alternated by rack (racks sorted, brokers of each rack sorted: rack1's first,
rack2's first, ..., rack1's second, ...), with the follower shift multiplied by
the number of racks, and a candidate follower skipped while its rack already
holds a replica and some rack holds none, or it holds one already and some
broker holds none. So each partition's replicas land on distinct racks when
RF <= racks. Some brokers with a rack and some without is an error.

Adding partitions continues the same sequence: start at the broker that leads
partition 0, partition numbers from the current count.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError


@dataclass(frozen=True)
class BrokerMetadata:
    id: int
    rack: str | None = None


def assign_replicas_to_brokers(
    brokers: Iterable[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    replica_shift: int | None = None,
    start_partition_id: int = 0,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Partition id -> replicas (the first is the preferred leader), for ``partitions`` partitions."""
    metadata = sorted(brokers, key=lambda b: b.id)
    _validate(metadata, partitions, replication_factor, start_index, replica_shift, start_partition_id)
    rng = rng or random.Random()
    n = len(metadata)
    start = start_index if start_index is not None else rng.randrange(n)
    # Kafka draws the shift too, or uses the fixed start index as the shift
    shift = replica_shift if replica_shift is not None else start if start_index is not None else rng.randrange(n)
    if all(b.rack is None for b in metadata):
        return _rack_unaware(partitions, replication_factor, [b.id for b in metadata], start, shift, start_partition_id)
    if any(b.rack is None for b in metadata):
        missing = [b.id for b in metadata if b.rack is None]
        raise InvalidReplicaAssignmentError(
            f"Not all brokers have rack information for replica rack aware assignment (brokers without broker.rack: "
            f"{', '.join(map(str, missing))})"
        )
    racks = {b.id: b.rack for b in metadata if b.rack is not None}
    return _rack_aware(partitions, replication_factor, racks, start, shift, start_partition_id)


def new_partitions_assignment(
    existing: Mapping[int, Sequence[int]],
    brokers: Iterable[BrokerMetadata],
    partitions: int,
    *,
    topic: str = "",
) -> dict[int, tuple[int, ...]]:
    """Replicas of the partitions that grow a topic to ``partitions`` (``createNewPartitionsAssignment``)."""
    name = f"topic '{topic}'" if topic else "the topic"
    if 0 not in existing or not existing[0]:
        raise InvalidReplicaAssignmentError(f"unexpected replica assignment of {name}: partition 0 is missing")
    if partitions <= len(existing):
        raise InvalidPartitionsError(
            f"The number of partitions for a topic can only be increased. {name[0].upper()}{name[1:]} currently has "
            f"{len(existing)} partitions, {partitions} would not be an increase."
        )
    metadata = sorted(brokers, key=lambda b: b.id)
    leader0 = existing[0][0]
    # the new partitions go on where partition 0's leader stands in the broker list
    start = next((i for i, b in enumerate(metadata) if b.id >= leader0), -1)
    return assign_replicas_to_brokers(
        metadata,
        partitions - len(existing),
        len(existing[0]),
        start_index=max(0, start),
        start_partition_id=len(existing),
    )


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers alternated by rack: racks sorted, each rack's brokers in id order, one rack after another."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    columns = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    return [column[i] for i in range(max(map(len, columns), default=0)) for column in columns if i < len(column)]


def _validate(
    brokers: Sequence[BrokerMetadata],
    partitions: int,
    replication_factor: int,
    start_index: int | None,
    replica_shift: int | None,
    start_partition_id: int,
) -> None:
    if partitions <= 0:
        raise InvalidPartitionsError(f"Number of partitions must be larger than 0 (got {partitions}).")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError(f"Replication factor must be larger than 0 (got {replication_factor}).")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    ids = [b.id for b in brokers]
    if len(set(ids)) != len(ids):
        raise InvalidReplicaAssignmentError(f"broker ids listed more than once: {ids}")
    for name, value in (("start index", start_index), ("replica shift", replica_shift)):
        if value is not None and value < 0:
            raise InvalidReplicaAssignmentError(f"{name} must not be negative (got {value})")
    if start_partition_id < 0:
        raise InvalidPartitionsError(f"start partition id must not be negative (got {start_partition_id})")


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_unaware(
    partitions: int, replication_factor: int, brokers: list[int], start: int, shift: int, first_partition: int
) -> dict[int, tuple[int, ...]]:
    n = len(brokers)
    out = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        followers = (brokers[_replica_index(first, shift, j, n)] for j in range(replication_factor - 1))
        out[p] = (brokers[first], *followers)
    return out


def _rack_aware(
    partitions: int, replication_factor: int, racks: Mapping[int, str], start: int, shift: int, first_partition: int
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated_brokers(racks)
    n, n_racks = len(arranged), len(set(racks.values()))
    out = {}
    for p in range(first_partition, first_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {racks[leader]}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * n_racks, k, n)]
                rack = racks[broker]
                k += 1
                if (rack not in racks_with_replicas or len(racks_with_replicas) == n_racks) and (
                    broker not in replicas or len(replicas) == n
                ):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    break
        out[p] = tuple(replicas)
    return out
