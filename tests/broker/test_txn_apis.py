"""The transaction coordinator's broker side over a real replica manager: a transaction's
``__transaction_state`` records written inside the request when the log takes them at
once, and the transaction complete (markers written, CompleteCommit logged) before the
producer could send its next AddPartitionsToTxn: in the loop's turn after EndTxn's answer
where every marker can be appended at once, through the channel manager otherwise."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from seglog.broker.admin import AdminManager
from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.broker.txn_apis import TxnApis
from seglog.common import TopicPartition
from seglog.coordinator.transaction_state import TransactionState
from seglog.protocol.message_data import (
    AddPartitionsToTxnRequestData,
    AddPartitionsToTxnResponseData,
    EndTxnRequestData,
    InitProducerIdRequestData,
)
from seglog.records import BatchIterator, Record, build_batch

# turns of the loop (no sleeping) in which a transaction's markers and completion are written
# after EndTxn's answer: a few tasks' steps, no I/O thread (a hop to one takes real time)
TURNS = 10


Scenario = Callable[[ReplicaManager, TxnApis, AddPartitionsToTxnRequestData, EndTxnRequestData], Awaitable[None]]


def run_transaction(tmp_path: Path, scenario: Scenario) -> None:
    """``scenario(replicas, txn, add, end)`` on one broker, with "app"'s producer id held
    and the bodies of its AddPartitionsToTxn (to t-0 and u-0) and EndTxn (commit)."""

    async def main() -> None:
        config = broker_config({"log.dirs": str(tmp_path), "transaction.state.log.num.partitions": 1})
        replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
        txn = TxnApis(config, replicas, ("127.0.0.1", 9092), AdminManager(config, replicas).create_internal_topic)
        replicas.leadership_listeners.append(txn.on_leadership_change)
        try:
            await txn.startup()
            await replicas.create_topic("t", 1, {})
            # a segment of 100 bytes holds one small batch: a second one needs a roll
            await replicas.create_topic("u", 1, {"segment.bytes": 100})
            init = await txn.init_producer_id(4, InitProducerIdRequestData("app", 60_000))
            pid, epoch = init.producer_id, init.producer_epoch
            Topic = AddPartitionsToTxnRequestData.AddPartitionsToTxnTopic
            add = AddPartitionsToTxnRequestData(
                v3_and_below_transactional_id="app",
                v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=[Topic("t", [0]), Topic("u", [0])],
            )
            end = EndTxnRequestData("app", pid, epoch, committed=True)
            await scenario(replicas, txn, add, end)
        finally:
            txn.shutdown()
            replicas.shutdown()

    asyncio.run(main())


async def _add(txn: TxnApis, add: AddPartitionsToTxnRequestData) -> None:
    """AddPartitionsToTxn, answered without error in the request's first turn."""
    added = asyncio.ensure_future(txn.add_partitions_to_txn(0, add))
    await asyncio.sleep(0)  # one turn: the request's first step, and nothing else
    assert added.done()
    for topic in added.result().results_by_topic_v3_and_below:
        for result in topic.results_by_partition:
            assert result.partition_error_code == 0  # not CONCURRENT_TRANSACTIONS (51)


