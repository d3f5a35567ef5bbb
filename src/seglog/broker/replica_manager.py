"""The partitions this broker holds, and every storage call the broker makes.

Kafka's ``ReplicaManager``: it owns a ``Partition`` per topic partition (its log, its
role, leader epoch, replicas and ISR), appends producers' batches as the leader, reads
for fetches, answers offset lookups, and changes topics. With ``partition.py`` (what
replication asks of a partition log) it is the only module of the broker that touches
``seglog.storage``, so that a change of the storage API stays in the two.

Storage calls block (appends fsync under ``flush.messages``, reads ``pread``, topic
creation makes files), so each request's storage work runs as one call in a thread pool
of ``num.io.threads``; the event loop only waits for it. The exception is a small
produce whose appends cannot wait (``PartitionLog.try_append_batches``: the log's lock
free, no segment roll, no fsync due): it runs on the loop, as the hop to a thread and
back would cost more than the append; the appends refused go to the pool as before. A partition log has its own
lock: appends from several connections to one partition are serialised there, as Kafka
serialises them under the log's lock.

Roles: on one broker every partition is a leader whose ISR is the broker itself, so
acks=all is answered as soon as the append is done. In a cluster the controller's
LeaderAndIsr makes each partition leader or follower (``become_leader_or_follower``):
followers fetch from their leaders (``replica_fetcher.py``), leaders follow their
followers' fetches to move the high watermark and the ISR (``partition.py``, the ISR
changes sent through ``alter_partition_manager.py``), acks=all produces wait in the
produce purgatory until the ISR has their records (``delayed_produce.py``), and DeleteRecords
in the delete-records purgatory until every replica's log starts at the offset
(``delayed_delete_records.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from ..cluster.znodes import topic_id_text, topic_uuid
from ..common import TopicPartition
from ..config import TOPIC_KEYS, BrokerConfig
from ..errors import (
    ControllerMovedError,
    FencedLeaderEpochError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from ..protocol import ErrorCode
from ..storage import AppendOrigin, FileSlice, LogConfig, LogManager, PartitionLog
from ..storage.naming import validate_topic
from .alter_partition_manager import AlterPartitionChannel, IsrChange, IsrChangeResult, WireAlterPartitionChannel
from .delayed_delete_records import INVALID_LOW_WATERMARK, DelayedDeleteRecords
from .delayed_fetch import DelayedFetch
from .delayed_produce import DelayedProduce
from .inter_broker import inter_broker_security
from .metadata_cache import BrokerInfo, MetadataCache, PartitionState, TopicMetadata
from .partition import LEADER, LeaderAndIsrPartitionState, Partition, check_leader_epoch
from .purgatory import DelayedOperation, Purgatory
from .replica_fetcher import ReplicaFetcherManager

log = logging.getLogger(__name__)

T = TypeVar("T")
_tuple_new = tuple.__new__

NONE: int = ErrorCode.NONE  # no error (an int, as every error code this module hands on)
STALE_CONTROLLER_EPOCH = ControllerMovedError.error_code
# StopReplica's leader epochs that stop a replica whatever its epoch (``LeaderAndIsr.EpochDuringDelete``, ``NoEpoch``)
EPOCH_DURING_DELETE, NO_EPOCH = -2, -1
# a produce request's appends at most this large run on the event loop when the log can
# take them without waiting (its lock free, no roll, no fsync due): a hop to an I/O thread
# and back costs more than validating and writing them to the page cache. A transaction's
# 1,000 records of 100 bytes (113 KiB, sent at commit, so on the commit's critical path)
# were answered in 0.17 ms on the loop against 0.31-0.38 ms through the pool (bench/groups.py)
INLINE_APPEND_BYTES = 256 * 1024
# a fetch of at most this many partitions, all in their active segments, is read
# on the loop (``_tail_reads``): ~15 µs a partition against a hop to a thread and back
LOOP_READS = 8
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# ListOffsets v8's earliest local offset and v9's latest tiered one (KIP-405, KIP-1005): without
# tiered storage the log start offset, and none (-1), as Kafka's log without remote storage answers
EARLIEST_LOCAL_TIMESTAMP, LATEST_TIERED_TIMESTAMP = -4, -5
# ListOffsets' replica ids: a consumer's (it sees up to the HW or the LSO) and a debugging tool's (any replica)
CONSUMER_REPLICA_ID, DEBUGGING_REPLICA_ID = -1, -2


class AppendResult(NamedTuple):
    """(A tuple: made for every partition of every produce and every coordinator write.)"""

    error_code: int = NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    size: int = 0
    last_offset: int = -1
    message: str | None = None


class FetchRequestPartition(NamedTuple):
    """(A tuple: made for every partition of every fetch, at a third of a frozen dataclass's cost.)"""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1  # a follower's: where its log starts (DeleteRecords waits for it)


class FetchResult(NamedTuple):
    """(A tuple, as FetchRequestPartition.)"""

    error_code: int = NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    aborted_transactions: list[tuple[int, int]] | None = None  # read_committed: (producer id, first offset)
    log_end_offset: int = -1  # the leader's, when the read was made

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass(frozen=True)
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = -1


@dataclass(frozen=True)
class OffsetResult:
    error_code: int = NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


# DescribeLogDirs' figures of a partition: (index, size in bytes, offset lag), a plain tuple: a broker of
# 10,000 partitions makes one each per request (with a frozen dataclass each and os.path.dirname, the
# request took it 67 ms of CPU; 28 ms now)
LogDirPartition = tuple[int, int, int]


def _error(e: BaseException) -> tuple[int, str]:
    if isinstance(e, SeglogError):
        return e.error_code, e.message
    log.exception("unexpected error in a storage call")
    return ErrorCode.UNKNOWN_SERVER_ERROR, f"{type(e).__name__}: {e}"


def fetch_key(tp: TopicPartition, replica_id: int) -> Hashable:
    """What a waiting fetch watches in the fetch purgatory: a follower's (``replica_id`` >= 0)
    is woken by appends, a consumer's by the high watermark moving."""
    return (tp, "log end") if replica_id >= 0 else tp


def _unwatched(op: DelayedOperation[Any]) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def _offset_for_timestamp(partition: Partition, timestamp: int, read_committed: bool | None) -> OffsetResult:
    """Kafka's ``Partition.fetchOffsetForTimestamp``: a consumer (``read_committed`` not None) sees
    offsets below the high watermark (read_committed: the last stable offset), a replica below the log
    end; a consumer asking a new leader whose high watermark is still short of its epoch's start
    offset gets OFFSET_NOT_AVAILABLE for the latest offset, or for a timestamp found past that bound."""
    plog = partition.log
    if read_committed is None:
        last_fetchable = plog.log_end_offset
    elif read_committed:
        last_fetchable = plog.last_stable_offset
    else:
        last_fetchable = plog.high_watermark
    not_available = None
    if read_committed is not None and partition.leader_epoch_start_offset > plog.high_watermark:
        not_available = OffsetNotAvailableError(
            f"{partition.topic}-{partition.index}: the high watermark ({plog.high_watermark}) is behind the start "
            f"of leader epoch {partition.leader_epoch} ({partition.leader_epoch_start_offset})"
        )
    if timestamp == LATEST_TIMESTAMP:
        if not_available is not None:
            raise not_available
        return OffsetResult(NONE, -1, last_fetchable, partition.leader_epoch)
    if timestamp == LATEST_TIERED_TIMESTAMP:
        return OffsetResult(NONE, -1, -1, -1)
    if timestamp == EARLIEST_LOCAL_TIMESTAMP:
        timestamp = EARLIEST_TIMESTAMP
    found = plog.offset_for_timestamp(timestamp)
    if found is not None and timestamp == EARLIEST_TIMESTAMP:
        return OffsetResult(NONE, found[1], found[0], _earliest_epoch(plog))
    if found is not None and found[0] < last_fetchable:
        return OffsetResult(NONE, found[1], found[0], _batch_epoch(plog, found[0]))
    if not_available is not None:
        raise not_available
    return OffsetResult(NONE, -1, -1, -1)


def _earliest_epoch(plog: PartitionLog) -> int:
    """Kafka's ``fetchOffsetByTimestamp`` for the earliest offset: the first cached epoch, if it
    started at or before the log start offset (batches older than epochs have none), else -1."""
    entries = plog.leader_epoch_cache.entries
    return entries[0][0] if entries and entries[0][1] <= plog.log_start_offset else -1


def _batch_epoch(plog: PartitionLog, offset: int) -> int:
    """The partition leader epoch of the batch holding ``offset`` (-1 for none, or a batch before
    epochs): what Kafka answers for an offset found by timestamp or as the max timestamp's."""
    for batch in plog.batches(offset, offset + 1, check_crcs=False):
        return max(batch.partition_leader_epoch, -1)
    return -1


class ReplicaManager:
    def __init__(
        self,
        config: BrokerConfig,
        broker: BrokerInfo,
        *,
        clock: Callable[[], int] | None = None,
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        self.config = config
        self.broker = broker
        # the logs keep the high watermark of the replication-offset-checkpoint; this module moves it
        self._logs = LogManager(config, clock=clock, standalone=False)
        self._partitions: dict[TopicPartition, Partition] = {}
        self._executor = ThreadPoolExecutor(config["num.io.threads"], thread_name_prefix="seglog-io")
        self.metadata = MetadataCache(self._logs.cluster_id or "")
        self.fetch_purgatory = Purgatory("Fetch")
        self.produce_purgatory = Purgatory("Produce")
        self.delete_records_purgatory = Purgatory("DeleteRecords")
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        security = inter_broker_security(config)  # TLS and SASL to the other brokers, as the listener has them
        self.fetchers = ReplicaFetcherManager(config, broker.broker_id, self._endpoint, self._run, security)
        timeout = config["replica.socket.timeout.ms"] / 1000
        self.alter_partition_channel: AlterPartitionChannel = WireAlterPartitionChannel(
            self._controller_node, timeout, security
        )
        self.broker_epoch = broker_epoch  # this broker's registration (KIP-380), once registered
        self._controller_epoch = -1
        self._loop: asyncio.AbstractEventLoop | None = None
        self._isr_task: asyncio.Task[None] | None = None
        self._isr_changes: set[asyncio.Task[None]] = set()
        # Kafka's onLeadershipChange: called on the loop with the partitions this broker began
        # to lead and those it began to follow (the coordinators load and drop their state)
        self.leadership_listeners: list[Callable[[list[TopicPartition], list[TopicPartition]], None]] = []
        # called on the loop with the partitions of deleted topics (the group coordinator drops their offsets)
        self.deletion_listeners: list[Callable[[list[TopicPartition]], None]] = []
        # in a cluster the controller's LeaderAndIsr says which logs this broker serves, and how
        self.cluster_mode = bool(config["zookeeper.connect"])
        # in a cluster, a topic's overrides (its /config/topics znode) for logs made on LeaderAndIsr
        self.topic_config_source: Callable[[str], Mapping[str, Any]] = lambda topic: {}
        self.metadata.update_brokers([broker], controller_id=-1 if self.cluster_mode else broker.broker_id)
        if not self.cluster_mode:
            for topic in self._logs.topics():
                self._become_leader(topic)

    # --- roles and metadata ---------------------------------------------------------------------

    def _become_leader(self, topic: str) -> None:
        """Lead every partition of ``topic`` (one broker: it is every partition's only replica). A dir
        may hold only some of a topic's partitions (a cluster broker's, or one a reassignment left):
        Kafka's topics have partitions 0 to n-1, and clients take the count for the highest number
        plus one, so a missing one is listed offline (no leader) rather than the others renumbered."""
        me = (self.broker.broker_id,)
        present = self._logs.partitions(topic)
        held = set(present)  # (a list's `in`: O(n²) in a topic of n partitions)
        states = [PartitionState(p, -1, -1, (), ()) for p in range(present[-1] + 1) if p not in held]
        for p in present:
            partition = self._partitions.get(TopicPartition(topic, p))
            if partition is None:
                partition = Partition(topic, p, self._logs.partition(topic, p), self.broker.broker_id)
                partition.lead_alone()
                self._partitions[TopicPartition(topic, p)] = partition
            states.append(PartitionState(p, self.broker.broker_id, partition.leader_epoch, me, me))
        topic_id = topic_uuid(self._logs.topic_id(topic))
        states.sort(key=lambda s: s.partition)
        self.metadata.update_topic(TopicMetadata(topic, topic_id, tuple(states)))

    def _forget(self, topic: str) -> None:
        deleted = [tp for tp in self._partitions if tp[0] == topic]
        for tp in deleted:
            del self._partitions[tp]
        self.metadata.remove_topic(topic)
        self.partitions_deleted(deleted)

    def partitions_deleted(self, tps: list[TopicPartition]) -> None:
        """Tell the deletion listeners that these partitions' topic is gone (one broker: its
        own deletion; a cluster: the controller's UpdateMetadata)."""
        for listener in self.deletion_listeners:
            listener(tps)

    def partition(self, topic: str, index: int) -> Partition:
        found = self._partitions.get(TopicPartition(topic, index))
        if found is None:
            if 0 <= index < self.metadata.partition_count(topic):  # Kafka's: known, but not hosted here
                raise NotLeaderOrFollowerError(f"broker {self.broker.broker_id} has no replica of {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this broker does not host {topic}-{index}")
        return found

    async def replay(self, topic: str, index: int, reader: Callable[[Any], T]) -> T:
        """``reader(partition log)`` in the I/O pool: a coordinator loading its state
        from ``__consumer_offsets`` or ``__transaction_state``."""
        return await self._run(reader, self.partition(topic, index).log)

    def leader_partition(
        self, topic: str, index: int, current_leader_epoch: int = -1, require_leader: bool = True
    ) -> Partition:
        """The partition, if this broker leads it: what producers and consumers may use. Kafka's
        ``localLogWithEpochOrThrow`` (KIP-320): the requester's ``current_leader_epoch`` (-1: none) is
        checked against the partition's first, FENCED_LEADER_EPOCH if older, UNKNOWN_LEADER_EPOCH if
        newer, then the role."""
        found = self.partition(topic, index)
        check_leader_epoch(current_leader_epoch, found.leader_epoch)
        if require_leader and found.role is not LEADER:
            raise NotLeaderOrFollowerError(f"broker {self.broker.broker_id} is not the leader of {topic}-{index}")
        return found

    def leading_epoch(self, tp: TopicPartition) -> int | None:
        """The partition's leader epoch when this broker leads it, else None: what a
        coordinator asks on each request (``leader_partition`` without the exceptions)."""
        found = self._partitions.get(tp)
        return found.leader_epoch if found is not None and found.role is LEADER else None

    # --- the controller's requests (a cluster) --------------------------------------------------------

    def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        states: list[LeaderAndIsrPartitionState],
        topic_ids: Mapping[str, uuid.UUID],
    ) -> dict[TopicPartition, int]:
        """LeaderAndIsr: lead or follow each partition of ``states`` (the request's partition
        states, each with its topic's name), making its log when missing; the error
        code of each. As Kafka: a controller epoch older than one seen, or a leader epoch and partition
        epoch not newer than the partition's, is STALE_CONTROLLER_EPOCH; a partition whose replicas do not
        include this broker UNKNOWN_TOPIC_OR_PARTITION. A new follower's fetcher truncates
        first (OffsetForLeaderEpoch). Callable from any thread: the logs are made in the
        caller's, the roles change on the event loop."""
        errors: dict[TopicPartition, int] = {}
        accepted: list[tuple[LeaderAndIsrPartitionState, Partition]] = []
        for state in states:
            tp = TopicPartition(state.topic_name, state.partition_index)
            current = self._partitions.get(tp)
            if controller_epoch < self._controller_epoch or (
                current is not None
                and (state.leader_epoch, state.partition_epoch) <= (current.leader_epoch, current.partition_epoch)
            ):
                errors[tp] = STALE_CONTROLLER_EPOCH
            elif self.broker.broker_id not in state.replicas:
                errors[tp] = UnknownTopicOrPartitionError.error_code
            else:
                try:
                    accepted.append((state, current or self._new_partition(*tp, topic_ids.get(tp[0]))))
                except Exception as e:
                    errors[tp] = _error(e)[0]
        if controller_epoch >= self._controller_epoch:
            self._controller_epoch = controller_epoch
        self._on_loop(self._change_roles, accepted, topic_ids)
        log.info(
            "LeaderAndIsr from controller %d (epoch %d): %s",
            controller_id,
            controller_epoch,
            ", ".join(f"{p.topic}-{p.index}: {p.role and p.role.value} of epoch {p.leader_epoch}" for _, p in accepted),
        )
        errors.update({TopicPartition(p.topic, p.index): NONE for _, p in accepted})
        return errors

    def _new_partition(self, topic: str, index: int, topic_id: uuid.UUID | None) -> Partition:
        plog = self._logs.get_or_create_log(
            topic, index, topic_id_text(topic_id) if topic_id else "", self.topic_config_source(topic)
        )
        return Partition(topic, index, plog, self.broker.broker_id)

    def _change_roles(
        self, accepted: list[tuple[LeaderAndIsrPartitionState, Partition]], topic_ids: Mapping[str, uuid.UUID]
    ) -> None:
        now = self._clock()
        leading: list[TopicPartition] = []
        following: list[TopicPartition] = []
        for state, partition in accepted:
            tp = TopicPartition(partition.topic, partition.index)
            self._partitions[tp] = partition
            topic_id = topic_ids.get(tp.topic)
            if state.leader == self.broker.broker_id:
                self.fetchers.remove_partitions([tp])
                if partition.make_leader(state, topic_id, now):
                    leading.append(tp)
                self._maybe_increment_high_watermark(partition)
            elif partition.make_follower(state, topic_id):
                self.fetchers.add_partition(partition)
                following.append(tp)
            self.produce_purgatory.check_and_complete(tp)  # a leader no more answers NOT_LEADER_OR_FOLLOWER
            self.delete_records_purgatory.check_and_complete(tp)
        for listener in self.leadership_listeners:
            listener(leading, following)

    def stop_replicas(
        self, controller_id: int, controller_epoch: int, partitions: list[tuple[str, int, bool, int]]
    ) -> dict[TopicPartition, int]:
        """StopReplica: stop serving (and fetching) each (topic, partition, delete, leader
        epoch), deleting its log when asked; the error code of each. As Kafka: an older
        controller epoch is STALE_CONTROLLER_EPOCH, a leader epoch older than the partition's
        FENCED_LEADER_EPOCH (-1 and -2, a topic being deleted, stop it whatever its epoch)."""
        errors: dict[TopicPartition, int] = {}
        stopped: list[tuple[TopicPartition, bool]] = []
        for topic, index, delete, leader_epoch in partitions:
            tp = TopicPartition(topic, index)
            current = self._partitions.get(tp)
            if controller_epoch < self._controller_epoch:
                errors[tp] = STALE_CONTROLLER_EPOCH
            elif (
                current is not None
                and leader_epoch not in (EPOCH_DURING_DELETE, NO_EPOCH)
                and (leader_epoch < current.leader_epoch)
            ):
                errors[tp] = FencedLeaderEpochError.error_code
            else:
                stopped.append((tp, delete))
        if controller_epoch >= self._controller_epoch:
            self._controller_epoch = controller_epoch
        self._on_loop(self._stop, [tp for tp, _ in stopped])
        errors.update((tp, NONE) for tp, _ in stopped)
        errors.update(self._delete_logs([tp for tp, delete in stopped if delete]))
        log.info("StopReplica from controller %d (epoch %d): %s", controller_id, controller_epoch, errors)
        return errors

    def _delete_logs(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        """StopReplica's deletions, all in one call to the log manager; the error code of each
        partition that failed (a log never made here, or gone already, is no failure)."""
        if not tps:
            return {}
        try:
            failed = self._logs.delete_partition_logs(tps)
        except Exception as e:  # after the renames: the files written once for them all
            return dict.fromkeys(tps, _error(e)[0])
        return {tp: _error(e)[0] for tp, e in failed.items() if not isinstance(e, UnknownTopicOrPartitionError)}

    def _stop(self, tps: list[TopicPartition]) -> None:
        self.fetchers.remove_partitions(tps)
        for tp in tps:
            partition = self._partitions.pop(tp, None)
            if partition is not None:
                partition.stop()
                self.produce_purgatory.check_and_complete(tp)
                self.delete_records_purgatory.check_and_complete(tp)
        for listener in self.leadership_listeners:  # led here no more: the coordinators resign (Kafka's StopReplica)
            listener([], tps)

    def _on_loop(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn`` on the broker's event loop, which owns the partitions' roles and the
        fetchers; from another thread, wait for it there."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is not None or self._loop is None:
            fn(*args)
            return
        done = threading.Event()
        failure: list[BaseException] = []

        def call() -> None:
            try:
                fn(*args)
            except BaseException as e:
                failure.append(e)
            finally:
                done.set()

        self._loop.call_soon_threadsafe(call)
        done.wait()
        if failure:
            raise failure[0]

    # --- the ISR (leaders) ---------------------------------------------------------------------------

    def _alter_isr(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        """Propose ``new_isr`` to the controller (AlterPartition); it counts once written."""
        partition.pending_isr = new_isr
        change = IsrChange(
            partition.topic,
            partition.topic_id,
            partition.index,
            partition.leader_epoch,
            new_isr,
            partition.partition_epoch,
        )
        log.info(
            "%s-%d: proposing ISR %s (was %s)", partition.topic, partition.index, list(new_isr), list(partition.isr)
        )
        task = asyncio.get_running_loop().create_task(self._send_isr_change(partition, change))
        self._isr_changes.add(task)
        task.add_done_callback(self._isr_changes.discard)

    async def _send_isr_change(self, partition: Partition, change: IsrChange) -> None:
        try:
            result = await self.alter_partition_channel.alter_partition(
                self.broker.broker_id, self.broker_epoch(), change
            )
        except Exception:  # a channel's failure must not leave the change pending for ever
            log.exception("%s-%d: AlterPartition failed", partition.topic, partition.index)
            result = IsrChangeResult(ErrorCode.UNKNOWN_SERVER_ERROR)
        if partition.pending_isr != change.new_isr:
            return  # a LeaderAndIsr came meanwhile: it rules
        if result.error_code == NONE:
            if partition.commit_isr(result.leader_epoch, result.isr, result.partition_epoch):
                log.info("%s-%d: ISR now %s", partition.topic, partition.index, list(result.isr))
                self._maybe_increment_high_watermark(partition)
                self.produce_purgatory.check_and_complete((partition.topic, partition.index))
            return
        log.warning("%s-%d: AlterPartition refused (error %d)", partition.topic, partition.index, result.error_code)
        if result.error_code not in (FencedLeaderEpochError.error_code, ErrorCode.INVALID_UPDATE_VERSION):
            partition.pending_isr = None  # proposed again at the next check; else a LeaderAndIsr comes

    async def _shrink_isr_periodically(self) -> None:
        """Kafka's isr-expiration task: every half of ``replica.lag.time.max.ms``."""
        max_lag = self.config["replica.lag.time.max.ms"]
        while True:
            await asyncio.sleep(max_lag / 2000)
            now = self._clock()
            for partition in list(self._partitions.values()):
                try:  # one partition's failure must not end the task, and with it every ISR check
                    shrunk = partition.isr_to_shrink(now, max_lag)
                    if shrunk is not None:
                        self._alter_isr(partition, shrunk)
                except Exception:
                    log.exception("%s-%d: ISR check failed", partition.topic, partition.index)

    def _endpoint(self, broker_id: int) -> tuple[str, int] | None:
        found = self.metadata.broker(broker_id)
        return (found.host, found.port) if found is not None else None

    def _controller_node(self) -> tuple[int, str, int] | None:
        controller = self.metadata.controller_id
        found = self._endpoint(controller)
        return (controller, *found) if found is not None else None

    async def startup(self) -> None:
        """On the broker's event loop: the ISR expiration task."""
        self._loop = asyncio.get_running_loop()
        self._isr_task = self._loop.create_task(self._shrink_isr_periodically())

    async def stop_replication(self) -> None:
        """Before shutdown: the fetchers and the ISR task stopped, waiting produces answered."""
        for task in [self._isr_task, *self._isr_changes]:
            if task is not None:
                task.cancel()
        await self.fetchers.shutdown()
        self.produce_purgatory.complete_all()
        self.delete_records_purgatory.complete_all()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- produce ----------------------------------------------------------------------------------

    async def append_records(
        self,
        batches: Mapping[TopicPartition, memoryview],
        *,
        acks: int = 1,
        timeout_ms: int = 30_000,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        on_appended: Callable[[], None] | None = None,
    ) -> dict[TopicPartition, AppendResult]:
        """Append each partition's batches as the leader (validated, offsets assigned in
        place); a partition's error is its own. ``origin`` COORDINATOR (the coordinators'
        records): sequences unchecked. Fetches waiting on them are woken. With
        acks=-1 a partition whose ISR is smaller than min.insync.replicas is refused
        (NOT_ENOUGH_REPLICAS), and the answer waits until the ISR has the records or
        ``timeout_ms`` passes (Kafka's DelayedProduce). ``on_appended`` is called once
        the batches are in the local logs (or refused), before that wait: a coordinator
        serialising its appends lets the next one go then, as Kafka appends under the
        partition's lock and waits in the purgatory without it."""
        self._loop = asyncio.get_running_loop()
        results: dict[TopicPartition, AppendResult] = {}
        waiting = batches
        if sum(len(records) for records in batches.values()) <= INLINE_APPEND_BYTES:
            waiting = {}
            for tp, records in batches.items():
                result = self._append(tp, records, acks, wait=False, origin=origin)
                if result is None:
                    waiting[tp] = records
                else:
                    results[tp] = result
        if waiting:
            results.update(await self._run(self._append_all, waiting, acks, origin))
        appended = {tp: r for tp, r in results.items() if r.error_code == NONE}
        for tp, result in appended.items():
            partition = self._partitions.get(tp)
            if partition is not None:
                self._after_leader_append(tp, partition, result)
        if on_appended is not None:
            on_appended()
        if acks == -1 and appended:
            codes = await self._wait_for_isr(appended, timeout_ms)
            for tp, code in codes.items():
                if code != NONE:
                    message = f"{ErrorCode(code).name}: {tp[0]}-{tp[1]} appended, not acknowledged by the ISR"
                    results[tp] = results[tp]._replace(error_code=code, message=message)
        return results

    def try_append_inline(
        self, tp: TopicPartition, records: memoryview, *, acks: int = 1, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendResult | None:
        """``append_records`` of one small batch, done on the loop without awaiting: the
        result of an append written at once and acknowledged (acks=1, or acks=all where
        this broker is the whole ISR, so the high watermark passes it in the append), or
        None, nothing written: the log cannot take it so (its lock held, a roll or an fsync
        due), it is over INLINE_APPEND_BYTES, acks=all must wait for other replicas, or it
        failed. A coordinator then awaits ``append_records``, which tells the error: its
        retries stay turns of the loop, never a recursion. Spares a request a task and two
        turns of the loop."""
        partition = self._partitions.get(tp)
        if len(records) > INLINE_APPEND_BYTES or partition is None:
            return None
        if acks == -1 and partition.maximal_isr != (self.broker.broker_id,):
            return None
        try:  # the partition checks its role itself: no second lookup (``_append``'s)
            info = partition.append_as_leader(records, acks, wait=False, origin=origin)
        except Exception:
            return None  # append_records tells the error
        if info is None:
            return None
        # (tuple.__new__: the named tuple's own constructor costs as much again, on every inline append)
        log_start = partition.log_start_offset
        result = _tuple_new(
            AppendResult, (NONE, info.first_offset, info.log_append_time, log_start, info.size, info.last_offset, None)
        )
        self._after_leader_append(tp, partition, result)
        return result

    def _after_leader_append(self, tp: TopicPartition, partition: Partition, result: AppendResult) -> None:
        """On the loop: the high watermark (an ISR of this broker alone has the records), and
        the fetches waiting for them: followers' at once, consumers' once the HW passes them."""
        self.fetch_purgatory.check_and_complete(fetch_key(tp, replica_id=0), result.size)
        exposed = partition.appended(result.last_offset + 1, result.size)
        if exposed:
            self._high_watermark_moved(tp, exposed)

    def _high_watermark_moved(self, tp: TopicPartition, exposed: int) -> None:
        self.fetch_purgatory.check_and_complete(tp, exposed)
        self.produce_purgatory.check_and_complete(tp)

    async def _wait_for_isr(
        self, appended: Mapping[TopicPartition, AppendResult], timeout_ms: int
    ) -> dict[TopicPartition, int]:
        waiting = {}
        gone: dict[TopicPartition, int] = {}
        for tp, result in appended.items():
            partition = self._partitions.get(tp)
            if partition is None:  # stopped since its append (StopReplica): the ISR may never have it
                gone[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                waiting[tp] = (partition, result.last_offset + 1)
        op = DelayedProduce(timeout_ms, waiting)
        if op.check():  # no other replica to wait for (one broker), or they have it already
            return {**op.codes, **gone}
        codes: dict[TopicPartition, int] = await self.produce_purgatory.wait(op, list(waiting))
        return {**codes, **gone}

    def _append_all(
        self, batches: Mapping[TopicPartition, memoryview], acks: int, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> dict[TopicPartition, AppendResult]:
        results = {}
        for tp, records in batches.items():
            result = self._append(tp, records, acks, wait=True, origin=origin)
            assert result is not None
            results[tp] = result
        return results

    def _append(
        self,
        tp: TopicPartition,
        records: memoryview,
        acks: int,
        *,
        wait: bool,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult | None:
        """The append (None: it could wait on a lock, roll or fsync, and ``wait`` is False)."""
        try:
            partition = self.leader_partition(*tp)
            info = partition.append_as_leader(records, acks, wait=wait, origin=origin)
            if info is None:
                return None
            return AppendResult(
                NONE, info.first_offset, info.log_append_time, partition.log_start_offset, info.size, info.last_offset
            )
        except Exception as e:
            code, message = _error(e)
            return AppendResult(code, message=message)

    # --- fetch ------------------------------------------------------------------------------------

    async def fetch_messages(
        self,
        requests: list[FetchRequestPartition],
        *,
        max_bytes: int,
        max_wait_ms: int = 0,
        min_bytes: int = 1,
        read_committed: bool = False,
        replica_id: int = -1,
        while_parked: Callable[[DelayedOperation[Any]], AbstractContextManager[object]] = _unwatched,
    ) -> list[FetchResult]:
        """A fetch: Kafka's ``fetchMessages``. Read (``read``); answer with that when the fetch
        will not wait (``max_wait_ms`` 0), asks for nothing, has ``min_bytes`` or met an error.
        Else park a ``DelayedFetch`` in the fetch purgatory under its partitions' keys
        (``fetch_key``: a follower's woken by appends, a consumer's by its high watermark
        moving; a read_committed one counts the bytes below the last stable offset only)
        until it has them or ``max_wait_ms`` passes, and read again. The first read's slices
        are let go before the wait: a parked fetch holds no segment file open.

        ``while_parked(op)``: the context the wait runs in, which may abandon ``op`` (the
        request handler's ends it when its client disconnects). A fetch answered at once
        never leaves the caller's turn of the loop when its reads are of its partitions'
        tails (see ``read``)."""
        results = await self.read(requests, max_bytes, read_committed, replica_id=replica_id)
        have = sum(r.size for r in results)
        if max_wait_ms <= 0 or not requests or have >= min_bytes or any(r.error_code != NONE for r in results):
            return results
        del results  # the slices read go: a parked fetch holds no segment file open, and reads again
        stable = (lambda: self.stable_bytes(requests, min_bytes)) if read_committed else None
        op = DelayedFetch(max_wait_ms, min_bytes, have, stable)
        with while_parked(op):
            await self.fetch_purgatory.wait(
                op, [fetch_key(TopicPartition(r.topic, r.partition), replica_id) for r in requests]
            )
        return await self.read(requests, max_bytes, read_committed, replica_id=replica_id)

    async def read(
        self,
        requests: list[FetchRequestPartition],
        max_bytes: int,
        read_committed: bool = False,
        *,
        replica_id: int = -1,
    ) -> list[FetchResult]:
        """Read for a fetch (Kafka's ``readFromLog``). A follower's (``replica_id`` >= 0) reads up
        to the log end and tells its leader how far it has come: its log end offset, which may
        move the high watermark and add it back to the ISR. A consumer's reads to the high
        watermark, or with ``read_committed`` to the last stable offset, with the aborted
        transactions of what it read (the log's ``.txnindex``, Kafka's way)."""
        self._loop = asyncio.get_running_loop()
        if self._tail_reads(requests):
            results = self._read_all(requests, max_bytes, read_committed, replica_id)
        else:
            results = await self._run(self._read_all, requests, max_bytes, read_committed, replica_id)
        if replica_id >= 0:
            now = self._clock()
            for req, result in zip(requests, results, strict=True):
                if result.error_code == NONE:
                    tp = TopicPartition(req.topic, req.partition)
                    self._follower_fetched(tp, replica_id, req.fetch_offset, req.log_start_offset, result, now)
        return results

    def _tail_reads(self, requests: list[FetchRequestPartition]) -> bool:
        """Whether every read is of its partition's active segment, whose index and batch
        headers the appends just wrote to the page cache: such a read (an index lookup and
        a header or two read; the records go later, by sendfile; read_committed, the active
        segment's transaction index too, kept in memory) runs on the loop, which is quicker
        than a hop to an I/O thread and back (two thread wake-ups a fetch). Reads further
        back may meet the disk and go to the I/O threads, as Kafka's do, and so do fetches
        of many partitions (their reads together would hold the loop up)."""
        if len(requests) > LOOP_READS:
            return False
        for req in requests:
            partition = self._partitions.get(TopicPartition(req.topic, req.partition))
            if partition is None or partition.role is not LEADER:
                return False  # the I/O thread's read answers the error
            if req.fetch_offset < partition.log.active_segment.base_offset:
                return False
        return True

    def _read_all(
        self, requests: list[FetchRequestPartition], max_bytes: int, read_committed: bool, replica_id: int
    ) -> list[FetchResult]:
        """Kafka's readFromLog: partitions in request order, each up to its own max bytes
        and what is left of the request's; the first batch of the response is whole even
        when larger (KIP-74; Fetch v3 and later, the versions served)."""
        results = []
        remaining = max_bytes
        for req in requests:
            try:
                partition = self.leader_partition(req.topic, req.partition, req.current_leader_epoch)
                hw = partition.high_watermark
                # (Kafka's initialLastStableOffset: taken before the read, which stops there)
                lso = partition.last_stable_offset
                limit = min(req.max_bytes, remaining)
                first = remaining == max_bytes
                read, leo = partition.read(
                    req.fetch_offset,
                    max(limit, 0),
                    for_replica=replica_id >= 0,
                    upper_bound=lso if read_committed else None,
                    min_one_message=first,
                    read_committed=read_committed,
                )
                data = read.records
                found = data if data is not None and (limit > 0 or first) else None
                if found is not None:
                    remaining = max(0, remaining - found.size)
                aborted = None
                if read_committed and replica_id < 0:
                    aborted = [(t.producer_id, t.first_offset) for t in read.aborted_transactions or ()]
                results.append(
                    FetchResult(
                        NONE,
                        hw,
                        lso,
                        partition.log_start_offset,
                        found,
                        aborted_transactions=aborted,
                        log_end_offset=leo,
                    )
                )
            except OffsetOutOfRangeError as e:
                results.append(FetchResult(e.error_code, e.log_end_offset, e.log_end_offset, e.log_start_offset))
            except Exception as e:
                results.append(FetchResult(_error(e)[0]))
        return results

    def stable_bytes(self, requests: list[FetchRequestPartition], limit: int) -> int:
        """On the loop, for a read_committed fetch waiting in the purgatory: the bytes it
        would now read below each partition's last stable offset, counted up to ``limit``
        (Kafka's DelayedFetch measures to the LSO for FetchTxnCommitted: records appended
        past it, an open transaction's, wake no such fetch). A partition this broker no
        longer leads, or a read that fails, counts as ``limit``: the fetch answers now."""
        total = 0
        for req in requests:
            partition = self._partitions.get(TopicPartition(req.topic, req.partition))
            if partition is None or partition.role is not LEADER:
                return limit
            try:
                lso = partition.last_stable_offset
                if lso <= req.fetch_offset:
                    continue
                data, _ = partition.read(
                    req.fetch_offset, limit - total, for_replica=False, upper_bound=lso, min_one_message=True
                )
            except SeglogError:
                return limit
            total += data.size
            if total >= limit:
                break
        return total

    def _follower_fetched(
        self,
        tp: TopicPartition,
        replica_id: int,
        fetch_offset: int,
        log_start_offset: int,
        result: FetchResult,
        now: int,
    ) -> None:
        """On the loop: Kafka's ``updateFollowerFetchState``, then ISR expansion, the HW and the
        DeleteRecords waiting for the follower's log start offset."""
        partition = self._partitions.get(tp)
        if partition is None or not partition.update_follower_fetch_state(
            replica_id, fetch_offset, result.log_end_offset, now, log_start_offset
        ):
            return
        self.delete_records_purgatory.check_and_complete(tp)
        expanded = partition.isr_to_expand(replica_id)
        if expanded is not None:
            self._alter_isr(partition, expanded)
        self._maybe_increment_high_watermark(partition)

    def _maybe_increment_high_watermark(self, partition: Partition) -> None:
        exposed = partition.maybe_increment_high_watermark()
        if exposed:
            self._high_watermark_moved(TopicPartition(partition.topic, partition.index), exposed)

    def partition_log(self, topic: str, index: int) -> PartitionLog:
        """The log of a partition this broker leads (the coordinators load their state from it)."""
        return self.partition(topic, index).log

    # --- offsets ----------------------------------------------------------------------------------

    async def list_offsets(
        self,
        requests: list[ListOffsetsPartition],
        read_committed: bool = False,
        replica_id: int = CONSUMER_REPLICA_ID,
    ) -> list[OffsetResult]:
        return await self._run(self._list_offsets, requests, read_committed, replica_id)

    def _list_offsets(
        self, requests: list[ListOffsetsPartition], read_committed: bool, replica_id: int
    ) -> list[OffsetResult]:
        results = []
        for req in requests:
            try:
                partition = self.leader_partition(
                    req.topic,
                    req.partition,
                    req.current_leader_epoch,
                    require_leader=replica_id != DEBUGGING_REPLICA_ID,
                )
                isolation_level = read_committed if replica_id == CONSUMER_REPLICA_ID else None
                results.append(_offset_for_timestamp(partition, req.timestamp, isolation_level))
            except Exception as e:
                results.append(OffsetResult(_error(e)[0]))
        return results

    async def legacy_offsets(
        self, requests: list[tuple[str, int, int, int]], replica_id: int = CONSUMER_REPLICA_ID
    ) -> list[tuple[int, list[int]]]:
        """ListOffsets v0 (Kafka's ``legacyFetchOffsetsForTimestamp``): for each (topic, partition,
        timestamp, max_num_offsets), (error code, offsets descending) as the leader's log gives them
        (``legacy_offsets_before``); a consumer is told none past the high watermark, which takes
        the place of those beyond it."""
        return await self._run(self._legacy_offsets, requests, replica_id)

    def _legacy_offsets(
        self, requests: list[tuple[str, int, int, int]], replica_id: int
    ) -> list[tuple[int, list[int]]]:
        results: list[tuple[int, list[int]]] = []
        for topic, index, timestamp, max_num_offsets in requests:
            try:
                partition = self.leader_partition(topic, index, require_leader=replica_id != DEBUGGING_REPLICA_ID)
                offsets = partition.log.legacy_offsets_before(timestamp, max_num_offsets)
                hw = partition.log.high_watermark
                if replica_id == CONSUMER_REPLICA_ID and offsets and offsets[0] > hw:
                    offsets = [hw, *(o for o in offsets if o <= hw)]
                results.append((NONE, offsets))
            except Exception as e:
                results.append((_error(e)[0], []))
        return results

    def end_offset_for_epoch(
        self, topic: str, index: int, epoch: int, current_leader_epoch: int = -1
    ) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of ``epoch`` on this leader, asked by a
        replica or consumer that knows ``current_leader_epoch`` (FENCED/UNKNOWN_LEADER_EPOCH)."""
        partition = self.leader_partition(topic, index, current_leader_epoch)
        return partition.end_offset_for_epoch(epoch)

    async def delete_records(
        self, requests: list[tuple[str, int, int]], timeout_ms: int = 30_000
    ) -> list[tuple[int, int]]:
        """DeleteRecords: (error code, low watermark) per (topic, partition, offset). Kafka's
        ``deleteRecords``: the leader's log start offset moves at once, then the answer waits
        until every live replica's has reached the offset (``delayed_delete_records.py``), or
        ``timeout_ms`` passes (REQUEST_TIMED_OUT). On one broker, the only replica, it is at once."""
        self._loop = asyncio.get_running_loop()
        deleted = await self._run(self._delete_records, requests)
        answers: list[tuple[int, int]] = []
        waiting: dict[int, tuple[TopicPartition, int]] = {}
        for i, ((topic, index, _), (code, required)) in enumerate(zip(requests, deleted, strict=True)):
            low = INVALID_LOW_WATERMARK
            if code == NONE:
                try:
                    tp = TopicPartition(topic, index)
                    low = self._low_watermark(tp)
                    waiting[i] = (tp, required)
                except SeglogError as e:  # led here no more
                    code = e.error_code
            answers.append((code, low))
        op = DelayedDeleteRecords(timeout_ms, answers, waiting, self._low_watermark)
        if op.check():
            return op.answers
        return await self.delete_records_purgatory.wait(op, {tp for tp, _ in waiting.values()})

    def _delete_records(self, requests: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
        """In an I/O thread: each leader's delete; (error code, the offset its replicas must reach)."""
        out = []
        for topic, index, offset in requests:
            try:
                self.leader_partition(topic, index)
                start = self._logs.delete_records(topic, index, offset)
                out.append((NONE, start if offset == -1 else offset))  # -1: up to the high watermark
            except Exception as e:
                out.append((_error(e)[0], INVALID_LOW_WATERMARK))
        return out

    def _low_watermark(self, tp: TopicPartition) -> int:
        return self.leader_partition(*tp).low_watermark(lambda b: self.metadata.broker(b) is not None)

    # --- topics -----------------------------------------------------------------------------------

    async def create_topic(self, name: str, partitions: int, config: Mapping[str, Any]) -> None:
        await self._run(self._logs.create_topic, name, partitions, config)
        self._become_leader(name)
        log.info("created topic %s with %d partitions", name, partitions)

    async def delete_topic(self, name: str) -> None:
        await self._run(self._logs.delete_topic, name)
        self._forget(name)
        log.info("deleted topic %s", name)

    async def create_partitions(self, name: str, count: int) -> None:
        await self._run(self._logs.create_partitions, name, count)
        self._become_leader(name)
        log.info("topic %s now has %d partitions", name, count)

    def topic_config(self, name: str) -> LogConfig:
        return self._logs.topic_config(name)

    def topic_overrides(self, name: str) -> dict[str, Any]:
        return self._logs.topic_overrides(name)

    async def alter_topic_config(self, name: str, set: Mapping[str, Any], delete: list[str]) -> LogConfig:
        return await self._run(lambda: self._logs.alter_topic_config(name, set, delete))

    def apply_topic_config(self, name: str, overrides: Mapping[str, Any]) -> None:
        """A cluster's topic config change (its /config/topics znode): the overrides of the logs held here."""
        try:
            current = self._logs.topic_config(name).overrides
        except UnknownTopicOrPartitionError:
            return  # no replica here
        self._logs.alter_topic_config(name, overrides, [k for k in current if k not in overrides])

    def validate_topic_config(self, overrides: Mapping[str, Any]) -> LogConfig:
        return LogConfig(self.config, overrides)

    @staticmethod
    def validate_topic_name(name: str) -> None:
        validate_topic(name)

    @staticmethod
    def topic_config_keys() -> list[str]:
        return list(TOPIC_KEYS)

    def log_dirs(self) -> dict[str, dict[str, list[LogDirPartition]]]:
        """DescribeLogDirs: each log dir with the partitions it holds, by topic."""
        out: dict[str, dict[str, list[LogDirPartition]]] = {os.path.abspath(d): {} for d in self.config.log_dirs}
        sep = os.sep
        for partition in list(self._partitions.values()):
            plog = partition.log
            # a log's dir is its log dir's path joined with its name (no trailing separator):
            # rpartition is os.path.dirname without the checks that took a quarter of this loop
            parent = plog.dir.rpartition(sep)[0]
            by_topic = out.get(parent)
            if by_topic is None:
                by_topic = out[parent] = {}
            held = by_topic.get(partition.topic)
            if held is None:
                held = by_topic[partition.topic] = []
            held.append((partition.index, plog.size_in_bytes, plog.log_end_offset - plog.high_watermark))
        return out

    # --- shutdown ----------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Clean shutdown: answer the waiting fetches, stop the I/O threads (their storage
        calls finish first), close the logs (flush, checkpoints, clean-shutdown marker)."""
        self.fetch_purgatory.complete_all()
        self.produce_purgatory.complete_all()
        self.delete_records_purgatory.complete_all()
        self._executor.shutdown(wait=True)
        self._logs.close()
