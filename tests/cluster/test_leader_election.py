"""Leader election strategies against Kafka's rules (PartitionLeaderElectionAlgorithms and Election)."""

from __future__ import annotations

import pytest

from seglog.cluster.leader_election import (
    controlled_shutdown_partition_leader_election,
    initial_leader_and_isr,
    leader_for_controlled_shutdown,
    leader_for_offline,
    leader_for_preferred_replica,
    leader_for_reassign,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from seglog.cluster.znodes import LeaderAndIsr, ReplicaAssignment
from seglog.errors import NoReplicaOnlineError

# --- the algorithms -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "leader"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, 1),
        ([1, 2, 3], [2, 3], {1, 2, 3}, False, 2),  # 1 is alive but out of the ISR
        ([1, 2, 3], [1, 3], {2, 3}, False, 3),  # assignment order, not ISR order
        ([3, 1, 2], [1, 2, 3], {1, 2, 3}, False, 3),
        ([1, 2, 3], [1], {2, 3}, False, None),  # the only ISR member is dead: no clean leader
        ([1, 2, 3], [1], {2, 3}, True, 2),  # unclean: the first live assigned replica
        ([1, 2, 3], [1], {3}, True, 3),
        ([1, 2, 3], [1], set(), True, None),
        ([1, 2, 3], [4], {4}, True, None),  # a live ISR member that is not assigned never leads
        ([], [], {1}, True, None),
    ],
)
def test_offline(assignment, isr, live, unclean, leader) -> None:
    assert offline_partition_leader_election(assignment, isr, live, unclean) == leader


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "leader"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, 1),
        ([1, 2, 3], [2, 3], {1, 2, 3}, None),  # preferred not in ISR: no other replica is taken
        ([1, 2, 3], [1, 2, 3], {2, 3}, None),  # preferred dead
        ([0, 1], [0, 1], {0, 1}, 0),  # broker 0 is a broker like the others
        ([], [], set(), None),
    ],
)
def test_preferred(assignment, isr, live, leader) -> None:
    assert preferred_replica_partition_leader_election(assignment, isr, live) == leader


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "leader"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, 2),
        ([1, 2, 3], [1, 3], {1, 2, 3}, {1}, 3),  # 2 is out of the ISR
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2, 3}, None),
        ([1, 2, 3], [1, 2], {1, 2, 3}, {1}, 2),
        ([1, 2, 3], [1, 2, 3], {1, 3}, {1}, 3),  # 2 is dead
    ],
)
def test_controlled_shutdown(assignment, isr, live, shutting_down, leader) -> None:
    assert controlled_shutdown_partition_leader_election(assignment, isr, live, shutting_down) == leader


@pytest.mark.parametrize(
    ("targets", "isr", "live", "leader"),
    [
        ([4, 5, 6], [1, 2, 3, 4, 5, 6], {1, 2, 3, 4, 5, 6}, 4),
        ([4, 5, 6], [1, 2, 5, 6], {1, 2, 4, 5, 6}, 5),  # 4 has not caught up yet
        ([4, 5, 6], [1, 2, 3], {1, 2, 3, 4, 5, 6}, None),  # no target in the ISR
        ([4, 5, 6], [4, 5, 6], {6}, 6),
    ],
)
def test_reassignment(targets, isr, live, leader) -> None:
    assert reassign_partition_leader_election(targets, isr, live) == leader


# --- the next LeaderAndIsr (Election.scala) ---------------------------------------------


def test_offline_result_keeps_live_isr_and_bumps_the_epoch() -> None:
    current = LeaderAndIsr(1, 7, (1, 2, 3), partition_epoch=12)
    result = leader_for_offline([1, 2, 3], current, live_brokers={2, 3}, unclean_enabled=False)
    assert result.leader_and_isr == LeaderAndIsr(2, 8, (2, 3), 0, 12)
    assert result.live_replicas == (2, 3)


def test_offline_result_unclean_marks_recovering() -> None:
    current = LeaderAndIsr(1, 7, (1,))
    result = leader_for_offline([1, 2, 3], current, live_brokers={3}, unclean_enabled=True)
    assert result.leader_and_isr == LeaderAndIsr(3, 8, (3,), leader_recovery_state=1)
    old_style = leader_for_offline([1, 2, 3], current, {3}, True, leader_recovery_supported=False)
    assert old_style.leader_and_isr == LeaderAndIsr(3, 8, (3,), leader_recovery_state=0)


def test_offline_result_without_leader() -> None:
    result = leader_for_offline([1, 2], LeaderAndIsr(1, 3, (1,)), live_brokers={2}, unclean_enabled=False)
    assert result.leader_and_isr is None
    assert result.live_replicas == (2,)


def test_preferred_result_keeps_the_isr() -> None:
    current = LeaderAndIsr(2, 4, (2, 1, 3))
    assert leader_for_preferred_replica([1, 2, 3], current, {1, 2, 3}).leader_and_isr == LeaderAndIsr(1, 5, (2, 1, 3))
    assert leader_for_preferred_replica([1, 2, 3], current, {2, 3}).leader_and_isr is None


def test_controlled_shutdown_result_drops_brokers_shutting_down_from_the_isr() -> None:
    current = LeaderAndIsr(1, 4, (1, 2, 3))
    result = leader_for_controlled_shutdown([1, 2, 3], current, {1, 2, 3}, shutting_down={1})
    assert result.leader_and_isr == LeaderAndIsr(2, 5, (2, 3))


def test_reassign_result_elects_among_the_targets() -> None:
    # moving from [1, 2, 3] to [4, 2, 3]: replicas hold both sets while 1 is being removed
    assignment = ReplicaAssignment((4, 2, 3, 1), adding_replicas=(4,), removing_replicas=(1,))
    current = LeaderAndIsr(1, 9, (1, 2, 3, 4))
    result = leader_for_reassign(assignment, current, {1, 2, 3, 4})
    assert result.leader_and_isr == LeaderAndIsr(4, 10, (1, 2, 3, 4))
    assert result.live_replicas == (4, 2, 3)


def test_initial_leader_and_isr() -> None:
    assert initial_leader_and_isr("t-0", [3, 1, 2], {1, 2}) == LeaderAndIsr(1, 0, (1, 2))
    with pytest.raises(NoReplicaOnlineError, match=r"partition t-0 online: no assigned replica is alive") as info:
        initial_leader_and_isr("t-0", [3, 1], {2})
    assert info.value.error_code == 5
