"""The coordinator runtime over a real replica manager and real logs, with a small
coordinator of its own (a ledger: each partition's record values, in order): loading and
its states, leadership, the writes and their order, the timer and the topic's creation."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from seglog.broker.admin import AdminManager
from seglog.broker.coordinator_runtime import CoordinatorRuntime, CoordinatorState, TopicSpec
from seglog.broker.metadata_cache import BrokerInfo, PartitionState
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.errors import CorruptRecordError, ErrorCode, InvalidTopicError
from seglog.records import build_batch
from seglog.storage import PartitionLog

from .test_replica_manager_replication import _state

TOPIC = "__ledger"
S = CoordinatorState


class Loader:
    def __init__(self) -> None:
        self.fail = False

    def replay(self, log: PartitionLog) -> list[bytes]:
        if self.fail:
            raise CorruptRecordError("unreadable", offset=0)
        return [r.value or b"" for b in log.batches(log.log_start_offset, log.log_end_offset) for r in b.records()]

    def empty(self) -> list[bytes]:
        return []


class Ledger:
    """The runtime's coordinator: what it was told, and one deadline."""

    def __init__(self) -> None:
        self.entries: dict[int, list[bytes]] = {}
        self.unloaded: list[int] = []
        self.deadline: int | None = None
        self.fired: list[int] = []

    def on_loaded(self, partition: int, epoch: int, loaded: list[bytes]) -> None:
        self.entries[partition] = list(loaded)

    def on_unloaded(self, partition: int) -> None:
        self.entries.pop(partition, None)
        self.unloaded.append(partition)

    def next_deadline(self) -> int | None:
        return self.deadline

    def on_deadline(self, now_ms: int) -> None:
        self.fired.append(now_ms)
        self.deadline = None


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def open_runtime(
    path: Path, cluster: bool = False, partitions: int = 2, segment_bytes: int = 1 << 20, name: str = TOPIC
) -> tuple[ReplicaManager, CoordinatorRuntime[list[bytes]], Ledger, Loader]:
    values: dict[str, Any] = {"log.dirs": str(path), "broker.id": 0}
    if cluster:  # a cluster's broker: it serves what LeaderAndIsr gives it
        values["zookeeper.connect"] = "127.0.0.1:1"
    config = broker_config(values)
    replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
    spec = TopicSpec(name, partitions, 1, {"segment.bytes": segment_bytes})
    ledger, loader = Ledger(), Loader()
    create = AdminManager(config, replicas).create_internal_topic
    runtime = CoordinatorRuntime(lambda: spec, replicas, loader, ledger, create, write_timeout_ms=5_000, clock=now_ms)
    return replicas, runtime, ledger, loader


def run(path: Path, scenario: Callable[..., Coroutine[Any, Any, None]], **kwargs: Any) -> None:
    async def main() -> None:
        replicas, runtime, ledger, loader = open_runtime(path, **kwargs)
        await replicas.startup()
        try:
            await scenario(replicas, runtime, ledger, loader)
        finally:
            await runtime.shutdown()
            await replicas.stop_replication()
            await asyncio.get_running_loop().run_in_executor(None, replicas.shutdown)

    asyncio.run(main())


