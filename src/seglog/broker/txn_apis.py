"""Idempotent and transactional producers on the broker: the transaction coordinator
(``seglog.coordinator.transaction_coordinator``, sans-IO) wired to requests, to
``__transaction_state`` and to the partitions' logs.

Handlers: InitProducerId (with or without a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions, and
FindCoordinator for transactions (key type 1; the group coordinator answers key type 0).

The coordinator runs on the event loop: a request becomes a call with a token, and the
call's outputs are acted on here. ``Reply`` answers the request waiting on its token;
``StoreTransaction`` appends a record to ``__transaction_state-<p>`` and reports the
append's error back (``complete_store``); ``WriteTxnMarkers`` goes to ``send_markers``:
the transaction's COMMIT or ABORT marker written to each of its partitions (in the loop's
next turn where this broker can append it at once as the partition's whole ISR; else by
``txn_marker_channel_manager.py``: this broker's own through ``append_markers``, others'
as WriteTxnMarkers requests, retried as the leaders move), then reported
(``complete_markers``) so that the coordinator logs the transaction complete.

WriteTxnMarkers served (Kafka's ``handleWriteTxnMarkersRequest``): each marker appended
as a control batch by the leader, as the coordinator (epoch checked, sequences not),
with required acks -1 (answered once the ISR has it, refused under min.insync.replicas);
an error code per partition. Markers written are told to ``on_markers_written`` (the
group coordinator's, for offsets committed in the transaction).

``__transaction_state`` (transaction.state.log.num.partitions, compacted,
min.insync.replicas transaction.state.log.min.isr; in a cluster through ZooKeeper with
transaction.state.log.replication.factor replicas) is created on the first transactional
request, as Kafka creates it on the first lookup of a transaction coordinator. The
coordinator runtime (``coordinator_runtime``) follows the leadership of its partitions: a
partition led here is read in the I/O pool and loaded, its ids answered
COORDINATOR_LOAD_IN_PROGRESS meanwhile (transactions found prepared get their markers
written again; ongoing ones time out); one no longer led is unloaded and its ids answered
NOT_COORDINATOR. Each record is written by the runtime (acks=all, as the coordinator), and a
store whose partition was unloaded or reloaded meanwhile is answered NOT_COORDINATOR (Kafka
checks the coordinator epoch the same way). Timed-out transactions are aborted and expired
ids removed at the coordinator's deadlines, on the runtime's timer, the first an interval
after start-up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from ..common import TRANSACTION_STATE_TOPIC, TopicPartition
from ..config import BrokerConfig
from ..coordinator.producer_id_manager import ProducerIdBlocks, ProducerIdManager, producer_id_block_path
from ..coordinator.transaction_coordinator import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    Output,
    Reply,
    StoreTransaction,
    TransactionConfig,
    TransactionCoordinator,
    TransactionLoader,
    WriteTxnMarkers,
)
from ..coordinator.transaction_metadata import TransactionMetadata
from ..coordinator.transaction_state import TransactionState
from ..errors import CoordinatorNotAvailableError, InvalidRequestError, SeglogError
from ..protocol import ApiKey, ErrorCode
from ..protocol.message_data import (
    AddOffsetsToTxnRequestData,
    AddOffsetsToTxnResponseData,
    AddPartitionsToTxnRequestData,
    AddPartitionsToTxnResponseData,
    DescribeTransactionsRequestData,
    DescribeTransactionsResponseData,
    EndTxnRequestData,
    EndTxnResponseData,
    InitProducerIdRequestData,
    InitProducerIdResponseData,
    ListTransactionsRequestData,
    ListTransactionsResponseData,
    WriteTxnMarkersRequestData,
    WriteTxnMarkersResponseData,
)
from ..records import build_batch
from ..records.control import end_transaction_marker
from ..security import AclOperation, ResourceType
from ..storage import AppendOrigin
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .coordinator_runtime import CoordinatorRuntime, TopicCreator, TopicSpec
from .inter_broker import inter_broker_security
from .replica_manager import ReplicaManager
from .routes import Route, Routes
from .txn_marker_channel_manager import TransactionMarkerChannelManager

log = logging.getLogger(__name__)

_E = ErrorCode
# told of markers written (producer id, committed, partitions)
MarkersWritten = Callable[[int, bool, list[TopicPartition]], None]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TxnApis:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        advertised: tuple[str, int],
        create_topic: TopicCreator,
        *,
        clock: Callable[[], int] = _now_ms,
        claim_producer_id_block: Callable[[], tuple[int, int]] | None = None,
        on_markers_written: MarkersWritten | None = None,
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
    ) -> None:
        self.config = config
        self.authorizer = authorizer
        self.replicas = replicas
        self.advertised = advertised
        self.clock = clock
        # a cluster's brokers share ZooKeeper's blocks (None: this broker has not joined it), never a local file
        self.claim_producer_id_block = claim_producer_id_block
        ids: ProducerIdBlocks = ProducerIdBlocks(self._claim_cluster_block)
        if not config["zookeeper.connect"]:
            ids = ProducerIdManager(producer_id_block_path(config.log_dirs[0]), config["broker.id"])
        self.coordinator = TransactionCoordinator(ids, TransactionConfig.from_broker(config))
        self.markers = TransactionMarkerChannelManager(
            replicas.metadata,
            config["broker.id"],
            self._append_marker,
            timeout_s=config["request.timeout.ms"] / 1000,
            security=inter_broker_security(config),
        )
        # Kafka's TransactionStateManager appends within request.timeout.ms
        self.runtime: CoordinatorRuntime[dict[str, TransactionMetadata]] = CoordinatorRuntime(
            self._topic_spec,
            replicas,
            TransactionLoader(),
            self,
            create_topic,
            write_timeout_ms=config["request.timeout.ms"],
            clock=clock,
        )
        # told of each marker written: the group coordinator completes the transaction's
        # offsets in __consumer_offsets
        self.on_markers_written = on_markers_written

    async def _claim_producer_id_block_if_used_up(self) -> None:
        # ZooKeeper is asked from a thread: waiting out a lost connection must not stall the broker
        ids = self.coordinator.producer_ids
        if self.config["zookeeper.connect"] and ids.block_used_up:
            ids.use_block(*await asyncio.get_running_loop().run_in_executor(None, self._claim_cluster_block))

    def _claim_cluster_block(self) -> tuple[int, int]:
        if self.claim_producer_id_block is None:
            # retriable: the client asks again once the broker has joined
            raise CoordinatorNotAvailableError("producer ids come from ZooKeeper: this broker has not joined it yet")
        return self.claim_producer_id_block()

    # --- life -------------------------------------------------------------------------------------

    async def startup(self) -> None:
        """Load back the ``__transaction_state`` partitions this broker leads (one broker:
        all of them; a cluster's come with LeaderAndIsr, after start-up); the checks for
        timed-out transactions and expired ids start an interval from now."""
        self._use_partition_count()
        self.coordinator.schedule_checks(self.clock())
        await asyncio.gather(*self.runtime.startup())
        self.runtime.reschedule()

    def shutdown(self) -> None:
        """Markers in flight are dropped, as Kafka's ``TransactionMarkerChannelManager.shutdown``
        drops its queues: their PrepareCommit or PrepareAbort in ``__transaction_state`` sends
        them again when the partition is loaded next."""
        self.runtime.close()
        self.markers.close()

    async def ensure_state_topic(self) -> None:
        """Create ``__transaction_state`` unless it exists (the first transactional request);
        raises what the creation raised."""
        await self.runtime.ensure_topic()
        self._use_partition_count()

    def _topic_spec(self) -> TopicSpec:
        count = self.config["transaction.state.log.num.partitions"]
        factor = self.config["transaction.state.log.replication.factor"]
        # one broker makes every topic with one replica, whatever the factor: an ISR of one must do
        min_isr = self.config["transaction.state.log.min.isr"] if self.replicas.cluster_mode else 1
        overrides = {
            "cleanup.policy": "compact",
            "segment.bytes": self.config["transaction.state.log.segment.bytes"],
            "compression.type": "uncompressed",
            "min.insync.replicas": min_isr,
        }
        return TopicSpec(TRANSACTION_STATE_TOPIC, count, factor, overrides)

    def _use_partition_count(self) -> None:
        # ids are placed by the topic's own partition count, as Kafka reads it, whatever
        # transaction.state.log.num.partitions says now
        count = self.replicas.metadata.partition_count(TRANSACTION_STATE_TOPIC)
        if count and count != self.coordinator.config.num_partitions:
            self.coordinator.config = dataclasses.replace(self.coordinator.config, num_partitions=count)

    # --- which transactional ids this broker coordinates (leadership of __transaction_state) --------------

    def on_leadership_change(self, leading: Iterable[tuple[str, int]], following: Iterable[tuple[str, int]]) -> None:
        """The replica manager's leadership listener (the runtime's), the partition count
        taken first: the topic may have been made by another broker."""
        self._use_partition_count()
        self.runtime.on_leadership_change(leading, following)

    def on_loaded(self, partition: int, epoch: int, loaded: dict[str, TransactionMetadata]) -> None:
        """Take over a partition's transactional ids; the prepared ones' markers go out again."""
        self._use_partition_count()
        self._act(self.coordinator.load_transactions(partition, epoch, loaded, self.clock()))
        if loaded:
            log.info("loaded %d transactional ids of %s-%d", len(loaded), TRANSACTION_STATE_TOPIC, partition)

    def on_unloaded(self, partition: int) -> None:
        self.coordinator.unload_partition(partition)

    def next_deadline(self) -> int | None:
        return self.coordinator.next_deadline()

    def on_deadline(self, now_ms: int) -> None:
        self._act(self.coordinator.tick(now_ms))

    def _not_here(self, transactional_id: str) -> int:
        """NONE when this broker coordinates the id now (or the id is empty: the coordinator
        answers INVALID_REQUEST); else COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR, as
        Kafka's ``getTransactionState`` answers."""
        if not transactional_id:
            return _E.NONE
        return self.runtime.partition_error(self.coordinator.partition_for(transactional_id))

    # --- the coordinator's outputs -----------------------------------------------------------------

    def _act(self, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Reply):
                self.runtime.complete(out.token, out.response)
            elif isinstance(out, StoreTransaction):
                self._store(out)
            elif isinstance(out, WriteTxnMarkers):
                self.send_markers(out)
        self.runtime.reschedule()

    def _store(self, out: StoreTransaction) -> None:
        """Write the record (at once when the log can take it: a request's answer then needs
        no task and no turn of the loop) and act on the result."""

        def written(error: int, base_offset: int) -> None:
            self._act(self.coordinator.complete_store(out.store_id, error, self.clock()))

        self.runtime.schedule_write(out.partition, build_batch([(out.key, out.value)]), written)

    def send_markers(self, out: WriteTxnMarkers) -> None:
        """Send a transaction's markers to its partitions' leaders, in the background, and log
        the transaction complete once all are written. The one way markers go out: EndTxn, a
        timed-out transaction's abort and a prepared transaction found on loading
        ``__transaction_state`` (``coordinator.load_partition``'s outputs) all come here.
        Sending stops, the transaction left as it is, once this broker no longer coordinates
        it at ``out.coordinator_epoch``.

        First, in the loop's next turn (after EndTxn's answer has gone out), each marker
        this broker can append at once as its partition's whole ISR is appended there
        (``_write_markers_now``); only the others take the channel manager's task."""
        asyncio.get_running_loop().call_soon(self._write_markers_now, out)

    def _still_current(self, out: WriteTxnMarkers) -> bool:
        held = self.coordinator
        epoch = self.runtime.epoch(held.partition_for(out.transactional_id))
        return epoch == out.coordinator_epoch and out.transactional_id in held.transactions

    def _write_markers_now(self, out: WriteTxnMarkers) -> None:
        """The markers appended on the loop (``try_append_inline``, acks -1, as ``append_markers``
        appends them) and, when all are, CompleteCommit / CompleteAbort logged in the same
        turn: a single-broker transaction completes with no task, before its producer can
        send its next AddPartitionsToTxn (which would be answered CONCURRENT_TRANSACTIONS,
        retried by librdkafka after 20 ms). A partition led elsewhere, one with other
        replicas in its ISR or a log that cannot take the marker at once goes to the
        channel manager, as does one whose append failed (it tells the error)."""
        if not self._still_current(out):
            return
        marker = self._marker_batch(out.producer_id, out.producer_epoch, out.committed, out.coordinator_epoch)
        written: list[TopicPartition] = []
        left: list[TopicPartition] = []
        for tp in sorted(out.partitions):
            inline = self.replicas.try_append_inline(
                tp, memoryview(bytearray(marker)), acks=-1, origin=AppendOrigin.COORDINATOR
            )
            (written if inline is not None else left).append(tp)
        if written and self.on_markers_written is not None:
            self.on_markers_written(out.producer_id, out.committed, written)
        if left:
            self.runtime.spawn(self._send_markers(dataclasses.replace(out, partitions=frozenset(left))))
        else:
            self._act(self.coordinator.complete_markers(out.transactional_id, self.clock()))

    async def _send_markers(self, out: WriteTxnMarkers) -> None:
        if await self.markers.send(out, lambda: self._still_current(out)):
            self._act(self.coordinator.complete_markers(out.transactional_id, self.clock()))

    async def _append_marker(self, out: WriteTxnMarkers, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return await self.append_markers(
            out.producer_id, out.producer_epoch, out.committed, out.coordinator_epoch, partitions
        )

    async def append_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """One marker appended by the leader of each partition with acks -1 (Kafka's
        ``handleWriteTxnMarkersRequest``); the error code of each. The written ones are told
        to ``on_markers_written``."""
        marker = self._marker_batch(producer_id, producer_epoch, committed, coordinator_epoch)
        # offsets are assigned in place: a copy per partition
        batches = {tp: memoryview(bytearray(marker)) for tp in partitions}
        try:
            results = await self.replicas.append_records(
                batches, acks=-1, timeout_ms=self.config["request.timeout.ms"], origin=AppendOrigin.COORDINATOR
            )
            errors = {tp: results[tp].error_code for tp in partitions}
        except SeglogError as e:
            errors = dict.fromkeys(partitions, e.error_code)
        written = [tp for tp, code in errors.items() if code == _E.NONE]
        if written and self.on_markers_written is not None:
            self.on_markers_written(producer_id, committed, written)
        return errors

    def _marker_batch(
        self, producer_id: int, producer_epoch: int, committed: bool, coordinator_epoch: int
    ) -> bytearray:
        return build_batch(
            [end_transaction_marker(committed, coordinator_epoch, self.clock())],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            transactional=True,  # Kafka's withEndTransactionMarker: a marker is a transactional control batch
            control=True,
        )

    async def _call(self, call: Callable[[Hashable], list[Output]]) -> Any:
        return await self.runtime.call(lambda token: self._act(call(token)))

    # --- handlers ----------------------------------------------------------------------------------

    def routes(self) -> Routes:
        return {
            ApiKey.INIT_PRODUCER_ID: Route(self.init_producer_id, (0, 5)),
            ApiKey.ADD_PARTITIONS_TO_TXN: Route(self.add_partitions_to_txn, (0, 5)),
            ApiKey.ADD_OFFSETS_TO_TXN: Route(self.add_offsets_to_txn, (0, 4)),
            ApiKey.END_TXN: Route(self.end_txn, (0, 4)),
            ApiKey.WRITE_TXN_MARKERS: Route(self.write_txn_markers, (0, 1)),
            ApiKey.DESCRIBE_TRANSACTIONS: Route(self.describe_transactions, (0, 0)),
            ApiKey.LIST_TRANSACTIONS: Route(self.list_transactions, (0, 1)),
        }

    def _may_write(self, txn_id: str) -> bool:
        return self.authorizer.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id)

    def _may_init(self, txn_id: str | None) -> int:
        """InitProducerId's check: Write on the transactional id; for an idempotent producer
        IdempotentWrite on the cluster or Write on some topic (KIP-679)."""
        if txn_id is not None:
            return _E.NONE if self._may_write(txn_id) else _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if self.authorizer.authorize_cluster(AclOperation.IDEMPOTENT_WRITE) or self.authorizer.authorize_any(
            AclOperation.WRITE, ResourceType.TOPIC
        ):
            return _E.NONE
        return _E.CLUSTER_AUTHORIZATION_FAILED

    async def init_producer_id(self, version: int, body: InitProducerIdRequestData) -> InitProducerIdResponseData:
        txn_id = body.transactional_id
        if refused := self._may_init(txn_id):
            return InitProducerIdResponseData(error_code=refused, producer_id=-1, producer_epoch=-1)
        if txn_id is not None:
            try:
                await self.ensure_state_topic()
                error = self._not_here(txn_id)
            except SeglogError as e:
                log.warning("cannot create %s: %s", TRANSACTION_STATE_TOPIC, e)
                error = _E.COORDINATOR_NOT_AVAILABLE
            if error:
                return InitProducerIdResponseData(error_code=error, producer_id=-1, producer_epoch=-1)
        try:
            await self._claim_producer_id_block_if_used_up()
        except SeglogError as e:  # ZooKeeper unreachable: Kafka answers with the exception's error
            log.warning("no producer id block could be claimed: %s", e)
            return InitProducerIdResponseData(error_code=e.error_code, producer_id=-1, producer_epoch=-1)
        # producer_id and producer_epoch are -1 before v3, the fields' defaults
        request = InitProducerIdRequest(txn_id, body.transaction_timeout_ms, body.producer_id, body.producer_epoch)
        response: InitProducerIdResponse = await self._call(
            lambda token: self.coordinator.init_producer_id(token, request, self.clock())
        )
        return InitProducerIdResponseData(
            error_code=response.error_code, producer_id=response.producer_id, producer_epoch=response.producer_epoch
        )

    async def add_partitions_to_txn(
        self, version: int, body: AddPartitionsToTxnRequestData
    ) -> AddPartitionsToTxnResponseData:
        """A client's one transaction (v0-3), or a broker's batch of them (v4+, KIP-890), each
        added to, or (``verify_only``) checked for, its partitions."""
        if version < 4:
            errors = await self._add_partitions(
                body.v3_and_below_transactional_id,
                body.v3_and_below_producer_id,
                body.v3_and_below_producer_epoch,
                [TopicPartition(t.name, p) for t in body.v3_and_below_topics for p in t.partitions],
            )
            return AddPartitionsToTxnResponseData(results_by_topic_v3_and_below=_results_by_topic(errors))
        if not self.authorizer.authorize_cluster(AclOperation.CLUSTER_ACTION):  # v4+: brokers' requests
            return AddPartitionsToTxnResponseData(error_code=_E.CLUSTER_AUTHORIZATION_FAILED)
        results = []
        for txn in body.transactions:
            asked = [TopicPartition(t.name, p) for t in txn.topics for p in t.partitions]
            if txn.verify_only:
                errors = self._verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, asked)
            else:
                errors = await self._add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, asked)
            results.append(
                AddPartitionsToTxnResponseData.AddPartitionsToTxnResult(txn.transactional_id, _results_by_topic(errors))
            )
        return AddPartitionsToTxnResponseData(error_code=_E.NONE, results_by_transaction=results)

    async def _add_partitions(
        self, txn_id: str, pid: int, epoch: int, asked: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        if not self._may_write(txn_id):
            return dict.fromkeys(asked, _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        writable = self.authorizer.authorized(AclOperation.WRITE, ResourceType.TOPIC, {tp.topic for tp in asked})
        refused = {tp: _E.TOPIC_AUTHORIZATION_FAILED for tp in asked if tp.topic not in writable}
        refused |= {
            tp: _E.UNKNOWN_TOPIC_OR_PARTITION
            for tp in asked
            if tp not in refused and not self.replicas.metadata.has_partition(tp)
        }
        if refused:  # as Kafka: nothing is added, the other partitions are not attempted
            return {tp: refused.get(tp, _E.OPERATION_NOT_ATTEMPTED) for tp in asked}
        if error := self._not_here(txn_id):
            return dict.fromkeys(asked, error)
        response: AddPartitionsToTxnResponse = await self._call(
            lambda token: self.coordinator.add_partitions_to_txn(token, txn_id, pid, epoch, tuple(asked), self.clock())
        )
        return {tp: response.errors.get(tp, _E.NONE) for tp in asked}

    def _verify_partitions(
        self, txn_id: str, pid: int, epoch: int, asked: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """Kafka's ``handleVerifyPartitionsInTransaction``: whether each partition is in the
        producer's ongoing transaction (INVALID_TXN_STATE if not), else one error for them all."""
        error = _E.INVALID_REQUEST if not txn_id else self._not_here(txn_id)
        txn = self.coordinator.transactions.get(txn_id)
        if error:
            pass
        elif txn is None or txn.producer_id != pid:
            error = _E.INVALID_PRODUCER_ID_MAPPING
        elif txn.producer_epoch != epoch:
            error = _E.PRODUCER_FENCED
        elif txn.pending_transition_in_progress or txn.state in (
            TransactionState.PREPARE_COMMIT,
            TransactionState.PREPARE_ABORT,
        ):
            error = _E.CONCURRENT_TRANSACTIONS
        else:
            return {tp: _E.NONE if tp in txn.partitions else _E.INVALID_TXN_STATE for tp in asked}
        return dict.fromkeys(asked, error)

    async def add_offsets_to_txn(self, version: int, body: AddOffsetsToTxnRequestData) -> AddOffsetsToTxnResponseData:
        if not self._may_write(body.transactional_id):
            return AddOffsetsToTxnResponseData(error_code=_E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self.authorizer.authorize(AclOperation.READ, ResourceType.GROUP, body.group_id):
            return AddOffsetsToTxnResponseData(error_code=_E.GROUP_AUTHORIZATION_FAILED)
        if error := self._not_here(body.transactional_id):
            return AddOffsetsToTxnResponseData(error_code=error)
        response: AddOffsetsToTxnResponse = await self._call(
            lambda token: self.coordinator.add_offsets_to_txn(
                token, body.transactional_id, body.producer_id, body.producer_epoch, body.group_id, self.clock()
            )
        )
        return AddOffsetsToTxnResponseData(error_code=response.error_code)

    async def end_txn(self, version: int, body: EndTxnRequestData) -> EndTxnResponseData:
        if not self._may_write(body.transactional_id):
            return EndTxnResponseData(error_code=_E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if error := self._not_here(body.transactional_id):
            return EndTxnResponseData(error_code=error)
        response: EndTxnResponse = await self._call(
            lambda token: self.coordinator.end_txn(
                token, body.transactional_id, body.producer_id, body.producer_epoch, body.committed, self.clock()
            )
        )
        return EndTxnResponseData(error_code=response.error_code)

    async def write_txn_markers(self, version: int, body: WriteTxnMarkersRequestData) -> WriteTxnMarkersResponseData:
        """WriteTxnMarkers: markers sent by a transaction coordinator (another broker's, or a
        tool), each appended to its partitions with acks -1; the markers are written at once."""
        markers = body.markers
        if not self.authorizer.authorize_cluster(AclOperation.CLUSTER_ACTION):  # coordinators' requests only
            denied: int = _E.CLUSTER_AUTHORIZATION_FAILED
            refused = [
                {TopicPartition(t.name, p): denied for t in m.topics for p in t.partition_indexes} for m in markers
            ]
            return _markers_response(markers, refused)
        appended = await asyncio.gather(
            *(
                self.append_markers(
                    m.producer_id,
                    m.producer_epoch,
                    m.transaction_result,
                    m.coordinator_epoch,
                    [TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes],
                )
                for m in markers
            )
        )
        return _markers_response(markers, appended)

    # --- DescribeTransactions, ListTransactions ----------------------------------------------------

    async def describe_transactions(
        self, version: int, body: DescribeTransactionsRequestData
    ) -> DescribeTransactionsResponseData:
        State = DescribeTransactionsResponseData.TransactionState
        states = []
        for txn_id in body.transactional_ids:
            txn = self.coordinator.transactions.get(txn_id)
            if not self.authorizer.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, txn_id):
                refused = _E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                states.append(State(refused, txn_id, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1))
                continue
            if txn is None:
                # Kafka's answer for an unknown id: no producer, no start time
                states.append(
                    State(
                        _E.TRANSACTIONAL_ID_NOT_FOUND,
                        txn_id,
                        transaction_start_time_ms=-1,
                        producer_id=-1,
                        producer_epoch=-1,
                    )
                )
                continue
            by_topic: dict[str, list[int]] = {}
            described = self.authorizer.authorized(
                AclOperation.DESCRIBE, ResourceType.TOPIC, {t for t, _ in txn.partitions}
            )
            for topic, p in sorted(txn.partitions):
                if topic in described:  # as Kafka: the topics it may not describe are left out
                    by_topic.setdefault(topic, []).append(p)
            states.append(
                State(
                    _E.NONE,
                    txn_id,
                    txn.state.kafka_name,
                    txn.timeout_ms,
                    txn.start_timestamp,
                    txn.producer_id,
                    txn.producer_epoch,
                    [DescribeTransactionsResponseData.TopicData(t, ps) for t, ps in by_topic.items()],
                )
            )
        return DescribeTransactionsResponseData(transaction_states=states)

    async def list_transactions(self, version: int, body: ListTransactionsRequestData) -> ListTransactionsResponseData:
        """Kafka's filters: by state name, by producer id, and (v1) by how long the
        transaction has run; a state name Kafka does not know is answered back."""
        known = {s.kafka_name for s in TransactionState if s is not TransactionState.DEAD}
        wanted = set(body.state_filters)
        pids = set(body.producer_id_filters)
        duration = body.duration_filter  # -1 before v1: no filter
        now = self.clock()
        listed = [
            ListTransactionsResponseData.TransactionState(t.transactional_id, t.producer_id, name)
            for t in self.coordinator.transactions.values()
            if (name := t.state.kafka_name) in known
            and (not wanted or name in wanted)
            and (not pids or t.producer_id in pids)
            and (duration < 0 or (t.start_timestamp >= 0 and now - t.start_timestamp > duration))
            and self.authorizer.authorize(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, t.transactional_id)
        ]
        return ListTransactionsResponseData(
            unknown_state_filters=sorted(wanted - known),
            transaction_states=sorted(listed, key=lambda t: t.transactional_id),
        )

    # --- FindCoordinator, transactions' part -------------------------------------------------------

    async def transaction_partition(self, key: str) -> TopicPartition:
        """FindCoordinator's lookup for key type 1: the ``__transaction_state`` partition of a
        transactional id, made on first need; its leader is the id's coordinator."""
        if not key:
            raise InvalidRequestError("a transactional id may not be empty")
        try:
            await self.ensure_state_topic()
        except SeglogError as e:
            raise CoordinatorNotAvailableError(f"{TRANSACTION_STATE_TOPIC} is not available: {e.message}") from e
        return TopicPartition(TRANSACTION_STATE_TOPIC, self.coordinator.partition_for(key))


def _markers_response(
    markers: list[WriteTxnMarkersRequestData.WritableTxnMarker], results: Iterable[dict[TopicPartition, int]]
) -> WriteTxnMarkersResponseData:
    Data = WriteTxnMarkersResponseData
    answers = []
    for marker, errors in zip(markers, results, strict=True):
        by_topic: dict[str, list[WriteTxnMarkersResponseData.WritableTxnMarkerPartitionResult]] = {}
        for (topic, p), code in errors.items():
            by_topic.setdefault(topic, []).append(Data.WritableTxnMarkerPartitionResult(p, code))
        topics = [Data.WritableTxnMarkerTopicResult(t, parts) for t, parts in by_topic.items()]
        answers.append(Data.WritableTxnMarkerResult(marker.producer_id, topics))
    return WriteTxnMarkersResponseData(answers)


def _results_by_topic(
    errors: dict[TopicPartition, int],
) -> list[AddPartitionsToTxnResponseData.AddPartitionsToTxnTopicResult]:
    Data = AddPartitionsToTxnResponseData
    by_topic: dict[str, list[AddPartitionsToTxnResponseData.AddPartitionsToTxnPartitionResult]] = {}
    for tp, code in errors.items():
        by_topic.setdefault(tp.topic, []).append(Data.AddPartitionsToTxnPartitionResult(tp.partition, int(code)))
    return [Data.AddPartitionsToTxnTopicResult(t, parts) for t, parts in by_topic.items()]
