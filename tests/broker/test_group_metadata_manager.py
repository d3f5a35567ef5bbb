"""The group coordinator's broker side over a real replica manager, on a fake wall clock:
__consumer_offsets made compacted and internal, a restart's load (its groups answered
COORDINATOR_LOAD_IN_PROGRESS until it ends), and offsets.retention.minutes' expiry
writing tombstones that a later load honours; the records compressed as
offsets.topic.compression.codec says; a transaction's marker that comes while its
partition loads completes its offsets once loaded."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from seglog.broker.admin import AdminManager
from seglog.broker.group_metadata_manager import GroupMetadataManager
from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import FetchRequestPartition, ReplicaManager
from seglog.common import GROUP_METADATA_TOPIC
from seglog.coordinator.offset_manager import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from seglog.protocol import ErrorCode
from seglog.records import Compression, Record, build_batch

from .test_replica_manager_replication import _state

MINUTE = 60_000


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        return self.now


def open_broker(path: str, clock: Clock) -> tuple[ReplicaManager, GroupMetadataManager]:
    config = broker_config(
        {
            "log.dirs": path,
            "offsets.topic.num.partitions": 4,
            "offsets.retention.minutes": 1,
            "offsets.retention.check.interval.ms": 20,  # real milliseconds: the timer's period
            "offsets.topic.compression.codec": 3,
        }
    )
    replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
    admin = AdminManager(config, replicas)
    return replicas, GroupMetadataManager(config, replicas, admin.create_internal_topic, clock=clock)


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def close(replicas: ReplicaManager, groups: GroupMetadataManager) -> None:
    await groups.shutdown()
    await asyncio.get_running_loop().run_in_executor(None, replicas.shutdown)


def committed(groups: GroupMetadataManager, group: str) -> int:
    fetched = groups.offsets.fetch_offsets(OffsetFetchRequest(group, (("t", 0),)))
    return fetched.partitions[("t", 0)].offset


def test_load_in_progress_then_expiry_by_offsets_retention(tmp_path) -> None:
    clock = Clock()

    async def scenario() -> None:
        replicas, groups = open_broker(str(tmp_path), clock)
        groups.startup()
        await replicas.create_topic("t", 1, {})
        await groups.ensure_offsets_topic()
        topic = replicas.metadata.topic(GROUP_METADATA_TOPIC)
        assert topic is not None and topic.internal and len(topic.partitions) == 4
        assert replicas.topic_config(GROUP_METADATA_TOPIC)["cleanup.policy"] == ("compact",)
        for group, offset in (("kept", 3), ("lonely", 5)):
            request = OffsetCommitRequest(group, {("t", 0): PartitionCommit(offset)})
            answer = await groups.commit_offsets(request)
            assert answer.errors == {("t", 0): ErrorCode.NONE}
        plog = replicas.partition(GROUP_METADATA_TOPIC, groups.partition_for("lonely")).log
        (batch,) = [b for b in plog.batches(0, plog.log_end_offset)]
        assert batch.compression == Compression.LZ4  # offsets.topic.compression.codec
        await close(replicas, groups)

        # a restart: the groups come back once their partitions are loaded, not before
        replicas, groups = open_broker(str(tmp_path), clock)
        groups.startup()
        assert groups.group_error("lonely") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await until(lambda: groups.group_error("lonely") == ErrorCode.NONE, "the load")
        assert committed(groups, "lonely") == 5

        # a minute on, the standalone commits expire; a commit since keeps "kept"
        clock.now += MINUTE - 1
        request = OffsetCommitRequest("kept", {("t", 0): PartitionCommit(4)})
        await groups.commit_offsets(request)
        clock.now += 1
        await until(lambda: committed(groups, "lonely") == -1, "the expiry")
        assert committed(groups, "kept") == 4
        await close(replicas, groups)

        replicas, groups = open_broker(str(tmp_path), clock)  # the tombstone was written
        groups.startup()
        await until(lambda: not groups.loading, "the load")
        assert (committed(groups, "lonely"), committed(groups, "kept")) == (-1, 4)
        await close(replicas, groups)

    asyncio.run(scenario())


def test_a_partition_that_cannot_be_loaded_is_not_coordinated_nor_read_again(tmp_path) -> None:
    clock = Clock()

    async def scenario() -> None:
        replicas, groups = open_broker(str(tmp_path), clock)
        groups.startup()
        await groups.ensure_offsets_topic()
        p = groups.partition_for("broken")
        bad_key = build_batch([Record(key=b"\xff\xff", value=b"x")])  # a key version below 0: corrupt
        result = await replicas.append_records({(GROUP_METADATA_TOPIC, p): memoryview(bad_key)})
        assert result[(GROUP_METADATA_TOPIC, p)].error_code == 0
        await close(replicas, groups)

        replicas, groups = open_broker(str(tmp_path), clock)
        groups.startup()
        await until(lambda: not groups.loading, "the loads")
        assert groups.group_error("broken") == ErrorCode.NOT_COORDINATOR
        assert not groups.loading  # not read again for every request
        other = next(g for g in (f"g{i}" for i in range(100)) if groups.partition_for(g) != p)
        assert groups.group_error(other) == ErrorCode.NONE
        await close(replicas, groups)

    asyncio.run(scenario())


def test_a_marker_written_while_its_partition_loads_completes_the_offsets_after(tmp_path) -> None:
    clock = Clock()
    producer_id = 1000

    async def scenario() -> None:
        replicas, groups = open_broker(str(tmp_path), clock)
        groups.startup()
        await replicas.create_topic("t", 1, {})
        await groups.ensure_offsets_topic()
        for offset in (4, 7):  # two commits of one transaction: batches of base sequence 0 both
            request = TxnOffsetCommitRequest("app", "g", producer_id, 0, {("t", 0): PartitionCommit(offset)})
            answer = await groups.txn_commit_offsets(request)
            assert answer.errors == {("t", 0): ErrorCode.NONE}
        assert committed(groups, "g") == -1  # pending until the marker
        await close(replicas, groups)

        replicas, groups = open_broker(str(tmp_path), clock)
        groups.startup()
        assert groups.loading
        # the COMMIT marker lands after the replay has read the partition's end
        groups.complete_transaction(producer_id, True, [(GROUP_METADATA_TOPIC, groups.partition_for("g"))])
        await until(lambda: not groups.loading, "the loads")
        assert committed(groups, "g") == 7
        await close(replicas, groups)

    asyncio.run(scenario())


def commit(groups: GroupMetadataManager, group: str, offset: int) -> Coroutine[Any, Any, OffsetCommitResponse]:
    """A commit of ``offset`` of t-0 for ``group``."""
    return groups.commit_offsets(OffsetCommitRequest(group, {("t", 0): PartitionCommit(offset)}))


def test_a_commit_is_answered_without_waiting_for_a_turn_of_the_loop(tmp_path) -> None:
    """A commit whose record the log takes at once is appended and answered inside the
    request's first step: it needs no task (nor the loop's turns one costs)."""

    async def scenario() -> None:
        replicas, groups = open_broker(str(tmp_path), Clock())
        await replicas.create_topic("t", 1, {})
        await groups.ensure_offsets_topic()
        answer = asyncio.ensure_future(commit(groups, "g", 5))
        await asyncio.sleep(0)  # one turn: the call's first step ran, and nothing else
        assert answer.done() and answer.result().errors == {("t", 0): ErrorCode.NONE}
        assert committed(groups, "g") == 5
        await close(replicas, groups)

    asyncio.run(scenario())


def test_a_commit_behind_a_queued_append_waits_its_turn(tmp_path) -> None:
    """Appends to one __consumer_offsets partition keep the coordinator's order: a commit
    made while an earlier one waits for the log (its lock held by another thread) is
    queued behind it, even when the log is free again by the time it is made."""
    clock = Clock()

    async def scenario() -> None:
        replicas, groups = open_broker(str(tmp_path), clock)
        await replicas.create_topic("t", 1, {})
        await groups.ensure_offsets_topic()
        partition = replicas.partition(GROUP_METADATA_TOPIC, groups.partition_for("g"))
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with partition.lock:
                held.set()
                release.wait()

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait()

        def let_go() -> None:  # runs after the first commit's step, before the second's
            release.set()
            holder.join()

        first = asyncio.ensure_future(commit(groups, "g", 1))
        asyncio.get_running_loop().call_soon(let_go)
        second = asyncio.ensure_future(commit(groups, "g", 2))
        await asyncio.gather(first, second)
        assert committed(groups, "g") == 2
        await close(replicas, groups)

        replicas, groups = open_broker(str(tmp_path), clock)  # the log's order, replayed
        groups.startup()
        await until(lambda: not groups.loading, "the load")
        assert committed(groups, "g") == 2
        await close(replicas, groups)

    asyncio.run(scenario())


def test_a_commit_waiting_for_its_replicas_holds_no_other_groups_append(tmp_path) -> None:
    """acks=all in a cluster: while one group's commit waits for a follower to fetch its
    record, another group's commit to the same __consumer_offsets partition is appended
    (Kafka appends under the partition's lock and waits in the purgatory without it);
    neither is visible to OffsetFetch nor answered until the follower has both."""

    async def scenario() -> None:
        config = broker_config(
            {
                "log.dirs": str(tmp_path),
                "broker.id": 0,
                "zookeeper.connect": "127.0.0.1:1",  # a cluster's broker: LeaderAndIsr says what it leads
                "offsets.topic.num.partitions": 1,
                "offsets.commit.timeout.ms": 60_000,
            }
        )
        replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
        groups = GroupMetadataManager(config, replicas, AdminManager(config, replicas).create_internal_topic)
        replicas.leadership_listeners.append(groups.on_leadership_change)
        state = _state(GROUP_METADATA_TOPIC, 0, 1, [0, 1], [0, 1])
        assert replicas.become_leader_or_follower(9, 1, [state], {GROUP_METADATA_TOPIC: uuid.uuid4()}) == {
            (GROUP_METADATA_TOPIC, 0): ErrorCode.NONE
        }
        await until(lambda: groups.group_error("a") == ErrorCode.NONE, "the load")
        plog = replicas.partition(GROUP_METADATA_TOPIC, 0).log

        first = asyncio.ensure_future(commit(groups, "a", 1))
        second = asyncio.ensure_future(commit(groups, "b", 2))
        await until(lambda: plog.log_end_offset == 2, "the second group's record in the leader's log")
        assert not first.done() and not second.done()  # both wait for follower 1
        assert (committed(groups, "a"), committed(groups, "b")) == (-1, -1)

        for offset in (0, 2):  # the follower reads both records, then says it has them
            fetch = FetchRequestPartition(GROUP_METADATA_TOPIC, 0, offset, 1 << 20, 1)
            await replicas.read([fetch], 1 << 20, replica_id=1)
        assert (await first).errors == (await second).errors == {("t", 0): ErrorCode.NONE}
        assert (committed(groups, "a"), committed(groups, "b")) == (1, 2)
        await replicas.stop_replication()
        await close(replicas, groups)

    asyncio.run(scenario())
