"""A three-broker cluster (``LocalCluster``: a real ZooKeeper and three ``seglog broker``
processes on this machine) beside one broker, measured in the same run.

1. produce: RECORDS records of 100 bytes with bench/broker.py's producer (confluent-kafka,
   linger.ms=5, batch.size 1 MiB) to one partition, acks=all with RF=3 on the cluster beside
   acks=1 on one broker without ZooKeeper: records/s and their ratio. Replication lag under
   that load: every LAG_EVERY_S the leader's and each follower's log size (the partition dir's
   .log files: followers append the leader's bytes unchanged), leader - follower, in records
   (bytes times records per byte of the finished log); mean and max over the phase;
2. failover: a producer (acks=all, min.insync.replicas=2, RF=3) writes a record every 5 ms;
   the partition's leader (from ZooKeeper) is SIGKILLed; the time from the kill to the first
   acknowledged record produced after it; the broker is restarted and the bench waits for it
   back in the ISR; KILLS times, median and max. The brokers' ZooKeeper sessions are
   ``zookeeper.session.timeout.ms`` (SESSION_MS) long: a killed broker is seen gone when its
   session expires, which bounds both figures from below;
3. controller failover: the controller's broker SIGKILLed, the time until /controller
   (read with kazoo) names another broker; CONTROLLER_KILLS times, median;
4. a topic of WIDE partitions RF=3: AdminClient create to every partition having a leader in
   Metadata, seconds; then a broker SIGKILLed (its leaders move), restarted, back in every ISR,
   and ``seglog leader-election --election-type preferred --all-topic-partitions``: seconds from
   the command to every leader being its preferred replica in Metadata.

Run: ``.venv/bin/python bench/cluster.py`` (about two minutes; needs ZooKeeper, which
``make install`` installs). Figures on a shared machine are not final.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from broker import RECORDS, VALUE, produce, start_seglog
from seglog.cluster import znodes
from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer, zookeeper_unavailable
from seglog.tools.cluster import LocalCluster

KILLS = 10
CONTROLLER_KILLS = 3
WIDE = 1000
# indexes are preallocated with real blocks (10 MiB each by default): 1,000 partitions x 3
# replicas x 2 indexes would take 60 GB of disk
WIDE_INDEX_BYTES = 64 << 10
SESSION_MS = 3000
LAG_EVERY_S = 0.05
OVERRIDES = [
    "replica.fetch.wait.max.ms=200",
    "replica.fetch.backoff.ms=100",
    "replica.high.watermark.checkpoint.interval.ms=100",
    "min.insync.replicas=2",
    f"zookeeper.session.timeout.ms={SESSION_MS}",
    "replica.lag.time.max.ms=5000",
    "auto.leader.rebalance.enable=false",  # the preferred election of step 4 is the bench's own
]


def wait_until(check: Callable[[], Any], timeout: float, what: str, every: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {timeout} s")
        time.sleep(every)
    return found


def partition_state(zk: ZkClient, topic: str, partition: int = 0) -> znodes.LeaderAndIsr | None:
    found = zk.get_partition_state(znodes.TopicPartition(topic, partition))
    return None if found is None else found.leader_and_isr


def full_isr(zk: ZkClient, topic: str) -> bool:
    state = partition_state(zk, topic)
    return state is not None and len(state.isr) == 3


def log_bytes(directory: Path) -> int:
    try:
        return sum(e.stat().st_size for e in os.scandir(directory) if e.name.endswith(".log"))
    except FileNotFoundError:  # not created yet on a follower
        return 0


def produce_with_lag(cluster: LocalCluster, topic: str) -> tuple[float, float, float]:
    """(records/s, mean lag, max lag in records) of acks=all to ``topic``'s partition 0 (leader broker 1)."""
    dirs = {i: b.log_dir / f"{topic}-0" for i, b in cluster.brokers.items()}
    samples: list[int] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(LAG_EVERY_S):
            leader = log_bytes(dirs[1])
            samples.extend(leader - log_bytes(dirs[i]) for i in (2, 3))

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.perf_counter()
    try:
        produce(cluster.bootstrap_servers, topic, "all")
    finally:
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
    per_byte = RECORDS / log_bytes(dirs[1])
    if not samples:
        return RECORDS / elapsed, 0.0, 0.0
    return RECORDS / elapsed, statistics.mean(samples) * per_byte, max(samples) * per_byte


