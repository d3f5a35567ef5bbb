"""A transactional producer's requests to its coordinators, as Kafka's ``TransactionManager``
sends them, blocking, over a ``ClusterClient``:

- InitProducerId (transactional.id, transaction.timeout.ms) to the transaction coordinator: the
  producer id and epoch. Calling it again bumps the epoch: the coordinator aborts the id's open
  transaction and fences every client still writing with the old epoch (PRODUCER_FENCED);
- AddPartitionsToTxn before a partition's first write in a transaction (``add_partitions``, the
  producer's hook), AddOffsetsToTxn + TxnOffsetCommit for offsets committed with it
  (``send_offsets``, to the group's coordinator), EndTxn to commit or abort.

The coordinator knows a transaction by (transactional id, producer id, epoch), not by the
connection that opened it: any client holding that triple may end it (``resume``, as Flink's
KafkaSink commits the transactions its writers prepared). Re-initialising the transactional id
instead aborts it (the way to clear a transaction a dead writer left open).

Answers that say the coordinator moved or loads (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS), that the previous transaction is still completing
(CONCURRENT_TRANSACTIONS), or a coordinator that cannot be reached, are retried (the coordinator
looked up again) until the client's timeout. The other errors move the manager to FATAL_ERROR
(fenced, not authorized, a state the coordinator refuses: only closing is left) or to
ABORTABLE_ERROR (the transaction must be aborted, then the next may begin), as ``_ERRORS`` says.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from typing import Any, NamedTuple

from ..common import GROUP_METADATA_TOPIC, TopicPartition
from ..errors import (
    BrokerNotAvailableError,
    ErrorCode,
    IllegalStateTransitionError,
    InvalidTxnStateError,
    ProducerFencedError,
    SeglogError,
    error_for,
)
from ..protocol import ApiKey
from ..protocol.message_data import (
    AddOffsetsToTxnRequestData,
    AddPartitionsToTxnRequestData,
    AddPartitionsToTxnResponseData,
    EndTxnRequestData,
    InitProducerIdRequestData,
    InitProducerIdResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    TxnOffsetCommitRequestData,
    TxnOffsetCommitResponseData,
)
from .cluster import ClusterClient, RetriableError, check, check_coordinator

# FindCoordinator's key types (Kafka's FindCoordinatorRequest.CoordinatorType)
GROUP_KEY, TRANSACTION_KEY = 0, 1
NO_PRODUCER_ID, NO_PRODUCER_EPOCH = -1, -1
TRANSACTION_TIMEOUT_MS = 60_000  # Kafka's transaction.timeout.ms
# a standalone sendOffsetsToTransaction(offsets, groupId) names no member: Kafka's
# ConsumerGroupMetadata(groupId) has JoinGroupRequest's UNKNOWN_GENERATION_ID and UNKNOWN_MEMBER_ID
UNKNOWN_GENERATION_ID, UNKNOWN_MEMBER_ID = -1, ""
STABLE_OFFSET_FETCH_VERSION = 7  # OffsetFetch's require_stable (KIP-447)


class PreparedTxnState(NamedTuple):
    """What names a transaction to its coordinator: enough for another client to end it
    (Kafka's KIP-939 calls the pair of producer id and epoch so)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""


class State(Enum):
    """Kafka's TransactionManager.State."""

    UNINITIALIZED = "Uninitialized"
    INITIALIZING = "Initializing"
    READY = "Ready"
    IN_TRANSACTION = "InTransaction"
    COMMITTING_TRANSACTION = "CommittingTransaction"
    ABORTING_TRANSACTION = "AbortingTransaction"
    ABORTABLE_ERROR = "AbortableError"
    FATAL_ERROR = "FatalError"


_S = State
# target state -> the states it may be entered from (Kafka's State.isTransitionValid). FATAL_ERROR
# may be entered from any state and left to none: it is no key here, and no source below.
_TRANSITIONS: dict[State, frozenset[State]] = {
    # READY too (Kafka's client inits once): initialising again bumps the epoch, as a new client would
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.READY, _S.ABORTING_TRANSACTION}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}),
}


