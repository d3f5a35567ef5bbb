"""A read_committed fetch answered the Kafka way, and the fetch's wait in the replica
manager (Kafka's ``fetchMessages``): the last stable offset from the partition's producer
state, held back by a transaction whose marker the ISR does not have yet; the aborted
transactions from the ``.txnindex``; a long poll parked in the fetch purgatory inside the
scope its caller gives, woken by the high watermark (a consumer's) or by appends (a
follower's); a fetch of tails answered in the handler's first step."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

from seglog.broker.apis import KafkaApis
from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import FetchRequestPartition, ListOffsetsPartition, ReplicaManager
from seglog.protocol.message_data import FetchRequestData, FetchResponseData
from seglog.records import Record
from seglog.records.batch import build_batch
from seglog.records.control import end_transaction_marker

from .test_replica_manager_replication import TOPIC_ID, _manager, _state

PID = 7


def _txn(n: int, sequence: int = 0) -> memoryview:
    batch = build_batch(
        [Record(key=None, value=b"t")] * n,
        producer_id=PID,
        producer_epoch=0,
        base_sequence=sequence,
        transactional=True,
    )
    return memoryview(bytearray(batch))


def _abort() -> memoryview:
    batch = build_batch(
        [end_transaction_marker(False, 1, 0)], producer_id=PID, producer_epoch=0, transactional=True, control=True
    )
    return memoryview(bytearray(batch))


async def _lead_with_a_follower(rm: ReplicaManager) -> None:
    await rm.startup()
    assert rm.become_leader_or_follower(9, 1, [_state("t", 0, 1, [0, 1], [0, 1])], {"t": TOPIC_ID}) == {("t", 0): 0}


async def _follower_fetch(rm: ReplicaManager, offset: int) -> None:
    result = (await rm.read([FetchRequestPartition("t", 0, offset, 1 << 20, 1)], 1 << 20, replica_id=1))[0]
    assert result.error_code == 0


async def _read_committed(rm: ReplicaManager, offset: int):
    return (await rm.read([FetchRequestPartition("t", 0, offset, 1 << 20)], 1 << 20, read_committed=True))[0]


async def _consume(rm: ReplicaManager, offset: int, **wait: Any):
    return (
        await rm.fetch_messages(
            [FetchRequestPartition("t", 0, offset, 1 << 20)], max_bytes=1 << 20, read_committed=True, **wait
        )
    )[0]


def test_a_marker_the_isr_does_not_have_holds_the_last_stable_offset(tmp_path) -> None:
    """Kafka's ``firstUnstableOffset``: a transaction decided by a marker the high watermark
    has not passed is still unstable. Before, the LSO went to the high watermark as soon as
    the leader had the marker, and a consumer read the transaction's records from a leader
    that could still lose the marker."""

    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        try:
            await _lead_with_a_follower(rm)
            assert (await rm.append_records({("t", 0): _txn(2)}))[("t", 0)].error_code == 0  # 0, 1
            await _follower_fetch(rm, 2)  # the follower has them: HW 2
            appended = await rm.append_records({("t", 0): _abort()}, origin="coordinator")  # 2
            assert appended[("t", 0)].error_code == 0
            result = await _read_committed(rm, 0)
            assert (result.high_watermark, result.last_stable_offset) == (2, 0)
            assert result.records is None and result.aborted_transactions == []
            latest = await rm.list_offsets([ListOffsetsPartition("t", 0, -1)], read_committed=True)
            assert latest[0].offset == 0

            await _follower_fetch(rm, 3)  # the follower has the marker: HW 3, the transaction stable
            result = await _read_committed(rm, 0)
            assert (result.high_watermark, result.last_stable_offset) == (3, 3)
            assert result.records is not None and result.aborted_transactions == [(PID, 0)]
            latest = await rm.list_offsets([ListOffsetsPartition("t", 0, -1)], read_committed=True)
            assert latest[0].offset == 3
        finally:
            rm.shutdown()

    asyncio.run(scenario())


def test_a_consumers_fetch_waits_in_its_callers_scope_for_the_high_watermark(tmp_path) -> None:
    """The replica manager parks a fetch that has too little (Kafka's ``fetchMessages``)
    inside the scope the handler gives (which abandons it when its client goes): a
    consumer's is not woken by the leader's append, only once the follower's fetch moves
    the high watermark; a follower's is woken by the append itself."""
    parked: list[Any] = []

    @contextlib.contextmanager
    def scope(op: Any) -> Iterator[None]:
        parked.append(op)
        yield

    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        try:
            await _lead_with_a_follower(rm)
            consumer = asyncio.ensure_future(_consume(rm, 0, max_wait_ms=60_000, min_bytes=1, while_parked=scope))
            follower = asyncio.ensure_future(
                rm.fetch_messages(
                    [FetchRequestPartition("t", 0, 0, 1 << 20, 1)],
                    max_bytes=1 << 20,
                    max_wait_ms=60_000,
                    replica_id=1,
                    while_parked=scope,
                )
            )
            while len(parked) < 2:
                await asyncio.sleep(0.01)
            assert len(rm.fetch_purgatory) == 2
            await rm.append_records({("t", 0): memoryview(bytearray(build_batch([Record(None, b"x")])))})
            (answer,) = await asyncio.wait_for(follower, 30)  # woken by the append
            assert answer.records is not None and answer.log_end_offset == 1
            await asyncio.sleep(0.05)
            assert not consumer.done()  # the high watermark has not moved
            await _follower_fetch(rm, 1)
            answer = await asyncio.wait_for(consumer, 30)
            assert answer.records is not None and answer.high_watermark == 1
            assert len(rm.fetch_purgatory) == 0
        finally:
            rm.shutdown()

    asyncio.run(scenario())


def test_a_fetch_of_tails_is_answered_without_leaving_the_handlers_first_step(tmp_path) -> None:
    """The connection's reader steps a Fetch's handler once and writes its answer there when
    it did not wait (``network.py``): the read of active segments runs on the loop
    (``_tail_reads``), read_committed ones too now that their LSO and aborted transactions
    are in memory, and ``fetch_messages`` awaits nothing more when the fetch has enough."""

    async def scenario() -> None:
        config = broker_config({"log.dirs": str(tmp_path)})
        rm = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
        try:
            apis = KafkaApis(config, rm, ("127.0.0.1", 9092))
            await rm.create_topic("t", 1, {})
            await rm.append_records({("t", 0): _txn(2)})
            await rm.append_records({("t", 0): _abort()}, origin="coordinator")
            await rm.append_records({("t", 0): memoryview(bytearray(build_batch([Record(None, b"x")])))})
            for isolation in (0, 1):
                partition = FetchRequestData.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
                body = FetchRequestData(
                    replica_id=-1,
                    max_wait_ms=500,
                    min_bytes=1,
                    max_bytes=1 << 20,
                    isolation_level=isolation,
                    topics=[FetchRequestData.FetchTopic(topic="t", partitions=[partition])],
                )
                step = apis.fetch(11, body)
                try:
                    step.send(None)
                except StopIteration as done:
                    answer = done.value.responses[0].partitions[0]
                else:
                    step.close()
                    raise AssertionError(f"isolation level {isolation}: the fetch left its first step")
                assert answer.last_stable_offset == 4 and answer.records.size > 0
                aborted = answer.aborted_transactions
                expected = [FetchResponseData.AbortedTransaction(producer_id=PID, first_offset=0)]
                assert aborted == (expected if isolation else None)
        finally:
            rm.shutdown()

    asyncio.run(scenario())