async def write(runtime: CoordinatorRuntime[Any], partition: int, value: bytes) -> tuple[int, int]:
    done: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
    runtime.schedule_write(partition, build_batch([(b"k", value)]), lambda e, o: done.set_result((e, o)))
    return await done


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def test_a_new_topic_is_active_at_once_and_a_restart_loads_what_was_written(tmp_path: Path) -> None:
    async def first(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        assert runtime.partition_error(0) == ErrorCode.NOT_COORDINATOR  # no topic yet
        await asyncio.gather(runtime.ensure_topic(), runtime.ensure_topic())  # one creation
        assert [runtime.state(p) for p in (0, 1)] == [S.ACTIVE, S.ACTIVE]
        assert ledger.entries == {0: [], 1: []}
        assert runtime.partition_error(1) == ErrorCode.NONE
        assert await write(runtime, 1, b"a") == (ErrorCode.NONE, 0)
        assert await write(runtime, 1, b"b") == (ErrorCode.NONE, 1)

    async def second(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        loads = runtime.startup()
        assert runtime.state(1) is S.LOADING and runtime.loading
        assert runtime.partition_error(1) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await asyncio.gather(*loads)
        assert runtime.state(1) is S.ACTIVE and ledger.entries[1] == [b"a", b"b"]
        assert runtime.epoch(1) == replicas.leader_partition(TOPIC, 1).leader_epoch

    run(tmp_path, first)
    run(tmp_path, second)


def test_a_partition_that_cannot_be_read_fails_and_is_not_coordinated(tmp_path: Path) -> None:
    async def scenario(
        replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, loader: Loader
    ) -> None:
        await runtime.ensure_topic()
        runtime.close()  # as a restart: every partition CLOSED, its state dropped
        assert ledger.unloaded == [0, 1] and runtime.state(0) is S.CLOSED

    async def reopen(
        replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, loader: Loader
    ) -> None:
        loader.fail = True
        await asyncio.gather(*runtime.startup())
        assert runtime.state(0) is S.FAILED
        assert runtime.partition_error(0) == ErrorCode.NOT_COORDINATOR
        assert runtime.state(0) is S.FAILED  # not read again on a request
        assert await write(runtime, 0, b"x") == (ErrorCode.NOT_COORDINATOR, -1)
        assert ledger.unloaded == []  # never loaded: nothing to drop

    run(tmp_path, scenario)
    run(tmp_path, reopen)


def lead_or_follow(replicas: ReplicaManager, leader: int, epoch: int, topic_id: uuid.UUID) -> None:
    """The controller's LeaderAndIsr for partition 0 (replicas 0 and 1), and its UpdateMetadata."""
    state = _state(TOPIC, leader, epoch, [leader], [0, 1])
    assert replicas.become_leader_or_follower(9, 1, [state], {TOPIC: topic_id}) == {(TOPIC, 0): ErrorCode.NONE}
    brokers = [BrokerInfo(0, "127.0.0.1", 9092), BrokerInfo(1, "127.0.0.1", 9093)]
    replicas.metadata.update_metadata(
        brokers, 0, [(TOPIC, topic_id, PartitionState(0, leader, epoch, (0, 1), (leader,)))], set()
    )


def test_the_partitions_follow_their_leadership_and_a_write_of_an_epoch_gone_is_not_coordinator(
    tmp_path: Path,
) -> None:
    """A new leader epoch of a partition still led here (the ISR changed) keeps it loaded at
    its coordinator epoch, as Kafka's onElection comes only to a new leader."""

    async def scenario(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        replicas.leadership_listeners.append(runtime.on_leadership_change)
        topic_id = uuid.uuid4()
        lead_or_follow(replicas, 0, 1, topic_id)
        await until(lambda: runtime.state(0) is S.ACTIVE, "the load")
        assert runtime.epoch(0) == 1
        assert await write(runtime, 0, b"a") == (ErrorCode.NONE, 0)

        lead_or_follow(replicas, 0, 2, topic_id)  # still led here, at a new epoch: nothing is read again
        assert runtime.state(0) is S.ACTIVE and runtime.epoch(0) == 1 and not ledger.unloaded
        assert runtime.partition_error(0) == ErrorCode.NONE
        assert await write(runtime, 0, b"b") == (ErrorCode.NONE, 1)

        lead_or_follow(replicas, 1, 3, topic_id)  # led by broker 1 now
        assert runtime.state(0) is S.CLOSED and ledger.unloaded == [0]
        assert runtime.partition_error(0) == ErrorCode.NOT_COORDINATOR
        assert await write(runtime, 0, b"c") == (ErrorCode.NOT_COORDINATOR, -1)

        lead_or_follow(replicas, 0, 4, topic_id)  # back: read again, at the new epoch
        await until(lambda: runtime.state(0) is S.ACTIVE, "the load")
        assert runtime.epoch(0) == 4 and ledger.entries[0] == [b"a", b"b"]

    run(tmp_path, scenario, cluster=True, partitions=1)


def test_writes_to_a_partition_complete_in_the_order_they_were_scheduled(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        await runtime.ensure_topic()
        done: list[tuple[bytes, int, int]] = []
        tasks = []
        # a segment of 100 bytes holds one batch: every later write must roll, so goes to a task,
        # and the ones after it queue behind it rather than be written at once
        for value in (b"a", b"b", b"c", b"d"):
            batch = build_batch([(b"k", value)])
            task = runtime.schedule_write(0, batch, lambda e, o, v=value: done.append((v, e, o)))
            if task is not None:
                tasks.append(task)
        assert done[:1] == [(b"a", ErrorCode.NONE, 0)]  # the first, at once
        assert len(tasks) == 3
        await asyncio.gather(*tasks)
        assert done == [(v, ErrorCode.NONE, i) for i, v in enumerate((b"a", b"b", b"c", b"d"))]
        log = replicas.partition_log(TOPIC, 0)
        assert [r.value for b in log.batches(0, log.log_end_offset) for r in b.records()] == [b"a", b"b", b"c", b"d"]

    run(tmp_path, scenario, segment_bytes=100)


def test_one_timer_at_the_coordinators_deadline_and_none_without_one(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        runtime.reschedule()  # no deadline: no timer, nothing fires
        await asyncio.sleep(0.05)
        assert ledger.fired == []
        due = ledger.deadline = now_ms() + 30
        runtime.reschedule()
        runtime.reschedule()  # armed once
        await asyncio.sleep(0.01)
        assert ledger.fired == []
        await until(lambda: len(ledger.fired) == 1, "the deadline")
        assert ledger.fired[0] >= due
        await asyncio.sleep(0.05)
        assert len(ledger.fired) == 1  # the coordinator set no deadline again

    run(tmp_path, scenario)


def test_calls_are_answered_inside_or_after_them(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        assert await runtime.call(lambda token: runtime.complete(token, "now")) == "now"
        later = asyncio.ensure_future(
            runtime.call(lambda token: asyncio.get_running_loop().call_soon(runtime.complete, token, "later"))
        )
        assert await later == "later"

    run(tmp_path, scenario)


def test_a_topic_that_cannot_be_made_raises(tmp_path: Path) -> None:
    async def scenario(replicas: ReplicaManager, runtime: CoordinatorRuntime[Any], ledger: Ledger, _: Loader) -> None:
        for _attempt in range(2):  # the failure is not kept: the next caller tries again
            with pytest.raises(InvalidTopicError):
                await runtime.ensure_topic()
        assert replicas.metadata.topic(runtime.topic_name) is None

    run(tmp_path, scenario, name="no/such/name")
