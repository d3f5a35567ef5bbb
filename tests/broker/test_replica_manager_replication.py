"""The replica manager's replication rules on a real log dir, with a follower's fetches made
by the test: LeaderAndIsr's stale epochs, the high watermark (the ISR's smallest log end,
never back), reads up to the log end for replicas, acks=all timing out, the HW checkpoint
read on start, StopReplica's fences."""

from __future__ import annotations

import asyncio
import logging
import uuid

from seglog.broker.alter_partition_manager import IsrChange, IsrChangeResult
from seglog.broker.apis import KafkaApis
from seglog.broker.metadata_cache import BrokerInfo, PartitionState
from seglog.broker.partition import LeaderAndIsrPartitionState
from seglog.broker.properties import broker_config
from seglog.broker.replica_fetcher import truncation_offset
from seglog.broker.replica_manager import FetchRequestPartition, ListOffsetsPartition, ReplicaManager
from seglog.protocol.message_data import ListOffsetsRequestData
from seglog.records import Record
from seglog.records.batch import build_batch

TOPIC_ID = uuid.uuid4()
STALE_CONTROLLER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION, REQUEST_TIMED_OUT, FENCED_LEADER_EPOCH = 11, 3, 7, 74
OFFSET_NOT_AVAILABLE, LEADER_NOT_AVAILABLE = 78, 5


def _manager(path: str, **overrides: object) -> ReplicaManager:
    # zookeeper.connect: a cluster's broker, which serves only what LeaderAndIsr gives it
    config = broker_config({"log.dirs": path, "broker.id": 0, "zookeeper.connect": "127.0.0.1:1", **overrides})
    return ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))


def _state(topic: str, leader: int, epoch: int, isr: list[int], replicas: list[int]) -> LeaderAndIsrPartitionState:
    """LeaderAndIsr's state of partition 0 of ``topic``, its partition epoch the leader epoch."""
    return LeaderAndIsrPartitionState(
        topic_name=topic,
        partition_index=0,
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        partition_epoch=epoch,
        replicas=replicas,
    )


def _batch(n: int) -> memoryview:
    return memoryview(bytearray(build_batch([Record(key=None, value=b"v")] * n)))


async def _follower_fetch(rm: ReplicaManager, offset: int, epoch: int):
    return (await rm.read([FetchRequestPartition("t", 0, offset, 1 << 20, epoch)], 1 << 20, replica_id=1))[0]


async def _high_watermark(rm: ReplicaManager) -> int:
    return (await rm.list_offsets([ListOffsetsPartition("t", 0, -1)]))[0].offset


