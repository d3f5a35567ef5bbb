"""One transactional id's state (Kafka's TransactionMetadata and TxnTransitMetadata).

Every change is two steps, as in Kafka: ``prepare_*`` checks the move against the state
table (``transaction_state``) and returns the next state as a ``TxnTransit`` while the
id holds it as ``pending`` (no other change may start meanwhile: CONCURRENT_TRANSACTIONS);
once its ``__transaction_state`` record is written, ``complete(transit)`` makes it the
state, or ``abort_pending()`` forgets it when the write failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..common import TopicPartition
from ..errors import SeglogError
from .transaction_records import TransactionLogValue
from .transaction_state import TransactionState, check_transaction_transition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
SHORT_MAX = (1 << 15) - 1
_S = TransactionState


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: at Short.MaxValue - 1 a new producer id is due."""
    return epoch >= SHORT_MAX - 1


@dataclass(frozen=True)
class TxnTransit:
    """The state a transactional id moves to once its record is written."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp: int
    last_update_timestamp: int

    def record_value(self) -> TransactionLogValue:
        """The TransactionLogValue Kafka writes for it (v0; Empty has null partitions)."""
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(partition)
        partitions = None if self.state is _S.EMPTY else tuple((t, tuple(p)) for t, p in by_topic.items())
        return TransactionLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            partitions,
            self.last_update_timestamp,
            self.start_timestamp,
        )


@dataclass
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp: int = -1
    last_update_timestamp: int = -1
    pending: TransactionState | None = None

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _transit(self, state: TransactionState, **changes: object) -> TxnTransit:
        if self.pending is not None:
            raise SeglogError(
                f"transactional id {self.transactional_id!r} moves to {state.kafka_name} while its move to "
                f"{self.pending.kafka_name} is pending"
            )
        check_transaction_transition(self.transactional_id, self.state, state)
        transit = TxnTransit(
            self.producer_id,
            self.last_producer_id,
            self.producer_epoch,
            self.last_producer_epoch,
            self.timeout_ms,
            state,
            frozenset(self.partitions),
            self.start_timestamp,
            self.last_update_timestamp,
        )
        transit = replace(transit, **changes)  # type: ignore[arg-type]
        if not 0 <= transit.producer_epoch <= SHORT_MAX:
            raise SeglogError(f"transactional id {self.transactional_id!r}: epoch {transit.producer_epoch}")
        self.pending = state
        return transit

    # --- the moves -------------------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> TxnTransit:
        """InitProducerId or a timeout fences an ongoing transaction: its epoch goes up by one."""
        return self._transit(_S.PREPARE_EPOCH_FENCE, producer_epoch=self.producer_epoch + 1, last_producer_epoch=-1)

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now: int
    ) -> TxnTransit | None:
        """The epoch bump of InitProducerId; None when the producer is fenced
        (``expected_epoch`` neither the current nor the last epoch)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epochs = (bumped, NO_PRODUCER_EPOCH)
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epochs = (bumped, self.producer_epoch)
        elif expected_epoch == self.last_producer_epoch:  # a retry of a bump whose answer was lost
            epochs = (self.producer_epoch, self.last_producer_epoch)
        else:
            return None
        return self._transit(
            _S.EMPTY,
            producer_epoch=epochs[0],
            last_producer_epoch=epochs[1],
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp=-1,
            last_update_timestamp=now,
        )

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now: int, record_last_epoch: bool
    ) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0."""
        return self._transit(
            _S.EMPTY,
            producer_id=producer_id,
            last_producer_id=self.producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_timestamp=-1,
            last_update_timestamp=now,
        )

    def prepare_add_partitions(self, partitions: set[TopicPartition], now: int) -> TxnTransit:
        start = now if self.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT) else self.start_timestamp
        return self._transit(
            _S.ONGOING,
            partitions=frozenset(self.partitions | partitions),
            start_timestamp=start,
            last_update_timestamp=now,
        )

    def prepare_abort_or_commit(self, state: TransactionState, now: int) -> TxnTransit:
        return self._transit(state, last_update_timestamp=now)

    def prepare_complete(self, now: int) -> TxnTransit:
        state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        return self._transit(state, partitions=frozenset(), last_update_timestamp=now)

    def prepare_dead(self) -> TxnTransit:
        return self._transit(_S.DEAD, partitions=frozenset())

    # --- after the write ---------------------------------------------------------------------------------

    def complete(self, transit: TxnTransit) -> None:
        if self.pending is not transit.state:
            raise SeglogError(
                f"transactional id {self.transactional_id!r} completes a move to {transit.state.kafka_name} "
                f"it did not prepare"
            )
        check_transaction_transition(self.transactional_id, self.state, transit.state)
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_timestamp = transit.start_timestamp
        self.last_update_timestamp = transit.last_update_timestamp
        self.pending = None

    def abort_pending(self) -> None:
        self.pending = None
