"""The controller against a real ZooKeeper: election, topic creation, broker failure and return, fencing.

Brokers are registrations made with their own ZooKeeper sessions; controller
candidates have sessions of their own. What is checked is what Kafka's tools
read (the znodes) and what the controller sends (recorded by the channel).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from seglog.cluster import admin_zk_client, znodes
from seglog.cluster.controller import KafkaController
from seglog.cluster.controller_context import ControllerContext
from seglog.cluster.partition_state_machine import update_leader_and_isr
from seglog.cluster.state_machine import PartitionState, ReplicaState
from seglog.cluster.zk_client import CreateOp, SetDataOp, ZkClient
from seglog.cluster.znodes import LeaderAndIsr, LeaderIsrAndControllerEpoch
from seglog.common import TopicPartition
from seglog.config import BrokerConfig
from seglog.errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    FencedLeaderEpochError,
    StaleBrokerEpochError,
    TopicExistsError,
)

from .conftest import expire_session, wait_until
from .recording_channel import RecordingChannel, leader_and_isr, partition_states, stop_replica, update_metadata
from .test_zk_client import registration

T0, T1, T2 = (TopicPartition("orders", p) for p in range(3))


class Cluster:
    """Brokers registered in ZooKeeper, controller candidates, and an observer session reading znodes."""

    def __init__(self, clients) -> None:
        self._clients = clients
        self.zk: ZkClient = clients()
        self.zk.ensure_persistent_paths()
        self.brokers: dict[int, ZkClient] = {}
        self.controllers: dict[int, KafkaController] = {}
        self.channels: dict[int, RecordingChannel] = {}

    def client(self) -> ZkClient:
        return self._clients()

    def start_brokers(self, *ids: int) -> None:
        for broker_id in ids:
            client = self._clients()
            client.register_broker(registration(broker_id))
            self.brokers[broker_id] = client

    def stop_broker(self, broker_id: int) -> None:
        self.brokers.pop(broker_id).close()

    def start_controller(self, broker_id: int, **config: object) -> KafkaController:
        config.setdefault("auto.leader.rebalance.enable", False)
        self.channels[broker_id] = RecordingChannel()
        controller = KafkaController(
            self._clients(session_timeout_ms=3000), broker_id, self.channels[broker_id], BrokerConfig(config)
        )
        self.controllers[broker_id] = controller.start()
        return controller

    def active(self) -> KafkaController:
        wait_until(lambda: [c for c in self.controllers.values() if c.is_active], what="an active controller")
        (controller,) = [c for c in self.controllers.values() if c.is_active]
        controller.wait_for_events()  # its failover done: what follows is new to it
        return controller

    def state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.zk.get_partition_state(tp)

    def wait_for_state(self, tp: TopicPartition, leader: int, isr: tuple[int, ...]) -> LeaderIsrAndControllerEpoch:
        def matches() -> bool:
            s = self.state(tp)
            return s is not None and (s.leader_and_isr.leader, s.leader_and_isr.isr) == (leader, isr)

        wait_until(matches, what=f"{tp} led by {leader} with ISR {isr}")
        state = self.state(tp)
        assert state is not None
        return state

    def stop(self) -> None:
        for controller in self.controllers.values():
            controller.stop()


@pytest.fixture
def cluster(clients) -> Iterator[Cluster]:
    made = Cluster(clients)
    yield made
    made.stop()


def create_orders(cluster: Cluster, **config: str) -> None:
    # partition p's preferred leader is broker p+1, followed by the next two
    assignment = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    admin_zk_client.create_topic_with_assignment(cluster.zk, "orders", assignment, config)


def start_with_orders(cluster: Cluster, controller_id: int = 1, **config: object) -> KafkaController:
    """Brokers 1-3, an active controller, topic orders online; what was sent so far taken away."""
    cluster.start_brokers(1, 2, 3)
    controller = cluster.start_controller(controller_id, **config)
    cluster.active()
    create_orders(cluster)
    cluster.wait_for_state(T2, 3, (3, 1, 2))
    controller.wait_for_events()
    cluster.channels[controller_id].take()
    return controller


def lai(state: LeaderIsrAndControllerEpoch | None) -> tuple[int, int, tuple[int, ...], int]:
    assert state is not None
    now = state.leader_and_isr
    return now.leader, now.leader_epoch, now.isr, state.controller_epoch


# --- becoming the controller, topic creation ---------------------------------------------------


def test_topic_creation_brings_partitions_online(cluster: Cluster) -> None:
    cluster.start_brokers(1, 2, 3)
    controller = cluster.start_controller(1)
    assert cluster.active() is controller and controller.epoch == 1
    channel = cluster.channels[1]
    controller.wait_for_events()
    assert sorted(channel.brokers) == [1, 2, 3]
    channel.take()

    create_orders(cluster)
    for p, tp in enumerate((T0, T1, T2)):
        cluster.wait_for_state(tp, p + 1, cluster.zk.get_topic("orders").partitions[p].replicas)  # type: ignore[union-attr]
    assert lai(cluster.state(T0)) == (1, 0, (1, 2, 3), 1)
    found = cluster.zk.get(znodes.partition_state_path("orders", 1))
    assert found is not None and found[0] == (
        b'{"version":1,"leader":2,"leader_epoch":0,"controller_epoch":1,"isr":[2,3,1]}'
    )
    controller.wait_for_events()
    for tp in (T0, T1, T2):
        assert controller.partition_state(tp) is PartitionState.ONLINE
        assert all(controller.replica_state(tp, r) is ReplicaState.ONLINE for r in (1, 2, 3))

    # one LeaderAndIsr per broker with all three partitions (new replicas), then UpdateMetadata to all
    sent = channel.take()
    requests = leader_and_isr(sent)
    assert sorted(b for b, _ in requests) == [1, 2, 3]
    topic_id = cluster.zk.get_topic("orders").topic_id  # type: ignore[union-attr]
    for broker_id, request in requests:
        assert (request.controller_id, request.controller_epoch) == (1, 1)
        assert request.broker_epoch == cluster.brokers[broker_id].get(znodes.broker_path(broker_id))[1].czxid  # type: ignore[index]
        assert [(s.partition_index, s.leader, s.leader_epoch, s.is_new) for s in partition_states(request)] == [
            (0, 1, 0, True),
            (1, 2, 0, True),
            (2, 3, 0, True),
        ]
        assert {t.topic_name: t.topic_id for t in request.topic_states} == {"orders": znodes.topic_uuid(topic_id or "")}
        assert [b.broker_id for b in request.live_leaders] == [1, 2, 3]
    metadata = update_metadata(sent)
    assert sorted(b for b, _ in metadata) == [1, 2, 3]
    assert [b for b, _ in sent].count(1) == 2  # the partitions' states went out in one batch
    assert {(s.partition_index, s.leader) for s in partition_states(metadata[0][1])} == {(0, 1), (1, 2), (2, 3)}
    assert [b.id for b in metadata[0][1].live_brokers] == [1, 2, 3]

    with pytest.raises(TopicExistsError):
        create_orders(cluster)


def test_new_partitions_and_dead_replicas_at_creation(cluster: Cluster) -> None:
    cluster.start_brokers(1, 2)
    controller = cluster.start_controller(2)
    cluster.active()
    # broker 3 is not registered: partitions are led by the first live replica, the ISR is the live ones
    create_orders(cluster)
    cluster.wait_for_state(T0, 1, (1, 2))
    cluster.wait_for_state(T2, 1, (1, 2))
    controller.wait_for_events()
    assert controller.replica_state(T2, 3) is ReplicaState.ONLINE  # Kafka's state even on a dead broker
    assert all(b != 3 for b, _ in cluster.channels[2].take())

    # more partitions written into the topic znode by the admin client: brought online the same way
    cluster.start_brokers(3)
    wait_until(lambda: 3 in cluster.channels[2].brokers, what="broker 3 known to the controller")
    added = admin_zk_client.add_partitions(cluster.zk, "orders", 5)
    assert sorted(added) == [3, 4] and added[3][0] == 1  # continues from partition 0's leader
    for p in (3, 4):
        cluster.wait_for_state(TopicPartition("orders", p), added[p][0], added[p])
    controller.wait_for_events()
    assert controller.partition_state(TopicPartition("orders", 4)) is PartitionState.ONLINE


def test_a_topic_created_by_kafka_tools_without_an_id_gets_one(cluster: Cluster) -> None:
    cluster.start_brokers(1)
    cluster.zk.create(znodes.topic_path("legacy"), b'{"version":1,"partitions":{"0":[1]}}', makepath=True)
    controller = cluster.start_controller(1)
    cluster.wait_for_state(TopicPartition("legacy", 0), 1, (1,))
    controller.wait_for_events()
    topic = cluster.zk.get_topic("legacy")
    assert topic is not None and topic.topic_id is not None and topic.partitions[0].replicas == (1,)


# --- broker failure and return -------------------------------------------------------------------


def test_broker_failure_and_return(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    channel = cluster.channels[1]

    cluster.stop_broker(1)
    # the partition it led gets the next ISR member; every ISR loses it; leader epochs go up by one
    cluster.wait_for_state(T0, 2, (2, 3))
    cluster.wait_for_state(T1, 2, (2, 3))
    cluster.wait_for_state(T2, 3, (3, 2))
    controller.wait_for_events()
    assert [lai(cluster.state(tp))[1] for tp in (T0, T1, T2)] == [1, 1, 1]
    assert lai(cluster.state(T0))[3] == 1
    assert controller.replica_state(T0, 1) is ReplicaState.OFFLINE
    assert controller.partition_state(T0) is PartitionState.ONLINE
    sent = channel.take()
    assert all(b in (2, 3) for b, _ in sent)  # nothing to the dead broker
    states = {(b, s.partition_index): (s.leader, s.isr) for b, r in leader_and_isr(sent) for s in partition_states(r)}
    assert states[(2, 0)] == states[(3, 0)] == (2, [2, 3])
    assert states[(3, 2)] == (3, [3, 2])
    assert {b.id for _, r in update_metadata(sent) for b in r.live_brokers} == {2, 3}
    assert not stop_replica(sent)  # StopReplica to the dead broker is dropped

    # it comes back: its replicas are Online again, it hears the partitions' states; leaders stay
    cluster.start_brokers(1)
    wait_until(lambda: 1 in channel.brokers, what="the controller to see broker 1")
    controller.wait_for_events()
    assert controller.replica_state(T0, 1) is ReplicaState.ONLINE
    sent = channel.take()
    to_1 = [r for b, r in leader_and_isr(sent) if b == 1]
    assert len(to_1) == 1
    assert [(s.partition_index, s.leader, s.isr, s.is_new) for s in partition_states(to_1[0])] == [
        (0, 2, [2, 3], False),
        (1, 2, [2, 3], False),
        (2, 3, [3, 2], False),
    ]
    # the others hear of the new broker, the new one of every partition; then the batch of its replicas
    metadata = update_metadata(sent)
    assert [(b, len(partition_states(r))) for b, r in metadata[:3]] == [(2, 0), (3, 0), (1, 3)]
    assert all([b.id for b in r.live_brokers] == [1, 2, 3] for _, r in metadata)
    assert sorted(b for b, _ in metadata[3:]) == [1, 2, 3]
    assert lai(cluster.state(T0)) == (2, 1, (2, 3), 1)  # the ISR grows back by the leader, not the controller


def test_last_replica_gone_then_unclean_election(cluster: Cluster) -> None:
    cluster.start_brokers(1, 2)
    controller = cluster.start_controller(1)
    cluster.active()
    admin_zk_client.create_topic_with_assignment(cluster.zk, "clean", {0: [1, 2]})
    admin_zk_client.create_topic_with_assignment(
        cluster.zk, "unclean", {0: [1, 2]}, {"unclean.leader.election.enable": "true"}
    )
    clean, unclean = TopicPartition("clean", 0), TopicPartition("unclean", 0)
    cluster.wait_for_state(clean, 1, (1, 2))
    cluster.wait_for_state(unclean, 1, (1, 2))
    cluster.stop_broker(2)
    cluster.wait_for_state(clean, 1, (1,))
    cluster.wait_for_state(unclean, 1, (1,))
    # the last ISR member goes: no leader, the ISR keeps it (so an unclean election stays visible)
    cluster.stop_broker(1)
    assert lai(cluster.wait_for_state(clean, -1, (1,)))[1] == 2
    cluster.wait_for_state(unclean, -1, (1,))
    controller.wait_for_events()
    assert controller.partition_state(clean) is PartitionState.OFFLINE
    # broker 2 returns, out of the ISR: only the topic allowing unclean election takes it as leader
    cluster.start_brokers(2)
    state = cluster.wait_for_state(unclean, 2, (2,))
    assert state.leader_and_isr.leader_recovery_state == 1  # RECOVERING
    controller.wait_for_events()
    assert lai(cluster.state(clean)) == (-1, 2, (1,), 1)
    assert controller.partition_state(clean) is PartitionState.OFFLINE
    # the ISR's member returns: the clean partition is led again
    cluster.start_brokers(1)
    assert lai(cluster.wait_for_state(clean, 1, (1,)))[1] == 3


# --- compare-and-set, fencing, failover ------------------------------------------------------------


def test_a_conflicting_write_is_read_again_and_retried(cluster: Cluster) -> None:
    leader_zk = cluster.client()
    epoch, version = cluster.zk.register_controller_and_increment_epoch(9)
    path = znodes.partition_state_path("t", 0)
    cluster.zk.ensure_path(znodes.partition_path("t", 0))
    first = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3)), epoch)
    cluster.zk.create(path, znodes.encode_partition_state(first))
    seen: list[tuple[int, ...]] = []

    def drop_replica_3(_tp: TopicPartition, current: LeaderIsrAndControllerEpoch) -> LeaderAndIsr:
        seen.append(current.leader_and_isr.isr)
        if len(seen) == 1:  # meanwhile the leader shrinks the ISR itself (as a leader's AlterPartition would)
            shrunk = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 3)), epoch)
            leader_zk.set(path, znodes.encode_partition_state(shrunk), 0)
        lai = current.leader_and_isr
        return lai.new_leader_and_isr(lai.leader, [r for r in lai.isr if r != 3])

    ctx = ControllerContext(epoch=epoch, epoch_zk_version=version)
    done, failed = update_leader_and_isr(cluster.zk, ctx, [TopicPartition("t", 0)], drop_replica_3)
    assert not failed and seen == [(1, 2, 3), (1, 3)]
    assert lai(cluster.zk.get_partition_state(TopicPartition("t", 0))) == (1, 1, (1,), epoch)
    assert done[TopicPartition("t", 0)].leader_and_isr.partition_epoch == 2

    # a controller whose epoch was replaced cannot write at all
    cluster.zk.set(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(epoch + 1))
    with pytest.raises(ControllerMovedError):
        update_leader_and_isr(cluster.zk, ctx, [TopicPartition("t", 0)], drop_replica_3)


def test_a_controller_whose_epoch_went_stale_resigns(cluster: Cluster) -> None:
    cluster.start_brokers(1)
    controller = cluster.start_controller(1)
    cluster.active()
    controller.wait_for_events()
    # another controller was elected meanwhile (it moved /controller_epoch); this one has not heard yet
    cluster.zk.set(znodes.CONTROLLER_EPOCH, znodes.encode_controller_epoch(2), 1)
    admin_zk_client.create_topic_with_assignment(cluster.zk, "late", {0: [1]})
    wait_until(lambda: not controller.is_active, what="the stale controller to resign")
    assert cluster.zk.get(znodes.partition_state_path("late", 0)) is None


def test_failover_to_another_candidate(cluster: Cluster, chroot: str) -> None:
    cluster.start_brokers(1, 2, 3)
    first = cluster.start_controller(1)
    assert cluster.active() is first
    second = cluster.start_controller(2)
    create_orders(cluster)
    cluster.wait_for_state(T2, 3, (3, 1, 2))
    first.wait_for_events()
    assert not second.is_active
    old_epoch_version = first.zk.get_controller_epoch()[1]  # type: ignore[index]

    expire_session(first.zk, chroot)
    wait_until(lambda: second.is_active, what="the second candidate to take over")
    assert second.epoch == 2
    second.wait_for_events()
    # it loaded the cluster from ZooKeeper and told every broker: LeaderAndIsr with the states as they are
    sent = cluster.channels[2].take()
    requests = leader_and_isr(sent)
    assert sorted(b for b, _ in requests) == [1, 2, 3]
    assert all(r.controller_epoch == 2 and len(partition_states(r)) == 3 for _, r in requests)
    assert all(not s.is_new and s.leader_epoch == 0 for _, r in requests for s in partition_states(r))
    # UpdateMetadata first with the live brokers only (Kafka's onControllerFailover), then with the partitions
    assert [(b, len(partition_states(r))) for b, r in update_metadata(sent)] == [
        (1, 0),
        (2, 0),
        (3, 0),
        (1, 3),
        (2, 3),
        (3, 3),
    ]
    # and goes on: a broker fails, its partitions are elected under the new epoch
    cluster.stop_broker(3)
    assert lai(cluster.wait_for_state(T2, 1, (1, 2))) == (1, 1, (1, 2), 2)
    # the old controller's writes are refused (once its client has a session again to try them with)
    wait_until(lambda: not first.is_active and first.zk.connected, what="the old controller to resign")
    with pytest.raises(ControllerMovedError):
        first.zk.fenced_write(old_epoch_version, [CreateOp("/stale", b"")])
    state = znodes.encode_partition_state(LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 1, (3,)), 1))
    with pytest.raises(ControllerMovedError):
        first.zk.fenced_write(old_epoch_version, [SetDataOp(znodes.partition_state_path("orders", 2), state)])
    assert lai(cluster.state(T2)) == (1, 1, (1, 2), 2)


# --- AlterPartition, preferred leaders, controlled shutdown ------------------------------------------


def epoch_of(cluster: Cluster, broker_id: int) -> int:
    found = cluster.zk.get(znodes.broker_path(broker_id))
    assert found is not None
    return int(found[1].czxid)


def expand_isr(cluster: Cluster, controller: KafkaController, tp: TopicPartition, isr: tuple[int, ...]) -> None:
    """What a leader does once a follower caught up: AlterPartition from its current state."""
    state = cluster.state(tp)
    assert state is not None
    now = state.leader_and_isr
    change = LeaderAndIsr(now.leader, now.leader_epoch, isr, now.leader_recovery_state, now.partition_epoch)
    result = controller.alter_partition(now.leader, epoch_of(cluster, now.leader), {tp: change})[tp]
    assert isinstance(result, LeaderAndIsr) and result.isr == isr


def bounce_broker_1(cluster: Cluster, controller: KafkaController) -> None:
    """Broker 1 fails and returns: partition 0 (preferred leader 1) is led by 2; the ISRs take 1 back."""
    cluster.stop_broker(1)
    cluster.wait_for_state(T0, 2, (2, 3))
    cluster.start_brokers(1)
    wait_until(lambda: 1 in cluster.channels[controller.broker_id].brokers, what="broker 1 back")
    controller.wait_for_events()
    for tp in (T0, T1, T2):
        state = cluster.state(tp)
        assert state is not None
        expand_isr(cluster, controller, tp, (*state.leader_and_isr.isr, 1))


def test_alter_partition(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    epoch1 = epoch_of(cluster, 1)
    # the leader shrinks the ISR: written at the next partition epoch, the leader epoch unchanged
    result = controller.alter_partition(1, epoch1, {T0: LeaderAndIsr(1, 0, (1, 2), partition_epoch=0)})
    assert result == {T0: LeaderAndIsr(1, 0, (1, 2), partition_epoch=1)}
    assert lai(cluster.state(T0)) == (1, 0, (1, 2), 1)
    metadata = update_metadata(cluster.channels[1].take())
    assert sorted(b for b, _ in metadata) == [1, 2, 3]
    assert [(s.partition_index, s.isr, s.zk_version) for s in partition_states(metadata[0][1])] == [(0, [1, 2], 1)]
    # the same change again is answered with the state as it is; stale epochs and dead brokers are refused
    again = controller.alter_partition(1, epoch1, {T0: LeaderAndIsr(1, 0, (1, 2), partition_epoch=0)})
    assert again == {T0: LeaderAndIsr(1, 0, (1, 2), partition_epoch=1)}
    refused = controller.alter_partition(
        1,
        epoch1,
        {
            T0: LeaderAndIsr(1, 0, (1,), partition_epoch=0),
            T1: LeaderAndIsr(1, 0, (2, 3, 1, 7), partition_epoch=0),
            TopicPartition("nope", 0): LeaderAndIsr(1, 0, (1,)),
        },
    )
    assert [type(refused[tp]).__name__ for tp in (T0, T1, TopicPartition("nope", 0))] == [
        "InvalidUpdateVersionError",
        "IneligibleReplicaError",
        "UnknownTopicOrPartitionError",
    ]
    assert [refused[tp].error_code for tp in (T0, T1)] == [95, 107]  # type: ignore[union-attr]
    with pytest.raises(StaleBrokerEpochError):
        controller.alter_partition(1, epoch1 - 1, {T0: LeaderAndIsr(1, 0, (1,), partition_epoch=1)})
    assert lai(cluster.state(T0)) == (1, 0, (1, 2), 1)
    # a leader fenced by a newer leader epoch
    cluster.stop_broker(1)
    cluster.wait_for_state(T0, 2, (2,))
    cluster.start_brokers(1)
    wait_until(lambda: 1 in cluster.channels[1].brokers, what="broker 1 back")
    stale = controller.alter_partition(1, epoch_of(cluster, 1), {T0: LeaderAndIsr(1, 0, (1, 2), partition_epoch=1)})
    assert isinstance(stale[T0], FencedLeaderEpochError)


def test_preferred_replica_election_znode(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    bounce_broker_1(cluster, controller)
    before = cluster.state(T0)
    assert lai(before) == (2, 1, (2, 3, 1), 1)
    cluster.channels[1].take()
    admin_zk_client.request_preferred_replica_election(cluster.zk, [T0, T1])
    state = cluster.wait_for_state(T0, 1, (2, 3, 1))
    assert state.leader_and_isr.leader_epoch == 2
    wait_until(lambda: cluster.zk.get(znodes.PREFERRED_REPLICA_ELECTION) is None, what="the request to be removed")
    controller.wait_for_events()
    assert lai(cluster.state(T1))[:2] == (2, 1)  # already led by its preferred replica: untouched
    requests = leader_and_isr(cluster.channels[1].take())
    assert sorted(b for b, _ in requests) == [1, 2, 3]
    assert all([(s.partition_index, s.leader) for s in partition_states(r)] == [(0, 1)] for _, r in requests)


def test_auto_leader_rebalance(cluster: Cluster) -> None:
    config = {
        "auto.leader.rebalance.enable": True,
        "leader.imbalance.check.interval.seconds": 1,
        "leader.imbalance.per.broker.percentage": 10,
    }
    controller = start_with_orders(cluster, **config)
    bounce_broker_1(cluster, controller)
    # broker 1's imbalance is 1/1 > 10 %: the next check gives partition 0 back to it
    assert lai(cluster.wait_for_state(T0, 1, (2, 3, 1)))[1] == 2
    assert [lai(cluster.state(tp))[0] for tp in (T1, T2)] == [2, 3]


def test_controlled_shutdown(cluster: Cluster) -> None:
    controller = start_with_orders(cluster, 3)
    admin_zk_client.create_topic_with_assignment(cluster.zk, "single", {0: [1]})
    cluster.wait_for_state(TopicPartition("single", 0), 1, (1,))
    controller.wait_for_events()
    cluster.channels[3].take()
    with pytest.raises(StaleBrokerEpochError):
        controller.controlled_shutdown(1, epoch_of(cluster, 1) - 1)
    with pytest.raises(BrokerNotAvailableError):
        controller.controlled_shutdown(9, 0)

    # leadership moves off broker 1, which leaves every ISR; the unreplicated partition stays with it
    # and, as in Kafka, does not count as still led: nothing could move it
    still_led = controller.controlled_shutdown(1, epoch_of(cluster, 1))
    assert still_led == set()
    assert lai(cluster.state(TopicPartition("single", 0)))[0] == 1
    assert lai(cluster.state(T0)) == (2, 1, (2, 3), 1)
    assert lai(cluster.state(T1)) == (2, 1, (2, 3), 1)
    assert lai(cluster.state(T2)) == (3, 1, (3, 2), 1)
    sent = cluster.channels[3].take()
    stops = stop_replica(sent)
    assert [b for b, _ in stops] == [1]
    assert [(s.partition_index, s.delete_partition) for s in partition_states(stops[0][1])] == [(1, False), (2, False)]
    assert all(r.controller_epoch == 1 for _, r in sent)
    # broker 2 fails next: broker 3, the last of the ISR, leads
    cluster.stop_broker(2)
    cluster.wait_for_state(T0, 3, (3,))
    # when it is gone and back, it is an ordinary broker again
    cluster.stop_broker(1)
    cluster.start_brokers(1)
    wait_until(lambda: 1 in cluster.channels[3].brokers, what="broker 1 back")
    expand_isr(cluster, controller, T0, (3, 1))


# --- topic deletion ---------------------------------------------------------------------------------


def orders_znodes(cluster: Cluster) -> list[bool]:
    paths = (znodes.topic_path("orders"), znodes.topic_config_path("orders"), znodes.delete_topic_path("orders"))
    return [cluster.zk.get(p) is not None for p in paths]


def test_topic_deletion(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    admin_zk_client.delete_topic(cluster.zk, "orders")
    wait_until(lambda: orders_znodes(cluster) == [False, False, False], what="the topic's znodes to go")
    controller.wait_for_events()
    assert controller.partition_state(T0) is PartitionState.NON_EXISTENT
    assert controller.replica_state(T0, 1) is ReplicaState.NON_EXISTENT
    sent = cluster.channels[1].take()
    # every broker hears leader -2, then each replica is stopped and then deleted
    first = update_metadata(sent)[0][1]
    assert {(s.partition_index, s.leader) for s in partition_states(first)} == {(0, -2), (1, -2), (2, -2)}
    stops = [
        (b, [(s.partition_index, s.leader_epoch, s.delete_partition) for s in partition_states(r)])
        for b, r in stop_replica(sent)
    ]
    for broker_id in (1, 2, 3):
        assert [s for b, s in stops if b == broker_id] == [
            [(0, -2, False), (1, -2, False), (2, -2, False)],
            [(0, -2, True), (1, -2, True), (2, -2, True)],
        ]
    assert not leader_and_isr(sent)
    # the name can be used again
    create_orders(cluster)
    cluster.wait_for_state(T0, 1, (1, 2, 3))


def test_topic_deletion_waits_for_a_dead_replica(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    cluster.stop_broker(3)
    cluster.wait_for_state(T2, 1, (1, 2))
    admin_zk_client.delete_topic(cluster.zk, "orders")
    wait_until(lambda: controller.replica_state(T0, 3) is ReplicaState.DELETION_INELIGIBLE, what="3 ineligible")
    wait_until(lambda: controller.replica_state(T0, 1) is ReplicaState.DELETION_SUCCESSFUL, what="1 deleted")
    assert orders_znodes(cluster) == [True, True, True]
    cluster.channels[1].take()
    cluster.start_brokers(3)
    wait_until(lambda: orders_znodes(cluster) == [False, False, False], what="the topic's znodes to go")
    controller.wait_for_events()
    deletes = [b for b, r in stop_replica(cluster.channels[1].take()) if partition_states(r)[0].delete_partition]
    assert deletes == [3]


def test_topic_deletion_disabled(cluster: Cluster) -> None:
    controller = start_with_orders(cluster, **{"delete.topic.enable": False})
    admin_zk_client.delete_topic(cluster.zk, "orders")
    wait_until(lambda: orders_znodes(cluster) == [True, True, False], what="the request to be dropped")
    controller.wait_for_events()
    assert controller.partition_state(T0) is PartitionState.ONLINE
    assert not stop_replica(cluster.channels[1].take())


# --- partition reassignment ------------------------------------------------------------------------------


def reassignment_of_partition_0(cluster: Cluster, controller: KafkaController) -> None:
    """Phase A of moving partition 0 from brokers 1, 2, 3 to 2, 3, 4: broker 4 is added, nothing removed yet."""
    cluster.zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({T0: [2, 3, 4]}))
    wait_until(lambda: cluster.zk.get_topic("orders").partitions[0].adding_replicas == (4,), what="phase A")  # type: ignore[union-attr]
    controller.wait_for_events()
    topic = cluster.zk.get_topic("orders")
    assert topic is not None and topic.partitions[0] == znodes.ReplicaAssignment((2, 3, 4, 1), (4,), (1,))
    assert lai(cluster.state(T0)) == (1, 1, (1, 2, 3), controller.epoch)  # leader epoch up, for the replica list
    assert controller.replica_state(T0, 4) is ReplicaState.NEW


def test_partition_reassignment(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    cluster.start_brokers(4)
    wait_until(lambda: 4 in cluster.channels[1].brokers, what="broker 4 known")
    controller.wait_for_events()
    cluster.channels[1].take()
    reassignment_of_partition_0(cluster, controller)
    requests = leader_and_isr(cluster.channels[1].take())
    assert {b: (partition_states(r)[0].replicas, partition_states(r)[0].is_new) for b, r in requests} == {
        1: ([2, 3, 4, 1], False),
        2: ([2, 3, 4, 1], False),
        3: ([2, 3, 4, 1], False),
        4: ([2, 3, 4, 1], True),
    }
    assert partition_states(requests[0][1])[0].adding_replicas == [4]

    # broker 4 caught up: the leader adds it to the ISR, and the reassignment completes
    expand_isr(cluster, controller, T0, (1, 2, 3, 4))
    wait_until(lambda: cluster.zk.get(znodes.REASSIGN_PARTITIONS) is None, what="the request to be removed")
    controller.wait_for_events()
    topic = cluster.zk.get_topic("orders")
    assert topic is not None and topic.partitions[0] == znodes.ReplicaAssignment((2, 3, 4))
    assert topic.partitions[1].replicas == (2, 3, 1)  # the others are untouched
    # leadership left broker 1 (the reassignment election: first target in the ISR), then 1 left the ISR
    assert lai(cluster.state(T0)) == (2, 3, (2, 3, 4), 1)
    assert controller.replica_state(T0, 1) is ReplicaState.NON_EXISTENT
    assert controller.replica_state(T0, 4) is ReplicaState.ONLINE
    sent = cluster.channels[1].take()
    assert [
        (s.partition_index, s.delete_partition) for b, r in stop_replica(sent) if b == 1 for s in partition_states(r)
    ] == [
        (0, False),
        (0, True),
    ]
    assert [(s.leader, s.replicas) for _, r in update_metadata(sent)[-1:] for s in partition_states(r)] == [
        (2, [2, 3, 4])
    ]


def test_a_new_controller_resumes_a_reassignment(cluster: Cluster, chroot: str) -> None:
    first = start_with_orders(cluster)
    second = cluster.start_controller(2)
    cluster.start_brokers(4)
    wait_until(lambda: 4 in cluster.channels[1].brokers, what="broker 4 known")
    reassignment_of_partition_0(cluster, first)
    expire_session(first.zk, chroot)
    wait_until(lambda: second.is_active, what="the second controller")
    second.wait_for_events()
    # it read the reassignment from the topic znode and goes on with it: the leader epoch up again, the new
    # replica told it is new
    assert lai(cluster.state(T0))[:3] == (1, 2, (1, 2, 3))
    to_4 = [partition_states(r)[0] for b, r in leader_and_isr(cluster.channels[2].take()) if b == 4]
    assert [(s.leader_epoch, s.adding_replicas, s.is_new) for s in to_4][-1] == (2, [4], True)
    expand_isr(cluster, second, T0, (1, 2, 3, 4))
    wait_until(lambda: cluster.zk.get(znodes.REASSIGN_PARTITIONS) is None, what="the reassignment to complete")
    second.wait_for_events()
    assert cluster.zk.get_topic("orders").partitions[0] == znodes.ReplicaAssignment((2, 3, 4))  # type: ignore[union-attr]
    assert lai(cluster.state(T0))[::2] == (2, (2, 3, 4))


def test_a_reassignment_to_a_dead_broker_is_refused(cluster: Cluster) -> None:
    controller = start_with_orders(cluster)
    cluster.zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({T0: [2, 3, 5], T1: [1, 1]}))
    wait_until(lambda: cluster.zk.get(znodes.REASSIGN_PARTITIONS) is None, what="the refused requests to go")
    controller.wait_for_events()
    assert cluster.zk.get_topic("orders").partitions[0] == znodes.ReplicaAssignment((1, 2, 3))  # type: ignore[union-attr]
    assert lai(cluster.state(T0)) == (1, 0, (1, 2, 3), 1)
