"""The coordinators follow the leadership of their partitions, on a cluster's replica manager
(real log dir) driven by LeaderAndIsr and StopReplica as the controller sends them: a
``__consumer_offsets`` partition led here is loaded; when the leadership moves away its
group's waiting JoinGroup is answered NOT_COORDINATOR and its state dropped, and it comes
back from the log when the leadership returns. The same for ``__transaction_state``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from seglog.broker.admin import AdminManager
from seglog.broker.controller_apis import ControllerApis
from seglog.broker.group_metadata_manager import GroupMetadataManager
from seglog.broker.metadata_cache import BrokerInfo, PartitionState
from seglog.broker.partition import LeaderAndIsrPartitionState
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.broker.txn_apis import TxnApis
from seglog.common import GROUP_METADATA_TOPIC, TRANSACTION_STATE_TOPIC
from seglog.coordinator.group_coordinator import JoinGroupRequest
from seglog.coordinator.offset_manager import OffsetCommitRequest, OffsetFetchRequest, PartitionCommit
from seglog.coordinator.transaction_state import TransactionState
from seglog.protocol import ErrorCode
from seglog.protocol.message_data import (
    AddOffsetsToTxnRequestData,
    EndTxnRequestData,
    InitProducerIdRequestData,
    UpdateMetadataRequestData,
)

from .test_replica_manager_replication import _state

IDS = {GROUP_METADATA_TOPIC: uuid.uuid4(), TRANSACTION_STATE_TOPIC: uuid.uuid4()}


def state(topic: str, leader: int, epoch: int) -> LeaderAndIsrPartitionState:
    """LeaderAndIsr's partition 0 of ``topic``, replicated on brokers 0 and 1."""
    return _state(topic, leader, epoch, [leader], [0, 1])


async def until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def open_broker(path: str) -> tuple[ReplicaManager, GroupMetadataManager, TxnApis]:
    config = broker_config(
        {
            "log.dirs": path,
            "broker.id": 0,
            "zookeeper.connect": "127.0.0.1:1",  # a cluster's broker: it serves what LeaderAndIsr gives it
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 60_000,  # the first JoinGroup waits
            "replica.fetch.backoff.ms": 50,
        }
    )
    replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
    admin = AdminManager(config, replicas)
    groups = GroupMetadataManager(config, replicas, admin.create_internal_topic)
    txn = TxnApis(config, replicas, ("127.0.0.1", 9092), admin.create_internal_topic)
    txn.claim_producer_id_block = lambda: (0, 999)  # the first block, as ZooKeeper (not run here) would give it
    replicas.leadership_listeners += [groups.on_leadership_change, txn.on_leadership_change]
    return replicas, groups, txn


async def close_broker(replicas: ReplicaManager, groups: GroupMetadataManager, txn: TxnApis) -> None:
    """What the broker's shutdown does to these three, in its order."""
    await groups.shutdown()
    txn.shutdown()
    await replicas.stop_replication()
    replicas.shutdown()


def lead_or_follow(replicas: ReplicaManager, topic: str, leader: int, epoch: int) -> None:
    """The controller's LeaderAndIsr, and its UpdateMetadata."""
    assert replicas.become_leader_or_follower(9, 1, [state(topic, leader, epoch)], IDS) == {(topic, 0): 0}
    brokers = [BrokerInfo(0, "127.0.0.1", 9092), BrokerInfo(1, "127.0.0.1", 9093)]
    partition = PartitionState(0, leader, epoch, (0, 1), (leader,))
    replicas.metadata.update_metadata(brokers, 0, [(topic, IDS[topic], partition)], set())


def join(groups: GroupMetadataManager) -> asyncio.Task[Any]:
    request = JoinGroupRequest("g", "", "consumer", (("range", b""),), 10_000, 10_000, require_known_member_id=False)
    return asyncio.ensure_future(groups.call(lambda token, now: groups.coordinator.join_group(token, request, now)))


