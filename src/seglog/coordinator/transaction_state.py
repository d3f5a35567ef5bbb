"""The states of a transactional id and the moves between them (Kafka's TransactionMetadata).

The state is stored in ``__transaction_state`` as the int8 ``TransactionStatus``
(the enum's value). A transaction may enter a state only from those listed::

    Empty              <- Empty, CompleteCommit, CompleteAbort
    Ongoing            <- Ongoing, Empty, CompleteCommit, CompleteAbort
    PrepareCommit      <- Ongoing
    PrepareAbort       <- Ongoing, PrepareEpochFence
    CompleteCommit     <- PrepareCommit
    CompleteAbort      <- PrepareAbort
    Dead               <- Empty, CompleteCommit, CompleteAbort
    PrepareEpochFence  <- Ongoing

- Empty: a producer id and epoch, no transaction yet.
- Ongoing: partitions were added; records may be written.
- PrepareCommit / PrepareAbort: EndTxn logged; markers are being written.
- CompleteCommit / CompleteAbort: every marker written.
- Dead: the transactional id expired (``transactional.id.expiration.ms``) and is removed.
- PrepareEpochFence: an InitProducerId fenced an ongoing transaction; it will be
  aborted with the epoch bumped.
"""

from __future__ import annotations

import enum

from ..errors import CorruptRecordError, IllegalStateTransitionError


class TransactionState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name of the state, as its tools print it."""
        return "".join(word.capitalize() for word in self.name.split("_"))

    @classmethod
    def from_status(cls, status: int) -> TransactionState:
        """The state an int8 ``TransactionStatus`` of ``__transaction_state`` holds."""
        try:
            return cls(status)
        except ValueError:
            raise CorruptRecordError(f"TransactionLogValue: unknown transaction status {status}") from None


_S = TransactionState
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: frozenset({_S.ONGOING, _S.PREPARE_EPOCH_FENCE}),
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT}),
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


def check_transaction_transition(transactional_id: str, current: TransactionState, target: TransactionState) -> None:
    """Refuse a move the table does not allow, naming the transactional id and both states."""
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = ", ".join(sorted(s.kafka_name for s in VALID_PREVIOUS_STATES[target]))
        raise IllegalStateTransitionError(
            f"transactional id {transactional_id!r} cannot move from {current.kafka_name} to "
            f"{target.kafka_name}: {target.kafka_name} is entered only from {allowed}"
        )
