"""The transaction coordinator, sans-IO (Kafka's TransactionCoordinator and
TransactionStateManager): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
timeouts and expiry, and the reload of a ``__transaction_state`` partition.

Requests go in with a ``token`` and the time; outputs come out:

- ``Reply(token, response)``: answer that request;
- ``StoreTransaction(store_id, transactional_id, partition, key, value)``: append this
  record to ``__transaction_state-<partition>`` (a value of None is a tombstone), then
  call ``complete_store(store_id, error, now)`` with Kafka's error code of the append;
- ``WriteTxnMarkers(transactional_id, producer_id, producer_epoch, committed,
  coordinator_epoch, partitions)``: write the transaction's COMMIT or ABORT marker to
  each partition (the broker's WriteTxnMarkers, retried until written or the partition
  is gone), then call ``complete_markers(transactional_id, now)``.

A transaction's life: InitProducerId gives a producer id and epoch (a new id, or the
epoch bumped, which fences older producers of the same transactional id: PRODUCER_FENCED);
AddPartitionsToTxn / AddOffsetsToTxn make it Ongoing; EndTxn logs PrepareCommit or
PrepareAbort, answers, has the markers written and logs CompleteCommit / CompleteAbort.
Until then requests get CONCURRENT_TRANSACTIONS. A transaction Ongoing for longer than its
``transaction.timeout.ms`` is aborted with its epoch bumped (checked every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``); an InitProducerId that
finds one Ongoing does the same and answers CONCURRENT_TRANSACTIONS, so the producer
retries. A transactional id idle for ``transactional.id.expiration.ms`` is removed with a
tombstone (checked every ``transaction.remove.expired.transaction.cleanup.interval.ms``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, fields

from ..common import GROUP_METADATA_TOPIC, TopicPartition
from ..config import BrokerConfig
from ..errors import CorruptRecordError, InvalidConfigurationError, SeglogError
from ..protocol import ErrorCode
from ..storage import PartitionLog
from .broker_keys import broker_key, from_broker, key_of
from .group_coordinator import Reply
from .partitioning import partition_for
from .producer_id_manager import ProducerIdBlocks
from .stores import Outputs, PendingStores, append_error
from .transaction_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnTransit,
    is_epoch_exhausted,
)
from .transaction_records import TransactionLogKey, decode_key, decode_value, encode_key, encode_value
from .transaction_state import TransactionState

_S = TransactionState


_E = ErrorCode
# a transaction's record too large is of the coordinator's own making, nothing the client
# can change: UNKNOWN_SERVER_ERROR, as Kafka's TransactionStateManager answers; the other
# append errors are stores.append_error's
_TOO_LARGE: dict[int, ErrorCode] = {
    _E.MESSAGE_TOO_LARGE: _E.UNKNOWN_SERVER_ERROR,
    _E.RECORD_LIST_TOO_LARGE: _E.UNKNOWN_SERVER_ERROR,
}


@dataclass(frozen=True)
class TransactionConfig:
    """The broker keys of the transaction coordinator (their defaults are ``seglog.config``'s)."""

    max_timeout_ms: int = broker_key("transaction.max.timeout.ms")
    transactional_id_expiration_ms: int = broker_key("transactional.id.expiration.ms")
    abort_timed_out_interval_ms: int = broker_key("transaction.abort.timed.out.transaction.cleanup.interval.ms")
    remove_expired_interval_ms: int = broker_key("transaction.remove.expired.transaction.cleanup.interval.ms")
    num_partitions: int = broker_key("transaction.state.log.num.partitions")
    offsets_topic_num_partitions: int = broker_key("offsets.topic.num.partitions")  # AddOffsetsToTxn

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value < 1:
                raise InvalidConfigurationError(f"{key_of(f)} ({f.name}) must be at least 1, not {value}")

    @classmethod
    def from_broker(cls, broker: BrokerConfig) -> TransactionConfig:
        return from_broker(cls, broker)


# --- requests, responses, outputs --------------------------------------------------------------------


@dataclass(frozen=True)
class InitProducerIdRequest:
    transactional_id: str | None  # None: an idempotent producer, no transactions
    transaction_timeout_ms: int
    producer_id: int = NO_PRODUCER_ID  # v3+: the producer's current id and epoch, to bump
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class InitProducerIdResponse:
    error_code: int
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True)
class AddPartitionsToTxnResponse:
    errors: dict[TopicPartition, int]