def test_leader_high_watermark_isr_and_checkpoint(tmp_path) -> None:
    async def first_run() -> int:
        rm = _manager(str(tmp_path))
        await rm.startup()
        changes: list[tuple[list, list]] = []
        rm.leadership_listeners.append(lambda leading, following: changes.append((leading, following)))
        try:
            lead = [_state("t", 0, 3, [0, 1], [0, 1])]
            # from another thread, as the cluster's handler calls it
            loop = asyncio.get_running_loop()
            assert await loop.run_in_executor(None, rm.become_leader_or_follower, 9, 1, lead, {"t": TOPIC_ID}) == {
                ("t", 0): 0
            }
            assert changes == [([("t", 0)], [])]
            for older_or_same in (2, 3):
                assert rm.become_leader_or_follower(9, 1, [_state("t", 0, older_or_same, [0, 1], [0, 1])], {}) == {
                    ("t", 0): STALE_CONTROLLER_EPOCH
                }
            assert rm.become_leader_or_follower(9, 0, [_state("t", 0, 4, [0, 1], [0, 1])], {}) == {
                ("t", 0): STALE_CONTROLLER_EPOCH
            }
            assert rm.become_leader_or_follower(9, 1, [_state("u", 1, 0, [1, 2], [1, 2])], {}) == {
                ("u", 0): UNKNOWN_TOPIC_OR_PARTITION
            }

            appended = await rm.append_records({("t", 0): _batch(3)}, acks=1)
            assert appended[("t", 0)].base_offset == 0
            assert await _high_watermark(rm) == 0  # follower 1, in the ISR, has nothing yet
            # a replica's ListOffsets (replica id >= 0) is answered the log end, as Kafka's
            assert (await rm.list_offsets([ListOffsetsPartition("t", 0, -1)], replica_id=1))[0].offset == 3

            read = await _follower_fetch(rm, 0, 3)  # a replica reads to the log end, past the HW
            assert [b.base_offset + b.last_offset_delta for b in read.records.batches()] == [2]
            await _follower_fetch(rm, 2, 3)
            assert await _high_watermark(rm) == 2
            await _follower_fetch(rm, 1, 3)  # a late fetch from further back: the HW never moves back
            assert await _high_watermark(rm) == 2
            assert (await _follower_fetch(rm, 2, 2)).error_code == FENCED_LEADER_EPOCH

            # acks=all: appended, but follower 1 never fetches it
            timed_out = await rm.append_records({("t", 0): _batch(1)}, acks=-1, timeout_ms=50)
            assert (timed_out[("t", 0)].error_code, timed_out[("t", 0)].base_offset) == (REQUEST_TIMED_OUT, 3)
            await _follower_fetch(rm, 3, 3)
            return await _high_watermark(rm)
        finally:
            await rm.stop_replication()
            rm.shutdown()

    hw = asyncio.run(first_run())
    assert hw == 3
    assert (tmp_path / "replication-offset-checkpoint").read_text() == "0\n1\nt 0 3\n"

    async def second_run() -> None:
        rm = _manager(str(tmp_path))
        await rm.startup()
        try:
            assert rm.become_leader_or_follower(9, 1, [_state("t", 0, 4, [0, 1], [0, 1])], {}) == {("t", 0): 0}
            assert rm.partition("t", 0).high_watermark == 3  # the checkpoint's, not the log end (4)
            # a new leader's HW short of its epoch's start (4): a consumer cannot be told the latest offset yet
            latest = await rm.list_offsets([ListOffsetsPartition("t", 0, -1)])
            assert latest[0].error_code == OFFSET_NOT_AVAILABLE
            # which ListOffsets v5 brought: older clients are told LEADER_NOT_AVAILABLE (once the topic is known)
            apis = KafkaApis(rm.config, rm, ("127.0.0.1", 9092))
            partition = PartitionState(0, 0, 4, (0, 1), (0, 1))
            rm.metadata.update_metadata([rm.broker], 9, [("t", TOPIC_ID, partition)], set())
            latest = ListOffsetsRequestData.ListOffsetsPartition(partition_index=0, timestamp=-1)
            latest_of_t = ListOffsetsRequestData.ListOffsetsTopic(name="t", partitions=[latest])
            for version, code in ((4, LEADER_NOT_AVAILABLE), (5, OFFSET_NOT_AVAILABLE)):
                answer = await apis.list_offsets(version, ListOffsetsRequestData(replica_id=-1, topics=[latest_of_t]))
                assert answer.topics[0].partitions[0].error_code == code
            rm.metadata.update_metadata([rm.broker], 9, [], {("t", 0)})
            assert rm.stop_replicas(9, 1, [("t", 0, True, 3)]) == {("t", 0): FENCED_LEADER_EPOCH}
            assert rm.stop_replicas(9, 1, [("t", 0, True, -2)]) == {("t", 0): 0}
            gone = await rm.list_offsets([ListOffsetsPartition("t", 0, -1)])
            assert gone[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
            assert not (tmp_path / "t-0").exists()
        finally:
            await rm.stop_replication()
            rm.shutdown()

    asyncio.run(second_run())


def test_a_leader_and_isr_handled_while_the_broker_stops_starts_no_fetcher(tmp_path, caplog) -> None:
    """LeaderAndIsr is handled in another thread, so one can come after the fetchers stopped: its
    partition follows, but no fetcher starts to run storage calls in the I/O threads shut down next
    (such a fetcher logged "RuntimeError: cannot schedule new futures after shutdown")."""

    async def run() -> None:
        rm = _manager(str(tmp_path))
        await rm.startup()
        rm.metadata.update_metadata([rm.broker, BrokerInfo(1, "127.0.0.1", 9093)], 1, [], set())
        await rm.stop_replication()
        follow = [_state("t", 1, 1, [0, 1], [0, 1])]
        assert rm.become_leader_or_follower(1, 1, follow, {"t": TOPIC_ID}) == {("t", 0): 0}
        rm.shutdown()
        for _ in range(3):  # a fetcher's first round would run here, on the broker's loop
            await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING):
        asyncio.run(run())
    assert [r.getMessage() for r in caplog.records] == []


def test_the_isr_shrinks_through_the_alter_partition_channel_after_a_failed_try(tmp_path) -> None:
    """A follower that never fetches leaves the ISR after replica.lag.time.max.ms: the change
    goes to the controller through the channel (here the test's), is proposed again after the
    channel failed, and counts once answered: the HW then moves without the follower."""

    async def scenario() -> None:
        rm = _manager(str(tmp_path), **{"replica.lag.time.max.ms": 200})
        proposed: list[IsrChange] = []
        answered = asyncio.Event()

        class Controller:
            async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange) -> IsrChangeResult:
                proposed.append(change)
                if len(proposed) == 1:
                    raise ConnectionResetError("the controller went away")
                answered.set()
                return IsrChangeResult(0, broker_id, change.leader_epoch, change.new_isr, change.partition_epoch + 1)

        rm.alter_partition_channel = Controller()
        await rm.startup()
        try:
            assert rm.become_leader_or_follower(9, 1, [_state("t", 0, 3, [0, 1], [0, 1])], {"t": TOPIC_ID}) == {
                ("t", 0): 0
            }
            await rm.append_records({("t", 0): _batch(2)}, acks=1)
            assert await _high_watermark(rm) == 0
            await asyncio.wait_for(answered.wait(), 30)
            assert [(c.topic_id, c.leader_epoch, c.new_isr, c.partition_epoch) for c in proposed] == [
                (TOPIC_ID, 3, (0,), 3),
                (TOPIC_ID, 3, (0,), 3),
            ]
            assert await _high_watermark(rm) == 2
        finally:
            await rm.stop_replication()
            rm.shutdown()

    asyncio.run(scenario())