class Outcome(Enum):
    """What an answer's error code means to the transaction (Kafka's TxnRequestHandlers)."""

    FIND_COORDINATOR = "find the coordinator again, then retry"
    RETRY = "retry at the same coordinator"
    ABORTABLE = "abort the transaction; the producer goes on"
    FATAL = "the producer can only be closed"


_E = ErrorCode
# every transactional request's answers; a code not listed is FATAL too (Kafka: "unexpected error").
# REQUEST_TIMED_OUT is TxnOffsetCommit's (its group coordinator writes with acks=all);
# UNKNOWN_TOPIC_OR_PARTITION is AddPartitionsToTxn's and TxnOffsetCommit's (metadata not there yet);
# the producer id ones are abortable only where the coordinator can bump the epoch (KIP-360), as
# seglog's and every Kafka since 2.5 can: the abort then re-initialises instead of sending EndTxn.
_ERRORS: dict[int, Outcome] = {
    _E.NOT_COORDINATOR: Outcome.FIND_COORDINATOR,
    _E.COORDINATOR_NOT_AVAILABLE: Outcome.FIND_COORDINATOR,
    _E.REQUEST_TIMED_OUT: Outcome.FIND_COORDINATOR,
    _E.COORDINATOR_LOAD_IN_PROGRESS: Outcome.RETRY,
    _E.CONCURRENT_TRANSACTIONS: Outcome.RETRY,
    _E.UNKNOWN_TOPIC_OR_PARTITION: Outcome.RETRY,
    _E.TOPIC_AUTHORIZATION_FAILED: Outcome.ABORTABLE,
    _E.GROUP_AUTHORIZATION_FAILED: Outcome.ABORTABLE,
    _E.OPERATION_NOT_ATTEMPTED: Outcome.ABORTABLE,
    _E.UNKNOWN_MEMBER_ID: Outcome.ABORTABLE,
    _E.ILLEGAL_GENERATION: Outcome.ABORTABLE,
    _E.FENCED_INSTANCE_ID: Outcome.ABORTABLE,
    _E.UNKNOWN_PRODUCER_ID: Outcome.ABORTABLE,
    _E.INVALID_PRODUCER_ID_MAPPING: Outcome.ABORTABLE,
    _E.TRANSACTION_ABORTABLE: Outcome.ABORTABLE,
    # INVALID_PRODUCER_EPOCH is an older coordinator's PRODUCER_FENCED (KIP-588): raised as that
    _E.PRODUCER_FENCED: Outcome.FATAL,
    _E.INVALID_PRODUCER_EPOCH: Outcome.FATAL,
    _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Outcome.FATAL,
    _E.CLUSTER_AUTHORIZATION_FAILED: Outcome.FATAL,
    _E.INVALID_TXN_STATE: Outcome.FATAL,
    _E.UNSUPPORTED_FOR_MESSAGE_FORMAT: Outcome.FATAL,
}
# answers after which the producer id is not the coordinator's: the abort bumps the epoch
_NEEDS_EPOCH_BUMP = frozenset({int(_E.UNKNOWN_PRODUCER_ID), int(_E.INVALID_PRODUCER_ID_MAPPING)})


