"""A read_committed fetch answered the Kafka way: the last stable offset from the
partition's producer state, held back by a transaction whose marker the ISR does not have
yet; the aborted transactions from the ``.txnindex``."""

from __future__ import annotations

import asyncio

from seglog.broker.replica_manager import FetchRequestPartition, ListOffsetsPartition, ReplicaManager
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
