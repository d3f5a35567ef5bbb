"""The group coordinator on the broker's event loop (Kafka's ``GroupMetadataManager``).

The membership and offset rules live in ``seglog.coordinator`` without I/O; this module
adds what they leave to the broker:

- ``__consumer_offsets``: created on first need (``offsets.topic.num.partitions``,
  compacted, ``offsets.topic.segment.bytes``; in a cluster through ZooKeeper with
  ``offsets.topic.replication.factor`` replicas), each group's records appended to the
  partition ``partitioning.partition_for`` names, as one batch per store, through the
  replica manager (at once on the loop when nothing is queued for the partition, its log
  can take the batch without waiting and this broker is its whole ISR; else in a task, in
  the I/O pool when the append could wait), with acks=all as Kafka's: a store is complete
  once the ISR has it (``offsets.commit.timeout.ms``), so an acknowledged commit survives
  the coordinator's broker. Appends to one partition go out in the order the coordinator
  asked for them: a group's records must replay in that order. The order is kept for the
  append alone: the wait for the ISR is made after it, as Kafka's DelayedProduce, so a
  commit waiting for its followers holds no other group's append to the partition;
- loading and unloading (Kafka's ``onElection`` / ``onResignation``): every partition of
  the topic this broker leads is replayed (``group_loader``) in the I/O pool, at start-up,
  when LeaderAndIsr makes this broker its leader (``on_leadership_change``), or when first
  asked about at a leader epoch not yet loaded; until it is, its groups are answered
  COORDINATOR_LOAD_IN_PROGRESS. A partition no longer led here (LeaderAndIsr making this
  broker a follower, StopReplica, shutdown) has its groups unloaded: their waiting
  JoinGroup and SyncGroup are answered NOT_COORDINATOR, their state dropped, and a
  group of a partition this broker does not lead is answered NOT_COORDINATOR;
- requests: a coordinator call gets a token and a future; the coordinator's ``Reply``
  for the token completes it, a ``Forget`` completes it with None (no answer, as Kafka
  never answers those requests), later or at once;
- time: one ``call_later`` at the coordinator's ``next_deadline`` (sessions, rebalance
  and sync waits, the initial rebalance delay), moved whenever a call changes it, and
  the offsets' expiry every ``offsets.retention.check.interval.ms``. No polling;
- transactions: records are appended as the coordinator (sequences not checked), and
  a transaction's marker written to a partition (``complete_transaction``) completes
  the offsets its producer committed there (TxnOffsetCommit);
- deleted topics: their partitions' committed offsets are removed from every group
  coordinated here, with tombstones (``on_partitions_deleted``).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import replace
from typing import Any

from ..config import BrokerConfig
from ..coordinator.group_admin import GroupAdmin
from ..coordinator.group_coordinator import Forget, GroupConfig, GroupCoordinator, Reply, StoreGroup
from ..coordinator.group_loader import LoadedGroup, load_groups
from ..coordinator.offset_manager import OffsetManager, StoreOffsets
from ..coordinator.partitioning import partition_for
from ..errors import SeglogError, TopicExistsError
from ..protocol import ErrorCode
from ..records import Compression
from ..records.batch import build_batch
from ..storage import AppendOrigin
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"

Output = Reply | Forget | StoreGroup | StoreOffsets
Call = Callable[[Hashable, int], list[Any]]  # (token, now ms) -> the coordinator's outputs
# (name, partitions, replication factor, topic config): the admin manager's, through ZooKeeper in a cluster
TopicCreator = Callable[[str, int, int, dict[str, Any]], Awaitable[None]]


_NO_ANSWER = object()


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


class GroupMetadataManager:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        create_topic: TopicCreator,
        *,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.replicas = replicas
        self._create_topic = create_topic
        group_config = GroupConfig.from_broker(config)
        self.coordinator = GroupCoordinator(replace(group_config, offsets_topic_num_partitions=self.num_partitions))
        self.offsets = OffsetManager(self.coordinator)
        self.admin = GroupAdmin(self.offsets)
        self._compression = Compression(config["offsets.topic.compression.codec"])
        self._commit_timeout_ms = config["offsets.commit.timeout.ms"]
        self._clock = clock
        self._tokens = itertools.count(1)
        self._waiting: dict[Hashable, asyncio.Future[Any]] = {}
        self._calling: Hashable | None = None  # the token of the call being dispatched
        self._answered: dict[Hashable, Any] = {}  # its answer, when it came inside the dispatch
        self._loading: dict[int, int] = {}  # partition -> the leader epoch it is being loaded at
        self._loaded: dict[int, int] = {}  # partition -> the leader epoch it was loaded at
        self._failed: set[int] = set()  # could not be read: not coordinated here (the error is logged)
        # markers written to a partition while it loads, applied once it is (the replay may end before them)
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}
        self._append_locks: dict[int, asyncio.Lock] = {}
        self._queued: dict[int, int] = {}  # partition -> its appends in tasks not yet in the log
        self._appends: set[asyncio.Task[None]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._creating: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due: int | None = None
        self._cleanup_timer: asyncio.TimerHandle | None = None
        self._stopped = False

    # --- start and stop --------------------------------------------------------------------------

    def startup(self) -> None:
        """Load the ``__consumer_offsets`` partitions this broker leads, in the background;
        offsets expire every ``offsets.retention.check.interval.ms`` from then on."""
        for p in range(self.replicas.metadata.partition_count(OFFSETS_TOPIC)):
            epoch = self._leader_epoch(p)
            if epoch is not None:
                self._start_load(p, epoch)
        self._schedule_cleanup(self.config["offsets.retention.check.interval.ms"])

    async def shutdown(self) -> None:
        """Unload every partition (requests still waiting are answered NOT_COORDINATOR),
        stop the timers and wait for the appends under way (the replica manager's pool
        must still run them)."""
        for p in {*self._loaded, *self._loading}:
            self._unload(p)
        self._stopped = True
        for timer in (self._timer, self._cleanup_timer):
            if timer is not None:
                timer.cancel()
        self._timer = self._cleanup_timer = None
        for task in list(self._tasks):
            task.cancel()
        if self._appends:
            await asyncio.gather(*self._appends, return_exceptions=True)

    def _spawn(self, coroutine: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # --- which groups this broker coordinates -------------------------------------------------------

    @property
    def num_partitions(self) -> int:
        """As Kafka: the partition count of the topic when it exists, whatever the config says."""
        return self.replicas.metadata.partition_count(OFFSETS_TOPIC) or self.config["offsets.topic.num.partitions"]

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def group_error(self, group_id: str) -> int:
        """NONE when this broker coordinates ``group_id`` now; otherwise what to answer. A
        partition led at a new leader epoch (a client made the topic, or, in a cluster, the
        leadership came here) is loaded first; one no longer led is forgotten."""
        p = self.partition_for(group_id)
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self._leader_epoch(p)
        if epoch is None or p in self._failed:
            self._unload(p)
            return ErrorCode.NOT_COORDINATOR
        if self._loaded.get(p) != epoch:
            self._unload(p)
            self._start_load(p, epoch)
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def _leader_epoch(self, p: int) -> int | None:
        try:
            return self.replicas.leader_partition(OFFSETS_TOPIC, p).leader_epoch
        except SeglogError:  # not here, or a follower
            return None

    def on_leadership_change(self, leading: list[tuple[str, int]], following: list[tuple[str, int]]) -> None:
        """The replica manager's leadership listener: a ``__consumer_offsets`` partition led
        here now is loaded (Kafka's ``onElection``), one no longer led is unloaded
        (``onResignation``)."""
        for topic, p in following:
            if topic == OFFSETS_TOPIC:
                self._unload(p)
        for topic, p in leading:
            epoch = self._leader_epoch(p) if topic == OFFSETS_TOPIC else None
            if epoch is not None and self._loaded.get(p) != epoch and self._loading.get(p) != epoch:
                self._unload(p)
                self._start_load(p, epoch)

    def _unload(self, p: int) -> None:
        """Drop the groups of a partition this broker no longer coordinates (Kafka's
        ``removeGroupsForPartition``): their waiting JoinGroup and SyncGroup are answered
        NOT_COORDINATOR; a load under way is discarded when it ends."""
        self._loading.pop(p, None)
        self._markers_while_loading.pop(p, None)
        if self._loaded.pop(p, None) is None:
            return
        now = self._clock()
        for group_id in [g for g in self.coordinator.groups if self.partition_for(g) == p]:
            self._dispatch(self.coordinator.unload_group(group_id, now))
        log.info("unloaded the groups of %s-%d", OFFSETS_TOPIC, p)

    @property
    def loading(self) -> bool:
        return bool(self._loading)

    def coordinates(self, group_id: str) -> bool:
        return self.group_error(group_id) == ErrorCode.NONE

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` unless it exists (FindCoordinator's first use);
        concurrent callers wait for the one creation."""
        if self.replicas.metadata.topic(OFFSETS_TOPIC) is not None:
            return
        if self._creating is None:
            self._creating = self._spawn(self._create_offsets_topic())
        creating = self._creating
        try:
            await asyncio.shield(creating)
        finally:
            if creating.done():
                self._creating = None

    async def _create_offsets_topic(self) -> None:
        topic_config = {
            "cleanup.policy": "compact",
            "segment.bytes": self.config["offsets.topic.segment.bytes"],
            "compression.type": "producer",
        }
        factor = self.config["offsets.topic.replication.factor"]
        try:
            await self._create_topic(OFFSETS_TOPIC, self.num_partitions, factor, topic_config)
        except TopicExistsError:
            return  # made meanwhile (a client, another broker): its partitions load on first use
        for p in range(self.num_partitions):  # new, so empty: nothing to load where this broker leads
            epoch = self._leader_epoch(p)
            if epoch is not None:
                self._loaded[p] = epoch

    def _start_load(self, p: int, epoch: int) -> None:
        self._loading[p] = epoch
        self._failed.discard(p)
        self._spawn(self._load(p, epoch))

    async def _load(self, p: int, epoch: int) -> None:
        started = time.monotonic()
        try:
            groups: dict[str, LoadedGroup] = await self.replicas.replay(OFFSETS_TOPIC, p, load_groups)
        except SeglogError as e:
            if self._loading.get(p) == epoch:
                log.error("cannot load %s-%d: %s; its groups are not coordinated here", OFFSETS_TOPIC, p, e)
                self._loading.pop(p, None)
                self._markers_while_loading.pop(p, None)
                self._failed.add(p)
            return
        if self._loading.get(p) != epoch:
            return  # the leadership moved on while the partition was read
        now = self._clock()
        for group in groups.values():
            if self.partition_for(group.group_id) == p:  # else: written by a broker with another partition count
                self.coordinator.load_group(group, now)
        self._loading.pop(p, None)
        for producer_id, committed in self._markers_while_loading.pop(p, []):
            self.complete_transaction(producer_id, committed, [(OFFSETS_TOPIC, p)])
        self._loaded[p] = epoch
        if groups:
            took = (time.monotonic() - started) * 1000
            log.info("loaded %d groups of %s-%d in %.0f ms", len(groups), OFFSETS_TOPIC, p, took)
        self._reschedule()

    # --- calls into the coordinator ----------------------------------------------------------------

    async def call(self, request: Call) -> Any:
        """Run ``request(token, now)`` (a coordinator method taking a token) and wait for
        its answer: the response value, or None for a request Kafka never answers."""
        token = self._calling = next(self._tokens)
        try:
            self._dispatch(request(token, self._clock()))
        finally:
            self._calling = None
            answer = self._answered.pop(token, _NO_ANSWER)
        if answer is not _NO_ANSWER:  # answered inside the call (a commit appended at once): no future
            return answer
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        try:
            return await future
        finally:
            self._waiting.pop(token, None)

    async def run(self, request: Callable[[int], Iterable[Output]]) -> None:
        """Run ``request(now)`` (calls that answer nothing themselves: deletions, expiry) and
        wait until the records it asked for are appended."""
        appends = self._dispatch(request(self._clock()))
        if appends:
            await asyncio.gather(*appends, return_exceptions=True)

    def _dispatch(self, outputs: Iterable[Output], *, reschedule: bool = True) -> list[asyncio.Task[None]]:
        """Act on the coordinator's outputs; returns the appends it started (those
        written at once are acted on before it returns, without ``reschedule``: the
        call acting on them moves the timer once, after)."""
        appends: list[asyncio.Task[None] | None] = []
        for out in outputs:
            if isinstance(out, Reply):
                self._resolve(out.token, out.response)
            elif isinstance(out, Forget):
                self._resolve(out.token, None)
            elif isinstance(out, StoreGroup):
                records = ((out.key, out.value),)
                appends.append(self._append(self.partition_for(out.group_id), records, self._group_stored(out)))
            else:
                stored = self._offsets_stored(out)
                partition = self.partition_for(out.group_id)  # the topic's count, should a client have made it
                appends.append(self._append(partition, out.records, stored, out.producer_id, out.producer_epoch))
        if reschedule:
            self._reschedule()
        return [task for task in appends if task is not None]

    def _resolve(self, token: Hashable, response: Any) -> None:
        future = self._waiting.pop(token, None)
        if future is None:
            if self._calling == token:
                self._answered.setdefault(token, response)  # the first answer wins, as a future's
        elif not future.done():
            future.set_result(response)

    def _group_stored(self, store: StoreGroup) -> Callable[[int, int], list[Any]]:
        return lambda error, base_offset: self.coordinator.complete_store(store.store_id, error, self._clock())

    def _offsets_stored(self, store: StoreOffsets) -> Callable[[int, int], list[Any]]:
        return lambda error, base_offset: self.offsets.complete_store(store.store_id, error, self._clock(), base_offset)

    # --- appends to __consumer_offsets ---------------------------------------------------------------

    def _append(
        self,
        partition: int,
        records: Iterable[tuple[bytes, bytes | None]],
        stored: Callable[[int, int], list[Any]],
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> asyncio.Task[None] | None:
        """Append one batch of ``records``; None when it was written (and ``stored`` acted
        on) at once: no append to the partition queued before it, and its log free."""
        batch = build_batch(
            [(key, value, self._clock()) for key, value in records],
            compression=self._compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if producer_id != -1 else -1,
            transactional=producer_id != -1,
        )
        # as Kafka's AppendOrigin.Coordinator: a TxnOffsetCommit's batch carries the
        # producer's id and epoch but base sequence 0 each time, so sequences (and the
        # duplicate check) are not applied, the epoch is
        tp = (OFFSETS_TOPIC, partition)
        if not self._queued.get(partition):
            result = self.replicas.try_append_inline(tp, memoryview(batch), acks=-1, origin=AppendOrigin.COORDINATOR)
            if result is not None:
                self._dispatch(stored(result.error_code, result.base_offset), reschedule=False)
                return None
        self._queued[partition] = self._queued.get(partition, 0) + 1
        task = asyncio.get_running_loop().create_task(self._write(partition, batch, stored))
        self._appends.add(task)
        task.add_done_callback(self._appends.discard)
        return task

    async def _write(self, partition: int, batch: bytearray, stored: Callable[[int, int], list[Any]]) -> None:
        # tasks start in the order they were made, so the lock hands out appends in that order;
        # it is held for the append alone: the wait for the ISR (acks=all) is made without it,
        # as Kafka's DelayedProduce, so one commit's replication holds no other group's append
        lock = self._append_locks.setdefault(partition, asyncio.Lock())
        queued, held = True, False

        def appended() -> None:  # in the log (or refused): the next append may go
            nonlocal queued, held
            if queued:
                queued = False
                self._queued[partition] -= 1
            if held:
                held = False
                lock.release()

        try:
            await lock.acquire()
            held = True
            tp = (OFFSETS_TOPIC, partition)
            try:
                # acks=all, as Kafka's coordinator appends: answered once the ISR has the records
                results = await self.replicas.append_records(
                    {tp: memoryview(batch)},
                    acks=-1,
                    timeout_ms=self._commit_timeout_ms,
                    origin=AppendOrigin.COORDINATOR,
                    on_appended=appended,
                )
                result = results[tp]
                error, base_offset = result.error_code, result.base_offset
            except Exception as e:  # the pool shut down under us, ...: the caller is told, nothing hangs
                log.warning("append to %s-%d failed: %s", OFFSETS_TOPIC, partition, e)
                error, base_offset = ErrorCode.UNKNOWN_SERVER_ERROR, -1
        finally:
            appended()
        self._dispatch(stored(error, base_offset))

    # --- transactions' markers ------------------------------------------------------------------------

    def complete_transaction(self, producer_id: int, committed: bool, partitions: Iterable[tuple[str, int]]) -> None:
        """The transaction coordinator wrote the producer's COMMIT or ABORT marker to these
        partitions: the offsets it committed to groups of the ``__consumer_offsets`` ones
        become visible or are dropped (Kafka's ``scheduleHandleTxnCompletion``)."""
        for topic, p in partitions:
            if topic != OFFSETS_TOPIC:
                continue
            if p in self._loading:
                self._markers_while_loading.setdefault(p, []).append((producer_id, committed))
                continue
            try:
                self.offsets.complete_transaction(producer_id, committed, p)
            except SeglogError as e:  # a commit whose record is still being appended: Kafka's IllegalState
                log.error("transaction of producer %d on %s-%d: %s", producer_id, OFFSETS_TOPIC, p, e)

    def on_partitions_deleted(self, partitions: list[tuple[str, int]]) -> None:
        """These partitions' topics were deleted: the groups coordinated here forget their
        offsets of them, with tombstones (Kafka's ``GroupCoordinator.onPartitionsDeleted``)."""
        if partitions and not self._stopped:
            self._dispatch(self.offsets.remove_partitions(partitions, self._clock()))

    # --- timers ------------------------------------------------------------------------------------

    def _reschedule(self) -> None:
        """One timer at the coordinator's next deadline (moved when that changes)."""
        if self._stopped:
            return
        due = self.coordinator.next_deadline()
        if due == self._timer_due and (due is None or self._timer is not None):
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_due = due
        if due is not None:
            delay = max(0, due - self._clock()) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._timer_due = None
        self._dispatch(self.coordinator.tick(self._clock()))

    def _schedule_cleanup(self, delay_ms: int) -> None:
        self._cleanup_timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self._cleanup)

    def _cleanup(self) -> None:
        """Expire offsets (``offsets.retention.minutes``); the next run in an interval."""
        self._dispatch(self.offsets.cleanup(self._clock()))
        if not self._stopped:
            self._schedule_cleanup(self.config["offsets.retention.check.interval.ms"])