@dataclass(frozen=True)
class AddOffsetsToTxnResponse:
    error_code: int


@dataclass(frozen=True)
class EndTxnResponse:
    error_code: int


@dataclass(frozen=True)
class StoreTransaction:
    store_id: int
    transactional_id: str
    partition: int  # of __transaction_state
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class WriteTxnMarkers:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: frozenset[TopicPartition]


Output = Reply | StoreTransaction | WriteTxnMarkers
_Done = Callable[[int, int], None]  # (error code of the append, now)
_Answer = Callable[[int], None]  # answers a request with an error code


class TransactionCoordinator:
    """The transactional ids of the ``__transaction_state`` partitions this broker leads."""

    def __init__(self, producer_ids: ProducerIdBlocks, config: TransactionConfig | None = None) -> None:
        self.config = config or TransactionConfig()
        self.producer_ids = producer_ids
        self.transactions: dict[str, TransactionMetadata] = {}
        self.coordinator_epochs: dict[int, int] = {}  # partition -> its leader epoch when loaded
        self._out: Outputs[Output] = Outputs()
        self._stores: PendingStores[_Done] = PendingStores("transaction state")
        self._markers: dict[str, TxnTransit] = {}  # transactional id -> its Complete* once markers are written
        self.next_abort_check_ms: int | None = None
        self.next_expiry_check_ms: int | None = None

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.num_partitions)

    # --- InitProducerId --------------------------------------------------------------------------------

    def init_producer_id(self, token: Hashable, request: InitProducerIdRequest, now_ms: int) -> list[Output]:
        req = request
        if req.transactional_id is None:  # idempotence only: a fresh id every time
            return self._answer_now(token, InitProducerIdResponse(_E.NONE, self.producer_ids.generate_producer_id(), 0))
        if not req.transactional_id:
            return self._answer_now(token, InitProducerIdResponse(_E.INVALID_REQUEST))
        if not 0 < req.transaction_timeout_ms <= self.config.max_timeout_ms:
            return self._answer_now(token, InitProducerIdResponse(_E.INVALID_TRANSACTION_TIMEOUT))
        txn = self.transactions.get(req.transactional_id)
        if txn is None:
            txn = TransactionMetadata(
                req.transactional_id,
                self.producer_ids.generate_producer_id(),
                NO_PRODUCER_ID,
                NO_PRODUCER_EPOCH,
                NO_PRODUCER_EPOCH,
                req.transaction_timeout_ms,
                _S.EMPTY,
                last_update_timestamp=now_ms,
            )
            self.transactions[req.transactional_id] = txn
        result = self._prepare_init(txn, req, now_ms)
        if isinstance(result, int):
            return self._answer_now(token, InitProducerIdResponse(result))
        if result.state is _S.PREPARE_EPOCH_FENCE:
            # abort the ongoing transaction first; the producer retries and then gets its bump
            def fenced(error: int) -> None:
                self._reply(token, InitProducerIdResponse(error or _E.CONCURRENT_TRANSACTIONS))

            self._end(txn, result.producer_id, result.producer_epoch, False, False, now_ms, fenced)
            return self._out.drain()

        def stored(error: int, now: int) -> None:
            if error:
                self._reply(token, InitProducerIdResponse(error))
            else:
                self._reply(token, InitProducerIdResponse(_E.NONE, result.producer_id, result.producer_epoch))

        self._store(txn, result, stored)
        return self._out.drain()

    def _prepare_init(self, txn: TransactionMetadata, req: InitProducerIdRequest, now: int) -> TxnTransit | int:
        expected = None if req.producer_id == NO_PRODUCER_ID else (req.producer_id, req.producer_epoch)
        if txn.pending_transition_in_progress:
            return _E.CONCURRENT_TRANSACTIONS
        if expected is not None and not (
            txn.producer_epoch == NO_PRODUCER_EPOCH
            or expected[0] == txn.producer_id
            or (expected[0] == txn.last_producer_id and is_epoch_exhausted(expected[1]))
        ):
            return _E.PRODUCER_FENCED
        if txn.state in (_S.PREPARE_ABORT, _S.PREPARE_COMMIT):
            return _E.CONCURRENT_TRANSACTIONS
        if txn.state is _S.ONGOING:
            return txn.prepare_fence_producer_epoch()
        if txn.state in (_S.EMPTY, _S.COMPLETE_ABORT, _S.COMPLETE_COMMIT):
            if txn.is_producer_epoch_exhausted and (expected is None or expected[1] == txn.producer_epoch):
                new_id = self.producer_ids.generate_producer_id()
                return txn.prepare_producer_id_rotation(new_id, req.transaction_timeout_ms, now, expected is not None)
            transit = txn.prepare_increment_producer_epoch(
                req.transaction_timeout_ms, None if expected is None else expected[1], now
            )
            return _E.PRODUCER_FENCED if transit is None else transit
        raise SeglogError(f"transactional id {txn.transactional_id!r} found {txn.state.kafka_name}")

    # --- AddPartitionsToTxn, AddOffsetsToTxn -------------------------------------------------------------

    def add_partitions_to_txn(
        self,
        token: Hashable,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: tuple[TopicPartition, ...],
        now_ms: int,
    ) -> list[Output]:
        def answer(error: int) -> None:
            self._reply(token, AddPartitionsToTxnResponse(dict.fromkeys(partitions, error)))

        self._add(transactional_id, producer_id, producer_epoch, set(partitions), now_ms, answer)
        return self._out.drain()

    def add_offsets_to_txn(
        self, token: Hashable, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, now_ms: int
    ) -> list[Output]:
        """The group's ``__consumer_offsets`` partition joins the transaction, so its
        TxnOffsetCommit gets the transaction's marker."""
        offsets_partition = TopicPartition(
            GROUP_METADATA_TOPIC, partition_for(group_id, self.config.offsets_topic_num_partitions)
        )

        def answer(error: int) -> None:
            self._reply(token, AddOffsetsToTxnResponse(error))

        self._add(transactional_id, producer_id, producer_epoch, {offsets_partition}, now_ms, answer)
        return self._out.drain()

    def _add(
        self,
        txn_id: str,
        pid: int,
        epoch: int,
        partitions: set[TopicPartition],
        now: int,
        answer: _Answer,
    ) -> None:
        txn = self.transactions.get(txn_id) if txn_id else None
        if not txn_id:
            return answer(_E.INVALID_REQUEST)
        if txn is None or txn.producer_id != pid:
            return answer(_E.INVALID_PRODUCER_ID_MAPPING)
        if txn.producer_epoch != epoch:
            return answer(_E.PRODUCER_FENCED)
        if txn.pending_transition_in_progress or txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
            return answer(_E.CONCURRENT_TRANSACTIONS)
        if txn.state is _S.ONGOING and partitions <= txn.partitions:
            return answer(_E.NONE)  # nothing new: no record to write
        self._store(txn, txn.prepare_add_partitions(partitions, now), lambda error, now: answer(error))

    # --- EndTxn ---------------------------------------------------------------------------------------

    def end_txn(
        self,
        token: Hashable,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        now_ms: int,
    ) -> list[Output]:
        def answer(error: int) -> None:
            self._reply(token, EndTxnResponse(error))

        txn = self.transactions.get(transactional_id) if transactional_id else None
        if not transactional_id:
            answer(_E.INVALID_REQUEST)
        elif txn is None:
            answer(_E.INVALID_PRODUCER_ID_MAPPING)
        else:
            self._end(txn, producer_id, producer_epoch, committed, True, now_ms, answer)
        return self._out.drain()

    def _end(
        self,
        txn: TransactionMetadata,
        pid: int,
        epoch: int,
        committed: bool,
        from_client: bool,
        now: int,
        answer: _Answer,
    ) -> None:
        if txn.producer_id != pid:
            return answer(_E.INVALID_PRODUCER_ID_MAPPING)
        # a client must not bump the epoch; the coordinator's own aborts carry the bumped one
        if (from_client and epoch != txn.producer_epoch) or epoch < txn.producer_epoch:
            return answer(_E.PRODUCER_FENCED)
        if txn.pending is not None and txn.pending is not _S.PREPARE_EPOCH_FENCE:
            return answer(_E.CONCURRENT_TRANSACTIONS)
        state = txn.state
        if state is _S.ONGOING:
            if not committed and txn.pending is _S.PREPARE_EPOCH_FENCE:
                # the fence's bumped epoch goes into the PrepareAbort record
                txn.pending = None
                txn.producer_epoch, txn.last_producer_epoch = epoch, NO_PRODUCER_EPOCH
            transit = txn.prepare_abort_or_commit(_S.PREPARE_COMMIT if committed else _S.PREPARE_ABORT, now)
            self._store(txn, transit, lambda error, now: self._prepared(txn, transit, error, now, answer))
            return None
        done, in_progress = (
            (_S.COMPLETE_COMMIT, _S.PREPARE_COMMIT) if committed else (_S.COMPLETE_ABORT, _S.PREPARE_ABORT)
        )
        if state is done:
            return answer(_E.NONE)  # a retry of an EndTxn that completed
        if state is in_progress:
            return answer(_E.CONCURRENT_TRANSACTIONS)
        return answer(_E.INVALID_TXN_STATE)

    def _prepared(self, txn: TransactionMetadata, transit: TxnTransit, error: int, now: int, answer: _Answer) -> None:
        """The Prepare* record is written: answer, and have the markers written."""
        answer(error)
        if not error:
            self._send_markers(txn, now)

    def _send_markers(self, txn: TransactionMetadata, now: int) -> None:
        complete = txn.prepare_complete(now)
        self._markers[txn.transactional_id] = complete
        self._out.append(
            WriteTxnMarkers(
                txn.transactional_id,
                txn.producer_id,
                txn.producer_epoch,
                txn.state is _S.PREPARE_COMMIT,
                self.coordinator_epochs.get(self.partition_for(txn.transactional_id), 0),
                frozenset(txn.partitions),
            )
        )

    def complete_markers(self, transactional_id: str, now_ms: int) -> list[Output]:
        """Every marker of the transaction is written: log its completion."""
        complete = self._markers.pop(transactional_id, None)
        if complete is None:
            raise SeglogError(f"no transaction markers of {transactional_id!r} are being written")
        self._store_completion(self.transactions[transactional_id], complete)
        return self._out.drain()

    def _store_completion(self, txn: TransactionMetadata, complete: TxnTransit) -> None:
        def stored(error: int, now: int) -> None:
            # Kafka retries the completion until it is written, unless the partition moved
            # (unloaded: the id's next coordinator finds the Prepare* record and completes it;
            # written from here, the stale record would land after that one's)
            if error and self.transactions.get(txn.transactional_id) is txn:
                txn.pending = complete.state
                self._store_completion(txn, complete)

        self._store(txn, complete, stored)

    # --- time ----------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Output]:
        """Abort timed-out transactions and remove expired transactional ids, each at its
        interval; ``next_deadline()`` says when next."""
        if self.next_abort_check_ms is None or self.next_abort_check_ms <= now_ms:
            self._abort_timed_out(now_ms)
            self.next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
        if self.next_expiry_check_ms is None or self.next_expiry_check_ms <= now_ms:
            self._remove_expired(now_ms)
            self.next_expiry_check_ms = now_ms + self.config.remove_expired_interval_ms
        return self._out.drain()

    def schedule_checks(self, now_ms: int) -> None:
        """The first abort and expiry checks, each an interval from ``now_ms`` (Kafka's
        ``TransactionCoordinator.startup`` schedules them so); ``tick`` runs them."""
        self.next_abort_check_ms = now_ms + self.config.abort_timed_out_interval_ms
        self.next_expiry_check_ms = now_ms + self.config.remove_expired_interval_ms

    def next_deadline(self) -> int | None:
        due = [d for d in (self.next_abort_check_ms, self.next_expiry_check_ms) if d is not None]
        return min(due, default=None)

    def _abort_timed_out(self, now: int) -> None:
        for txn in list(self.transactions.values()):
            if (
                txn.state is _S.ONGOING
                and not txn.pending_transition_in_progress
                and txn.start_timestamp + txn.timeout_ms < now
            ):
                fence = txn.prepare_fence_producer_epoch()
                self._end(txn, fence.producer_id, fence.producer_epoch, False, False, now, lambda error: None)

    def _remove_expired(self, now: int) -> None:
        for txn in list(self.transactions.values()):
            if (
                txn.state in (_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT)
                and not txn.pending_transition_in_progress
                and txn.last_update_timestamp <= now - self.config.transactional_id_expiration_ms
            ):
                dead = txn.prepare_dead()

                def stored(error: int, now: int, txn: TransactionMetadata = txn) -> None:
                    if not error and self.transactions.get(txn.transactional_id) is txn:
                        del self.transactions[txn.transactional_id]

                self._store(txn, dead, stored, tombstone=True)

    # --- loading -------------------------------------------------------------------------------------

    def load_partition(self, log: PartitionLog, partition: int, coordinator_epoch: int, now_ms: int) -> list[Output]:
        """Become coordinator of ``__transaction_state-<partition>``: its transactional ids
        replayed (later records win, tombstones remove); a transaction found in
        PrepareCommit or PrepareAbort has its markers written again and completes, an
        Ongoing one times out later."""
        return self.load_transactions(partition, coordinator_epoch, read_transactions(log), now_ms)

    def load_transactions(
        self, partition: int, coordinator_epoch: int, loaded: dict[str, TransactionMetadata], now_ms: int
    ) -> list[Output]:
        """Take over the transactional ids ``read_transactions`` found in a partition (Kafka's
        ``loadTransactionsForTxnTopicPartition``), resuming the prepared ones' markers."""
        self.coordinator_epochs[partition] = coordinator_epoch
        for txn_id, txn in loaded.items():
            self.transactions[txn_id] = txn
            if txn.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                self._send_markers(txn, now_ms)
        return self._out.drain()

    def unload_partition(self, partition: int) -> None:
        """This broker no longer leads ``__transaction_state-<partition>`` (Kafka's
        ``removeTransactionsForTxnTopicPartition``): its transactional ids are dropped,
        with the markers still being written for them. Stores under way are answered by
        their appends (NOT_COORDINATOR)."""
        self.coordinator_epochs.pop(partition, None)
        for txn_id in [t for t in self.transactions if self.partition_for(t) == partition]:
            del self.transactions[txn_id]
            self._markers.pop(txn_id, None)

    # --- storing -------------------------------------------------------------------------------------

    def _store(
        self,
        txn: TransactionMetadata,
        transit: TxnTransit,
        done: _Done,
        *,
        tombstone: bool = False,
    ) -> None:
        """Log ``transit``; once written it becomes the state, else the pending move is dropped."""

        def stored(error: int, now: int) -> None:
            error = append_error(error, _TOO_LARGE)
            if error:
                txn.abort_pending()
            else:
                txn.complete(transit)
            done(error, now)

        store_id = self._stores.add(stored)
        key = encode_key(TransactionLogKey(txn.transactional_id))
        value = None if tombstone else encode_value(transit.record_value())
        partition = self.partition_for(txn.transactional_id)
        self._out.append(StoreTransaction(store_id, txn.transactional_id, partition, key, value))

    def complete_store(self, store_id: int, error_code: int, now_ms: int) -> list[Output]:
        """The append of a ``StoreTransaction`` ended with ``error_code`` (0: written)."""
        self._stores.pop(store_id)(error_code, now_ms)
        return self._out.drain()

    def _reply(self, token: Hashable, response: object) -> None:
        self._out.append(Reply(token, response))

    def _answer_now(self, token: Hashable, response: object) -> list[Output]:
        self._reply(token, response)
        return self._out.drain()


