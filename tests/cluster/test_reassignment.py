"""/admin/reassign_partitions and the AlterPartitionReassignments API together (Kafka 3.x's
``processApiPartitionReassignment``): the latest reassignment of a partition, by API or through
ZooKeeper, wins, so a partition the API reassigns (or cancels) leaves the znode at once, and the znode
goes with its last partition. A request left there would never complete (it names other targets than
the partition's) and would be started again by the next controller.

The controller against a real ZooKeeper, brokers as registrations (tests/cluster/test_controller.py's
harness): no replica ever catches up unless the test says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.common import TopicPartition

from .conftest import expire_session, wait_until
from .test_controller import T0, T1, Cluster, expand_isr, start_with_orders


@pytest.fixture
def cluster(clients: Callable[..., ZkClient]) -> Iterator[Cluster]:
    made = Cluster(clients)
    yield made
    made.stop()


def requested(cluster: Cluster) -> dict[TopicPartition, tuple[int, ...]] | None:
    found = cluster.zk.get(znodes.REASSIGN_PARTITIONS)
    return None if found is None else znodes.decode_reassignment(found[0])


def test_an_api_reassignment_takes_its_partitions_out_of_the_znode(cluster: Cluster, chroot: str) -> None:
    controller = start_with_orders(cluster)
    successor = cluster.start_controller(2)
    cluster.start_brokers(4)
    wait_until(lambda: 4 in cluster.channels[1].brokers, what="broker 4 known")
    cluster.zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({T0: [2, 3, 4], T1: [3, 1, 4]}))
    wait_until(lambda: controller.list_partition_reassignments().keys() == {T0, T1}, what="both moves started")

    # T0 goes elsewhere by API: it leaves the znode, T1 stays
    assert controller.alter_partition_reassignments({T0: [3, 4, 1]}) == {T0: None}
    assert requested(cluster) == {T1: (3, 1, 4)}
    # cancelled by API, T1 leaves it too, and the znode goes with it
    assert controller.alter_partition_reassignments({T1: None}) == {T1: None}
    assert requested(cluster) is None
    # back on the original replicas, in the full list's order (Kafka's originReplicas)
    assert cluster.zk.get_topic("orders").partitions[1] == znodes.ReplicaAssignment((3, 1, 2))  # type: ignore[union-attr]

    # a new controller has nothing to start again from the znode: T0 goes on to the API's target only
    expire_session(controller.zk, chroot)
    wait_until(lambda: successor.is_active, what="the second controller")
    successor.wait_for_events()
    assert successor.list_partition_reassignments() == {
        T0: znodes.ReplicaAssignment((3, 4, 1, 2), (4,), (2,)),
    }
    expand_isr(cluster, successor, T0, (1, 2, 3, 4))
    successor.wait_for_events()
    assert successor.list_partition_reassignments() == {}
    assert cluster.zk.get_topic("orders").partitions[0] == znodes.ReplicaAssignment((3, 4, 1))  # type: ignore[union-attr]
    assert requested(cluster) is None


def test_a_znode_request_after_an_api_reassignment_is_started(cluster: Cluster) -> None:
    """The znode, deleted when its last partition left it, is watched again: a new request is acted on."""
    controller = start_with_orders(cluster)
    cluster.start_brokers(4)
    wait_until(lambda: 4 in cluster.channels[1].brokers, what="broker 4 known")
    cluster.zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({T0: [2, 3, 4]}))
    wait_until(lambda: T0 in controller.list_partition_reassignments(), what="the move started")
    assert controller.alter_partition_reassignments({T0: None}) == {T0: None}
    assert requested(cluster) is None
    cluster.zk.create(znodes.REASSIGN_PARTITIONS, znodes.encode_reassignment({T1: [3, 1, 4]}))
    wait_until(lambda: T1 in controller.list_partition_reassignments(), what="the second request acted on")
    assert T0 not in controller.list_partition_reassignments()
