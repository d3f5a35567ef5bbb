"""The states of a classic consumer group and the moves between them (Kafka's GroupMetadata).

A group may enter a state only from one of the states listed for it::

    to \\ from            Empty  PreparingRebalance  CompletingRebalance  Stable  Dead
    PreparingRebalance    yes    -                   yes                  yes     -
    CompletingRebalance   -      yes                 -                    -       -
    Stable                -      -                   yes                  -       -
    Empty                 -      yes                 -                    -       -
    Dead                  yes    yes                 yes                  yes     yes

- Empty: no members; offsets kept until they expire. A join starts a rebalance.
- PreparingRebalance: waiting for members to (re)join, up to the rebalance timeout.
- CompletingRebalance: joined; waiting for the leader's assignment in SyncGroup.
- Stable: assignments handed out; heartbeats keep members in.
- Dead: no members and no offsets, or the partition moved away: about to be removed.
"""

from __future__ import annotations

import enum

from ..errors import IllegalStateTransitionError


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_S = GroupState
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    _S.PREPARING_REBALANCE: frozenset({_S.STABLE, _S.COMPLETING_REBALANCE, _S.EMPTY}),
    _S.COMPLETING_REBALANCE: frozenset({_S.PREPARING_REBALANCE}),
    _S.STABLE: frozenset({_S.COMPLETING_REBALANCE}),
    _S.DEAD: frozenset({_S.STABLE, _S.PREPARING_REBALANCE, _S.COMPLETING_REBALANCE, _S.EMPTY, _S.DEAD}),
    _S.EMPTY: frozenset({_S.PREPARING_REBALANCE}),
}


def check_group_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Refuse a move the table does not allow, naming the group and both states."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransitionError(
            f"group {group_id!r} cannot move from {current.value} to {target.value}: "
            f"{target.value} is entered only from {', '.join(sorted(s.value for s in VALID_PREVIOUS_STATES[target]))}"
        )
