"""The transaction coordinator's broker side over a real replica manager: a transaction's
``__transaction_state`` records written inside the request when the log takes them at
once, and the transaction complete (markers written, CompleteCommit logged) before the
producer could send its next AddPartitionsToTxn."""

from __future__ import annotations

import asyncio

from seglog.broker.admin import AdminManager
from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.broker.txn_apis import TxnApis
from seglog.coordinator.transaction_state import TransactionState
from seglog.records import Record, build_batch

# turns of the loop (no sleeping) in which a transaction's markers and completion are written
# after EndTxn's answer: a few tasks' steps, no I/O thread (a hop to one takes real time)
TURNS = 10


def test_a_transaction_is_answered_in_its_request_and_complete_before_the_next(tmp_path) -> None:
    async def scenario() -> None:
        config = broker_config({"log.dirs": str(tmp_path), "transaction.state.log.num.partitions": 1})
        replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
        txn = TxnApis(config, replicas, ("127.0.0.1", 9092), AdminManager(config, replicas).create_internal_topic)
        replicas.leadership_listeners.append(txn.on_leadership_change)
        try:
            await txn.startup()
            await replicas.create_topic("t", 1, {})
            body = {
                "transactional_id": "app",
                "transaction_timeout_ms": 60_000,
                "producer_id": -1,
                "producer_epoch": -1,
            }
            init = await txn.init_producer_id(4, body)
            pid, epoch = init["producer_id"], init["producer_epoch"]
            add = {
                "v3_and_below_transactional_id": "app",
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": "t", "partitions": [0]}],
            }
            end = {"transactional_id": "app", "producer_id": pid, "producer_epoch": epoch, "committed": True}
            for round_ in range(2):
                added = asyncio.ensure_future(txn.add_partitions_to_txn(0, add))
                await asyncio.sleep(0)  # one turn: the request's first step, and nothing else
                assert added.done()
                [result] = added.result()["results_by_topic_v3_and_below"][0]["results_by_partition"]
                assert result["partition_error_code"] == 0  # not CONCURRENT_TRANSACTIONS (51)
                records = build_batch(
                    [Record(key=None, value=b"v")],
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=round_,
                    transactional=True,
                )
                assert (await replicas.append_records({("t", 0): memoryview(records)}))[("t", 0)].error_code == 0
                ended = asyncio.ensure_future(txn.end_txn(1, end))
                await asyncio.sleep(0)
                assert ended.done() and ended.result()["error_code"] == 0
                for _ in range(TURNS):  # the markers' tasks: written on the loop, then CompleteCommit
                    await asyncio.sleep(0)
                assert txn.coordinator.transactions["app"].state is TransactionState.COMPLETE_COMMIT
            assert replicas.partition_log("t", 0).log_end_offset == 4  # a record and a marker, twice
        finally:
            txn.shutdown()
            replicas.shutdown()

    asyncio.run(scenario())
