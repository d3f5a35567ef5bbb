"""TransactionManager against a real embedded broker: transactional batches (built with seglog's
record writers, sent with a raw Produce to the partition's leader) committed and aborted as a
real consumer (confluent-kafka, read_committed) sees them; an old epoch fenced by a re-init;
offsets committed with a transaction; a transaction ended by another client than the one that
opened it, and one left open aborted by re-initialising its id (the exactly-once sink's two
phases)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import (
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    BatchTransactions,
    ClusterClient,
    DecidedBatch,
    OffsetAndMetadata,
    PreparedTxnState,
    RetriableError,
    TransactionManager,
    check_partition,
    committed_offsets,
)
from seglog.client.transactions import TRANSACTION_KEY, State
from seglog.cluster.zookeeper_server import ZooKeeperServer
from seglog.common import TopicPartition
from seglog.errors import (
    ApiError,
    ErrorCode,
    IllegalStateTransitionError,
    InvalidProducerEpochError,
    InvalidProducerIdMappingError,
    InvalidTxnStateError,
    ProducerFencedError,
    SeglogError,
)
from seglog.protocol import ApiKey
from seglog.protocol.message_data import ProduceRequestData, ProduceResponseData
from seglog.records import Record, build_batch
from seglog.tools.cluster import LocalCluster

from ..cluster.conftest import chrooted_local_cluster, zookeeper  # noqa: F401 (a fixture)

TIMEOUT = 30.0
SRC = str(Path(__file__).parents[2] / "src")


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {
        "num.partitions": 1,
        "transaction.state.log.num.partitions": 4,
        "offsets.topic.num.partitions": 4,
        "log.retention.ms": -1,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
    }


def create(bootstrap: str, topic: str, partitions: int = 1, replicas: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, replicas, config=config)]).values():
        future.result(60)


def produce(client: ClusterClient, txn: TransactionManager, tp: TopicPartition, values: list[bytes]) -> None:
    """``values`` written in ``txn``'s open transaction: the partition joins it first, as the
    producer's hook does before its first write there."""
    txn.add_partitions([tp])
    produce_as(client, txn.prepared, tp, values)


def produce_as(client: ClusterClient, producer: PreparedTxnState, tp: TopicPartition, values: list[bytes]) -> None:
    """``values`` as one transactional batch of ``producer`` sent to ``tp``'s leader (acks=all)."""
    key = (producer.producer_id, producer.producer_epoch, tp)
    sequence = SEQUENCES.get(key, 0)
    batch = build_batch(
        [Record(key=None, value=v) for v in values],
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=sequence,
        transactional=True,
    )
    SEQUENCES[key] = sequence + len(values)

    def send(leader: Any, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
        Data = ProduceRequestData
        topic = Data.TopicProduceData(tp.topic, [Data.PartitionProduceData(tp.partition, batch)])
        request = Data(transactional_id=producer.transactional_id, acks=-1, timeout_ms=10_000, topic_data=[topic])
        answer: ProduceResponseData = leader.request(ApiKey.PRODUCE, request)
        return {tp: answer.responses[0].partition_responses[0]}

    check_partition(client.to_leaders([tp], send)[tp], f"cannot produce to {tp}")


SEQUENCES: dict[tuple[int, int, TopicPartition], int] = {}


def read(bootstrap: str, tp: TopicPartition, isolation_level: str) -> list[bytes]:
    """The values of ``tp`` from its start as a confluent-kafka consumer at ``isolation_level`` reads
    them, once its position reached the end (read_committed: once no transaction is open there)."""
    with ClusterClient(bootstrap, TIMEOUT) as client:
        deadline = time.monotonic() + TIMEOUT
        while True:  # markers are written after EndTxn's answer: wait for the last stable offset
            end = client.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset
            stable = client.list_offsets({tp: LATEST_TIMESTAMP}, READ_COMMITTED)[tp].offset
            if stable == end or isolation_level == "read_uncommitted":
                break
            assert time.monotonic() < deadline, f"{tp} stays unstable at {stable} < {end}"
            time.sleep(0.05)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": isolation_level,
            "fetch.wait.max.ms": 50,
        }
    )
    try:
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT
        while consumer.position([KafkaTopicPartition(tp.topic, tp.partition)])[0].offset < end:
            assert time.monotonic() < deadline, f"the consumer stopped at {got}"
            msg = consumer.poll(0.1)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        return got
    finally:
        consumer.close()