def test_a_follower_that_stops_fetching_leaves_the_isr_of_a_partition_nothing_is_written_to(tmp_path) -> None:
    """replica.lag.time.max.ms as documented: a follower whose log end equals the leader's but
    that has sent no fetch for the lag leaves the ISR (Kafka 3.9 keeps it while no write comes);
    a follower that goes on fetching the idle partition stays."""

    async def scenario() -> None:
        rm = _manager(str(tmp_path), **{"replica.lag.time.max.ms": 300})
        proposed: list[IsrChange] = []

        class Controller:
            async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange) -> IsrChangeResult:
                proposed.append(change)
                return IsrChangeResult(0, broker_id, change.leader_epoch, change.new_isr, change.partition_epoch + 1)

        rm.alter_partition_channel = Controller()
        await rm.startup()
        try:
            rm.become_leader_or_follower(9, 1, [_state("t", 0, 3, [0, 1, 2], [0, 1, 2])], {"t": TOPIC_ID})
            await rm.append_records({("t", 0): _batch(2)}, acks=1)
            for replica in (1, 2):  # both reach the log end, which stays there
                await rm.read([FetchRequestPartition("t", 0, 2, 1 << 20, 3)], 1 << 20, replica_id=replica)
            while not proposed:  # follower 1 fetches no more, follower 2 every 50 ms
                await rm.read([FetchRequestPartition("t", 0, 2, 1 << 20, 3)], 1 << 20, replica_id=2)
                await asyncio.sleep(0.05)
            assert [c.new_isr for c in proposed] == [(0, 2)]
        finally:
            await rm.stop_replication()
            rm.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 30))


def test_delete_records_waits_for_the_followers_log_start_offsets(tmp_path) -> None:
    """Kafka's DelayedDeleteRecords: the leader's log starts at the offset at once, the answer
    waits until each follower on a live broker has said (in a fetch) that its log starts there
    too; a follower whose broker is gone from the metadata is not waited for; a wait past the
    request's timeout is REQUEST_TIMED_OUT with the low watermark it reached."""

    async def fetch(rm: ReplicaManager, replica: int, log_start_offset: int) -> None:
        request = FetchRequestPartition("t", 0, 10, 1 << 20, 3, log_start_offset)
        assert (await rm.read([request], 1 << 20, replica_id=replica))[0].error_code == 0

    async def settled(task: asyncio.Task) -> bool:
        for _ in range(10):  # the turns a completed wait needs to answer
            await asyncio.sleep(0)
        return task.done()

    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        rm.metadata.update_brokers([BrokerInfo(b, "127.0.0.1", 9092 + b) for b in (0, 1, 2)], controller_id=9)
        await rm.startup()
        try:
            assert rm.become_leader_or_follower(9, 1, [_state("t", 0, 3, [0, 1, 2], [0, 1, 2])], {"t": TOPIC_ID}) == {
                ("t", 0): 0
            }
            await rm.append_records({("t", 0): _batch(10)}, acks=1)
            for replica in (1, 2):
                await fetch(rm, replica, 0)
            assert await _high_watermark(rm) == 10

            deleting = asyncio.create_task(rm.delete_records([("t", 0, 4)], timeout_ms=60_000))
            await fetch(rm, 1, 4)
            assert not await settled(deleting)  # follower 2's log still starts at 0
            await fetch(rm, 2, 4)
            assert await deleting == [(0, 4)]

            assert await rm.delete_records([("t", 0, 6)], timeout_ms=50) == [(REQUEST_TIMED_OUT, 4)]
            rm.metadata.update_brokers([BrokerInfo(b, "127.0.0.1", 9092 + b) for b in (0, 1)], controller_id=9)
            deleting = asyncio.create_task(rm.delete_records([("t", 0, 8)], timeout_ms=60_000))
            await fetch(rm, 1, 8)
            assert await deleting == [(0, 8)]  # broker 2 is not alive: not waited for
        finally:
            await rm.stop_replication()
            rm.shutdown()

    asyncio.run(scenario())


def test_a_leader_answering_no_end_offset_leaves_what_the_high_watermark_covers(tmp_path) -> None:
    """OffsetForLeaderEpoch answered UNDEFINED_EPOCH_OFFSET (the leader knows no epoch that
    old): Kafka's getOffsetTruncationState truncates to the initial fetch offset, the high
    watermark, not the log end, since nothing shows that the suffix agrees with the leader."""

    async def run() -> tuple[int, bool]:
        rm = _manager(str(tmp_path))
        await rm.startup()
        try:
            rm.become_leader_or_follower(9, 1, [_state("t", 0, 3, [0, 1], [0, 1])], {"t": TOPIC_ID})
            await rm.append_records({("t", 0): _batch(3)}, acks=1)
            await _follower_fetch(rm, 2, 3)  # the HW moves to 2, the log ends at 3
            return truncation_offset(rm.partition("t", 0), -1, -1)
        finally:
            await rm.stop_replication()
            rm.shutdown()

    assert asyncio.run(run()) == (2, True)
