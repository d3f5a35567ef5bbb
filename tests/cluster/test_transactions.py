"""Transactions across brokers: the coordinator sends each marker to the partition's leader
(WriteTxnMarkers, API key 27), wherever it is. Three ``seglog broker`` processes and a real
ZooKeeper; confluent-kafka's transactional producer writes partitions led by each broker and
commits offsets in its transactions, a read_committed consumer sees exactly the committed
records, also while a partition's leader is SIGKILLed between commits. WriteTxnMarkers is
sent raw to a broker (acks -1, Kafka's per-partition errors), and the coordinator's channel
is run against the cluster with stale metadata (the leader moved, a broker unreachable)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog import common
from seglog.broker.metadata_cache import BrokerInfo, MetadataCache, PartitionState
from seglog.broker.txn_marker_channel_manager import TransactionMarkerChannelManager
from seglog.client import connect
from seglog.cluster.zookeeper_server import ZooKeeperServer, free_port
from seglog.common import ZERO_UUID
from seglog.coordinator.transaction_coordinator import WriteTxnMarkers
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    DescribeTransactionsRequestData,
    ListOffsetsRequestData,
    MetadataRequestData,
    ProduceRequestData,
    WriteTxnMarkersRequestData,
)
from seglog.records import Record
from seglog.records.batch import build_batch
from seglog.tools.cluster import BrokerProcess, LocalCluster

from .conftest import wait_until
from .test_replication import chrooted_cluster, identical, state, zk_of

NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS = 0, 3, 6, 19
BROKERS = (1, 2, 3)
GROUP = "txn-readers"


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Short sessions: a killed leader is replaced within seconds."""
    overrides = [
        "zookeeper.session.timeout.ms=3000",
        "replica.lag.time.max.ms=5000",
        "offsets.topic.num.partitions=3",
        "offsets.topic.replication.factor=3",
        "transaction.state.log.num.partitions=3",
        "group.initial.rebalance.delay.ms=0",
        "log.index.size.max.bytes=65536",
    ]
    local = chrooted_cluster(zookeeper, tmp_path_factory.mktemp("txn"), "txn", overrides)
    local.start()
    try:
        # made through ZooKeeper, so that every broker names the same coordinator for an id
        # (a broker that makes it on its first FindCoordinator makes it locally today)
        create(local, "__transaction_state", [[1, 2, 3], [2, 3, 1], [3, 1, 2]], **{"cleanup.policy": "compact"})
        yield local
    finally:
        local.stop()


