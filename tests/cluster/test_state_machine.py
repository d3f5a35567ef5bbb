"""The controller's state tables: every (from, to) pair checked against Kafka's legal moves."""

from __future__ import annotations

import itertools

import pytest

from seglog.cluster.state_machine import (
    PartitionState,
    ReplicaState,
    check_partition_transition,
    check_replica_transition,
)
from seglog.common import TopicPartition
from seglog.errors import IllegalStateChangeError, SeglogError

# Kafka's validPreviousStates, written out as the moves they allow (from -> to)
LEGAL_PARTITION_MOVES = {
    ("NonExistentPartition", "NewPartition"),
    ("NewPartition", "OnlinePartition"),
    ("OnlinePartition", "OnlinePartition"),
    ("OfflinePartition", "OnlinePartition"),
    ("NewPartition", "OfflinePartition"),
    ("OnlinePartition", "OfflinePartition"),
    ("OfflinePartition", "OfflinePartition"),
    ("OfflinePartition", "NonExistentPartition"),
}
LEGAL_REPLICA_MOVES = {
    ("NonExistentReplica", "NewReplica"),
    *((s, "OnlineReplica") for s in ("NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible")),
    *((s, "OfflineReplica") for s in ("NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible")),
    ("OfflineReplica", "ReplicaDeletionStarted"),
    ("ReplicaDeletionStarted", "ReplicaDeletionSuccessful"),
    ("OfflineReplica", "ReplicaDeletionIneligible"),
    ("ReplicaDeletionStarted", "ReplicaDeletionIneligible"),
    ("ReplicaDeletionSuccessful", "NonExistentReplica"),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(PartitionState, repeat=2)), ids=str)
def test_partition_transitions(current: PartitionState, target: PartitionState) -> None:
    tp = TopicPartition("orders", 3)
    if (str(current), str(target)) in LEGAL_PARTITION_MOVES:
        check_partition_transition(tp, current, target)
    else:
        with pytest.raises(IllegalStateChangeError) as info:
            check_partition_transition(tp, current, target)
        message = str(info.value)
        assert f"partition orders-3 from {current} to {target}" in message


@pytest.mark.parametrize(("current", "target"), list(itertools.product(ReplicaState, repeat=2)), ids=str)
def test_replica_transitions(current: ReplicaState, target: ReplicaState) -> None:
    tp = TopicPartition("orders", 0)
    if (str(current), str(target)) in LEGAL_REPLICA_MOVES:
        check_replica_transition(tp, 2, current, target)
    else:
        with pytest.raises(IllegalStateChangeError) as info:
            check_replica_transition(tp, 2, current, target)
        assert f"replica 2 of partition orders-0 from {current} to {target}" in str(info.value)


def test_error_names_the_allowed_previous_states() -> None:
    with pytest.raises(SeglogError, match="NonExistentPartition may only follow OfflinePartition"):
        check_partition_transition("t-0", PartitionState.ONLINE, PartitionState.NON_EXISTENT)
    with pytest.raises(SeglogError, match="ReplicaDeletionStarted may only follow OfflineReplica"):
        check_replica_transition("t-0", 1, ReplicaState.ONLINE, ReplicaState.DELETION_STARTED)


def test_state_bytes_are_kafkas() -> None:
    assert [s.value for s in PartitionState] == [0, 1, 2, 3]
    assert [s.value for s in ReplicaState] == [1, 2, 3, 4, 5, 6, 7]
