"""The controller's partition and replica state machines, as tables (Kafka's ``validPreviousStates``).

Partition states::

    NonExistent --> New --> Online <--> Offline --> NonExistent
                     \\_______________/^

    target state  valid previous states
    New           NonExistent
    Online        New, Online, Offline
    Offline       New, Online, Offline
    NonExistent   Offline

Replica states::

    target state         valid previous states
    New                  NonExistent
    Online               New, Online, Offline, DeletionIneligible
    Offline              New, Online, Offline, DeletionIneligible
    DeletionStarted      Offline
    DeletionSuccessful   DeletionStarted
    DeletionIneligible   Offline, DeletionStarted
    NonExistent          DeletionSuccessful

A move not in the table is a controller bug or a race it lost; Kafka logs it and
leaves the state as it was, and so does a caller of ``check_*_transition`` that
catches the error.
"""

from __future__ import annotations

import enum

from ..errors import IllegalStateChangeError


class PartitionState(enum.Enum):
    # values are Kafka's state bytes
    NEW = 0
    ONLINE = 1
    OFFLINE = 2
    NON_EXISTENT = 3

    def __str__(self) -> str:
        return {0: "NewPartition", 1: "OnlinePartition", 2: "OfflinePartition", 3: "NonExistentPartition"}[self.value]


class ReplicaState(enum.Enum):
    NEW = 1
    ONLINE = 2
    OFFLINE = 3
    DELETION_STARTED = 4
    DELETION_SUCCESSFUL = 5
    DELETION_INELIGIBLE = 6
    NON_EXISTENT = 7

    def __str__(self) -> str:
        return {
            1: "NewReplica",
            2: "OnlineReplica",
            3: "OfflineReplica",
            4: "ReplicaDeletionStarted",
            5: "ReplicaDeletionSuccessful",
            6: "ReplicaDeletionIneligible",
            7: "NonExistentReplica",
        }[self.value]


_P = PartitionState
VALID_PREVIOUS_PARTITION_STATES: dict[PartitionState, frozenset[PartitionState]] = {
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
}

_R = ReplicaState
VALID_PREVIOUS_REPLICA_STATES: dict[ReplicaState, frozenset[ReplicaState]] = {
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
}


def check_partition_transition(partition: object, current: PartitionState, target: PartitionState) -> None:
    """Raise ``IllegalStateChangeError`` unless ``partition`` (e.g. ``orders-3``) may go ``current`` -> ``target``."""
    if current not in VALID_PREVIOUS_PARTITION_STATES[target]:
        raise IllegalStateChangeError(
            f"Invalid state transition of partition {partition} from {current} to {target}: "
            f"{target} may only follow {_names(VALID_PREVIOUS_PARTITION_STATES[target])}"
        )


def check_replica_transition(partition: object, replica: int, current: ReplicaState, target: ReplicaState) -> None:
    """Raise ``IllegalStateChangeError`` unless ``replica`` of ``partition`` may go ``current`` -> ``target``."""
    if current not in VALID_PREVIOUS_REPLICA_STATES[target]:
        raise IllegalStateChangeError(
            f"Invalid state transition of replica {replica} of partition {partition} from {current} to {target}: "
            f"{target} may only follow {_names(VALID_PREVIOUS_REPLICA_STATES[target])}"
        )


def _names(states: frozenset[PartitionState] | frozenset[ReplicaState]) -> str:
    return ", ".join(sorted(str(s) for s in states))
