"""Faults under load, checked with a history (tests/cluster/history.py): a leader cut off from
the other brokers and ZooKeeper by iptables rules, a leader paused, and ZooKeeper restarted; each
over a PLAINTEXT cluster and over one with SASL_SSL listeners only (tests/cluster/security.py).

Every broker here binds its own 127.0.0.x, but on loopback every connection it opens leaves
from 127.0.0.1, as everyone else's does: its outgoing packets are told apart by its cgroup (each
broker is started in a cgroup v2 of its own and iptables' ``cgroup`` match drops what it sends),
its incoming ones by its listener's address and port. The test's own requests to the cut
broker come from 127.0.0.200, which the rules let through.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.tools.cluster import BrokerProcess, LocalCluster

from .conftest import wait_until
from .history import History
from .security import assert_only_over_listeners, client_properties
from .test_replication import chrooted_cluster, create_topic, identical, produce, state, wait_until_found, zk_of

CLIENT = "127.0.0.200"  # the test's requests to a cut-off broker, let through
CGROUPS = Path("/sys/fs/cgroup/unified") if Path("/sys/fs/cgroup/unified").is_dir() else Path("/sys/fs/cgroup")


def cgroup_of_this_process() -> Path:
    line = next(x for x in Path("/proc/self/cgroup").read_text().splitlines() if x.startswith("0::"))
    return CGROUPS / line[3:].lstrip("/")


class Cuts:
    """The iptables rules in force, each removed by ``heal``; every broker in a cgroup of its own."""

    def __init__(self) -> None:
        self.rules: list[tuple[str, list[str]]] = []
        self.home = cgroup_of_this_process()

    def cgroup(self, broker: BrokerProcess) -> Path:
        return CGROUPS / f"seglog-test-{os.getpid()}-broker-{broker.broker_id}"

    def start(self, broker: BrokerProcess, zookeeper: str) -> None:
        """Start ``broker`` in its cgroup: this process moves there while it forks the broker."""
        group = self.cgroup(broker)
        group.mkdir(exist_ok=True)
        (group / "cgroup.procs").write_text(str(os.getpid()))
        try:
            broker.start(zookeeper)
        finally:
            (self.home / "cgroup.procs").write_text(str(os.getpid()))

    def cut(self, broker: BrokerProcess) -> None:
        """Nothing ``broker`` sends leaves but to CLIENT; nothing reaches its listener but from CLIENT."""
        path = str(self.cgroup(broker).relative_to(CGROUPS))
        self._add("OUTPUT", ["-m", "cgroup", "--path", path, "!", "-d", CLIENT, "-j", "DROP"])
        listener = ["-d", broker.host, "-p", "tcp", "--dport", str(broker.port), "!", "-s", CLIENT, "-j", "DROP"]
        self._add("INPUT", listener)

    def cut_from_zookeeper(self, broker: BrokerProcess, zookeeper: ZooKeeperServer) -> None:
        """Nothing ``broker`` sends reaches ZooKeeper: its session expires there."""
        path = str(self.cgroup(broker).relative_to(CGROUPS))
        port = str(zookeeper.port)
        self._add(
            "OUTPUT", ["-m", "cgroup", "--path", path, "-d", zookeeper.host, "-p", "tcp", "--dport", port, "-j", "DROP"]
        )

    def _add(self, chain: str, rule: list[str]) -> None:
        subprocess.run(["iptables", "-A", chain, *rule], check=True)
        self.rules.append((chain, rule))

    def heal(self) -> None:
        while self.rules:
            chain, rule = self.rules.pop()
            subprocess.run(["iptables", "-D", chain, *rule], check=True)

    def remove_cgroups(self, cluster: LocalCluster) -> None:
        for broker in cluster.brokers.values():
            with contextlib.suppress(FileNotFoundError):
                self.cgroup(broker).rmdir()


def cut_unavailable() -> str | None:
    if shutil.which("iptables") is None:
        return "iptables is not installed (make install installs it as root with apt-get)"
    if os.geteuid() != 0:
        return "iptables rules need root"
    if not (CGROUPS / "cgroup.procs").exists() or not (CGROUPS / "cgroup.subtree_control").exists():
        return f"no cgroup v2 hierarchy at {CGROUPS} to tell the brokers' packets apart"
    probe = subprocess.run(["iptables", "-L", "OUTPUT", "-n"], capture_output=True, text=True)
    return None if probe.returncode == 0 else f"iptables does not work here: {probe.stderr.strip()}"


@pytest.fixture(scope="module")
def cuts() -> Iterator[Cuts]:
    reason = cut_unavailable()
    if reason is not None:
        pytest.skip(reason)
    cuts = Cuts()
    try:
        yield cuts
    finally:
        cuts.heal()


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, cuts: Cuts, tmp_path_factory: pytest.TempPathFactory, security: str
) -> Iterator[LocalCluster]:
    """Sessions of 3 s: a cut-off leader's session expires and it is replaced within seconds."""
    overrides = ["zookeeper.session.timeout.ms=3000", "replica.lag.time.max.ms=5000"]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("faults"), "faults", overrides, security)
    try:
        local.prepare()
        for broker in local.brokers.values():
            cuts.start(broker, local.zookeeper_connect)
        local.wait_until_formed()
        yield local
    finally:
        cuts.heal()
        local.stop()
        cuts.remove_cgroups(local)


