"""The console of a three-broker cluster (real ZooKeeper, three ``seglog broker`` processes) when a
broker is killed: its API and its cluster page, left open, show the broker down and its
partitions under-replicated, without a reload (the page asks again every few seconds).

The checks wait for the figures to change (the controller learns of the death when the killed
broker's ZooKeeper session expires); they do not time it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.console import ConsoleServer, start
from seglog.tools.cluster import LocalCluster

from ..broker.conftest import wait_for
from ..cluster.conftest import chrooted_local_cluster, zookeeper  # noqa: F401 (the cluster tests' fixture)
from .conftest import open_page
from .test_api import get

REPLICATED = "replicated"  # three partitions, each on every broker
OVERRIDES = [
    "zookeeper.session.timeout.ms=4000",  # a killed broker's session ends soon
    "offsets.topic.replication.factor=3",
    "min.insync.replicas=1",
]


@pytest.fixture(scope="module")
def three_brokers(
    zookeeper: ZooKeeperServer,  # noqa: F811 (the fixture imported above: a ZooKeeper, or a skip saying why)
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Brokers]:
    """Three brokers with topic REPLICATED, and a console of them."""
    local = chrooted_local_cluster(zookeeper, tmp_path_factory.mktemp("cluster"), "console", 3, OVERRIDES)
    with local, start(local.bootstrap_servers) as console:
        topics = AdminClient({"bootstrap.servers": local.bootstrap_servers})  # held until it answers
        topics.create_topics([NewTopic(REPLICATED, 3, 3)])[REPLICATED].result(60)
        yield Brokers(local, console)


class Brokers(NamedTuple):
    cluster: LocalCluster
    console: ConsoleServer


def _replicated(console: ConsoleServer) -> list[dict[str, Any]]:
    status, found = get(console, f"api/topics/{REPLICATED}")
    assert status == 200, found
    return found["partitionList"]


def test_a_killed_broker_shows_down_with_its_partitions_under_replicated(page, three_brokers):
    from playwright.sync_api import expect

    cluster_console = three_brokers.console
    wait_for(lambda: all(len(p["isr"]) == 3 for p in _replicated(cluster_console)), 60, "the full ISRs")
    status, before = get(cluster_console, "api/cluster")
    assert status == 200
    assert [(b["id"], b["alive"]) for b in before["brokers"]] == [(1, True), (2, True), (3, True)]
    assert (before["underReplicated"], before["offline"]) == (0, 0)
    # neither the console's bootstrap broker (the first) nor the controller: the figures change, not who tells them
    victim = next(b for b in (2, 3) if b != before["controller"])
    open_page(page, cluster_console, "#/cluster", "clusterPage")
    expect(page.locator("#count-under-replicated")).to_have_text("0")

    three_brokers.cluster.brokers[victim].kill()

    def down() -> dict[str, Any] | None:
        found = get(cluster_console, "api/cluster")[1]
        return found if any(b["id"] == victim and not b["alive"] for b in found.get("brokers", [])) else None

    after = wait_for(down, 60, f"broker {victim} to show down")
    assert next(b for b in after["brokers"] if b["id"] == victim)["host"] is None
    # every partition of REPLICATED and of the offsets topic has a replica on it
    wait_for(lambda: get(cluster_console, "api/cluster")[1]["underReplicated"] == after["partitions"], 60, "ISRs")
    assert all(victim not in p["isr"] and p["leader"] != victim for p in _replicated(cluster_console))
    assert all(p["highWatermark"] is not None for p in _replicated(cluster_console))  # led elsewhere
    # the page left open follows
    victim_row = page.locator("#brokers tbody tr").filter(has=page.locator(f"td:first-child:text-is('{victim}')"))
    expect(victim_row.locator("td").last).to_have_text("down")
    expect(page.locator("#count-under-replicated")).to_have_text(str(after["partitions"]))