class TransactionManager:
    """One transactional id's transactions, a request at a time (not thread-safe)."""

    def __init__(
        self, client: ClusterClient, transactional_id: str, transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS
    ) -> None:
        if not transactional_id:
            raise SeglogError("a transactional id must not be empty")
        self.client = client
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.state = State.UNINITIALIZED
        self.partitions: set[TopicPartition] = set()  # those added to the open transaction
        self.last_error: SeglogError | None = None
        # the coordinator knows of the open transaction (Kafka's transactionStarted)
        self.transaction_started = False
        self._epoch_bump_required = False
        # the coordinators found, by (key, key type): asked again after one moved (Kafka keeps them too)
        self._coordinators: dict[tuple[str, int], int] = {}

    @classmethod
    def resume(
        cls, client: ClusterClient, prepared: PreparedTxnState, transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS
    ) -> TransactionManager:
        """A manager of a transaction another client opened and left open, to ``commit_transaction``
        or ``abort_transaction`` it: the coordinator checks the producer id and epoch, not who sends
        EndTxn. A transaction already ended that way is answered without error again."""
        manager = cls(client, prepared.transactional_id, transaction_timeout_ms)
        manager.producer_id, manager.producer_epoch = prepared.producer_id, prepared.producer_epoch
        manager.state = State.IN_TRANSACTION
        manager.transaction_started = True
        return manager

    def __repr__(self) -> str:
        return (
            f"TransactionManager({self.transactional_id!r}, producer id {self.producer_id}, "
            f"epoch {self.producer_epoch}, {self.state.value})"
        )

    @property
    def prepared(self) -> PreparedTxnState:
        """The open transaction, for another client to end (``resume``)."""
        self._require(State.IN_TRANSACTION, "hand over the transaction")
        return PreparedTxnState(self.transactional_id, self.producer_id, self.producer_epoch)

    # --- the producer's calls ------------------------------------------------------------------

    def init_transactions(self) -> PreparedTxnState:
        """InitProducerId: this id's producer id and a new epoch. An open transaction of the id is
        aborted first, and a client that still holds an older epoch is fenced. After an error that
        lost the producer id, the current producer id and epoch go with the request (KIP-360), so
        that the coordinator bumps this producer's epoch and no other's."""
        previous = self.state
        if previous is not State.ABORTING_TRANSACTION:  # an abort that bumps the epoch stays Aborting
            self._transition(State.INITIALIZING)
        bump = self._epoch_bump_required
        request = InitProducerIdRequestData(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            producer_id=self.producer_id if bump else NO_PRODUCER_ID,
            producer_epoch=self.producer_epoch if bump else NO_PRODUCER_EPOCH,
        )
        answer: InitProducerIdResponseData = self._to_coordinator(
            previous, ApiKey.INIT_PRODUCER_ID, request, _single_error, "InitProducerId"
        )
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self._epoch_bump_required = False
        self._complete()
        return PreparedTxnState(self.transactional_id, self.producer_id, self.producer_epoch)

    def begin_transaction(self) -> None:
        """A transaction starts here for this client; the coordinator hears of it with its first
        partition (``add_partitions``) or offsets (``send_offsets``)."""
        self._transition(State.IN_TRANSACTION)

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn of the partitions not yet in the transaction: the producer's hook
        before its first write to each (the coordinator writes its markers to those added only)."""
        self._require(State.IN_TRANSACTION, "add partitions")
        new = sorted(set(partitions) - self.partitions)
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for tp in new:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        Topic = AddPartitionsToTxnRequestData.AddPartitionsToTxnTopic
        request = AddPartitionsToTxnRequestData(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[Topic(name, ps) for name, ps in by_topic.items()],
        )
        # a client's request is v3 at most: v4+ batch transactions, for brokers (KIP-890)
        what = f"AddPartitionsToTxn of {', '.join(map(str, new))}"
        self._to_coordinator(self.state, ApiKey.ADD_PARTITIONS_TO_TXN, request, _add_partitions_error, what, highest=3)
        self.partitions.update(new)
        self.transaction_started = True

    def send_offsets(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group_id: str) -> None:
        """Offsets of ``group_id`` committed with the transaction (Kafka's standalone
        ``sendOffsetsToTransaction(offsets, groupId)``): AddOffsetsToTxn to the transaction
        coordinator, then TxnOffsetCommit to the group's, naming no member nor generation."""
        self._require(State.IN_TRANSACTION, "send offsets")
        add = AddOffsetsToTxnRequestData(self.transactional_id, self.producer_id, self.producer_epoch, group_id)
        what = f"AddOffsetsToTxn of group {group_id!r}"
        self._to_coordinator(self.state, ApiKey.ADD_OFFSETS_TO_TXN, add, _single_error, what)
        self.transaction_started = True
        Request = TxnOffsetCommitRequestData
        by_topic: dict[str, list[TxnOffsetCommitRequestData.TxnOffsetCommitRequestPartition]] = {}
        for tp, committed in sorted(offsets.items()):
            wanted = Request.TxnOffsetCommitRequestPartition(tp.partition, committed.offset, -1, committed.metadata)
            by_topic.setdefault(tp.topic, []).append(wanted)
        commit = Request(
            transactional_id=self.transactional_id,
            group_id=group_id,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            generation_id=UNKNOWN_GENERATION_ID,
            member_id=UNKNOWN_MEMBER_ID,
            group_instance_id=None,
            topics=[Request.TxnOffsetCommitRequestTopic(name, ps) for name, ps in by_topic.items()],
        )
        what = f"TxnOffsetCommit of group {group_id!r}"
        self._to_coordinator(
            self.state, ApiKey.TXN_OFFSET_COMMIT, commit, _offset_commit_error, what, group_id=group_id
        )

    def commit_transaction(self) -> None:
        """EndTxn(commit): answered once the coordinator logged PrepareCommit (the outcome is
        decided then; its markers follow). A retry after a timeout may be called again."""
        previous = self.state
        self._transition(State.COMMITTING_TRANSACTION)
        self._end(previous, committed=True)

    def abort_transaction(self) -> None:
        """EndTxn(abort); after an error that lost the producer id, InitProducerId bumping the
        epoch instead (the coordinator aborts the transaction as it bumps it)."""
        previous = self.state
        self._transition(State.ABORTING_TRANSACTION)
        if self._epoch_bump_required:
            try:
                self.init_transactions()
            except RetriableError:
                self.state = previous  # timed out: the abort may be asked again
                raise
        else:
            self._end(previous, committed=False)

    # --- requests ------------------------------------------------------------------------------

    def _end(self, previous: State, committed: bool) -> None:
        if self.transaction_started:  # else the coordinator never heard of it: nothing to end (as Kafka)
            request = EndTxnRequestData(self.transactional_id, self.producer_id, self.producer_epoch, committed)
            what = f"EndTxn({'commit' if committed else 'abort'})"
            self._to_coordinator(previous, ApiKey.END_TXN, request, _single_error, what)
        self._complete()

    def _complete(self) -> None:
        self._transition(State.READY)
        self.partitions.clear()
        self.transaction_started = False
        self.last_error = None

    def _to_coordinator(
        self,
        previous: State,
        api_key: ApiKey,
        body: Any,
        error_of: Callable[[Any], int],
        what: str,
        *,
        highest: int | None = None,
        group_id: str | None = None,
    ) -> Any:
        """The answer of the transaction coordinator (or of ``group_id``'s), asked again while it
        moves, loads or cannot be reached, or the previous transaction completes, until the
        client's timeout (then the last error is raised, and the manager is back in ``previous``:
        the call may be made again). An error the transaction cannot retry moves it to
        ABORTABLE_ERROR or FATAL_ERROR and is raised."""
        key, key_type = (group_id, GROUP_KEY) if group_id is not None else (self.transactional_id, TRANSACTION_KEY)
        client = self.client

        def attempt() -> tuple[int, Any]:
            try:
                if (key, key_type) not in self._coordinators:
                    self._coordinators[key, key_type] = client.coordinator(key, key_type)[0]
                coordinator = client.broker(self._coordinators[key, key_type])
                answer = coordinator.request(api_key, body, coordinator.version_for(api_key, highest))
            except BrokerNotAvailableError as e:  # the coordinator (or the bootstrap broker) went away
                self._coordinators.pop((key, key_type), None)
                client.metadata([])  # a bootstrap broker that died is replaced by one that answers
                raise RetriableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{what}: {e.message}") from None
            code = error_of(answer)
            outcome = _ERRORS.get(code)
            if outcome is Outcome.FIND_COORDINATOR:
                self._coordinators.pop((key, key_type), None)
            if outcome in (Outcome.RETRY, Outcome.FIND_COORDINATOR):
                raise RetriableError(code, what)  # ``retrying`` closes the connections: opened anew
            return code, answer

        client.renew_deadline()
        try:
            code, answer = client.retrying(attempt)
        except RetriableError:
            self.state = previous
            raise
        if code:
            raise self._fail(code, f"{what} of transactional id {self.transactional_id!r}")
        return answer

    def _fail(self, code: int, what: str) -> SeglogError:
        """The error of ``code``, the manager moved to the state Kafka's client moves to."""
        error = error_for(ErrorCode.PRODUCER_FENCED if code == ErrorCode.INVALID_PRODUCER_EPOCH else code, None, what)
        if _ERRORS.get(code, Outcome.FATAL) is Outcome.ABORTABLE and self.state in _TRANSITIONS[State.ABORTABLE_ERROR]:
            self._epoch_bump_required = code in _NEEDS_EPOCH_BUMP
            self.abortable_error(error)
        else:
            self.fatal_error(error)
        return error

    # --- states --------------------------------------------------------------------------------

    def abortable_error(self, error: SeglogError) -> None:
        """The open transaction cannot commit (the producer's hook: a write it lost, Kafka's
        Sender does so): ``error`` is raised by every call but ``abort_transaction``."""
        self._transition(State.ABORTABLE_ERROR)
        self.last_error = error

    def fatal_error(self, error: SeglogError) -> None:
        """This producer can do nothing more (the producer's hook: a write answered PRODUCER_FENCED
        ...): ``error`` is raised by every call from now on."""
        self.state = State.FATAL_ERROR
        self.last_error = error

    def _transition(self, target: State) -> None:
        self._raise_error(target)
        if self.state not in _TRANSITIONS[target]:
            raise IllegalStateTransitionError(
                f"transactional id {self.transactional_id!r}: cannot go from {self.state.value} to {target.value}"
            )
        self.state = target

    def _require(self, state: State, what: str) -> None:
        self._raise_error(state)
        if self.state is not state:
            raise IllegalStateTransitionError(
                f"transactional id {self.transactional_id!r}: cannot {what} in state {self.state.value}"
            )

    def _raise_error(self, target: State) -> None:
        """The error that put the manager in an error state, unless the call leads out of it."""
        if self.state is State.FATAL_ERROR or (
            self.state is State.ABORTABLE_ERROR and target not in (State.ABORTING_TRANSACTION, State.ABORTABLE_ERROR)
        ):
            assert self.last_error is not None
            raise self.last_error


