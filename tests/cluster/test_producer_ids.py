"""Producer ids in a cluster: blocks claimed in ZooKeeper's /latest_producer_id_block by
compare-and-set (Kafka's ZkProducerIdManager), so that no two brokers hand out the same id.
Against a real ZooKeeper; the last test asks three ``seglog broker`` processes for ids."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator

import pytest

from seglog.client import BlockingConnection, connect
from seglog.cluster import znodes
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.coordinator.producer_id_manager import BLOCK_SIZE, ProducerIdBlocks
from seglog.errors import InvalidZNodeError
from seglog.protocol import ApiKey
from seglog.protocol.message_data import ApiVersionsRequestData, InitProducerIdRequestData
from seglog.tools.cluster import LocalCluster

from .test_replication import chrooted_cluster


def manager(client, broker_id: int, block_size: int = BLOCK_SIZE) -> ProducerIdBlocks:
    """A broker's producer ids as the broker wires them in cluster mode."""
    return ProducerIdBlocks(lambda: client.claim_producer_id_block(broker_id, block_size)[1:])


def test_the_znode_holds_kafkas_json(clients) -> None:
    zk = clients()
    zk.ensure_persistent_paths()  # the znode exists, empty, as a starting broker leaves it
    first, second = manager(zk, 7), manager(zk, 8)
    assert first.generate_producer_id() == 0
    data, stat = zk.get(znodes.LATEST_PRODUCER_ID_BLOCK)
    # Kafka's ProducerIdBlockZNode: version and broker numbers, the inclusive ends strings of longs
    assert data == b'{"version":1,"broker":7,"block_start":"0","block_end":"999"}'
    assert second.generate_producer_id() == 1000
    data, stat = zk.get(znodes.LATEST_PRODUCER_ID_BLOCK)
    assert json.loads(data) == {"version": 1, "broker": 8, "block_start": "1000", "block_end": "1999"}
    assert stat.version == 2  # one compare-and-set per claimed block
    assert [first.generate_producer_id() for _ in range(999)] == list(range(1, 1000))
    assert first.generate_producer_id() == 2000  # its block is used up: the next one after broker 8's


def test_a_block_written_by_kafka_is_continued_and_a_bad_one_refused(clients) -> None:
    zk = clients()
    zk.create(znodes.LATEST_PRODUCER_ID_BLOCK, b'{"version":1,"broker":2,"block_start":"5000","block_end":"5999"}')
    assert manager(zk, 1).generate_producer_id() == 6000
    zk.set(znodes.LATEST_PRODUCER_ID_BLOCK, b'{"version":1,"broker":2,"block_start":5000,"block_end":"5999"}')
    with pytest.raises(InvalidZNodeError, match="block_start") as e:
        manager(zk, 1).generate_producer_id()
    assert e.value.file == znodes.LATEST_PRODUCER_ID_BLOCK


def test_managers_claiming_concurrently_never_share_an_id(clients) -> None:
    """Two brokers' managers race for blocks of 3 ids on one ZooKeeper, each on its own session:
    every compare-and-set a rival won is read again and retried, so the ids are all distinct,
    and every claimed block is used (together they are exactly 0..N-1)."""
    sessions = [clients(), clients()]
    per_manager = 150
    start = threading.Barrier(len(sessions))
    handed: list[list[int]] = [[] for _ in sessions]

    def run(index: int) -> None:
        ids = manager(sessions[index], index + 1, block_size=3)
        start.wait()
        handed[index].extend(ids.generate_producer_id() for _ in range(per_manager))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(sessions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not set(handed[0]) & set(handed[1])
    assert sorted(handed[0] + handed[1]) == list(range(len(sessions) * per_manager))


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("pids"), "pids", ["log.index.size.max.bytes=65536"])
    local.start()
    try:
        yield local
    finally:
        local.stop()


def test_brokers_of_a_cluster_give_idempotent_producers_distinct_ids(cluster: LocalCluster) -> None:
    """InitProducerId without a transactional id is answered by whichever broker is asked."""
    given: dict[int, list[int]] = {}
    for broker_id, broker in cluster.brokers.items():
        with connect(broker.address) as client:
            for _ in range(2):
                init = client.request(
                    ApiKey.INIT_PRODUCER_ID, InitProducerIdRequestData(transactional_id=None, transaction_timeout_ms=-1)
                )
                assert init.error_code == 0, init
                given.setdefault(broker_id, []).append(init.producer_id)
    everyone = [pid for pids in given.values() for pid in pids]
    assert len(set(everyone)) == len(everyone), given
    assert all(pids[1] == pids[0] + 1 for pids in given.values())  # each broker's from its own block


def init_producer_id(client: BlockingConnection) -> int:
    init = client.request(
        ApiKey.INIT_PRODUCER_ID, InitProducerIdRequestData(transactional_id=None, transaction_timeout_ms=-1)
    )
    assert init.error_code == 0, init
    return int(init.producer_id)


def test_a_block_claimed_while_zookeeper_is_stopped_stalls_nothing_else(
    cluster: LocalCluster, zookeeper: ZooKeeperServer
) -> None:
    """The claim goes to ZooKeeper from a thread: while ZooKeeper does not answer (SIGSTOP), the
    InitProducerId that needs a new block waits, and the broker answers other requests meanwhile."""
    others = []
    for broker_id in (2, 3):
        with connect(cluster.brokers[broker_id].address) as client:
            others.append(init_producer_id(client))
    broker = cluster.brokers[1]
    with connect(broker.address) as waiting, connect(broker.address, timeout=10) as other:
        while init_producer_id(waiting) % BLOCK_SIZE != BLOCK_SIZE - 1:
            pass  # to the block's last id: the next request claims a block
        assert zookeeper.pid is not None
        answer: list[int] = []
        os.kill(zookeeper.pid, signal.SIGSTOP)
        try:
            asking = threading.Thread(target=lambda: answer.append(init_producer_id(waiting)))
            asking.start()
            # each round trip lets the broker's loop go round: by the third it has read the first request
            for _ in range(3):
                assert other.request(ApiKey.API_VERSIONS, ApiVersionsRequestData()).error_code == 0
            assert not answer  # still waiting for ZooKeeper
        finally:
            os.kill(zookeeper.pid, signal.SIGCONT)
        asking.join()
    assert answer and answer[0] % BLOCK_SIZE == 0 and answer[0] // BLOCK_SIZE not in {o // BLOCK_SIZE for o in others}