def test_committed_records_appear_once_and_aborted_never(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "orders")
    tp = TopicPartition("orders", 0)
    with ClusterClient(bootstrap, TIMEOUT) as client:
        txn = TransactionManager(client, "orders-app", transaction_timeout_ms=30_000)
        assert txn.state is State.UNINITIALIZED
        first = txn.init_transactions()
        assert (txn.state, first.producer_epoch) == (State.READY, 0)
        outcomes = [([b"c1", b"c2"], True), ([b"a1", b"a2"], False), ([b"c3"], True)]
        for values, commit in outcomes:
            txn.begin_transaction()
            produce(client, txn, tp, values)
            txn.commit_transaction() if commit else txn.abort_transaction()
            assert txn.state is State.READY and not txn.partitions
        # one with nothing written sends no EndTxn: the coordinator never heard of it
        txn.begin_transaction()
        txn.commit_transaction()
    assert read(bootstrap, tp, "read_committed") == [b"c1", b"c2", b"c3"]
    assert read(bootstrap, tp, "read_uncommitted") == [b"c1", b"c2", b"a1", b"a2", b"c3"]


def test_a_reinit_bumps_the_epoch_and_fences_the_old_one(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "fenced", 2)
    tp0, tp1 = TopicPartition("fenced", 0), TopicPartition("fenced", 1)
    with ClusterClient(bootstrap, TIMEOUT) as client:
        old = TransactionManager(client, "fenced-app")
        first = old.init_transactions()
        old.begin_transaction()
        produce(client, old, tp0, [b"zombie"])
        new = TransactionManager(client, "fenced-app")
        # the open transaction is aborted with the epoch bumped (its marker carries it), then the
        # retried InitProducerId bumps it again, as Kafka's coordinator does
        second = new.init_transactions()
        assert (second.producer_id, second.producer_epoch) == (first.producer_id, first.producer_epoch + 2)
        with pytest.raises(ProducerFencedError, match="AddPartitionsToTxn of fenced-1 of transactional id"):
            old.add_partitions([tp1])
        assert old.state is State.FATAL_ERROR
        with pytest.raises(ProducerFencedError):  # fatal: every later call says so
            old.commit_transaction()
        # the partition's leader refuses the old epoch's writes too
        with pytest.raises((InvalidProducerEpochError, ProducerFencedError)):
            produce_as(client, first, tp0, [b"late"])
        new.begin_transaction()
        produce(client, new, tp0, [b"current"])
        new.commit_transaction()
    assert read(bootstrap, tp0, "read_committed") == [b"current"]


def test_offsets_sent_to_a_transaction_are_committed_with_it(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "in")
    create(bootstrap, "out")
    source, sink = TopicPartition("in", 0), TopicPartition("out", 0)
    with ClusterClient(bootstrap, TIMEOUT) as client:
        txn = TransactionManager(client, "offsets-app")
        txn.init_transactions()
        assert committed_offsets(client, "g", [source]) == {source: None}
        for offset, commit in ((5, True), (9, False), (12, True)):
            txn.begin_transaction()
            produce(client, txn, sink, [b"x%d" % offset])
            txn.send_offsets({source: OffsetAndMetadata(offset, f"batch {offset}")}, "g")
            txn.commit_transaction() if commit else txn.abort_transaction()
            expected = 5 if offset == 9 else offset
            for highest in (None, 7):  # by group (v8+), and v7's request and answer
                got = committed_offsets(client, "g", [source], highest=highest)
                assert got == {source: OffsetAndMetadata(expected, f"batch {expected}")}
        with pytest.raises(SeglogError, match="serves OffsetFetch v6, before require_stable"):
            committed_offsets(client, "g", [source], highest=6)
    # the group's offsets as a real consumer of the group reads them
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
    try:
        (found,) = consumer.committed([KafkaTopicPartition("in", 0)], 30)
        assert (found.offset, found.metadata) == (12, "batch 12")
    finally:
        consumer.close()
    assert read(bootstrap, sink, "read_committed") == [b"x5", b"x12"]