def baseline_produce() -> float:
    """records/s of acks=1 to one partition of one broker (no ZooKeeper)."""
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    proc, port = start_seglog(data)
    try:
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_topics([NewTopic("load", 1, 1)])["load"].result(30)
        started = time.perf_counter()
        produce(bootstrap, "load", "1")
        return RECORDS / (time.perf_counter() - started)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


class Writer:
    """A producer (acks=all) writing a record every 5 ms; the times of its acknowledgements,
    each beside the time its record was produced."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acks: list[tuple[float, float]] = []  # (produced, acknowledged)
        self._stop = threading.Event()
        config = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "retry.backoff.ms": 50, "log_level": 0}
        self._producer = Producer({**config, "enable.idempotence": False, "topic.metadata.refresh.interval.ms": 1000})
        self._topic = topic
        self._thread = threading.Thread(target=self._write)
        self._thread.start()

    def _write(self) -> None:
        while not self._stop.is_set():
            sent = time.perf_counter()
            self._producer.produce(self._topic, VALUE, partition=0, on_delivery=lambda e, m, s=sent: self._ack(e, s))
            self._producer.poll(0.005)
        self._producer.flush(30)

    def _ack(self, error: object, sent: float) -> None:
        if error is None:
            self.acks.append((sent, time.perf_counter()))

    def first_ack_after(self, moment: float) -> float | None:
        return min((acked for sent, acked in list(self.acks) if sent > moment), default=None)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def leader_failovers(cluster: LocalCluster, zk: ZkClient) -> list[float]:
    """Seconds from each leader SIGKILL to the first acknowledged acks=all record produced after it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic("failover", 1, 3)])["failover"].result(30)
    wait_until(lambda: full_isr(zk, "failover"), 60, "full ISR")
    writer = Writer(cluster.bootstrap_servers, "failover")
    times = []
    try:
        for _ in range(KILLS):
            acked = len(writer.acks)
            wait_until(lambda a=acked: len(writer.acks) >= a + 20, 60, "acknowledged writes")
            state = partition_state(zk, "failover")
            assert state is not None
            killed = time.perf_counter()
            cluster.brokers[state.leader].kill()
            first = wait_until(lambda k=killed: writer.first_ack_after(k), 60, "acknowledged write after the kill")
            times.append(first - killed)
            cluster.start_broker(state.leader)
            wait_until(lambda: full_isr(zk, "failover"), 60, "the killed broker back in the ISR")
    finally:
        writer.stop()
    return times


def controller_failovers(cluster: LocalCluster) -> list[float]:
    """Seconds from each SIGKILL of the controller's broker to /controller naming another broker."""
    kazoo = KazooClient(hosts=cluster.zookeeper_connect)
    kazoo.start()

    def controller() -> int | None:
        try:
            return int(json.loads(kazoo.get("/controller")[0])["brokerid"])
        except NoNodeError:  # between the old controller's session ending and the next one's election
            return None

    times = []
    try:
        for _ in range(CONTROLLER_KILLS):
            old = wait_until(controller, 60, "controller")
            killed = time.perf_counter()
            cluster.brokers[old].kill()
            wait_until(lambda o=old: controller() not in (None, o), 60, "a new controller", every=0.005)
            times.append(time.perf_counter() - killed)
            cluster.start_broker(old)
    finally:
        kazoo.stop()
        kazoo.close()
    return times


def leaders(admin: AdminClient, topic: str) -> list[tuple[int, list[int], list[int]]]:
    """(leader, replicas, isr) of each of ``topic``'s partitions, from Metadata."""
    found = admin.list_topics(topic, timeout=30).topics.get(topic)
    if found is None or found.error is not None:
        return []
    return [(p.leader, list(p.replicas), list(p.isrs)) for p in found.partitions.values()]


def wide_topic(cluster: LocalCluster) -> tuple[float, float]:
    """(seconds to create WIDE partitions RF=3 with every leader, seconds of the preferred election)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    started = time.perf_counter()
    topic = NewTopic("wide", WIDE, 3, config={"segment.index.bytes": str(WIDE_INDEX_BYTES)})
    admin.create_topics([topic], operation_timeout=120)["wide"].result(180)
    led = lambda: (found := leaders(admin, "wide")) and len(found) == WIDE and all(p[0] >= 0 for p in found)  # noqa: E731
    wait_until(led, 180, "every partition led", every=0.1)
    created = time.perf_counter() - started

    cluster.brokers[1].kill()
    wait_until(lambda: all(p[0] not in (-1, 1) for p in leaders(admin, "wide")), 120, "leaders off broker 1", 0.2)
    cluster.start_broker(1)
    wait_until(lambda: all(len(p[2]) == 3 for p in leaders(admin, "wide")), 180, "broker 1 in every ISR", 0.2)
    started = time.perf_counter()
    command = [sys.executable, "-m", "seglog.cli", "leader-election", "--election-type", "preferred"]
    command += ["--all-topic-partitions", "--bootstrap-server", cluster.brokers[2].address]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=180)
    wait_until(lambda: all(p[0] == p[1][0] for p in leaders(admin, "wide")), 180, "preferred leaders", 0.1)
    return created, time.perf_counter() - started


def main() -> int:
    reason = zookeeper_unavailable()
    if reason is not None:
        print(reason)
        return 1
    base = baseline_produce()
    directory = Path(tempfile.mkdtemp(prefix="seglog-bench-cluster-"))
    zookeeper = ZooKeeperServer(directory / "zookeeper", tick_time_ms=100, fsync=False)
    zookeeper.start()
    cluster = LocalCluster(directory, 3, zookeeper=zookeeper.connect_string, port=None, overrides=OVERRIDES)
    try:
        cluster.start()
        with ZkClient(cluster.zookeeper_connect, session_timeout_ms=10_000) as zk:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
            admin.create_topics([NewTopic("load", 1, replica_assignment=[[1, 2, 3]])])["load"].result(30)
            wait_until(lambda: full_isr(zk, "load"), 60, "full ISR")
            rate, lag_mean, lag_max = produce_with_lag(cluster, "load")
            print(f"produce, {RECORDS:,} records of 100 bytes, 1 partition (records/s)")
            print(f"  one broker, acks=1:          {base:12,.0f}")
            print(f"  3 brokers, RF=3, acks=all:   {rate:12,.0f}   ratio {rate / base:.2f}")
            print(f"  replication lag (leader - follower LEO), records: mean {lag_mean:,.0f}, max {lag_max:,.0f}")
            failovers = leader_failovers(cluster, zk)
        print(f"leader SIGKILL -> first acknowledged acks=all write, {len(failovers)} kills (session {SESSION_MS} ms):")
        print(f"  median {statistics.median(failovers):.2f} s, max {max(failovers):.2f} s", flush=True)
        controllers = controller_failovers(cluster)
        print(f"controller SIGKILL -> /controller names another broker, {len(controllers)} kills:")
        print(f"  median {statistics.median(controllers):.2f} s, max {max(controllers):.2f} s", flush=True)
        created, rebalanced = wide_topic(cluster)
        print(f"topic of {WIDE} partitions RF=3 created, every leader in Metadata: {created:.2f} s")
        print(f"preferred leader election after a broker returns, every leader preferred: {rebalanced:.2f} s")
    finally:
        for broker in cluster.brokers.values():
            broker.kill()
        zookeeper.stop()
        shutil.rmtree(directory, ignore_errors=True)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    sys.exit(main())
