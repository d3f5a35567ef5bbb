"""A killed broker comes back under load: it catches up, rejoins the ISR, and leadership returns
to the preferred replicas by the controller's automatic rebalance (a short check interval), with
every acknowledged record kept (the manual election is tests/cluster/test_cluster_tools.py's)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.tools.cluster import LocalCluster

from .conftest import wait_until
from .history import History
from .test_replication import chrooted_cluster, create_topic, state, zk_of

OVERRIDES = [
    "zookeeper.session.timeout.ms=2000",  # the killed broker is seen gone soon
    "auto.leader.rebalance.enable=true",
    "leader.imbalance.check.interval.seconds=1",
    "leader.imbalance.per.broker.percentage=10",
    "min.insync.replicas=2",
]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("return"), "return", OVERRIDES)
    local.start()
    try:
        yield local
    finally:
        local.stop()


def test_a_returned_broker_catches_up_rejoins_and_leads_again(cluster: LocalCluster) -> None:
    create_topic(cluster, "back", [1, 2, 3])  # broker 1 is the preferred leader
    with zk_of(cluster) as zk:
        wait_until(lambda: state(zk, "back").leader == 1 and len(state(zk, "back").isr) == 3, 30, "broker 1 leading")
        with History(cluster.bootstrap_servers, "back") as history:
            history.wait_for(200)
            cluster.brokers[1].kill()
            wait_until(lambda: state(zk, "back").leader in (2, 3), 30, "a new leader")
            assert 1 not in state(zk, "back").isr
            history.wait_for(500)  # written while broker 1 is away: it must fetch them
            wait_until(lambda: zk.get_broker(1) is None, 30, "broker 1's session to end")
            cluster.start_broker(1)
            wait_until(lambda: 1 in state(zk, "back").isr, 60, "broker 1 back in the ISR")
            # the next imbalance check (1 s) gives the partition back to its preferred replica
            wait_until(lambda: state(zk, "back").leader == 1, 30, "leadership back on broker 1")
            history.wait_for(200)  # acknowledged by the returned leader
        assert sorted(state(zk, "back").isr) == [1, 2, 3]
    history.check(cluster.brokers[1])