class TransactionLoader:
    """``__transaction_state``'s loader (the broker's ``CoordinatorLoader``): a partition's ids."""

    def replay(self, log: PartitionLog) -> dict[str, TransactionMetadata]:
        return read_transactions(log)

    def empty(self) -> dict[str, TransactionMetadata]:
        return {}


def read_transactions(log: PartitionLog) -> dict[str, TransactionMetadata]:
    """The transactional ids a ``__transaction_state`` partition holds at its end (later
    records win, tombstones remove); pure reading, for an I/O thread."""
    loaded: dict[str, TransactionMetadata] = {}
    try:
        for batch in log.batches(log.log_start_offset, log.log_end_offset):
            if batch.is_control:
                continue
            for record in batch.records():
                if record.key is None:
                    raise CorruptRecordError("__transaction_state record without a key", offset=record.offset)
                try:
                    key = decode_key(record.key)
                    if record.value is None:
                        loaded.pop(key.transactional_id, None)
                    else:
                        loaded[key.transactional_id] = _metadata(key.transactional_id, record.value)
                except CorruptRecordError as e:
                    raise e.at(offset=record.offset) from None
    except CorruptRecordError as e:
        raise e.at(file=log.dir) from None
    return loaded


def _metadata(transactional_id: str, raw: bytes) -> TransactionMetadata:
    value = decode_value(raw)
    return TransactionMetadata(
        transactional_id,
        value.producer_id,
        value.previous_producer_id,
        value.producer_epoch,
        NO_PRODUCER_EPOCH,
        value.transaction_timeout_ms,
        value.state,
        {TopicPartition(topic, p) for topic, ids in value.partitions or () for p in ids},
        value.start_timestamp_ms,
        value.last_update_timestamp_ms,
    )
