"""Partition leader election strategies: pure functions of the assignment, the ISR and who is alive.

Kafka's ``PartitionLeaderElectionAlgorithms`` choose a leader; its ``Election``
turns the choice into the partition's next ``LeaderAndIsr`` (the leader epoch
always goes up by one):

    strategy             leader                                                  new ISR
    offline              first assigned replica alive and in the ISR;            the ISR's live members
                         if none and unclean election is allowed, the first      [leader] (unclean: the partition
                         live assigned replica                                    is marked RECOVERING)
    reassignment         first target replica alive and in the ISR               unchanged
    preferred            the first assigned replica, if alive and in the ISR     unchanged
    controlled shutdown  first assigned replica alive, in the ISR and not        the ISR less the brokers
                         shutting down                                           shutting down

"Alive" is the caller's: live brokers (for controlled shutdown, live brokers
including those shutting down) whose log dir holding the replica is online.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..errors import NoReplicaOnlineError
from .znodes import LeaderAndIsr, ReplicaAssignment


def offline_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], unclean_enabled: bool
) -> int | None:
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_enabled:
        return next((r for r in assignment if r in live_replicas), None)
    return None


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    return next((r for r in reassignment if r in live_replicas and r in isr), None)


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int]
) -> int | None:
    if assignment and assignment[0] in live_replicas and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: Collection[int], shutting_down: Collection[int]
) -> int | None:
    return next((r for r in assignment if r in live_replicas and r in isr and r not in shutting_down), None)


@dataclass(frozen=True)
class ElectionResult:
    """The partition's next leader and ISR (None: no replica may lead), and the replicas the election saw."""

    leader_and_isr: LeaderAndIsr | None
    live_replicas: tuple[int, ...]


def leader_for_offline(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_brokers: Collection[int],
    unclean_enabled: bool,
    leader_recovery_supported: bool = True,
) -> ElectionResult:
    """Elect a leader for a partition whose leader went away (or a new partition being brought online)."""
    live = tuple(r for r in assignment if r in live_brokers)
    leader = offline_partition_leader_election(assignment, current.isr, live, unclean_enabled)
    if leader is None:
        return ElectionResult(None, live)
    if leader in current.isr:
        return ElectionResult(current.new_leader_and_isr(leader, [r for r in current.isr if r in live_brokers]), live)
    # an unclean election: the new leader may lack acknowledged records
    if leader_recovery_supported:
        return ElectionResult(current.new_recovering_leader_and_isr(leader, [leader]), live)
    return ElectionResult(current.new_leader_and_isr(leader, [leader]), live)


def leader_for_reassign(
    assignment: ReplicaAssignment, current: LeaderAndIsr, live_brokers: Collection[int]
) -> ElectionResult:
    """Move leadership into the reassignment's target replicas."""
    targets = assignment.target_replicas
    live = tuple(r for r in targets if r in live_brokers)
    leader = reassign_partition_leader_election(targets, current.isr, live)
    return ElectionResult(None if leader is None else current.new_leader(leader), targets)


def leader_for_preferred_replica(
    assignment: Sequence[int], current: LeaderAndIsr, live_brokers: Collection[int]
) -> ElectionResult:
    """Give leadership back to the preferred (first assigned) replica."""
    live = tuple(r for r in assignment if r in live_brokers)
    leader = preferred_replica_partition_leader_election(assignment, current.isr, live)
    return ElectionResult(None if leader is None else current.new_leader(leader), tuple(assignment))


def leader_for_controlled_shutdown(
    assignment: Sequence[int],
    current: LeaderAndIsr,
    live_or_shutting_down: Collection[int],
    shutting_down: Collection[int],
) -> ElectionResult:
    """Move leadership off brokers shutting down; they leave the ISR."""
    live = tuple(r for r in assignment if r in live_or_shutting_down)
    leader = controlled_shutdown_partition_leader_election(assignment, current.isr, live, shutting_down)
    if leader is None:
        return ElectionResult(None, live)
    return ElectionResult(current.new_leader_and_isr(leader, [r for r in current.isr if r not in shutting_down]), live)


def initial_leader_and_isr(partition: object, assignment: Sequence[int], live_brokers: Collection[int]) -> LeaderAndIsr:
    """A new partition's first state: the first live assigned replica leads, the live ones form the ISR."""
    live = [r for r in assignment if r in live_brokers]
    if not live:
        raise NoReplicaOnlineError(
            f"cannot bring partition {partition} online: no assigned replica is alive "
            f"(assigned [{','.join(map(str, assignment))}], live brokers [{','.join(map(str, sorted(live_brokers)))}])"
        )
    return LeaderAndIsr(live[0], 0, tuple(live))