def test_a_cut_off_leader_is_replaced_and_truncates_its_tail(cluster: LocalCluster, cuts: Cuts, security: str) -> None:
    """A leader cut off from the other brokers and ZooKeeper cannot acknowledge acks=all
    (min.insync.replicas=2) though it appends; its session expires and the controller elects a
    follower, through which a producer goes on; healed, the old leader truncates what it
    appended alone, every replica ends byte-identical, and every acknowledged record is kept."""
    with zk_of(cluster) as zk:
        controller = zk.get_controller_id()
        leader = next(b for b in (1, 2, 3) if b != controller)  # the controller stays reachable
        others = [b for b in (1, 2, 3) if b != leader]
        create_topic(cluster, "cut", [leader, *others])
        wait_until(lambda: state(zk, "cut").isr == (leader, *others), what="a full ISR")
        assert_only_over_listeners(cluster, security.upper())
        bootstrap = ",".join(cluster.brokers[b].address for b in others)
        with History(bootstrap, "cut", client_properties(cluster)) as history:
            history.wait_for(50)
            try:
                cuts.cut(cluster.brokers[leader])
                cut_off = cluster.brokers[leader]
                answer = produce(
                    cut_off, "cut", [b"cut off"], timeout_ms=3000, source_host=CLIENT, security=cluster.security
                )
                assert answer.error_code != 0
                wait_until(lambda: state(zk, "cut").leader in others, 60, "a new leader")
                history.wait_for(50)
            finally:
                cuts.heal()
            wait_until(lambda: len(state(zk, "cut").isr) == 3, 60, "the old leader back in the ISR")
            history.wait_for(20)
        final = wait_until_found(lambda: identical(cluster, "cut"), "the old leader truncated")
        assert b"cut off" not in final
        history.check(cluster.brokers[state(zk, "cut").leader])


def test_a_paused_leader_is_replaced_and_rejoins_as_a_follower(cluster: LocalCluster, security: str) -> None:
    """A leader paused (SIGSTOP, as a long GC pause or a stalled VM) longer than its session: the
    controller elects a follower, through which the producer goes on; resumed, the old leader
    learns its session ended, registers again, follows, catches up and is back in the ISR; every
    acknowledged record is kept and the replicas end byte-identical."""
    with zk_of(cluster) as zk:
        controller = zk.get_controller_id()
        leader = next(b for b in (3, 2, 1) if b != controller)  # the controller stays to elect
        others = [b for b in (1, 2, 3) if b != leader]
        create_topic(cluster, "paused", [leader, *others])
        wait_until(lambda: state(zk, "paused").isr == (leader, *others), what="a full ISR")
        bootstrap = ",".join(cluster.brokers[b].address for b in others)
        with History(bootstrap, "paused", client_properties(cluster)) as history:
            history.wait_for(50)
            cluster.brokers[leader].signal(signal.SIGSTOP)
            try:
                wait_until(lambda: state(zk, "paused").leader in others, 60, "a new leader")
                assert leader not in state(zk, "paused").isr
                history.wait_for(50)
            finally:
                cluster.brokers[leader].signal(signal.SIGCONT)
            wait_until(lambda: len(state(zk, "paused").isr) == 3, 60, "the old leader back in the ISR")
            history.wait_for(20)
        wait_until_found(lambda: identical(cluster, "paused"), "identical logs")
        assert_only_over_listeners(cluster, security.upper())
        history.check(cluster.brokers[state(zk, "paused").leader])


def test_zookeeper_restarted_under_load_loses_nothing(
    cluster: LocalCluster, zookeeper: ZooKeeperServer, cuts: Cuts, security: str
) -> None:
    """ZooKeeper restarts while a producer writes (acks=all), and the brokers cannot reach it
    again until their sessions have expired (as when it is down longer than a session): they
    register again, a new controller is elected (a higher controller epoch), writes go on, and
    every acknowledged record is kept."""
    with zk_of(cluster) as zk:
        create_topic(cluster, "zk-restart", [1, 2, 3])
        wait_until(lambda: len(state(zk, "zk-restart").isr) == 3, what="a full ISR")
        epoch = zk.get_controller_epoch()
    assert epoch is not None
    with History(cluster.bootstrap_servers, "zk-restart", client_properties(cluster)) as history:
        history.wait_for(50)
        zookeeper.restart()
        with zk_of(cluster) as zk:
            try:
                for broker in cluster.brokers.values():
                    cuts.cut_from_zookeeper(broker, zookeeper)
                wait_until(lambda: zk.get_broker_ids() == [], 60, "the brokers' sessions to expire")
            finally:
                cuts.heal()
            wait_until(lambda: zk.get_broker_ids() == [1, 2, 3], 60, "the brokers registered again")
            wait_until(lambda: (zk.get_controller_epoch() or epoch)[0] > epoch[0], 60, "a new controller")
            cluster.wait_until_formed()
            history.wait_for(50)
            leader = state(zk, "zk-restart").leader
            wait_until(lambda: len(state(zk, "zk-restart").isr) == 3, 60, "a full ISR again")
    wait_until_found(lambda: identical(cluster, "zk-restart"), "identical logs")
    assert_only_over_listeners(cluster, security.upper())
    history.check(cluster.brokers[leader])
