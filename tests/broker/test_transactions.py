"""Transactional producers against the broker (confluent-kafka): commits and aborts seen
by read_committed and read_uncommitted consumers, a transaction left open aborted at its
timeout, the transaction index, `seglog transactions`, and every outcome kept across a
SIGKILL."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import seglog
from seglog.cli import main
from seglog.client import connect
from seglog.common import TRANSACTION_STATE_TOPIC
from seglog.protocol import ApiKey
from seglog.protocol.message_data import DescribeTransactionsRequestData, ListOffsetsRequestData, MetadataRequestData
from seglog.storage.txn_index import read_txn_index

from .conftest import CONSUMER, wait_for
from .subprocess_broker import BrokerProcess

TXN_BROKER = {
    "num.partitions": 1,
    "transaction.state.log.num.partitions": 4,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
}


def transactional(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1, **extra})
    producer.init_transactions(30)
    return producer


def run_transaction(producer: Producer, values: list[bytes], *, commit: bool) -> None:
    producer.begin_transaction()
    for v in values:
        producer.produce("orders", v)
    assert producer.flush(30) == 0  # sent before the end: librdkafka drops unsent records on abort
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def consume_all(bootstrap: str, isolation_level: str, until: int) -> list[bytes]:
    """The values of orders-0 from the start, polled until the consumer's position
    reaches ``until`` (read_committed: the last stable offset must have got there)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER, "isolation.level": isolation_level})
    try:
        consumer.assign([TopicPartition("orders", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            elif consumer.position([TopicPartition("orders", 0)])[0].offset >= until:
                return got
        raise AssertionError(f"{isolation_level} consumer stopped at {got}")
    finally:
        consumer.close()


def cli(capsys: Any, *argv: str) -> str:
    """What ``seglog ARGV`` prints (stdout, or the error line)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return out if code == 0 else err


def producer_id(txn_id: str, bootstrap: str) -> int:
    with connect(bootstrap) as client:
        body = DescribeTransactionsRequestData([txn_id])
        states = client.request(ApiKey.DESCRIBE_TRANSACTIONS, body).transaction_states
    return int(states[0].producer_id)


def log_state(data: Path) -> tuple[int, int]:
    """orders-0's log end and last stable offset, read from the files of the broker's dir."""
    with seglog.open(str(data), background=False, read_only=True) as logs:
        plog = logs.partition("orders", 0)
        return plog.log_end_offset, plog.last_stable_offset


def test_read_committed_sees_exactly_the_committed_records(seglog_broker_factory, tmp_path, capsys) -> None:
    data = tmp_path / "data"
    broker = seglog_broker_factory(str(data), config=TXN_BROKER)
    bootstrap = broker.bootstrap_servers
    producer = transactional(bootstrap, "orders-app")
    run_transaction(producer, [b"c1", b"c2"], commit=True)
    run_transaction(producer, [b"a1", b"a2", b"a3"], commit=False)
    run_transaction(producer, [b"c3"], commit=True)
    producer.flush(10)
    # 6 records and 3 markers
    assert consume_all(bootstrap, "read_committed", 9) == [b"c1", b"c2", b"c3"]
    assert consume_all(bootstrap, "read_uncommitted", 9) == [b"c1", b"c2", b"a1", b"a2", b"a3", b"c3"]

    # left open: aborted at its transaction.timeout.ms, the producer fenced
    stale = transactional(bootstrap, "stale-app", **{"transaction.timeout.ms": 1000})
    stale.begin_transaction()
    stale.produce("orders", b"never")
    assert stale.flush(30) == 0
    wait_for(lambda: log_state(data)[1] == log_state(data)[0] == 11, what="the timeout's abort")
    assert consume_all(bootstrap, "read_committed", 11) == [b"c1", b"c2", b"c3"]
    with pytest.raises(KafkaException, match="fenced"):
        stale.commit_transaction(30)

    with connect(bootstrap) as client:
        body = MetadataRequestData([MetadataRequestData.MetadataRequestTopic(name=TRANSACTION_STATE_TOPIC)])
        (state_topic,) = client.request(ApiKey.METADATA, body).topics
    assert state_topic.is_internal and len(state_topic.partitions) == 4

    # seglog transactions, as kafka-transactions.sh prints them
    listed = cli(capsys, "transactions", "--bootstrap-server", bootstrap, "--list")
    assert [line.split() for line in listed.splitlines()] == [
        ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
        ["orders-app", "0", str(producer_id("orders-app", bootstrap)), "CompleteCommit"],
        ["stale-app", "0", str(producer_id("stale-app", bootstrap)), "CompleteAbort"],
    ]
    assert main(["transactions", "--bootstrap-server", bootstrap, "--describe"]) == 2  # a usage error
    assert capsys.readouterr().err.startswith("error: --describe needs --transactional-id")
    described = cli(capsys, "transactions", "--bootstrap-server", bootstrap, "--describe", "--transactional-id", "x")
    assert described.startswith("error: cannot describe the transaction state of transactional-id `x`")
    producer.begin_transaction()
    producer.produce("orders", b"c4")
    assert producer.flush(30) == 0
    described = cli(
        capsys, "transactions", "--bootstrap-server", bootstrap, "--describe", "--transactional-id", "orders-app"
    )
    header, row = (line.split("\t") for line in described.splitlines())
    fields = dict(zip((h.strip() for h in header), (v.strip() for v in row), strict=True))
    assert fields["TransactionState"] == "Ongoing" and fields["TopicPartitions"] == "orders-0"
    assert fields["ProducerEpoch"] == "0" and fields["CoordinatorId"] == "0"
    producer.commit_transaction(30)

    # EndTxn is answered once PrepareCommit is logged; the marker is written after, and a clean
    # stop drops it as Kafka's TransactionMarkerChannelManager.shutdown does: the broker started
    # again finds PrepareCommit in __transaction_state and writes it then
    broker.stop()
    again = seglog_broker_factory(str(data), config=TXN_BROKER)
    wait_for(lambda: latest_offsets(again.bootstrap_servers) == (13, 13), what="the commit's marker")
    again.stop()
    assert log_state(data) == (13, 13)
    with seglog.open(str(data), background=False, read_only=True) as logs:
        aborted = logs.partition("orders", 0).collect_aborted_transactions(0, 13)
    assert [(t.first_offset, t.last_offset) for t in aborted] == [(3, 6), (9, 10)]
    entries = read_txn_index(str(data / "orders-0" / "00000000000000000000.txnindex"))
    assert [(e.first_offset, e.last_offset) for e in entries] == [(3, 6), (9, 10)]


def latest_offsets(bootstrap: str) -> tuple[int, int]:
    """ListOffsets of orders-0 at "latest": read_uncommitted, then read_committed."""
    found = []
    with connect(bootstrap) as client:
        for level in (0, 1):
            latest = ListOffsetsRequestData.ListOffsetsPartition(0, timestamp=-1)
            topics = [ListOffsetsRequestData.ListOffsetsTopic("orders", [latest])]
            body = ListOffsetsRequestData(replica_id=-1, isolation_level=level, topics=topics)
            found.append(client.request(ApiKey.LIST_OFFSETS, body).topics[0].partitions[0].offset)
    return found[0], found[1]


def test_transaction_outcomes_survive_sigkill(tmp_path) -> None:
    data = tmp_path / "data"
    overrides = [f"{k}={v}" for k, v in TXN_BROKER.items()]
    with BrokerProcess(data, *overrides) as broker:
        producer = transactional(broker.bootstrap_servers, "orders-app", **{"transaction.timeout.ms": 3000})
        run_transaction(producer, [b"c1"], commit=True)
        run_transaction(producer, [b"a1"], commit=False)
        producer.begin_transaction()
        producer.produce("orders", b"open")
        assert producer.flush(30) == 0
        # c1 0, its marker 1, a1 2, its marker 3, open 4: latest is 5, and 4 for read_committed
        assert latest_offsets(broker.bootstrap_servers) == (5, 4)
        broker.kill()  # the open transaction's EndTxn was never sent
    # ids stay where the topic's 4 partitions put them, whatever the config says now
    overrides[1] = "transaction.state.log.num.partitions=7"
    with BrokerProcess(data, *overrides) as broker:
        bootstrap = broker.bootstrap_servers
        # the open transaction is aborted after its timeout by the reloaded coordinator
        assert consume_all(bootstrap, "read_committed", 6) == [b"c1"]
        assert consume_all(bootstrap, "read_uncommitted", 6) == [b"c1", b"a1", b"open"]
        again = transactional(bootstrap, "orders-app")  # the id's epoch goes on from the log
        run_transaction(again, [b"c2"], commit=True)
        assert consume_all(bootstrap, "read_committed", 8) == [b"c1", b"c2"]
        code, err = broker.terminate()
        assert code == 0, err