def test_a_group_partition_led_elsewhere_answers_the_waiting_join_not_coordinator(tmp_path) -> None:
    async def scenario() -> None:
        replicas, groups, txn = open_broker(str(tmp_path))
        await replicas.startup()
        try:
            lead_or_follow(replicas, GROUP_METADATA_TOPIC, 0, 1)
            await until(lambda: groups.group_error("g") == ErrorCode.NONE, "the load")
            commit = OffsetCommitRequest("g", {("t", 0): PartitionCommit(7)})
            answer = await groups.commit_offsets(commit)
            assert answer.errors == {("t", 0): ErrorCode.NONE}
            waiting = join(groups)
            await asyncio.sleep(0.05)
            assert not waiting.done()  # group.initial.rebalance.delay.ms

            lead_or_follow(replicas, GROUP_METADATA_TOPIC, 1, 2)  # the controller moved the leadership to broker 1
            response = await asyncio.wait_for(waiting, 5)
            assert response.error_code == ErrorCode.NOT_COORDINATOR
            assert "g" not in groups.coordinator.groups
            assert groups.group_error("g") == ErrorCode.NOT_COORDINATOR

            lead_or_follow(replicas, GROUP_METADATA_TOPIC, 0, 3)  # back: the group is read again from the log
            await until(lambda: groups.group_error("g") == ErrorCode.NONE, "the load")
            fetched = groups.offsets.fetch_offsets(OffsetFetchRequest("g", (("t", 0),)))
            assert fetched.partitions[("t", 0)].offset == 7

            waiting = join(groups)
            await asyncio.sleep(0.05)
            replicas.stop_replicas(9, 1, [(GROUP_METADATA_TOPIC, 0, False, 3)])  # StopReplica resigns too
            assert (await asyncio.wait_for(waiting, 5)).error_code == ErrorCode.NOT_COORDINATOR
            assert groups.group_error("g") == ErrorCode.NOT_COORDINATOR
        finally:
            await close_broker(replicas, groups, txn)

    asyncio.run(scenario())


def test_transactional_ids_follow_their_partition_leadership(tmp_path) -> None:
    async def scenario() -> None:
        replicas, groups, txn = open_broker(str(tmp_path))
        await replicas.startup()
        init = InitProducerIdRequestData("tx", 60_000)
        try:
            lead_or_follow(replicas, TRANSACTION_STATE_TOPIC, 0, 1)
            await until(lambda: 0 in txn.coordinator.coordinator_epochs, "the load")
            answer = await txn.init_producer_id(4, init)
            assert answer.error_code == ErrorCode.NONE

            lead_or_follow(replicas, TRANSACTION_STATE_TOPIC, 1, 2)
            assert "tx" not in txn.coordinator.transactions
            ended = await txn.end_txn(3, EndTxnRequestData("tx", answer.producer_id, 0, committed=True))
            assert ended.error_code == ErrorCode.NOT_COORDINATOR

            lead_or_follow(replicas, TRANSACTION_STATE_TOPIC, 0, 3)  # back: the id is read again from the log
            await until(lambda: "tx" in txn.coordinator.transactions, "the load")
            assert txn.coordinator.transactions["tx"].producer_id == answer.producer_id
            ended = await txn.end_txn(3, EndTxnRequestData("tx", answer.producer_id, 0, committed=False))
            assert ended.error_code == ErrorCode.INVALID_TXN_STATE  # known again: nothing is open
        finally:
            await close_broker(replicas, groups, txn)

    asyncio.run(scenario())


