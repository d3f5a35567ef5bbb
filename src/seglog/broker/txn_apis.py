"""Idempotent and transactional producers on the broker: the transaction coordinator
(``seglog.coordinator.transaction_coordinator``, sans-IO) wired to requests, to
``__transaction_state`` and to the partitions' logs.

Handlers: InitProducerId (with or without a transactional id), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, WriteTxnMarkers, DescribeTransactions, ListTransactions, and
FindCoordinator for transactions (key type 1; the group coordinator answers key type 0).

The coordinator runs on the event loop: a request becomes a call with a token, and the
call's outputs are acted on here. ``Reply`` answers the request waiting on its token;
``StoreTransaction`` appends a record to ``__transaction_state-<p>`` and reports the
append's error back (``complete_store``); ``WriteTxnMarkers`` appends a COMMIT or ABORT
control batch to each partition of the transaction, as the coordinator (epoch checked,
sequences not), retrying a partition until it is written or gone, then reports
(``complete_markers``). One broker leads every partition, so markers are appended
locally rather than sent to other brokers; the WriteTxnMarkers API does the same for
a request from elsewhere. Markers written are told to ``on_markers_written`` (the group
coordinator's, for offsets committed in the transaction).

``__transaction_state`` (transaction.state.log.num.partitions, compacted) is created on
the first transactional request, as Kafka creates it on the first lookup of a
transaction coordinator; at start-up its partitions are loaded back (transactions
found prepared get their markers written again; ongoing ones time out). Timed-out
transactions are aborted at the coordinator's deadlines, on the event loop's timer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Hashable
from typing import Any

from ..config import BrokerConfig
from ..coordinator.producer_id_manager import ProducerIdManager, producer_id_block_path
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
    WriteTxnMarkers,
)
from ..coordinator.transaction_state import TransactionState
from ..errors import CoordinatorNotAvailableError, InvalidRequestError, SeglogError
from ..protocol import ErrorCode
from ..records import build_batch
from ..records.control import end_transaction_marker
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

TRANSACTION_STATE = "__transaction_state"
OPERATION_NOT_ATTEMPTED = 55
TRANSACTIONAL_ID_NOT_FOUND = 105
_MARKER_RETRY_S = 0.1
_E = ErrorCode
# a marker's append that will never succeed: the partition is gone, or the producer moved on
_MARKER_DONE = {_E.NONE, _E.UNKNOWN_TOPIC_OR_PARTITION, 47, 52}  # + INVALID_PRODUCER_EPOCH, COORDINATOR_FENCED


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class TxnApis:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        advertised: tuple[str, int],
        *,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.config = config
        self.replicas = replicas
        self.advertised = advertised
        self.clock = clock
        ids = ProducerIdManager(producer_id_block_path(config.log_dirs[0]), config["broker.id"])
        self.coordinator = TransactionCoordinator(ids, TransactionConfig.from_broker(config))
        self._waiting: dict[Hashable, asyncio.Future[Any]] = {}
        self._tokens = itertools.count()
        self._state_topic_ready: asyncio.Future[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopped = False
        # told of each marker written (producer id, committed, partitions): the group
        # coordinator completes the transaction's offsets in __consumer_offsets
        self.on_markers_written: Callable[[int, bool, list[tuple[str, int]]], None] | None = None

    # --- life -------------------------------------------------------------------------------------

    async def startup(self) -> None:
        """Load ``__transaction_state`` back, if this broker has it."""
        if self.replicas.metadata.topic(TRANSACTION_STATE) is not None:
            await self._load_state_partitions()
        self._schedule_tick()

    def shutdown(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for task in self._tasks:
            task.cancel()

    async def _ensure_state_topic(self) -> int:
        """Create and load ``__transaction_state`` once; COORDINATOR_NOT_AVAILABLE if that fails."""
        if self.replicas.metadata.topic(TRANSACTION_STATE) is not None and self._state_topic_ready is None:
            return _E.NONE
        if self._state_topic_ready is None:
            self._state_topic_ready = asyncio.get_running_loop().create_future()
            try:
                overrides = {
                    "cleanup.policy": "compact",
                    "segment.bytes": self.config["transaction.state.log.segment.bytes"],
                    "compression.type": "uncompressed",
                }
                await self.replicas.create_topic(
                    TRANSACTION_STATE, self.config["transaction.state.log.num.partitions"], overrides
                )
                await self._load_state_partitions()
                self._state_topic_ready.set_result(None)
            except SeglogError as e:
                log.warning("cannot create %s: %s", TRANSACTION_STATE, e)
                self._state_topic_ready.set_result(None)
                self._state_topic_ready = None
                return _E.COORDINATOR_NOT_AVAILABLE
            return _E.NONE
        await self._state_topic_ready
        return _E.NONE

    async def _load_state_partitions(self) -> None:
        count = self.replicas.metadata.partition_count(TRANSACTION_STATE)
        # ids are placed by the topic's own partition count, as Kafka reads it, whatever
        # transaction.state.log.num.partitions says now
        self.coordinator.config = dataclasses.replace(self.coordinator.config, num_partitions=count)
        logs = [self.replicas.partition_log(TRANSACTION_STATE, p) for p in range(count)]
        now = self.clock()

        def load() -> list[Output]:
            outputs: list[Output] = []
            for p, state_log in enumerate(logs):
                outputs += self.coordinator.load_partition(state_log, p, 0, now)
            return outputs

        # the reads run on an I/O thread; nothing else calls the coordinator until it is loaded
        outputs = await asyncio.get_running_loop().run_in_executor(None, load)
        self._act(outputs)

    # --- the coordinator's outputs -----------------------------------------------------------------

    def _act(self, outputs: list[Output]) -> None:
        for out in outputs:
            if isinstance(out, Reply):
                future = self._waiting.pop(out.token, None)
                if future is not None and not future.done():
                    future.set_result(out.response)
            elif isinstance(out, StoreTransaction):
                if not self._store_now(out):
                    self._spawn(self._store(out))
            elif isinstance(out, WriteTxnMarkers):
                self._spawn(self._write_markers(out))
        self._schedule_tick()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _store_now(self, out: StoreTransaction) -> bool:
        """Append the record at once when its log can take it without waiting, and act on
        the result: a request's answer needs no task and no turn of the loop (False: the
        caller awaits ``_store``)."""
        tp = (TRANSACTION_STATE, out.partition)
        result = self.replicas.try_append_inline(tp, memoryview(build_batch([(out.key, out.value)])))
        if result is None:
            return False
        self._act(self.coordinator.complete_store(out.store_id, result.error_code, self.clock()))
        return True

    async def _store(self, out: StoreTransaction) -> None:
        batch = build_batch([(out.key, out.value)])
        tp = (TRANSACTION_STATE, out.partition)
        try:
            error = (await self.replicas.append_records({tp: memoryview(batch)}))[tp].error_code
        except SeglogError as e:
            error = e.error_code
        self._act(self.coordinator.complete_store(out.store_id, error, self.clock()))

    async def _write_markers(self, out: WriteTxnMarkers) -> None:
        await self.write_markers(
            out.producer_id, out.producer_epoch, out.committed, out.coordinator_epoch, out.partitions, retry=True
        )
        self._act(self.coordinator.complete_markers(out.transactional_id, self.clock()))

    async def write_markers(
        self,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        partitions: Any,
        *,
        retry: bool,
    ) -> dict[tuple[str, int], int]:
        """Append the transaction's marker to each partition; with ``retry``, a partition
        that failed for a passing reason is tried again until written or gone."""
        marker = build_batch(
            [end_transaction_marker(committed, coordinator_epoch, self.clock())],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            control=True,
        )
        pending = set(partitions)
        errors: dict[tuple[str, int], int] = {}
        while pending:
            results = await self.replicas.append_as_coordinator(dict.fromkeys(pending, bytes(marker)))
            written = [tp for tp, result in results.items() if result.error_code == _E.NONE]
            if written and self.on_markers_written is not None:
                self.on_markers_written(producer_id, committed, written)
            for tp, result in results.items():
                errors[tp] = result.error_code
                if result.error_code in _MARKER_DONE:
                    pending.discard(tp)
                    if result.error_code not in (_E.NONE, _E.UNKNOWN_TOPIC_OR_PARTITION):
                        log.warning("transaction marker of producer %d not written to %s: %s", producer_id, tp, result)
            if not retry or self._stopped:
                break
            if pending:
                await asyncio.sleep(_MARKER_RETRY_S)
        return errors

    def _schedule_tick(self) -> None:
        if self._stopped:
            return
        deadline = self.coordinator.next_deadline()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        loop = asyncio.get_running_loop()
        delay = 0.0 if deadline is None else max(0.0, (deadline - self.clock()) / 1000)
        self._timer = loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        if self._stopped or (self._state_topic_ready is not None and not self._state_topic_ready.done()):
            return self._schedule_tick_later()
        self._act(self.coordinator.tick(self.clock()))
        return None

    def _schedule_tick_later(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(_MARKER_RETRY_S, self._tick)

    async def _call(self, call: Callable[[Hashable], list[Output]]) -> Any:
        token = next(self._tokens)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        self._act(call(token))
        return await future

    # --- handlers ----------------------------------------------------------------------------------

    async def init_producer_id(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        txn_id = body["transactional_id"]
        if txn_id is not None:
            error = await self._ensure_state_topic()
            if error:
                return {"throttle_time_ms": 0, "error_code": error, "producer_id": -1, "producer_epoch": -1}
        request = InitProducerIdRequest(
            txn_id, body["transaction_timeout_ms"], body.get("producer_id", -1), body.get("producer_epoch", -1)
        )
        response: InitProducerIdResponse = await self._call(
            lambda token: self.coordinator.init_producer_id(token, request, self.clock())
        )
        return {
            "throttle_time_ms": 0,
            "error_code": response.error_code,
            "producer_id": response.producer_id,
            "producer_epoch": response.producer_epoch,
        }

    async def add_partitions_to_txn(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        txn_id = body["v3_and_below_transactional_id"]
        pid, epoch = body["v3_and_below_producer_id"], body["v3_and_below_producer_epoch"]
        asked = [(t["name"], p) for t in body["v3_and_below_topics"] for p in t["partitions"]]
        unknown = {tp for tp in asked if not self._exists(tp)}
        if unknown:  # as Kafka: nothing is added, the known partitions are not attempted
            errors = {tp: _E.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in asked}
        else:
            response: AddPartitionsToTxnResponse = await self._call(
                lambda token: self.coordinator.add_partitions_to_txn(
                    token, txn_id, pid, epoch, tuple(asked), self.clock()
                )
            )
            errors = {tp: response.errors.get(tp, _E.NONE) for tp in asked}
        by_topic: dict[str, list[dict[str, int]]] = {}
        for (topic, p), code in errors.items():
            by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": int(code)})
        return {
            "throttle_time_ms": 0,
            "results_by_topic_v3_and_below": [
                {"name": t, "results_by_partition": parts} for t, parts in by_topic.items()
            ],
        }

    def _exists(self, tp: tuple[str, int]) -> bool:
        topic = self.replicas.metadata.topic(tp[0])
        return topic is not None and 0 <= tp[1] < len(topic.partitions)

    async def add_offsets_to_txn(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        group = body["group_id"]
        response: AddOffsetsToTxnResponse = await self._call(
            lambda token: self.coordinator.add_offsets_to_txn(token, *_producer(body), group, self.clock())
        )
        return {"throttle_time_ms": 0, "error_code": response.error_code}

    async def end_txn(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        committed = body["committed"]
        response: EndTxnResponse = await self._call(
            lambda token: self.coordinator.end_txn(token, *_producer(body), committed, self.clock())
        )
        return {"throttle_time_ms": 0, "error_code": response.error_code, "producer_id": -1, "producer_epoch": -1}

    async def write_txn_markers(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Markers sent by a transaction coordinator (another broker's, or a tool)."""
        answers = []
        for marker in body["markers"]:
            partitions = [(t["name"], p) for t in marker["topics"] for p in t["partition_indexes"]]
            errors = await self.write_markers(
                marker["producer_id"],
                marker["producer_epoch"],
                marker["transaction_result"],
                marker["coordinator_epoch"],
                partitions,
                retry=False,
            )
            by_topic: dict[str, list[dict[str, int]]] = {}
            for topic, p in partitions:
                by_topic.setdefault(topic, []).append({"partition_index": p, "error_code": errors[(topic, p)]})
            answers.append(
                {
                    "producer_id": marker["producer_id"],
                    "topics": [{"name": t, "partitions": parts} for t, parts in by_topic.items()],
                }
            )
        return {"markers": answers}

    # --- DescribeTransactions, ListTransactions ----------------------------------------------------

    async def describe_transactions(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        states = []
        for txn_id in body["transactional_ids"]:
            txn = self.coordinator.transactions.get(txn_id)
            if txn is None:
                states.append(_describe_error(txn_id, TRANSACTIONAL_ID_NOT_FOUND))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, p in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(p)
            states.append(
                {
                    "error_code": _E.NONE,
                    "transactional_id": txn_id,
                    "transaction_state": txn.state.kafka_name,
                    "transaction_timeout_ms": txn.timeout_ms,
                    "transaction_start_time_ms": txn.start_timestamp,
                    "producer_id": txn.producer_id,
                    "producer_epoch": txn.producer_epoch,
                    "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
                }
            )
        return {"throttle_time_ms": 0, "transaction_states": states}

    async def list_transactions(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        """Kafka's filters: by state name, by producer id, and (v1) by how long the
        transaction has run; a state name Kafka does not know is answered back."""
        known = {s.kafka_name for s in TransactionState if s is not TransactionState.DEAD}
        wanted = set(body["state_filters"])
        pids = set(body["producer_id_filters"])
        duration = body.get("duration_filter", -1)
        now = self.clock()
        listed = [
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "transaction_state": name}
            for t in self.coordinator.transactions.values()
            if (name := t.state.kafka_name) in known
            and (not wanted or name in wanted)
            and (not pids or t.producer_id in pids)
            and (duration < 0 or (t.start_timestamp >= 0 and now - t.start_timestamp > duration))
        ]
        return {
            "throttle_time_ms": 0,
            "error_code": _E.NONE,
            "unknown_state_filters": sorted(wanted - known),
            "transaction_states": sorted(listed, key=lambda t: t["transactional_id"]),
        }

    # --- FindCoordinator, transactions' part -------------------------------------------------------

    async def transaction_partition(self, key: str) -> tuple[str, int]:
        """FindCoordinator's lookup for key type 1: the ``__transaction_state`` partition of a
        transactional id, made on first need; its leader is the id's coordinator."""
        if not key:
            raise InvalidRequestError("a transactional id may not be empty")
        error = await self._ensure_state_topic()
        if error:
            raise CoordinatorNotAvailableError(f"{TRANSACTION_STATE} is not available (error {error})")
        return TRANSACTION_STATE, self.coordinator.partition_for(key)


def _producer(body: dict[str, Any]) -> tuple[str, int, int]:
    """A request's transactional id, producer id and epoch."""
    return body["transactional_id"], body["producer_id"], body["producer_epoch"]


def _describe_error(txn_id: str, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "transactional_id": txn_id,
        "transaction_state": "",
        "transaction_timeout_ms": 0,
        "transaction_start_time_ms": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }
