"""Offsets committed inside transactions (confluent-kafka's ``send_offsets_to_transaction``,
TxnOffsetCommit): invisible to OffsetFetch until the transaction commits, dropped when
it aborts, kept across a broker's SIGKILL; and a consume-transform-produce loop killed
at random points whose output is every input record exactly once."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from seglog.client import connect
from seglog.protocol import ApiKey, ErrorCode
from seglog.protocol.message_data import OffsetFetchRequestData

from .conftest import CONSUMER, PRODUCER, wait_for
from .subprocess_broker import BrokerProcess

EOS_BROKER = {
    "num.partitions": 2,
    "offsets.topic.num.partitions": 4,
    "transaction.state.log.num.partitions": 4,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
}
PIPELINE = Path(__file__).with_name("eos_pipeline.py")


def transactional(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 1, **extra})
    producer.init_transactions(30)
    return producer


def group_metadata(bootstrap: str, group: str) -> Any:
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER, "group.id": group})
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


def send_offsets(producer: Producer, offset: int, metadata: Any, *, commit: bool | None) -> None:
    """A transaction writing one record and committing in-0's offset; ``commit`` None:
    left open."""
    producer.begin_transaction()
    producer.produce("out", b"x", partition=0)
    producer.send_offsets_to_transaction([TopicPartition("in", 0, offset)], metadata, 30)
    assert producer.flush(30) == 0
    if commit is True:
        producer.commit_transaction(30)
    elif commit is False:
        producer.abort_transaction(30)


def offset_fetch(group: str, partitions: list[int], *, require_stable: bool) -> OffsetFetchRequestData:
    """OffsetFetch (v8+: by group) of the group's offsets of these partitions of "in"."""
    topics = [OffsetFetchRequestData.OffsetFetchRequestTopics("in", partitions)]
    return OffsetFetchRequestData(
        groups=[OffsetFetchRequestData.OffsetFetchRequestGroup(group, topics=topics)], require_stable=require_stable
    )


def fetch_offset(bootstrap: str, group: str, *, require_stable: bool = False) -> int:
    """The group's committed offset of in-0 (OffsetFetch; -1: none), once the group's
    partition is loaded; UNSTABLE_OFFSET_COMMIT answered as -2."""

    def fetch() -> int | None:
        with connect(bootstrap) as client:
            body = offset_fetch(group, [0], require_stable=require_stable)
            (answer,) = client.request(ApiKey.OFFSET_FETCH, body).groups
        if answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return None
        assert answer.error_code == 0, answer
        (found,) = answer.topics[0].partitions
        if found.error_code == ErrorCode.UNSTABLE_OFFSET_COMMIT:
            return -2
        assert found.error_code == 0, found
        return int(found.committed_offset)

    result = wait_for(lambda: (found := fetch()) is not None and (found,), what="the group's partition to load")
    return int(result[0])


def stable_offset(bootstrap: str, group: str) -> int:
    """The committed offset once no transaction's commit of it is pending: EndTxn is
    answered when its outcome is logged, its markers follow (a client asking for stable
    offsets retries as here)."""
    found = wait_for(lambda: (o := fetch_offset(bootstrap, group, require_stable=True)) != -2 and (o,))
    return int(found[0])


def make_topics(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    for topic in ("in", "out"):
        producer.produce(topic, b"first", partition=0)
    assert producer.flush(30) == 0


def test_offsets_appear_only_when_their_transaction_commits(seglog_broker_factory, tmp_path) -> None:
    broker = seglog_broker_factory(str(tmp_path / "data"), config=EOS_BROKER)
    bootstrap = broker.bootstrap_servers
    make_topics(bootstrap)
    producer = transactional(bootstrap, "offsets-app")
    metadata = group_metadata(bootstrap, "g")

    send_offsets(producer, 5, metadata, commit=None)
    assert fetch_offset(bootstrap, "g") == -1  # written, not yet committed
    assert fetch_offset(bootstrap, "g", require_stable=True) == -2
    producer.commit_transaction(30)
    assert stable_offset(bootstrap, "g") == 5

    send_offsets(producer, 9, metadata, commit=False)
    assert stable_offset(bootstrap, "g") == 5  # aborted: never seen

    # two commits in one transaction (each TxnOffsetCommit's batch has base sequence 0):
    # the later one counts
    producer.begin_transaction()
    for offset in (7, 8):
        producer.send_offsets_to_transaction([TopicPartition("in", 0, offset)], metadata, 30)
    producer.commit_transaction(30)
    assert stable_offset(bootstrap, "g") == 8


def test_transactional_offsets_survive_a_broker_sigkill(tmp_path) -> None:
    data = tmp_path / "data"
    overrides = [f"{k}={v}" for k, v in EOS_BROKER.items()]
    with BrokerProcess(data, *overrides) as broker:
        bootstrap = broker.bootstrap_servers
        make_topics(bootstrap)
        producer = transactional(bootstrap, "offsets-app", **{"transaction.timeout.ms": 2000})
        metadata = group_metadata(bootstrap, "g")
        send_offsets(producer, 5, metadata, commit=True)
        send_offsets(producer, 8, metadata, commit=True)  # the same producer's next commit
        assert stable_offset(bootstrap, "g") == 8
        send_offsets(producer, 12, metadata, commit=None)  # open at the crash
        assert fetch_offset(bootstrap, "g") == 8
        broker.kill()
    with BrokerProcess(data, *overrides) as broker:
        bootstrap = broker.bootstrap_servers
        assert fetch_offset(bootstrap, "g") == 8
        # the open transaction is aborted at its timeout: its offset goes without showing
        assert stable_offset(bootstrap, "g") == 8
        again = transactional(bootstrap, "offsets-app")
        send_offsets(again, 13, group_metadata(bootstrap, "g"), commit=True)
        assert stable_offset(bootstrap, "g") == 13
        code, err = broker.terminate()
        assert code == 0, err


def read_committed(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """Every committed value of ``topic``, read until each partition's position reaches
    its last stable offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER, "isolation.level": "read_committed"})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)]
        consumer.assign(tps)
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
            elif all(tp.offset >= end for tp, end in zip(consumer.position(tps), ends, strict=True)):
                return got
        raise AssertionError(f"the read of {topic} stopped after {len(got)} records")
    finally:
        consumer.close()


def test_a_pipeline_killed_at_random_points_writes_each_record_once(seglog_broker_factory, tmp_path) -> None:
    broker = seglog_broker_factory(str(tmp_path / "data"), config=EOS_BROKER)
    bootstrap = broker.bootstrap_servers
    inputs = [f"r{i}".encode() for i in range(300)]
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    for i, value in enumerate(inputs):
        producer.produce("in", value, partition=i % 2)
    assert producer.flush(30) == 0
    Producer({"bootstrap.servers": bootstrap, **PRODUCER}).list_topics("out", timeout=30)  # made, 2 partitions

    def run(seed: int) -> subprocess.Popen[str]:
        args = [sys.executable, str(PIPELINE), bootstrap, "pipeline", "pipeline-group", str(seed)]
        return subprocess.Popen(args, stdout=subprocess.PIPE, text=True)

    rng = random.Random()
    for seed in range(4):
        proc = run(seed)
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            time.sleep(rng.uniform(0.05, 0.6))
        finally:
            proc.kill()
            proc.wait(30)
    proc = run(4)
    try:
        want = [(p, sum(1 for i in range(len(inputs)) if i % 2 == p)) for p in (0, 1)]

        def consumed_all() -> bool:
            with connect(bootstrap) as client:
                body = offset_fetch("pipeline-group", [0, 1], require_stable=True)
                (answer,) = client.request(ApiKey.OFFSET_FETCH, body).groups
            found = {p.partition_index: p.committed_offset for p in answer.topics[0].partitions}
            return answer.error_code == 0 and all(found.get(p) == n for p, n in want)

        wait_for(consumed_all, timeout=60, what="the pipeline to commit every input offset")
    finally:
        proc.kill()
        proc.wait(30)
    # aborted transactions of the killed ones left records behind; read_committed skips them
    out = Counter(read_committed(bootstrap, "out", 2))
    assert out == Counter(b"T-" + v for v in inputs)