def test_misuse_and_refusals_are_clear_errors(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    with ClusterClient(bootstrap, 2.0) as client:
        with pytest.raises(SeglogError, match="must not be empty"):
            TransactionManager(client, "")
        create(bootstrap, "misused", 2)
        txn = TransactionManager(client, "misused-app")
        with pytest.raises(IllegalStateTransitionError, match="cannot add partitions in state Uninitialized"):
            txn.add_partitions([TopicPartition("orders", 0)])
        txn.init_transactions()
        with pytest.raises(IllegalStateTransitionError, match="cannot go from Ready to CommittingTransaction"):
            txn.commit_transaction()
        # a topic nobody created: retried (its metadata may be on the way) until the timeout,
        # then the transaction is still open and may be aborted
        txn.begin_transaction()
        with pytest.raises(RetriableError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            txn.add_partitions([TopicPartition("no-such-topic", 0)])
        assert txn.state is State.IN_TRANSACTION
        txn.abort_transaction()
        # a timeout the broker refuses: fatal, with Kafka's code
        refused = TransactionManager(client, "refused-app", transaction_timeout_ms=24 * 3600 * 1000)
        with pytest.raises(ApiError, match="InitProducerId of transactional id 'refused-app'") as raised:
            refused.init_transactions()
        assert raised.value.error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert refused.state is State.FATAL_ERROR
        # the producer's hooks: a write lost makes the transaction abortable, a fenced one fatal
        txn.begin_transaction()
        produce(client, txn, TopicPartition("misused", 0), [b"half"])
        lost = SeglogError("a write to misused-0 was lost")
        txn.abortable_error(lost)
        for call in (txn.commit_transaction, lambda: txn.add_partitions([TopicPartition("misused", 1)])):
            with pytest.raises(SeglogError) as raised:
                call()
            assert raised.value is lost
        txn.abort_transaction()
        txn.begin_transaction()
        fenced = ProducerFencedError("misused-0 answered PRODUCER_FENCED")
        txn.fatal_error(fenced)
        for call in (txn.abort_transaction, txn.init_transactions):
            with pytest.raises(ProducerFencedError) as raised_fatal:
                call()
            assert raised_fatal.value is fenced
        assert read(bootstrap, TopicPartition("misused", 0), "read_committed") == []
        # a producer id the transactional id does not hold: abortable, the abort re-initialises
        # with it (KIP-360), which the coordinator refuses as another producer's
        held = TransactionManager(client, "misused-app").init_transactions()
        stranger = TransactionManager.resume(client, held._replace(producer_id=held.producer_id + 100))
        with pytest.raises(InvalidProducerIdMappingError, match="AddPartitionsToTxn of misused-0"):
            stranger.add_partitions([TopicPartition("misused", 0)])
        assert stranger.state is State.ABORTABLE_ERROR
        with pytest.raises(ProducerFencedError, match="InitProducerId of transactional id 'misused-app'"):
            stranger.abort_transaction()
        assert stranger.state is State.FATAL_ERROR


# --- the exactly-once sink's two phases -----------------------------------------------------------


def test_a_transaction_opened_by_one_client_is_committed_by_another(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "handed")
    tp = TopicPartition("handed", 0)
    with ClusterClient(bootstrap, TIMEOUT) as task_client:  # a task: writes, hands its transaction over
        task = TransactionManager(task_client, "query-1-p0")
        task.init_transactions()
        task.begin_transaction()
        produce(task_client, task, tp, [b"r1", b"r2"])
        prepared = task.prepared
    assert read(bootstrap, tp, "read_uncommitted") == [b"r1", b"r2"]
    with ClusterClient(bootstrap, TIMEOUT) as driver_client:  # the driver: ends it
        TransactionManager.resume(driver_client, prepared).commit_transaction()
        # a driver restarted after the commit commits again: answered as done, nothing changes
        TransactionManager.resume(driver_client, prepared).commit_transaction()
        with pytest.raises(InvalidTxnStateError, match=r"EndTxn\(abort\) of transactional id 'query-1-p0'"):
            TransactionManager.resume(driver_client, prepared).abort_transaction()
    assert read(bootstrap, tp, "read_committed") == [b"r1", b"r2"]


def test_an_abandoned_transaction_is_aborted_by_reinitialising_its_id(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "abandoned")
    tp = TopicPartition("abandoned", 0)
    with ClusterClient(bootstrap, TIMEOUT) as client:
        dead = TransactionManager(client, "query-2-p0")
        dead.init_transactions()
        dead.begin_transaction()
        produce(client, dead, tp, [b"lost"])
        prepared = dead.prepared  # the task's commit message, never committed: its driver died
    with ClusterClient(bootstrap, TIMEOUT) as client:  # the restarted query's task of that partition
        again = TransactionManager(client, "query-2-p0")
        bumped = again.init_transactions()
        assert bumped.producer_epoch == prepared.producer_epoch + 2  # the abort's bump, then its own
        again.begin_transaction()
        produce(client, again, tp, [b"rewritten"])
        again.commit_transaction()
        # the dead driver's commit message, sent late: fenced, not committed
        with pytest.raises(ProducerFencedError):
            TransactionManager.resume(client, prepared).commit_transaction()
    assert read(bootstrap, tp, "read_committed") == [b"rewritten"]
    assert read(bootstrap, tp, "read_uncommitted") == [b"lost", b"rewritten"]


def test_a_decision_reads_back_as_written_and_a_foreign_one_is_refused() -> None:
    decision = DecidedBatch(7, {0: (1000, 3), 12: (1001, 32767)})
    assert decision.metadata() == "0:1000:3,12:1001:32767"
    assert DecidedBatch.parse(7, decision.metadata()) == decision
    assert DecidedBatch.parse(8, "") == DecidedBatch(8, {})  # a batch no task wrote to
    with pytest.raises(
        SeglogError, match="batch 7's decision holds 'consumer-offsets', not partition:producer id:epoch"
    ):
        DecidedBatch.parse(7, "0:1000:3,consumer-offsets")


def run_tasks(
    bootstrap: str, prefix: str, batch_id: int, rows: dict[int, list[bytes]], topic: str
) -> dict[int, PreparedTxnState]:
    """Batch ``batch_id``'s tasks, each on a client of its own as on an executor: task ``p`` writes
    ``rows[p]`` to ``topic``-``p`` and hands back its transaction, unless the batch was decided."""
    prepared = {}
    for partition, values in rows.items():
        with ClusterClient(bootstrap, TIMEOUT) as client:
            txn = BatchTransactions(client, prefix).open_task(batch_id, partition)
            if txn is not None:
                produce(client, txn, TopicPartition(topic, partition), values)
                prepared[partition] = txn.prepared
    return prepared


def rows_of(batch_id: int, run: str) -> dict[int, list[bytes]]:
    return {p: [b"b%d-p%d-%s" % (batch_id, p, run.encode())] for p in (0, 1)}


def test_each_batch_is_committed_once_whenever_its_driver_dies(seglog_broker: Any) -> None:
    """A query's batches through a driver "killed" (its client dropped) before, during and after
    its commits, and "restarted" (a new one, the same batch run again): read_committed sees each
    batch's records once, from the run whose decision committed it."""
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "eos-out", 2)
    prefix = "query-3"

    def driver() -> tuple[ClusterClient, BatchTransactions]:
        client = ClusterClient(bootstrap, TIMEOUT)
        batches = BatchTransactions(client, prefix)
        batches.start()
        return client, batches

    client, batches = driver()
    assert batches.decided() is None
    # task 0's first attempt dies after its write; the retry's init aborts that transaction
    (dead_attempt,) = run_tasks(bootstrap, prefix, 0, {0: [b"b0-p0-dead-attempt"]}, "eos-out").values()
    batches.commit(0, run_tasks(bootstrap, prefix, 0, rows_of(0, "first"), "eos-out"))
    with pytest.raises(ProducerFencedError):  # its commit message, had it got out, is refused
        TransactionManager.resume(client, dead_attempt).commit_transaction()
    decided = batches.decided()
    assert decided is not None and (decided.batch_id, sorted(decided.producers)) == (0, [0, 1])

    # killed before the commit: the run again writes batch 1 anew, the first run's aborted
    run_tasks(bootstrap, prefix, 1, rows_of(1, "lost"), "eos-out")
    client.close()
    client, batches = driver()
    batches.commit(1, run_tasks(bootstrap, prefix, 1, rows_of(1, "again"), "eos-out"))

    # killed during the commit: decided, one of its two transactions committed
    decision = batches.decide(2, run_tasks(bootstrap, prefix, 2, rows_of(2, "decided"), "eos-out"))
    pid, epoch = decision.producers[0]
    TransactionManager.resume(client, PreparedTxnState(f"{prefix}-0", pid, epoch)).commit_transaction()
    old_client, old = client, batches
    client, batches = driver()
    with pytest.raises(ProducerFencedError):  # the old driver, were it still running, is fenced
        old.decide(3, {})
    old_client.close()
    assert run_tasks(bootstrap, prefix, 2, rows_of(2, "skipped"), "eos-out") == {}  # tasks see the decision
    batches.commit(2, {})

    # killed after the commit, before the query logged it: the run again finds it decided
    batches.commit(3, run_tasks(bootstrap, prefix, 3, rows_of(3, "first"), "eos-out"))
    client.close()
    client, batches = driver()
    assert run_tasks(bootstrap, prefix, 3, rows_of(3, "skipped"), "eos-out") == {}
    batches.commit(3, {})
    client.close()

    runs = {0: "first", 1: "again", 2: "decided", 3: "first"}
    for p in (0, 1):
        expected = [b"b%d-p%d-%s" % (n, p, run.encode()) for n, run in runs.items()]
        assert read(bootstrap, TopicPartition("eos-out", p), "read_committed") == expected


# a driver process that SIGKILLs itself at one of these points of its commit of batch 0
KILL_POINTS = ["before the decision", "while deciding", "after the decision", "during the commit", "after the commit"]
DRIVER = """
import json, os, signal, sys
from seglog.client import BatchTransactions, ClusterClient, DecidedBatch, OffsetAndMetadata, PreparedTxnState
from seglog.client import TransactionManager
from seglog.client.transactions import DECISION_MARKER

bootstrap, prefix, point, handed = sys.argv[1:]
prepared = {int(p): PreparedTxnState(*t) for p, t in json.loads(handed).items()}

def die(at):
    if point == at:
        os.kill(os.getpid(), signal.SIGKILL)

client = ClusterClient(bootstrap, 30)
batches = BatchTransactions(client, prefix)
batches.start()
die("before the decision")
if point == "while deciding":  # decide's transaction, its offset written, never ended
    deciding = TransactionManager(client, prefix + "-driver")
    deciding.init_transactions()
    deciding.begin_transaction()
    decision = DecidedBatch(0, {p: t[1:] for p, t in prepared.items()})
    deciding.send_offsets({DECISION_MARKER: OffsetAndMetadata(0, decision.metadata())}, prefix)
    die("while deciding")
decided = batches.decide(0, prepared)
die("after the decision")
pid, epoch = decided.producers[0]
TransactionManager.resume(client, PreparedTxnState(prefix + "-0", pid, epoch)).commit_transaction()
die("during the commit")
batches.commit_decided(decided)
die("after the commit")
"""


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_driver_killed_with_sigkill_leaves_its_batch_visible_once(seglog_broker: Any, point: str) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    name = "killed-" + point.replace(" ", "-")
    create(bootstrap, name, 2)
    handed = run_tasks(bootstrap, name, 0, rows_of(0, "first"), name)
    driver = subprocess.run(
        [sys.executable, "-c", DRIVER, bootstrap, name, point, json.dumps(handed)],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert driver.returncode == -signal.SIGKILL, driver.stderr
    # the query restarted from its checkpoint: batch 0 run again, then committed
    with ClusterClient(bootstrap, TIMEOUT) as client:
        batches = BatchTransactions(client, name)
        batches.start()
        batches.commit(0, run_tasks(bootstrap, name, 0, rows_of(0, "rerun"), name))
    run = "rerun" if point in ("before the decision", "while deciding") else "first"
    for p in (0, 1):
        assert read(bootstrap, TopicPartition(name, p), "read_committed") == rows_of(0, run)[p]


def test_a_decided_batch_whose_transactions_timed_out_is_reported_lost(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "eos-late")
    with ClusterClient(bootstrap, TIMEOUT) as client:
        batches = BatchTransactions(client, "query-4", transaction_timeout_ms=1000)
        batches.start()
        txn = batches.open_task(0, 0)
        assert txn is not None
        produce(client, txn, TopicPartition("eos-late", 0), [b"late"])
        decision = batches.decide(0, {0: txn.prepared})
        # the driver is away longer than the transaction's timeout: the coordinator aborts it
        assert read(bootstrap, TopicPartition("eos-late", 0), "read_committed") == []
        with pytest.raises(
            SeglogError, match=r"batch 0 was decided, but the transactions of query-4-0 \(PRODUCER_FENCED\)"
        ):
            batches.commit_decided(decision)


def test_a_decision_too_large_for_the_broker_aborts_the_batch(seglog_broker_factory: Any) -> None:
    broker = seglog_broker_factory(config={"offset.metadata.max.bytes": 10})
    bootstrap = broker.bootstrap_servers
    create(bootstrap, "wide", 3)
    prepared = run_tasks(bootstrap, "query-5", 0, {p: [b"never-%d" % p] for p in range(3)}, "wide")
    with ClusterClient(bootstrap, TIMEOUT) as client:
        batches = BatchTransactions(client, "query-5")
        batches.start()
        with pytest.raises(ApiError, match=r"TxnOffsetCommit of group 'query-5'.*OFFSET_METADATA_TOO_LARGE"):
            batches.commit(0, prepared)
        assert batches.decided() is None
    for p in range(3):
        assert read(bootstrap, TopicPartition("wide", p), "read_committed") == []


# --- a 3-broker cluster: the transaction coordinator killed mid-transaction ----------------------


# the transactions' state, and the groups', on 3 replicas: a coordinator's successor has them
REPLICATED_STATE = [
    f"{log}.{key}={value}"
    for log in ("transaction.state.log", "offsets.topic")
    for key, value in (("replication.factor", 3), ("num.partitions", 3))
] + ["transaction.state.log.min.isr=2", "zookeeper.session.timeout.ms=6000", "controlled.shutdown.enable=false"]


@pytest.fixture(scope="module")
def cluster(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:  # noqa: F811
    with chrooted_local_cluster(
        zookeeper, tmp_path_factory.mktemp("txn-cluster"), "txn-cluster", 3, REPLICATED_STATE
    ) as local:
        yield local


def test_a_commit_goes_on_at_the_next_coordinator_when_the_first_is_killed(cluster: LocalCluster) -> None:
    """AddPartitionsToTxn, the writes, then the coordinator's broker SIGKILLed before EndTxn: the
    commit is retried at the broker that leads the id's ``__transaction_state`` partition next
    (which read the transaction's Ongoing state from its replica) and completes: every record
    visible once to read_committed, on each partition, whichever leaders they lost."""
    bootstrap = cluster.bootstrap_servers
    create(bootstrap, "replicated-txn", 3, 3, **{"min.insync.replicas": "2"})
    partitions = [TopicPartition("replicated-txn", p) for p in range(3)]
    with ClusterClient(bootstrap, 90.0) as client:
        txn = TransactionManager(client, "cluster-app")
        txn.init_transactions()
        victim = client.coordinator("cluster-app", TRANSACTION_KEY)[0]
        txn.begin_transaction()
        for tp in partitions:
            produce(client, txn, tp, [b"%s-%d" % (tp.topic.encode(), tp.partition), b"second"])
        cluster.brokers[victim].kill()
        txn.commit_transaction()
        assert txn.state is State.READY
        assert client.coordinator("cluster-app", TRANSACTION_KEY)[0] != victim
        # the next transaction, at the new coordinator, with the same epoch
        txn.begin_transaction()
        produce(client, txn, partitions[0], [b"after"])
        txn.commit_transaction()
    live = ",".join(b.address for i, b in cluster.brokers.items() if i != victim)
    for tp in partitions:
        expected = [b"replicated-txn-%d" % tp.partition, b"second"] + ([b"after"] if tp.partition == 0 else [])
        assert read(live, tp, "read_committed") == expected