def _single_error(answer: Any) -> int:
    return int(answer.error_code)


def _add_partitions_error(answer: AddPartitionsToTxnResponseData) -> int:
    """The first error among the partitions (one answer for the request, as Kafka's handler)."""
    results = answer.results_by_topic_v3_and_below
    codes = [p.partition_error_code for t in results for p in t.results_by_partition]
    return next((int(c) for c in codes if c), int(ErrorCode.NONE))


def _offset_commit_error(answer: TxnOffsetCommitResponseData) -> int:
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    return next((int(c) for c in codes if c), int(ErrorCode.NONE))


def committed_offsets(
    client: ClusterClient, group_id: str, partitions: Iterable[TopicPartition], *, highest: int | None = None
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offsets of ``partitions`` (None: none committed), from its coordinator,
    stable: an offset committed inside a transaction whose outcome is decided but whose marker is
    not yet written (UNSTABLE_OFFSET_COMMIT) is asked again until it is, so that what is read is
    the outcome, as a consumer at read_committed asks (KIP-447's require_stable, OffsetFetch v7+;
    ``highest``: the highest version to ask at)."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(set(partitions)):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    what = f"cannot fetch the offsets of group {group_id!r}"

    def attempt() -> dict[TopicPartition, OffsetAndMetadata | None]:
        try:
            _, coordinator = client.coordinator(group_id, GROUP_KEY)
            version = coordinator.version_for(ApiKey.OFFSET_FETCH, highest)
            if version < STABLE_OFFSET_FETCH_VERSION:
                raise SeglogError(f"{what}: {coordinator.address} serves OffsetFetch v{version}, before require_stable")
            answer: OffsetFetchResponseData = coordinator.request(
                ApiKey.OFFSET_FETCH, _offset_fetch(group_id, by_topic, version), version
            )
        except BrokerNotAvailableError as e:
            client.metadata([])
            raise RetriableError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{what}: {e.message}") from None
        # v8+ asks by group and answers each group's error beside its offsets
        group = answer.groups[0] if version >= 8 else answer
        check_coordinator(group.error_code, what)
        found: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for topic in group.topics:
            for p in topic.partitions:
                if p.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
                    raise RetriableError(p.error_code, what)
                check(p.error_code, f"{what} of {topic.name}-{p.partition_index}")
                tp = TopicPartition(topic.name, p.partition_index)
                found[tp] = None if p.committed_offset < 0 else OffsetAndMetadata(p.committed_offset, p.metadata or "")
        return found

    client.renew_deadline()
    return client.retrying(attempt)


def _offset_fetch(group_id: str, by_topic: dict[str, list[int]], version: int) -> OffsetFetchRequestData:
    Request = OffsetFetchRequestData
    if version >= 8:
        topics = [Request.OffsetFetchRequestTopics(name, ps) for name, ps in by_topic.items()]
        return Request(groups=[Request.OffsetFetchRequestGroup(group_id, topics=topics)], require_stable=True)
    old = [Request.OffsetFetchRequestTopic(name, ps) for name, ps in by_topic.items()]
    return Request(group_id=group_id, topics=old, require_stable=True)


# --- the exactly-once sink's two phases ------------------------------------------------------------
#
# A streaming query's batch N is written by tasks, each in a transaction of its own id
# "<prefix>-<partition>", left open; the driver then decides the batch (a transaction of
# "<prefix>-driver" that commits, in the group "<prefix>", the offset N of the marker partition
# with the tasks' producer ids and epochs as its metadata) and commits each task's transaction.
# docs/architecture.md ("Exactly-once Spark sink") gives the protocol and its failure cases.
#
# The decision's metadata: "<partition>:<producer id>:<epoch>" for each task that wrote, joined by
# ","; it must fit the broker's offset.metadata.max.bytes (4096 by default: 200 to 400 tasks).

# An offset needs a partition the cluster knows (Kafka's TxnOffsetCommit answers
# UNKNOWN_TOPIC_OR_PARTITION for one it does not): the groups' own topic's first is always there.
DECISION_MARKER = TopicPartition(GROUP_METADATA_TOPIC, 0)


class DecidedBatch(NamedTuple):
    """A batch the driver decided to commit: its id, and each writing task's producer id and epoch."""

    batch_id: int
    producers: dict[int, tuple[int, int]]

    def metadata(self) -> str:
        return ",".join(f"{p}:{pid}:{epoch}" for p, (pid, epoch) in sorted(self.producers.items()))

    @classmethod
    def parse(cls, batch_id: int, metadata: str) -> DecidedBatch:
        producers = {}
        for entry in filter(None, metadata.split(",")):
            try:
                partition, pid, epoch = map(int, entry.split(":"))
            except ValueError:
                raise SeglogError(
                    f"batch {batch_id}'s decision holds {entry!r}, not partition:producer id:epoch"
                ) from None
            producers[partition] = (pid, epoch)
        return cls(batch_id, producers)


class BatchTransactions:
    """The transactions of one streaming query's batches, named by ``prefix`` (the query's):
    ``open_task`` on an executor, ``start``, ``commit`` and ``abort`` on the driver."""

    def __init__(
        self, client: ClusterClient, prefix: str, transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.group_id = prefix
        self.transaction_timeout_ms = transaction_timeout_ms
        self._driver = TransactionManager(client, f"{prefix}-driver", transaction_timeout_ms)

    def transactional_id(self, partition: int) -> str:
        return f"{self.prefix}-{partition}"

    def decided(self) -> DecidedBatch | None:
        """The last batch decided, as stable: a decision being written is waited for."""
        found = committed_offsets(self.client, self.group_id, [DECISION_MARKER])[DECISION_MARKER]
        return None if found is None else DecidedBatch.parse(found.offset, found.metadata)

    # --- a task -------------------------------------------------------------------------------------

    def open_task(self, batch_id: int, partition: int) -> TransactionManager | None:
        """The task's transaction, begun: None when the batch was decided already (a run before a
        restart wrote it: this run's records of it must not be written). Initialising the id aborts
        what an earlier attempt of the task, or an earlier run, left open there, and fences it."""
        decided = self.decided()
        if decided is not None and decided.batch_id >= batch_id:
            return None
        txn = TransactionManager(self.client, self.transactional_id(partition), self.transaction_timeout_ms)
        txn.init_transactions()
        txn.begin_transaction()
        return txn

    # --- the driver ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Before the query's first task: the driver's id initialised, which fences a driver still
        running from before a restart and aborts a decision it had not committed."""
        self._driver.init_transactions()

    def commit(self, batch_id: int, prepared: Mapping[int, PreparedTxnState]) -> None:
        """Batch ``batch_id`` made visible: decided (``decide``), then each task's transaction
        committed (``commit_decided``). A batch an earlier run decided is committed from its
        decision, and this run's transactions of it (none, when its tasks saw the decision) aborted."""
        decided = self.decided()
        if decided is not None and decided.batch_id >= batch_id:
            self.abort(prepared.values())
            if decided.batch_id == batch_id:
                self.commit_decided(decided)
            return
        self.commit_decided(self.decide(batch_id, prepared))

    def decide(self, batch_id: int, prepared: Mapping[int, PreparedTxnState]) -> DecidedBatch:
        """The first phase's end: the batch id and its tasks' producers committed in one transaction
        of the driver's id, to the query's group. From its EndTxn on, the batch is the tasks'
        transactions, whatever happens to this driver; if it fails, they are aborted."""
        strangers = [t.transactional_id for p, t in prepared.items() if t.transactional_id != self.transactional_id(p)]
        if strangers:
            raise SeglogError(f"batch {batch_id}: {', '.join(strangers)} are no transactional ids of {self.prefix!r}")
        decision = DecidedBatch(batch_id, {p: (t.producer_id, t.producer_epoch) for p, t in prepared.items()})
        self._driver.begin_transaction()
        try:
            offsets = {DECISION_MARKER: OffsetAndMetadata(batch_id, decision.metadata())}
            self._driver.send_offsets(offsets, self.group_id)
            self._driver.commit_transaction()
        except SeglogError:
            if self._driver.state is not State.FATAL_ERROR:
                self._driver.abort_transaction()
            self.abort(prepared.values())
            raise
        return decision

    def commit_decided(self, decided: DecidedBatch) -> None:
        """The second phase: every transaction of a decided batch committed (again, after a
        restart: a commit done is answered so); one that cannot be is lost, and said so."""
        lost = []
        for partition, (pid, epoch) in sorted(decided.producers.items()):
            state = PreparedTxnState(self.transactional_id(partition), pid, epoch)
            try:
                TransactionManager.resume(self.client, state, self.transaction_timeout_ms).commit_transaction()
            except (ProducerFencedError, InvalidTxnStateError) as e:
                lost.append(f"{state.transactional_id} ({e.error_code.name})")
        if lost:
            raise SeglogError(
                f"batch {decided.batch_id} was decided, but the transactions of {', '.join(lost)} were aborted "
                f"before their commit (by transaction.timeout.ms, {self.transaction_timeout_ms} ms, or a writer "
                "that initialised their id again): their records are lost"
            )

    def abort(self, prepared: Iterable[PreparedTxnState]) -> None:
        """Transactions of a batch that will not be committed, aborted (one fenced is aborted already)."""
        for state in prepared:
            with contextlib.suppress(ProducerFencedError):  # its id was initialised again, which aborted it
                TransactionManager.resume(self.client, state, self.transaction_timeout_ms).abort_transaction()
