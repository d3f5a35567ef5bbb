"""The partitions this broker holds, and every storage call the broker makes.

Kafka's ``ReplicaManager``: it owns a ``Partition`` per topic partition (its log, its
role, leader epoch, replicas and ISR), appends producers' batches as the leader, reads
for fetches, answers offset lookups, and changes topics. It is the one module of the
broker that touches ``seglog.storage``, so that a change of the storage API stays here.

Storage calls block (appends fsync under ``flush.messages``, reads ``pread``, topic
creation makes files), so each request's storage work runs as one call in a thread pool
of ``num.io.threads``; the event loop only waits for it. The exception is a small
produce whose appends cannot wait (``PartitionLog.try_append_batches``: the log's lock
free, no segment roll, no fsync due): it runs on the loop, as the hop to a thread and
back would cost more than the append; the appends refused go to the pool as before. A partition log has its own
lock: appends from several connections to one partition are serialised there, as Kafka
serialises them under the log's lock.

Roles: on one broker every partition is a leader whose ISR is the broker itself, so
acks=all is answered as soon as the append is done, and the high watermark, which this
module owns (the logs are opened with ``standalone=False``), moves to the log end after
each append (Kafka's maybeIncrementLeaderHW: the min LEO over the ISR). The cluster will add followers
(fetching from leaders, appending through storage's follower path) and park acks=all
produces in the purgatory until the ISR has the records.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from ..config import TOPIC_KEYS, BrokerConfig
from ..errors import (
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    SeglogError,
    UnknownTopicOrPartitionError,
)
from ..storage import FileSlice, LogConfig, LogManager, PartitionLog, isolation
from ..storage.naming import validate_topic
from .metadata_cache import BrokerInfo, MetadataCache, PartitionState, TopicMetadata, topic_id_text, topic_uuid
from .purgatory import Purgatory

log = logging.getLogger(__name__)

T = TypeVar("T")
TopicPartition = tuple[str, int]

NONE = 0
LEADER = "leader"
FOLLOWER = "follower"
STALE_CONTROLLER_EPOCH = 11
# a produce request's appends at most this large run on the event loop when the log can
# take them without waiting (its lock free, no roll, no fsync due): a hop to an I/O thread
# and back costs more than validating and writing them to the page cache
INLINE_APPEND_BYTES = 64 * 1024
LATEST_TIMESTAMP = -1
# the coordinators' topics, which Metadata marks internal (Kafka's Topic.INTERNAL_TOPICS)
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass
class Partition:
    """One topic partition held by this broker: its log and its role."""

    topic: str
    index: int
    log: PartitionLog
    role: str = LEADER
    leader_epoch: int = 0
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    leader_id: int = -1
    partition_epoch: int = -1


@dataclass(frozen=True)
class AppendResult:
    error_code: int = NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    size: int = 0
    message: str | None = None


@dataclass(frozen=True)
class FetchRequestPartition:
    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int


@dataclass(frozen=True)
class FetchResult:
    error_code: int = NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSlice | None = None
    aborted_transactions: list[tuple[int, int]] | None = None  # read_committed: (producer id, first offset)

    @property
    def size(self) -> int:
        return self.records.size if self.records is not None else 0


@dataclass(frozen=True)
class OffsetResult:
    error_code: int = NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True)
class LogDirPartition:
    topic: str
    partition: int
    size: int
    offset_lag: int


def _error(e: BaseException) -> tuple[int, str]:
    if isinstance(e, SeglogError):
        return e.error_code, e.message
    log.exception("unexpected error in a storage call")
    return -1, f"{type(e).__name__}: {e}"  # UNKNOWN_SERVER_ERROR


# a log's transactions as of (log end, high watermark, segments): consumers polling a log
# that did not change since their last fetch do not walk it again
_TRANSACTIONS: weakref.WeakKeyDictionary[PartitionLog, tuple[tuple[Any, ...], isolation.TransactionState]] = (
    weakref.WeakKeyDictionary()
)


def _transaction_state(plog: PartitionLog) -> isolation.TransactionState:
    key = (plog.log_end_offset, plog.high_watermark, plog.segments)
    cached = _TRANSACTIONS.get(plog)
    if cached is not None and cached[0][:2] == key[:2] and cached[0][2] is key[2]:
        return cached[1]
    state = isolation.transaction_state(plog)
    _TRANSACTIONS[plog] = (key, state)
    return state


def _stable_view(plog: PartitionLog, fetch_offset: int, read_committed: bool) -> tuple[int, list | None]:
    """The last stable offset, and for read_committed the aborted transactions from the
    fetch offset on, as the Spark reader sees them (``storage.isolation``)."""
    if not read_committed:
        undecided = plog.producer_state.first_unstable_offset
        hw = plog.high_watermark
        return (hw if undecided is None else min(undecided, hw)), None
    state = _transaction_state(plog)
    lso = state.last_stable_offset
    return lso, [(t.producer_id, t.first_offset) for t in state.aborted_transactions(fetch_offset, lso)]


class ReplicaManager:
    def __init__(self, config: BrokerConfig, broker: BrokerInfo, *, clock: Callable[[], int] | None = None) -> None:
        self.config = config
        self.broker = broker
        self._logs = LogManager(config, clock=clock, standalone=False)
        self._partitions: dict[TopicPartition, Partition] = {}
        self._executor = ThreadPoolExecutor(config["num.io.threads"], thread_name_prefix="seglog-io")
        self.metadata = MetadataCache(self._logs.cluster_id or "")
        self.fetch_purgatory = Purgatory("Fetch")
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
        """Lead every partition of ``topic`` (one broker: it is every partition's only replica)."""
        me = (self.broker.broker_id,)
        states = []
        for p in self._logs.partitions(topic):
            partition_log = self._logs.partition(topic, p)
            partition_log.become_leader(partition_log.leader_epoch)  # the epoch it had: no controller yet
            self._maybe_increment_high_watermark(partition_log)
            partition = Partition(topic, p, partition_log, LEADER, partition_log.leader_epoch, me, me)
            self._partitions[(topic, p)] = partition
            states.append(PartitionState(p, self.broker.broker_id, partition.leader_epoch, me, me))
        topic_id = topic_uuid(self._logs.topic_id(topic))
        self.metadata.update_topic(TopicMetadata(topic, topic_id, tuple(states), topic in INTERNAL_TOPICS))

    @staticmethod
    def _maybe_increment_high_watermark(partition_log: PartitionLog) -> None:
        """A leader's high watermark is the min log end offset over its ISR: here the
        ISR is this broker alone, so its own log end."""
        partition_log.maybe_increment_high_watermark(partition_log.log_end_offset)

    def _forget(self, topic: str) -> None:
        for tp in [tp for tp in self._partitions if tp[0] == topic]:
            del self._partitions[tp]
        self.metadata.remove_topic(topic)

    def partition(self, topic: str, index: int) -> Partition:
        found = self._partitions.get((topic, index))
        if found is None:
            if self.cluster_mode and 0 <= index < self.metadata.partition_count(topic):
                raise NotLeaderOrFollowerError(f"broker {self.broker.broker_id} has no replica of {topic}-{index}")
            raise UnknownTopicOrPartitionError(f"this broker does not host {topic}-{index}")
        return found

    async def replay(self, topic: str, index: int, reader: Callable[[Any], T]) -> T:
        """``reader(partition log)`` in the I/O pool: a coordinator loading its state
        from ``__consumer_offsets`` or ``__transaction_state``."""
        return await self._run(reader, self.partition(topic, index).log)

    def leader_partition(self, topic: str, index: int) -> Partition:
        """The partition, if this broker leads it: what producers and consumers may use."""
        found = self.partition(topic, index)
        if found.role != LEADER:
            raise NotLeaderOrFollowerError(f"broker {self.broker.broker_id} is not the leader of {topic}-{index}")
        return found

    # --- the controller's requests (cluster mode) ----------------------------------------------------

    def become_leader_or_follower(
        self,
        controller_id: int,
        controller_epoch: int,
        states: list[dict[str, Any]],
        topic_ids: Mapping[str, uuid.UUID],
    ) -> dict[TopicPartition, int]:
        """LeaderAndIsr: lead or follow each partition in ``states`` (the request's partition states),
        making its log when missing. A state older than the partition's is refused with
        STALE_CONTROLLER_EPOCH, as Kafka does. Followers do not fetch here: replication's work."""
        errors: dict[TopicPartition, int] = {}
        for state in states:
            tp = (state["topic_name"], state["partition_index"])
            current = self._partitions.get(tp)
            epoch, partition_epoch = state["leader_epoch"], state.get("partition_epoch", -1)
            if current is not None and (epoch, partition_epoch) <= (current.leader_epoch, current.partition_epoch):
                errors[tp] = STALE_CONTROLLER_EPOCH
                continue
            try:
                topic_id = topic_ids.get(tp[0])
                plog = self._logs.get_or_create_log(
                    tp[0], tp[1], topic_id_text(topic_id) if topic_id else "", self.topic_config_source(tp[0])
                )
                leads = state["leader"] == self.broker.broker_id
                if leads:
                    plog.become_leader(epoch)
                else:
                    plog.become_follower(epoch)
                self._partitions[tp] = Partition(
                    tp[0],
                    tp[1],
                    plog,
                    LEADER if leads else FOLLOWER,
                    epoch,
                    tuple(state["replicas"]),
                    tuple(state["isr"]),
                    state["leader"],
                    partition_epoch,
                )
                errors[tp] = NONE
            except Exception as e:
                errors[tp] = _error(e)[0]
        log.info(
            "LeaderAndIsr from controller %d epoch %d: %s",
            controller_id,
            controller_epoch,
            ", ".join(f"{t}-{p}:{self._partitions[(t, p)].role}" for (t, p), c in errors.items() if c == NONE),
        )
        return errors

    def stop_replicas(
        self, controller_id: int, controller_epoch: int, partitions: list[tuple[str, int, bool, int]]
    ) -> dict[TopicPartition, int]:
        """StopReplica: stop serving each (topic, partition), deleting its log when asked."""
        errors: dict[TopicPartition, int] = {}
        for topic, index, delete, _leader_epoch in partitions:
            tp = (topic, index)
            try:
                self._partitions.pop(tp, None)
                if delete:
                    with contextlib.suppress(UnknownTopicOrPartitionError):  # never made here, or gone already
                        self._logs.delete_partition_log(topic, index)
                errors[tp] = NONE
            except Exception as e:
                errors[tp] = _error(e)[0]
        return errors

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- produce ----------------------------------------------------------------------------------

    async def append_records(
        self, batches: Mapping[TopicPartition, memoryview], *, origin: str = "client"
    ) -> dict[TopicPartition, AppendResult]:
        """Append each partition's batches as the leader (validated, offsets assigned in
        place); a partition's error is its own. Fetches waiting on them are woken.
        ``origin`` "coordinator" (the group coordinator's records): sequences unchecked."""
        results: dict[TopicPartition, AppendResult] = {}
        waiting = batches
        if sum(len(records) for records in batches.values()) <= INLINE_APPEND_BYTES:
            waiting = {}
            for tp, records in batches.items():
                result = self._try_append(tp, records, origin)
                if result is None:
                    waiting[tp] = records
                else:
                    results[tp] = result
        if waiting:
            results.update(await self._run(self._append_all, waiting, origin))
        for tp, result in results.items():
            if result.error_code == NONE:
                self.fetch_purgatory.check_and_complete(tp, result.size)
        return results

    def _append_all(
        self, batches: Mapping[TopicPartition, memoryview], origin: str = "client"
    ) -> dict[TopicPartition, AppendResult]:
        results = {}
        for tp, records in batches.items():
            result = self._append(tp, records, wait=True, origin=origin)
            assert result is not None
            results[tp] = result
        return results

    def _try_append(self, tp: TopicPartition, records: memoryview, origin: str = "client") -> AppendResult | None:
        """On the event loop: the append, or None when it could wait (lock, roll, fsync)."""
        return self._append(tp, records, wait=False, origin=origin)

    def _append(
        self, tp: TopicPartition, records: memoryview, *, wait: bool, origin: str = "client"
    ) -> AppendResult | None:
        try:
            plog = self.leader_partition(*tp).log
            append = plog.append_batches if wait else plog.try_append_batches
            info = append(records, origin=origin)
            if info is None:
                return None
            self._maybe_increment_high_watermark(plog)
            return AppendResult(NONE, info.first_offset, info.log_append_time, plog.log_start_offset, info.size)
        except Exception as e:
            code, message = _error(e)
            return AppendResult(code, message=message)

    # --- fetch ------------------------------------------------------------------------------------

    async def read(
        self, requests: list[FetchRequestPartition], max_bytes: int, read_committed: bool = False
    ) -> list[FetchResult]:
        return await self._run(self._read_all, requests, max_bytes, read_committed)

    def _read_all(
        self, requests: list[FetchRequestPartition], max_bytes: int, read_committed: bool = False
    ) -> list[FetchResult]:
        """Kafka's readFromLog: partitions in request order, each up to its own max bytes
        and what is left of the request's; the first batch of the response is whole even
        when larger (KIP-74; Fetch v3 and later, the versions served)."""
        results = []
        remaining = max_bytes
        for req in requests:
            try:
                partition = self.leader_partition(req.topic, req.partition)
                plog = partition.log
                hw = plog.high_watermark
                lso, aborted = _stable_view(plog, req.fetch_offset, read_committed)
                limit = min(req.max_bytes, remaining)
                first = remaining == max_bytes
                bound = lso if read_committed else None
                data = plog.read(req.fetch_offset, max(limit, 0), upper_bound=bound, min_one_message=first)
                found = data.slice if data.slice is not None and (limit > 0 or first) else None
                if found is not None:
                    remaining = max(0, remaining - found.size)
                results.append(FetchResult(NONE, hw, lso, plog.log_start_offset, found, aborted))
            except OffsetOutOfRangeError as e:
                results.append(FetchResult(e.error_code, e.log_end_offset, e.log_end_offset, e.log_start_offset))
            except Exception as e:
                results.append(FetchResult(_error(e)[0]))
        return results

    # --- transactions -----------------------------------------------------------------------------

    async def append_as_coordinator(
        self, batches: Mapping[TopicPartition, bytes]
    ) -> dict[TopicPartition, AppendResult]:
        """Append the transaction coordinator's control batches (markers), checked for
        the producer's epoch only; fetches waiting on the partitions are woken."""
        results = await self._run(self._append_as_coordinator, batches)
        for tp, result in results.items():
            if result.error_code == NONE:
                self.fetch_purgatory.check_and_complete(tp, result.size)
        return results

    def _append_as_coordinator(self, batches: Mapping[TopicPartition, bytes]) -> dict[TopicPartition, AppendResult]:
        results = {}
        for tp, batch in batches.items():
            try:
                plog = self.leader_partition(*tp).log
                info = plog.append_batches(batch, origin="coordinator")
                self._maybe_increment_high_watermark(plog)
                results[tp] = AppendResult(
                    NONE, info.first_offset, info.log_append_time, plog.log_start_offset, info.size
                )
            except Exception as e:
                code, message = _error(e)
                results[tp] = AppendResult(code, message=message)
        return results

    def partition_log(self, topic: str, index: int) -> PartitionLog:
        """The log of a partition this broker leads (the coordinators load their state from it)."""
        return self.partition(topic, index).log

    # --- offsets ----------------------------------------------------------------------------------

    async def list_offsets(
        self, requests: list[tuple[str, int, int]], read_committed: bool = False
    ) -> list[OffsetResult]:
        return await self._run(self._list_offsets, requests, read_committed)

    def _list_offsets(self, requests: list[tuple[str, int, int]], read_committed: bool = False) -> list[OffsetResult]:
        results = []
        for topic, index, timestamp in requests:
            try:
                partition = self.leader_partition(topic, index)
                found = partition.log.offset_for_timestamp(timestamp)
                if found is not None and timestamp == LATEST_TIMESTAMP and read_committed:
                    found = (_stable_view(partition.log, 0, False)[0], found[1])  # the last stable offset
                if found is None:
                    results.append(OffsetResult(NONE, -1, -1, -1))
                else:
                    offset, ts = found
                    results.append(OffsetResult(NONE, ts, offset, partition.leader_epoch))
            except Exception as e:
                results.append(OffsetResult(_error(e)[0]))
        return results

    def end_offset_for_epoch(self, topic: str, index: int, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) of ``epoch`` on this leader."""
        plog = self.leader_partition(topic, index).log
        return plog.leader_epoch_cache.end_offset_for(epoch, plog.log_end_offset)

    async def delete_records(self, requests: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
        """DeleteRecords: (error code, new low watermark) per (topic, partition, offset)."""
        return await self._run(self._delete_records, requests)

    def _delete_records(self, requests: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
        out = []
        for topic, index, offset in requests:
            try:
                self.leader_partition(topic, index)
                out.append((NONE, self._logs.delete_records(topic, index, offset)))
            except Exception as e:
                out.append((_error(e)[0], -1))
        return out

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

    def log_dirs(self) -> dict[str, list[LogDirPartition]]:
        """DescribeLogDirs: each log dir with the partitions it holds."""
        out: dict[str, list[LogDirPartition]] = {os.path.abspath(d): [] for d in self.config.log_dirs}
        for partition in list(self._partitions.values()):
            plog = partition.log
            parent = os.path.dirname(plog.dir)
            lag = plog.log_end_offset - plog.high_watermark
            out.setdefault(parent, []).append(
                LogDirPartition(partition.topic, partition.index, plog.size_in_bytes, lag)
            )
        return out

    # --- shutdown ----------------------------------------------------------------------------------

    def shutdown(self) -> None:
        """Clean shutdown: answer the waiting fetches, stop the I/O threads (their storage
        calls finish first), close the logs (flush, checkpoints, clean-shutdown marker)."""
        self.fetch_purgatory.complete_all()
        self._executor.shutdown(wait=True)
        self._logs.close()