def test_a_new_leader_epoch_of_a_partition_still_led_here_keeps_its_transactions(tmp_path) -> None:
    """Broker 0 goes on leading ``__transaction_state-0`` while the controller bumps its epoch
    (broker 1 put in its ISR, then dead and taken out, as when a test kills a broker): the
    transactional ids stay loaded, as Kafka's onElection comes only to a new leader. Requests
    asked at the bump wait for broker 1 and are answered NONE once it is out, and the abort
    ends the transaction its AddOffsetsToTxn began. A reload answered them
    COORDINATOR_LOAD_IN_PROGRESS, and the EndTxn(abort) after that, of a transaction never
    begun, INVALID_TXN_STATE: fatal to librdkafka, which aborts so after any retriable
    AddPartitionsToTxn error."""

    async def scenario() -> None:
        replicas, groups, txn = open_broker(str(tmp_path))
        await replicas.startup()
        epochs = iter(range(1, 100))

        def lead(isr: list[int]) -> None:  # broker 0 leads at the next epoch
            partition = _state(TRANSACTION_STATE_TOPIC, 0, next(epochs), isr, [0, 1])
            assert replicas.become_leader_or_follower(9, 1, [partition], IDS) == {(TRANSACTION_STATE_TOPIC, 0): 0}

        def loaded() -> bool:
            return txn.runtime.partition_error(0) == ErrorCode.NONE

        async def as_broker_1_joins(request: Coroutine[Any, Any, Any]) -> int:
            """Asked as broker 1 joins the ISR; answered once the controller took it out."""
            lead([0, 1])
            asked = asyncio.ensure_future(request)
            await asyncio.sleep(0.1)  # acks=all: broker 1 never fetches the record
            lead([0])
            answer = await asyncio.wait_for(asked, 5)
            await until(loaded, "the load")
            return int(answer.error_code)

        answers: dict[str, int] = {}
        try:
            lead_or_follow(replicas, GROUP_METADATA_TOPIC, 0, 1)  # the markers' partition, an ISR of one
            lead([0])
            await until(loaded, "the load")
            init = await txn.init_producer_id(4, InitProducerIdRequestData("tx", 60_000))
            offsets = AddOffsetsToTxnRequestData("tx", init.producer_id, 0, "g")
            answers["add"] = await as_broker_1_joins(txn.add_offsets_to_txn(3, offsets))
            abort = EndTxnRequestData("tx", init.producer_id, 0, committed=False)
            answers["abort"] = (await txn.end_txn(3, abort)).error_code
            assert answers == {"add": ErrorCode.NONE, "abort": ErrorCode.NONE}

            def ended() -> bool:
                found = txn.coordinator.transactions.get("tx")
                return found is not None and found.state is TransactionState.COMPLETE_ABORT

            await until(ended, "the abort's markers")
            assert (await txn.add_offsets_to_txn(3, offsets)).error_code == ErrorCode.NONE
            commit = EndTxnRequestData("tx", init.producer_id, 0, committed=True)
            assert await as_broker_1_joins(txn.end_txn(3, commit)) == ErrorCode.NONE
        finally:
            await close_broker(replicas, groups, txn)

    asyncio.run(scenario())


def test_the_controllers_deletion_drops_the_topics_offsets(tmp_path) -> None:
    """In a cluster a topic's deletion reaches every broker as UpdateMetadata with leader -2
    (LeaderDuringDelete): the groups coordinated here forget its offsets."""

    async def scenario() -> None:
        replicas, groups, txn = open_broker(str(tmp_path))
        replicas.deletion_listeners.append(groups.on_partitions_deleted)
        controller = ControllerApis(replicas, lambda: -1, lambda: None)
        await replicas.startup()
        try:
            lead_or_follow(replicas, GROUP_METADATA_TOPIC, 0, 1)
            await until(lambda: groups.group_error("g") == ErrorCode.NONE, "the load")
            commit = OffsetCommitRequest("g", {("gone", 0): PartitionCommit(3), ("kept", 0): PartitionCommit(4)})
            await groups.commit_offsets(commit)
            deleting = UpdateMetadataRequestData.UpdateMetadataTopicState(
                topic_name="gone",
                partition_states=[
                    UpdateMetadataRequestData.UpdateMetadataPartitionState(
                        controller_epoch=1, leader=-2, leader_epoch=1, isr=[-2], zk_version=1, replicas=[0, 1]
                    )
                ],
            )
            body = UpdateMetadataRequestData(controller_id=0, controller_epoch=1, topic_states=[deleting])
            answer = await controller.update_metadata(7, body)
            assert answer.error_code == ErrorCode.NONE
            fetched = groups.offsets.fetch_offsets(OffsetFetchRequest("g", None))
            assert {tp: f.offset for tp, f in fetched.partitions.items()} == {("kept", 0): 4}
        finally:
            await close_broker(replicas, groups, txn)

    asyncio.run(scenario())


def test_a_cluster_broker_hands_out_no_producer_id_from_a_local_file(tmp_path) -> None:
    """Producer ids come from ZooKeeper's block in a cluster: before the broker has joined it,
    InitProducerId is answered COORDINATOR_NOT_AVAILABLE (retriable) and no local block is written."""
    replicas, _groups, txn = open_broker(str(tmp_path))
    txn.claim_producer_id_block = None
    try:
        answer = asyncio.run(txn.init_producer_id(4, InitProducerIdRequestData(None, -1)))
        assert answer.error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert not (tmp_path / "latest_producer_id_block").exists()
    finally:
        txn.shutdown()
        replicas.shutdown()