async def _produce(replicas: ReplicaManager, add: AddPartitionsToTxnRequestData, sequence: int = 0) -> None:
    """One transactional record to each partition ``add`` names."""
    pid, epoch = add.v3_and_below_producer_id, add.v3_and_below_producer_epoch
    for tp in [TopicPartition(t.name, p) for t in add.v3_and_below_topics for p in t.partitions]:
        records = build_batch(
            [Record(key=None, value=b"v")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=sequence,
            transactional=True,
        )
        assert (await replicas.append_records({tp: memoryview(records)}))[tp].error_code == 0


async def _end(txn: TxnApis, end: EndTxnRequestData) -> None:
    """EndTxn, answered in its first turn once PrepareCommit is logged, before any marker
    (as Kafka's)."""
    ended = asyncio.ensure_future(txn.end_txn(1, end))
    await asyncio.sleep(0)
    assert ended.done() and ended.result().error_code == 0
    assert txn.coordinator.transactions["app"].state is TransactionState.PREPARE_COMMIT


def _check_marker(replicas: ReplicaManager, topic: str, producer_id: int) -> None:
    """The partition's last batch is a COMMIT marker as Kafka writes one: a control batch that
    is transactional too (read_committed consumers and the cleaner tell markers so)."""
    log = replicas.partition_log(topic, 0)
    (marker,) = BatchIterator(log.read(log.log_end_offset - 1, 1 << 20, min_one_message=True).slice.read())
    assert (marker.is_control, marker.is_transactional, marker.producer_id) == (True, True, producer_id)
    (record,) = marker.records()
    assert record.key == b"\x00\x00\x00\x01"  # version 0, type 1: COMMIT


def test_a_transaction_is_answered_in_its_request_and_complete_before_the_next(tmp_path) -> None:
    async def scenario(
        replicas: ReplicaManager, txn: TxnApis, add: AddPartitionsToTxnRequestData, end: EndTxnRequestData
    ) -> None:
        add.v3_and_below_topics = add.v3_and_below_topics[:1]  # t-0 alone
        for round_ in range(2):
            await _add(txn, add)
            await _produce(replicas, add, sequence=round_)
            await _end(txn, end)
            for _ in range(TURNS):  # the markers: written on the loop, then CompleteCommit
                await asyncio.sleep(0)
            assert txn.coordinator.transactions["app"].state is TransactionState.COMPLETE_COMMIT
        assert replicas.partition_log("t", 0).log_end_offset == 4  # a record and a marker, twice

    run_transaction(tmp_path, scenario)


def test_markers_that_can_be_appended_at_once_complete_the_transaction_in_the_next_turn(tmp_path) -> None:
    async def scenario(
        replicas: ReplicaManager, txn: TxnApis, add: AddPartitionsToTxnRequestData, end: EndTxnRequestData
    ) -> None:
        add.v3_and_below_topics = add.v3_and_below_topics[:1]  # t-0 alone
        await _add(txn, add)
        await _produce(replicas, add)
        await _end(txn, end)
        await asyncio.sleep(0)  # one turn: the marker appended on the loop, then CompleteCommit, no task
        assert replicas.partition_log("t", 0).log_end_offset == 2  # the record and the marker
        assert txn.coordinator.transactions["app"].state is TransactionState.COMPLETE_COMMIT

    run_transaction(tmp_path, scenario)


def test_a_marker_the_log_cannot_take_at_once_goes_through_the_channel_manager(tmp_path) -> None:
    """u-0's marker needs a roll (files made), which the loop never does: t-0's is appended
    in the turn after the answer, u-0's in a task of the channel manager, and the
    transaction is complete only once both are written."""

    async def scenario(
        replicas: ReplicaManager, txn: TxnApis, add: AddPartitionsToTxnRequestData, end: EndTxnRequestData
    ) -> None:
        await _add(txn, add)
        await _produce(replicas, add)
        await _end(txn, end)
        await asyncio.sleep(0)
        assert replicas.partition_log("t", 0).log_end_offset == 2
        assert replicas.partition_log("u", 0).log_end_offset == 1  # not yet
        assert txn.coordinator.transactions["app"].state is TransactionState.PREPARE_COMMIT
        for _ in range(1000):  # the I/O thread's roll takes real time: wait for it, not for a clock
            if txn.coordinator.transactions["app"].state is TransactionState.COMPLETE_COMMIT:
                break
            await asyncio.sleep(0.01)
        assert replicas.partition_log("u", 0).log_end_offset == 2
        assert len(replicas.partition_log("u", 0).segments) == 2  # rolled for the marker
        assert txn.coordinator.transactions["app"].state is TransactionState.COMPLETE_COMMIT
        for topic in ("t", "u"):  # appended at once and through the channel manager: the same marker
            _check_marker(replicas, topic, add.v3_and_below_producer_id)

    run_transaction(tmp_path, scenario)


def test_a_brokers_batched_add_partitions_and_verification(tmp_path) -> None:
    """AddPartitionsToTxn v4+ (KIP-890, a broker's): transactions in one request, each added to
    its partitions or (verify_only) asked whether they are in its ongoing transaction."""

    async def scenario(
        replicas: ReplicaManager, txn: TxnApis, add: AddPartitionsToTxnRequestData, end: EndTxnRequestData
    ) -> None:
        pid, epoch = add.v3_and_below_producer_id, add.v3_and_below_producer_epoch
        Request = AddPartitionsToTxnRequestData

        def batch(verify_only: bool, partitions: dict[str, list[int]], **changes: int) -> Request:
            one = Request.AddPartitionsToTxnTransaction(
                transactional_id="app",
                producer_id=changes.get("producer_id", pid),
                producer_epoch=changes.get("producer_epoch", epoch),
                verify_only=verify_only,
                topics=[Request.AddPartitionsToTxnTopic(t, ps) for t, ps in partitions.items()],
            )
            return Request(transactions=[one])

        def errors(answer: AddPartitionsToTxnResponseData) -> dict[tuple[str, int], int]:
            assert answer.error_code == 0
            (result,) = answer.results_by_transaction
            assert result.transactional_id == "app"
            return {
                (t.name, r.partition_index): r.partition_error_code
                for t in result.topic_results
                for r in t.results_by_partition
            }

        assert errors(await txn.add_partitions_to_txn(5, batch(False, {"t": [0]}))) == {("t", 0): 0}
        verified = await txn.add_partitions_to_txn(4, batch(True, {"t": [0], "u": [0]}))
        assert errors(verified) == {("t", 0): 0, ("u", 0): 48}  # u-0 is not in it: INVALID_TXN_STATE
        fenced = await txn.add_partitions_to_txn(4, batch(True, {"t": [0]}, producer_epoch=epoch - 1))
        assert errors(fenced) == {("t", 0): 90}  # PRODUCER_FENCED
        stranger = await txn.add_partitions_to_txn(4, batch(True, {"t": [0]}, producer_id=pid + 1))
        assert errors(stranger) == {("t", 0): 49}  # INVALID_PRODUCER_ID_MAPPING
        assert txn.coordinator.transactions["app"].partitions == {("t", 0)}

    run_transaction(tmp_path, scenario)
