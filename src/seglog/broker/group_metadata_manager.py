"""The group coordinator on the broker's event loop (Kafka's ``GroupMetadataManager``),
a user of the coordinator runtime (``coordinator_runtime``).

The membership and offset rules live in ``seglog.coordinator`` without I/O; the runtime
gives them ``__consumer_offsets`` (created on first need: ``offsets.topic.num.partitions``,
compacted, ``offsets.topic.segment.bytes``; in a cluster through ZooKeeper with
``offsets.topic.replication.factor`` replicas), leadership, loading (``group_loader``) and
unloading, the calls' answers, the writes (one batch per store, acks=all within
``offsets.commit.timeout.ms``, in order per partition) and the timer. This module adds:

- which partition holds a group (``partitioning.partition_for`` over the topic's own
  partition count) and the answer for a group not coordinated here (NOT_COORDINATOR,
  COORDINATOR_LOAD_IN_PROGRESS); an unloaded partition's groups die, their waiting
  JoinGroup and SyncGroup answered NOT_COORDINATOR;
- the coordinator's outputs: ``Reply`` completes a call, ``Forget`` completes it with None
  (no answer, as Kafka never answers those requests), ``StoreGroup`` and ``StoreOffsets``
  become writes;
- offset commits (``commit_offsets``, ``txn_commit_offsets``) without a call's token: the
  offset manager returns the answer or the store, whose completion is the answer, made in
  the request's own turn when the log takes the batch at once;
- time: the coordinator's ``next_deadline`` (sessions, rebalance and sync waits, the
  initial rebalance delay) and the offsets' expiry every
  ``offsets.retention.check.interval.ms``, on the runtime's one timer;
- transactions: a TxnOffsetCommit's batch carries the producer's id and epoch, and a
  transaction's marker written to a partition (``complete_transaction``) completes the
  offsets its producer committed there;
- deleted topics: their partitions' committed offsets are removed from every group
  coordinated here, with tombstones (``on_partitions_deleted``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from typing import Any

from ..common import GROUP_METADATA_TOPIC, TopicPartition
from ..config import BrokerConfig
from ..coordinator.group_admin import GroupAdmin
from ..coordinator.group_coordinator import Forget, GroupConfig, GroupCoordinator, Reply, StoreGroup
from ..coordinator.group_loader import GroupLoader, LoadedGroup
from ..coordinator.offset_manager import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetManager,
    StoreOffsets,
    TxnOffsetCommitRequest,
)
from ..coordinator.partitioning import partition_for
from ..errors import ErrorCode, SeglogError
from ..records import Compression
from ..records.batch import build_batch
from .coordinator_runtime import CoordinatorRuntime, CoordinatorState, TopicCreator, TopicSpec, WriteCallback
from .replica_manager import ReplicaManager

log = logging.getLogger(__name__)

Output = Reply | Forget | StoreGroup | StoreOffsets
Call = Callable[[Hashable, int], list[Any]]  # (token, now ms) -> the coordinator's outputs


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
        group_config = GroupConfig.from_broker(config)
        self.coordinator = GroupCoordinator(replace(group_config, offsets_topic_num_partitions=self.num_partitions))
        self.offsets = OffsetManager(self.coordinator)
        self.admin = GroupAdmin(self.offsets)
        self._compression = Compression(config["offsets.topic.compression.codec"])
        self._clock = clock
        self.runtime: CoordinatorRuntime[dict[str, LoadedGroup]] = CoordinatorRuntime(
            self._topic_spec,
            replicas,
            GroupLoader(),
            self,
            create_topic,
            write_timeout_ms=config["offsets.commit.timeout.ms"],
            clock=clock,
        )
        # markers written to a partition while it loads, applied once it is (the replay may end before them)
        self._markers_while_loading: dict[int, list[tuple[int, bool]]] = {}

    # --- start and stop --------------------------------------------------------------------------

    def startup(self) -> None:
        """Load the ``__consumer_offsets`` partitions this broker leads, in the background;
        offsets expire every ``offsets.retention.check.interval.ms`` from then on."""
        self.runtime.startup()
        self.offsets.next_cleanup_ms = self._clock() + self.config["offsets.retention.check.interval.ms"]
        self.runtime.reschedule()

    async def shutdown(self) -> None:
        """Unload every partition (requests still waiting are answered NOT_COORDINATOR),
        stop the timer and wait for the writes under way."""
        await self.runtime.shutdown()

    # --- which groups this broker coordinates -------------------------------------------------------

    def _topic_spec(self) -> TopicSpec:
        topic_config = {
            "cleanup.policy": "compact",
            "segment.bytes": self.config["offsets.topic.segment.bytes"],
            "compression.type": "producer",
        }
        factor = self.config["offsets.topic.replication.factor"]
        return TopicSpec(GROUP_METADATA_TOPIC, self.num_partitions, factor, topic_config)

    @property
    def num_partitions(self) -> int:
        """As Kafka: the partition count of the topic when it exists, whatever the config says."""
        count = self.replicas.metadata.partition_count(GROUP_METADATA_TOPIC)
        return count or self.config["offsets.topic.num.partitions"]

    def partition_for(self, group_id: str) -> int:
        count = self.replicas.metadata.partition_count(GROUP_METADATA_TOPIC)  # num_partitions's, inline: twice a commit
        return partition_for(group_id, count or self.config["offsets.topic.num.partitions"])

    def group_error(self, group_id: str) -> int:
        """NONE when this broker coordinates ``group_id`` now; otherwise what to answer."""
        return self.runtime.partition_error(self.partition_for(group_id))

    def on_leadership_change(self, leading: Iterable[tuple[str, int]], following: Iterable[tuple[str, int]]) -> None:
        """The replica manager's leadership listener (the runtime's)."""
        self.runtime.on_leadership_change(leading, following)

    @property
    def loading(self) -> bool:
        return self.runtime.loading

    def coordinates(self, group_id: str) -> bool:
        return self.group_error(group_id) == ErrorCode.NONE

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` unless it exists (FindCoordinator's first use); raises
        what the creation raised."""
        await self.runtime.ensure_topic()

    # --- the runtime's coordinator -----------------------------------------------------------------

    def on_loaded(self, partition: int, epoch: int, loaded: dict[str, LoadedGroup]) -> None:
        now = self._clock()
        for group in loaded.values():
            if self.partition_for(group.group_id) == partition:  # else: written with another partition count
                self.coordinator.load_group(group, now)
        for producer_id, committed in self._markers_while_loading.pop(partition, []):
            self.complete_transaction(producer_id, committed, [TopicPartition(GROUP_METADATA_TOPIC, partition)])
        if loaded:
            log.info("loaded %d groups of %s-%d", len(loaded), GROUP_METADATA_TOPIC, partition)

    def on_unloaded(self, partition: int) -> None:
        """Drop the groups of a partition this broker no longer coordinates (Kafka's
        ``removeGroupsForPartition``): their waiting JoinGroup and SyncGroup are answered
        NOT_COORDINATOR."""
        self._markers_while_loading.pop(partition, None)
        now = self._clock()
        for group_id in [g for g in self.coordinator.groups if self.partition_for(g) == partition]:
            self._dispatch(self.coordinator.unload_group(group_id, now))

    def next_deadline(self) -> int | None:
        due, cleanup = self.coordinator.next_deadline(), self.offsets.next_cleanup_ms  # asked after every call
        if due is None or cleanup is None:
            return cleanup if due is None else due
        return min(due, cleanup)

    def on_deadline(self, now_ms: int) -> None:
        self._dispatch(self.coordinator.tick(now_ms))
        cleanup = self.offsets.next_cleanup_ms
        if cleanup is not None and cleanup <= now_ms:  # offsets.retention.minutes; the next in an interval
            self._dispatch(self.offsets.cleanup(now_ms))

    # --- calls into the coordinator ----------------------------------------------------------------

    async def call(self, request: Call) -> Any:
        """Run ``request(token, now)`` (a coordinator method taking a token) and wait for
        its answer: the response value, or None for a request Kafka never answers."""
        return await self.runtime.call(lambda token: self._dispatch(request(token, self._clock())))

    async def commit_offsets(self, request: OffsetCommitRequest) -> OffsetCommitResponse:
        """OffsetCommit: the coordinator's answer, once the commit's record is in the log."""
        now = self._clock()  # one reading a commit: its timestamp, its batch's
        store = self.offsets.commit_offsets(request, now)
        self.runtime.reschedule()  # a member's commit restarted its session
        return store if isinstance(store, OffsetCommitResponse) else await self._store_offsets(store, now)

    async def txn_commit_offsets(self, request: TxnOffsetCommitRequest) -> OffsetCommitResponse:
        """TxnOffsetCommit: the coordinator's answer, once the commit's record is in the log."""
        now = self._clock()
        store = self.offsets.txn_commit_offsets(request, now)
        return store if isinstance(store, OffsetCommitResponse) else await self._store_offsets(store, now)

    async def _store_offsets(self, store: StoreOffsets, now: int) -> OffsetCommitResponse:
        """Append a commit's records, then its answer: made in this turn when the log takes the
        batch at once (nearly always), else once the write's task has it in the ISR."""
        answers: list[OffsetCommitResponse | None] = []

        def stored(error: int, base_offset: int) -> None:
            answers.append(self.offsets.complete_store(store.store_id, error, base_offset))

        task = self._write(store.group_id, store.records, stored, store.producer_id, store.producer_epoch, now)
        if task is not None:
            await asyncio.shield(task)  # a request cancelled meanwhile leaves its write to end
        (answer,) = answers
        assert answer is not None  # a commit's store: answered
        return answer

    async def run(self, request: Callable[[int], Iterable[Output]]) -> None:
        """Run ``request(now)`` (calls that answer nothing themselves: deletions, expiry) and
        wait until the records it asked for are appended."""
        writes = self._dispatch(request(self._clock()))
        self.runtime.reschedule()
        if writes:
            await asyncio.gather(*writes, return_exceptions=True)

    def _dispatch(self, outputs: Iterable[Output]) -> list[asyncio.Task[None]]:
        """Act on the coordinator's outputs; returns the writes under way (those written at
        once are acted on before it returns)."""
        writes: list[asyncio.Task[None] | None] = []
        for out in outputs:
            if isinstance(out, Reply):
                self.runtime.complete(out.token, out.response)
            elif isinstance(out, Forget):
                self.runtime.complete(out.token, None)
            elif isinstance(out, StoreGroup):
                stored = functools.partial(self._group_stored, out.store_id)
                writes.append(self._write(out.group_id, ((out.key, out.value),), stored))
            else:
                stored = functools.partial(self._offsets_stored, out.store_id)
                writes.append(self._write(out.group_id, out.records, stored, out.producer_id, out.producer_epoch))
        return [task for task in writes if task is not None]

    def _group_stored(self, store_id: int, error: int, base_offset: int) -> None:
        self._dispatch(self.coordinator.complete_store(store_id, error, self._clock()))

    def _offsets_stored(self, store_id: int, error: int, base_offset: int) -> None:
        self.offsets.complete_store(store_id, error, base_offset)  # tombstones: nothing answers

    def _write(
        self,
        group_id: str,
        records: Iterable[tuple[bytes, bytes | None]],
        stored: WriteCallback,
        producer_id: int = -1,
        producer_epoch: int = -1,
        now: int | None = None,
    ) -> asyncio.Task[None] | None:
        """Append the records as one batch, timestamped ``now`` (None: the clock's time)."""
        # as Kafka's AppendOrigin.Coordinator: a TxnOffsetCommit's batch carries the
        # producer's id and epoch but base sequence 0 each time, so sequences (and the
        # duplicate check) are not applied, the epoch is
        if now is None:
            now = self._clock()
        timed = []  # (a loop: a comprehension is a function made and called, every commit)
        for key, value in records:
            timed.append((key, value, now))
        if producer_id == -1:  # a commit's (nearly always): the defaults, no producer
            batch = build_batch(timed, compression=self._compression)
        else:
            batch = build_batch(
                timed,
                compression=self._compression,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=0,
                transactional=True,
            )
        # the topic's partition count, should a client have made it
        return self.runtime.schedule_write(self.partition_for(group_id), batch, stored)

    # --- transactions' markers ------------------------------------------------------------------------

    def complete_transaction(self, producer_id: int, committed: bool, partitions: Iterable[tuple[str, int]]) -> None:
        """The transaction coordinator wrote the producer's COMMIT or ABORT marker to these
        partitions: the offsets it committed to groups of the ``__consumer_offsets`` ones
        become visible or are dropped (Kafka's ``scheduleHandleTxnCompletion``)."""
        for topic, p in partitions:
            if topic != GROUP_METADATA_TOPIC:
                continue
            if self.runtime.state(p) is CoordinatorState.LOADING:
                self._markers_while_loading.setdefault(p, []).append((producer_id, committed))
                continue
            try:
                self.offsets.complete_transaction(producer_id, committed, p)
            except SeglogError as e:  # a commit whose record is still being appended: Kafka's IllegalState
                log.error("transaction of producer %d on %s-%d: %s", producer_id, GROUP_METADATA_TOPIC, p, e)

    def on_partitions_deleted(self, partitions: Iterable[tuple[str, int]]) -> None:
        """These partitions' topics were deleted: the groups coordinated here forget their
        offsets of them, with tombstones (Kafka's ``GroupCoordinator.onPartitionsDeleted``)."""
        deleted = [TopicPartition(*tp) for tp in partitions]
        if deleted:
            self._dispatch(self.offsets.remove_partitions(deleted, self._clock()))
            self.runtime.reschedule()