def create(cluster: LocalCluster, topic: str, assignment: list[list[int]], **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    new = NewTopic(topic, len(assignment), replica_assignment=assignment, config=config)
    admin.create_topics([new], operation_timeout=30)[topic].result(60)
    with zk_of(cluster) as zk:
        wait_until(lambda: len(state(zk, topic).isr) == len(assignment[0]), what=f"{topic}'s full ISR")

    def leaders_known() -> bool:  # by every broker: a coordinator sends the markers where its metadata says
        return all(leader_of(cluster, b, topic, p) == r[0] for b in live(cluster) for p, r in enumerate(assignment))

    wait_until(leaders_known, what=f"{topic}'s leaders in every broker's metadata")


def live(cluster: LocalCluster) -> list[BrokerProcess]:
    return [b for b in cluster.brokers.values() if b.running]


def metadata_request(topic: str) -> MetadataRequestData:
    return MetadataRequestData([MetadataRequestData.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)


def leader_of(cluster: LocalCluster, broker: BrokerProcess, topic: str, partition: int) -> int:
    with connect(broker.address) as client:
        answer = client.request(ApiKey.METADATA, metadata_request(topic))
    found = [p.leader_id for t in answer.topics for p in t.partitions if p.partition_index == partition]
    return found[0] if found else -1


def transactional(bootstrap: str, txn_id: str) -> Producer:
    # librdkafka's log to a logger: served only by poll(), so a producer a failed test's traceback
    # keeps alive does not write its reconnect attempts on the stderr of every later test
    settings = {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1}
    settings["logger"] = logging.getLogger(f"rdkafka.{txn_id}")
    producer = Producer({**settings, "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000})
    producer.init_transactions(60)
    return producer


def coordinator_of(cluster: LocalCluster, txn_id: str) -> int:
    """The broker that knows the transactional id: its coordinator."""
    for broker in live(cluster):
        with connect(broker.address) as client:
            found = client.request(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequestData([txn_id]))
        if found.transaction_states[0].error_code == NONE:
            return broker.broker_id
    raise AssertionError(f"no broker coordinates {txn_id}")


def transaction_state(cluster: LocalCluster, coordinator: int, txn_id: str) -> str:
    with connect(cluster.brokers[coordinator].address) as client:
        found = client.request(ApiKey.DESCRIBE_TRANSACTIONS, DescribeTransactionsRequestData([txn_id]))
    return str(found.transaction_states[0].transaction_state)


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> dict[int, list[bytes]]:
    """Each partition's values from the start until the consumer's position reaches the high
    watermark (read_committed: the last stable offset must have got there)."""
    settings = {"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "enable.auto.commit": False}
    consumer = Consumer({**settings, "isolation.level": isolation})
    tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
    ends = [consumer.get_watermark_offsets(tp, 30)[1] for tp in tps]
    consumer.assign(tps)
    got: dict[int, list[bytes]] = {p: [] for p in range(partitions)}

    def caught_up() -> bool:
        for m in consumer.consume(500, 0.2):
            assert m.error() is None, m.error()
            got[int(m.partition() or 0)].append(bytes(m.value() or b""))
        positions = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
        return all(tp.offset >= end for tp, end in zip(positions, ends, strict=True))

    try:
        wait_until(caught_up, 60, f"{isolation} reads of {topic} to the high watermark")
    finally:
        consumer.close()
    return got


def test_transactions_over_three_leaders_commit_and_abort(cluster: LocalCluster) -> None:
    """Each transaction writes a partition led by each broker and commits a group's offset;
    a read_committed consumer sees the committed ones only, the group's offset is the last
    committed transaction's, and the aborted records are in the logs all the same."""
    create(cluster, "spread", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    producer = transactional(cluster.bootstrap_servers, "spread-writer")
    reader = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": GROUP})
    group = reader.consumer_group_metadata()
    for n, commit in [(1, True), (2, False), (3, True)]:
        producer.begin_transaction()
        for p in range(3):
            producer.produce("spread", b"%s%d-%d" % (b"c" if commit else b"a", n, p), partition=p)
        producer.send_offsets_to_transaction([TopicPartition("spread", 0, n)], group, 30)
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(60)
        else:
            producer.abort_transaction(60)
    committed = read_all(cluster.bootstrap_servers, "spread", 3, "read_committed")
    assert committed == {p: [b"c1-%d" % p, b"c3-%d" % p] for p in range(3)}
    everything = read_all(cluster.bootstrap_servers, "spread", 3, "read_uncommitted")
    assert everything == {p: [b"c1-%d" % p, b"a2-%d" % p, b"c3-%d" % p] for p in range(3)}
    offsets = reader.committed([TopicPartition("spread", 0)], timeout=30)
    assert offsets[0].offset == 3
    reader.close()


class Writer:
    """Transactions in a thread, one record to each partition of ``topic`` each, committed or
    (every third) aborted; each outcome recorded. A commit that fails with an abortable error
    is aborted; one whose outcome is unknown (a timeout) is tried again."""

    def __init__(self, producer: Producer, topic: str, partitions: int) -> None:
        self.producer = producer
        self.topic = topic
        self.partitions = partitions
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive()
        if self.failure is not None:
            raise self.failure

    def wait_for(self, more: int) -> None:
        wanted = len(self.committed) + more
        wait_until(lambda: self.failure is not None or len(self.committed) >= wanted, 90, "committed transactions")

    def _run(self) -> None:
        n = 0
        try:
            while not self._stop.is_set():
                n += 1
                values = [b"t%d-%d" % (n, p) for p in range(self.partitions)]
                self._transaction(values, commit=n % 3 != 0)
        except BaseException as e:  # re-raised in the test's thread
            self.failure = e

    def _transaction(self, values: list[bytes], *, commit: bool) -> None:
        self.producer.begin_transaction()
        for p, value in enumerate(values):
            self.producer.produce(self.topic, value, partition=p)
        for _ in range(5):
            try:
                if commit:
                    self.producer.commit_transaction(60)
                    self.committed += values
                else:
                    self.producer.abort_transaction(60)
                    self.aborted += values
                return
            except KafkaException as e:
                error = e.args[0]
                if error.txn_requires_abort():
                    self.producer.abort_transaction(60)
                    self.aborted += values
                    return
                if not error.retriable():
                    raise
        raise AssertionError(f"transaction of {values} never ended")


def test_a_leader_killed_during_commits_loses_no_committed_record(cluster: LocalCluster) -> None:
    """Transactions run without pause over two partitions while the leader of one is
    SIGKILLed: the markers go to its successor, every committed record is read back by a
    read_committed consumer, no aborted one is, and every transaction completed."""
    txn_id = "killed-leader-writer"
    producer = transactional(cluster.bootstrap_servers, txn_id)
    coordinator = coordinator_of(cluster, txn_id)
    victim = next(b for b in BROKERS if b != coordinator)
    others = [b for b in BROKERS if b != victim]
    create(cluster, "kill", [[victim, *others], [coordinator, *(b for b in BROKERS if b != coordinator)]])
    try:
        with Writer(producer, "kill", 2) as writer:
            writer.wait_for(10)
            cluster.brokers[victim].kill()
            with zk_of(cluster) as zk:
                wait_until(lambda: state(zk, "kill").leader in others, 60, "a new leader of kill-0")
            writer.wait_for(20)
        # EndTxn is answered once PrepareCommit is logged; the markers complete it after
        done = ("CompleteCommit", "CompleteAbort")
        wait_until(lambda: transaction_state(cluster, coordinator, txn_id) in done, 60, "the last transaction complete")
        read = read_all(cluster.bootstrap_servers, "kill", 2, "read_committed")
        values = read[0] + read[1]
        assert sorted(values) == sorted(writer.committed)
        assert not set(values) & set(writer.aborted)
    finally:
        if not cluster.brokers[victim].running:  # first: the module's later tests need all three
            cluster.start_broker(victim)
        with contextlib.suppress(KafkaException):  # a producer in a fatal state: the body's error tells why
            producer.flush(10)


# --- WriteTxnMarkers itself ------------------------------------------------------------------------


def produce_transactional(broker: BrokerProcess, topic: str, partition: int, producer_id: int, epoch: int = 0) -> None:
    """One transactional record of ``producer_id`` (sequence 0), acks -1."""
    batch = build_batch(
        [Record(key=None, value=b"pending")],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    data = [ProduceRequestData.TopicProduceData(topic, [ProduceRequestData.PartitionProduceData(partition, batch)])]
    with connect(broker.address) as client:
        answer = client.request(ApiKey.PRODUCE, ProduceRequestData(None, -1, 30_000, data))
    assert answer.responses[0].partition_responses[0].error_code == NONE


def write_markers(
    broker: BrokerProcess, producer_id: int, partitions: list[tuple[str, int]], *, commit: bool
) -> dict[tuple[str, int], int]:
    """A raw WriteTxnMarkers request of one marker: the error code of each partition."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    Markers = WriteTxnMarkersRequestData
    topics = [Markers.WritableTxnMarkerTopic(t, ps) for t, ps in by_topic.items()]
    marker = Markers.WritableTxnMarker(producer_id, 0, commit, topics, 0)
    with connect(broker.address) as client:
        answer = client.request(ApiKey.WRITE_TXN_MARKERS, Markers([marker]))
    (found,) = answer.markers
    assert found.producer_id == producer_id
    return {(t.name, p.partition_index): p.error_code for t in found.topics for p in t.partitions}


def offsets(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    """ListOffsets latest of a partition from its leader: (read_uncommitted, read_committed)."""
    found = []
    with connect(broker.address) as client:
        for level in (0, 1):
            latest = ListOffsetsRequestData.ListOffsetsPartition(partition, timestamp=-1)
            topics = [ListOffsetsRequestData.ListOffsetsTopic(topic, [latest])]
            body = ListOffsetsRequestData(replica_id=-1, isolation_level=level, topics=topics)
            answer = client.request(ApiKey.LIST_OFFSETS, body).topics[0].partitions[0]
            assert answer.error_code == NONE
            found.append(answer.offset)
    return found[0], found[1]


def test_write_txn_markers_appends_with_acks_all_and_answers_per_partition(cluster: LocalCluster) -> None:
    """A leader appends the marker and answers once every replica has it; a follower answers
    NOT_LEADER_OR_FOLLOWER, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, a partition whose
    ISR is below min.insync.replicas NOT_ENOUGH_REPLICAS (acks -1, not 1); the ABORT marker
    ends the transaction: the last stable offset passes it and read_committed drops it."""
    create(cluster, "marked", [[1, 2, 3]])
    create(cluster, "lonely", [[2]], **{"min.insync.replicas": "2"})
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    produce_transactional(leader, "marked", 0, 4242)
    assert offsets(leader, "marked", 0) == (1, 0)  # the open transaction holds the stable offset back

    assert write_markers(follower, 4242, [("marked", 0)], commit=False) == {("marked", 0): NOT_LEADER_OR_FOLLOWER}
    answer = write_markers(leader, 4242, [("marked", 0), ("nowhere", 0)], commit=False)
    assert answer == {("marked", 0): NONE, ("nowhere", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # answered once the ISR had it: every replica's log already holds the marker
    assert identical(cluster, "marked") is not None
    assert offsets(leader, "marked", 0) == (2, 2)
    assert read_all(cluster.bootstrap_servers, "marked", 1, "read_committed") == {0: []}
    assert read_all(cluster.bootstrap_servers, "marked", 1, "read_uncommitted") == {0: [b"pending"]}

    answer = write_markers(cluster.brokers[2], 4243, [("lonely", 0)], commit=True)
    assert answer == {("lonely", 0): NOT_ENOUGH_REPLICAS}


# --- the coordinator's channel, leaders moving ------------------------------------------------------


def metadata_of(cluster: LocalCluster, topic: str) -> tuple[list[BrokerInfo], list[PartitionState]]:
    """The live brokers and ``topic``'s partitions as a broker's Metadata answers them."""
    with connect(live(cluster)[0].address) as client:
        answer = client.request(ApiKey.METADATA, metadata_request(topic))
    brokers = [BrokerInfo(b.node_id, b.host, b.port) for b in answer.brokers]
    partitions = [
        PartitionState(p.partition_index, p.leader_id, p.leader_epoch, tuple(p.replica_nodes), ())
        for t in answer.topics
        for p in t.partitions
    ]
    return brokers, partitions


def test_markers_follow_a_moved_leader_and_pass_an_unreachable_broker(cluster: LocalCluster) -> None:
    """The coordinator's channel (run here, as broker 99 with no partition of its own) starts
    from stale metadata: moving-0's leader is a follower now (NOT_LEADER_OR_FOLLOWER), moving-1's
    a broker nobody answers for, and a deleted topic's partition is in the transaction. Once the
    metadata is current (UpdateMetadata, here from a Metadata request) the next round writes both
    markers to the real leaders, which end the transactions; the deleted partition needs none."""
    create(cluster, "moving", [[1, 2, 3], [3, 1, 2]])
    produce_transactional(cluster.brokers[1], "moving", 0, 4300)
    produce_transactional(cluster.brokers[3], "moving", 1, 4300)
    brokers, current = metadata_of(cluster, "moving")
    gone = free_port("127.0.0.1")  # nothing listens there
    stale = [
        PartitionState(0, 2, 0, (1, 2, 3), ()),  # a follower
        PartitionState(1, 7, 0, (3, 1, 2), ()),  # broker 7: unreachable
    ]
    cache = MetadataCache("txn")
    unreachable = BrokerInfo(7, "127.0.0.1", gone)
    cache.update_metadata([*brokers, unreachable], -1, [("moving", ZERO_UUID, s) for s in stale], set())
    rounds: list[int] = []

    def still_current() -> bool:  # asked before each round and before completing
        rounds.append(len(rounds) + 1)
        if len(rounds) == 2:  # the first round was refused: the metadata becomes current
            cache.update_metadata(brokers, -1, [("moving", ZERO_UUID, s) for s in current], set())
        return True

    async def send() -> bool:
        channel = TransactionMarkerChannelManager(cache, 99, _no_local_write, timeout_s=10)
        partitions = frozenset(
            {
                common.TopicPartition("moving", 0),
                common.TopicPartition("moving", 1),
                common.TopicPartition("deleted", 0),
            }
        )
        try:
            return await channel.send(WriteTxnMarkers("moving-writer", 4300, 0, True, 0, partitions), still_current)
        finally:
            channel.close()

    assert asyncio.run(send())
    assert rounds == [1, 2, 3]  # refused, written, the check before completing
    assert offsets(cluster.brokers[1], "moving", 0) == (2, 2)
    assert offsets(cluster.brokers[3], "moving", 1) == (2, 2)
    committed = read_all(cluster.bootstrap_servers, "moving", 2, "read_committed")
    assert committed == {0: [b"pending"], 1: [b"pending"]}


def test_markers_of_a_fenced_producer_epoch_are_abandoned(cluster: LocalCluster) -> None:
    """A leader refuses a marker older than its producer's epoch (INVALID_PRODUCER_EPOCH): the
    producer has moved on, so the channel stops at once, without a retry, and reports the
    transaction not completed (Kafka's abortSending); the open transaction stays open."""
    create(cluster, "fenced", [[2, 3, 1]])
    produce_transactional(cluster.brokers[2], "fenced", 0, 4400, epoch=1)
    brokers, current = metadata_of(cluster, "fenced")
    cache = MetadataCache("txn")
    cache.update_metadata(brokers, -1, [("fenced", ZERO_UUID, s) for s in current], set())
    rounds: list[int] = []

    def still_current() -> bool:
        rounds.append(len(rounds) + 1)
        return True

    async def send() -> bool:
        channel = TransactionMarkerChannelManager(cache, 99, _no_local_write, timeout_s=10)
        try:
            marker = WriteTxnMarkers("fenced-writer", 4400, 0, True, 0, frozenset({common.TopicPartition("fenced", 0)}))
            return await channel.send(marker, still_current)
        finally:
            channel.close()

    assert not asyncio.run(send())
    assert rounds == [1]
    assert offsets(cluster.brokers[2], "fenced", 0) == (1, 0)


class RequestRelay:
    """A TCP relay in front of a broker that counts the requests passing through it by API key:
    a trace of what reaches the broker, which it forwards byte for byte."""

    def __init__(self, upstream: BrokerProcess) -> None:
        self.upstream = upstream
        self.counts: dict[int, int] = {}
        self._server: asyncio.Server | None = None
        self._pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return "127.0.0.1", self._server.sockets[0].getsockname()[1]

    async def _relay(self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter) -> None:
        broker_in, broker_out = await asyncio.open_connection(self.upstream.host, self.upstream.port)
        for pump in (self._requests(client_in, broker_out), self._copy(broker_in, client_out)):
            task = asyncio.create_task(pump)
            self._pumps.add(task)

    async def _requests(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                size = await reader.readexactly(4)
                frame = await reader.readexactly(int.from_bytes(size, "big"))
                api_key = int.from_bytes(frame[:2], "big")
                self.counts[api_key] = self.counts.get(api_key, 0) + 1
                writer.write(size + frame)
                await writer.drain()
        writer.close()

    async def _copy(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(1 << 16):
                writer.write(chunk)
                await writer.drain()
        writer.close()

    def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in self._pumps:
            task.cancel()


def test_markers_of_several_transactions_to_one_broker_go_in_one_request(cluster: LocalCluster) -> None:
    """Kafka's drainQueuedTransactionMarkers: the markers queued for a broker, of every transaction,
    go in one WriteTxnMarkers request. The channel (run here as broker 99) ends five transactions at
    once on the two partitions broker 2 leads, through a relay that counts the requests reaching
    broker 2: one WriteTxnMarkers carries the five markers, and every marker is written (the last
    stable offset passes them all, read_committed reads every record)."""
    create(cluster, "batched", [[2, 3, 1], [2, 1, 3]])
    producer_ids = range(4500, 4505)
    for n, pid in enumerate(producer_ids):
        produce_transactional(cluster.brokers[2], "batched", n % 2, pid)
    brokers, current = metadata_of(cluster, "batched")
    assert [p.leader for p in current] == [2, 2]
    relay = RequestRelay(cluster.brokers[2])

    async def send() -> list[bool]:
        host, port = await relay.start()
        cache = MetadataCache("txn")
        relayed = [BrokerInfo(b.broker_id, host, port) if b.broker_id == 2 else b for b in brokers]
        cache.update_metadata(relayed, -1, [("batched", ZERO_UUID, s) for s in current], set())
        channel = TransactionMarkerChannelManager(cache, 99, _no_local_write, timeout_s=10)
        markers = [
            WriteTxnMarkers(f"batched-{pid}", pid, 0, True, 0, frozenset({common.TopicPartition("batched", n % 2)}))
            for n, pid in enumerate(producer_ids)
        ]
        try:
            return await asyncio.gather(*(channel.send(m, lambda: True) for m in markers))
        finally:
            channel.close()
            relay.close()

    assert asyncio.run(send()) == [True] * 5
    assert relay.counts.get(ApiKey.WRITE_TXN_MARKERS) == 1
    # partition 0: three records and their markers; partition 1: two and theirs
    assert offsets(cluster.brokers[2], "batched", 0) == (6, 6)
    assert offsets(cluster.brokers[2], "batched", 1) == (4, 4)
    committed = read_all(cluster.bootstrap_servers, "batched", 2, "read_committed")
    assert committed == {0: [b"pending"] * 3, 1: [b"pending"] * 2}


async def _no_local_write(
    marker: WriteTxnMarkers, partitions: list[common.TopicPartition]
) -> dict[common.TopicPartition, int]:
    raise AssertionError(f"the channel's broker (99) leads none of {partitions}")
