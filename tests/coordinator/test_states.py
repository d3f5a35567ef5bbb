"""The group and transaction state tables: every pair of states, allowed exactly when
Kafka's GroupMetadata / TransactionMetadata list the first as a valid previous state
of the second (spelled out here from Kafka's source, not read from the module)."""

from __future__ import annotations

import itertools

import pytest

from seglog.coordinator.group_state import GroupState, check_group_transition
from seglog.coordinator.transaction_state import TransactionState, check_transaction_transition
from seglog.errors import CorruptRecordError, IllegalStateTransitionError

# (from, to) pairs Kafka allows, by Kafka's names
GROUP_MOVES = {
    ("Stable", "PreparingRebalance"),
    ("CompletingRebalance", "PreparingRebalance"),
    ("Empty", "PreparingRebalance"),
    ("PreparingRebalance", "CompletingRebalance"),
    ("CompletingRebalance", "Stable"),
    ("PreparingRebalance", "Empty"),
    *((s, "Dead") for s in ("Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead")),
}
TRANSACTION_MOVES = {
    *((s, "Empty") for s in ("Empty", "CompleteCommit", "CompleteAbort")),
    *((s, "Ongoing") for s in ("Ongoing", "Empty", "CompleteCommit", "CompleteAbort")),
    ("Ongoing", "PrepareCommit"),
    ("Ongoing", "PrepareAbort"),
    ("PrepareEpochFence", "PrepareAbort"),
    ("PrepareCommit", "CompleteCommit"),
    ("PrepareAbort", "CompleteAbort"),
    *((s, "Dead") for s in ("Empty", "CompleteAbort", "CompleteCommit")),
    ("Ongoing", "PrepareEpochFence"),
}


@pytest.mark.parametrize(("current", "target"), list(itertools.product(GroupState, GroupState)))
def test_group_transitions_follow_kafka(current, target):
    if (current.value, target.value) in GROUP_MOVES:
        check_group_transition("orders-app", current, target)
    else:
        with pytest.raises(IllegalStateTransitionError) as e:
            check_group_transition("orders-app", current, target)
        assert f"group 'orders-app' cannot move from {current.value} to {target.value}" in str(e.value)
        assert e.value.error_code == -1


@pytest.mark.parametrize(("current", "target"), list(itertools.product(TransactionState, TransactionState)))
def test_transaction_transitions_follow_kafka(current, target):
    if (current.kafka_name, target.kafka_name) in TRANSACTION_MOVES:
        check_transaction_transition("txn-1", current, target)
    else:
        with pytest.raises(IllegalStateTransitionError) as e:
            check_transaction_transition("txn-1", current, target)
        assert f"transactional id 'txn-1' cannot move from {current.kafka_name} to {target.kafka_name}" in str(e.value)


def test_transaction_states_carry_kafkas_status_bytes():
    names = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead"]
    assert [TransactionState.from_status(i).kafka_name for i in range(8)] == [*names, "PrepareEpochFence"]
    with pytest.raises(CorruptRecordError, match="unknown transaction status -1"):
        TransactionState.from_status(-1)
