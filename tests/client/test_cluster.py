"""ClusterClient against a real embedded broker: bootstrap, ListOffsets and the raw Fetch, with
records produced by a real client (confluent-kafka)."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import EARLIEST_TIMESTAMP as EARLIEST
from seglog.client import LATEST_TIMESTAMP as LATEST
from seglog.client import READ_COMMITTED, ClusterClient
from seglog.common import TopicPartition
from seglog.errors import BrokerNotAvailableError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from seglog.records import BatchIterator

MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    # records stamped in 2023: no retention to delete them under the tests
    return {"num.partitions": 1, "transaction.state.log.replication.factor": 1, "log.retention.ms": -1}


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(30)


def _produce(bootstrap: str, topic: str, rows: list[tuple[int, bytes, bytes, int]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, key, value, ts in rows:
        producer.produce(topic, value, key, partition=partition, timestamp=ts, headers=[("h", key)])
    assert producer.flush(30) == 0


def _records(data: bytes, start: int = 0) -> list[tuple[int, bytes | None, bytes | None, int]]:
    return [
        (r.offset, r.key, r.value, r.timestamp)
        for b in BatchIterator(data)
        if not b.is_control
        for r in b.records()
        if r.offset >= start
    ]


@pytest.fixture(scope="module")
def produced(seglog_broker: Any) -> dict[int, list[tuple[int, bytes, bytes, int]]]:
    """Topic ``fetched``: 2 partitions of 30 records, timestamps MS + 10 x offset."""
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "fetched", 2)
    rows = [(p, b"k%d-%d" % (p, i), b"v%d-%d" % (p, i), MS + 10 * i) for p in (0, 1) for i in range(30)]
    _produce(bootstrap, "fetched", rows)
    return {p: [(i, k, v, ts) for i, (q, k, v, ts) in enumerate(r for r in rows if r[0] == p)] for p in (0, 1)}


def test_list_offsets_earliest_latest_and_by_timestamp(seglog_broker: Any, produced: Any) -> None:
    tps = [TopicPartition("fetched", p) for p in (0, 1)]
    with ClusterClient(seglog_broker.bootstrap_servers, timeout=30) as client:
        assert {tp: o.offset for tp, o in client.list_offsets(dict.fromkeys(tps, EARLIEST)).items()} == dict.fromkeys(
            tps, 0
        )
        assert {tp: o.offset for tp, o in client.list_offsets(dict.fromkeys(tps, LATEST)).items()} == dict.fromkeys(
            tps, 30
        )
        at = client.list_offsets({tps[0]: MS + 55, tps[1]: MS + 290})
        assert at[tps[0]] == (6, MS + 60)  # the first record at or after the time
        assert at[tps[1]] == (29, MS + 290)
        assert client.list_offsets({tps[0]: MS + 10_000})[tps[0]].offset == -1  # none so late


def test_fetch_keeps_the_leaders_bytes_and_tells_the_high_watermark(seglog_broker: Any, produced: Any) -> None:
    tp = TopicPartition("fetched", 1)
    with ClusterClient(seglog_broker.bootstrap_servers, timeout=30) as client:
        got: list[tuple[int, bytes | None, bytes | None, int]] = []
        offset = 7
        while offset < 30:
            fetched = client.fetch(tp, offset, partition_max_bytes=200)  # small: several fetches
            # the batches' bytes, not records: a view of the answer as received, no copy made
            assert type(fetched.records) is memoryview
            assert (fetched.high_watermark, fetched.last_stable_offset, fetched.log_start_offset) == (30, 30, 0)
            assert fetched.aborted_transactions == ()
            records = _records(fetched.records, offset)
            got += records
            offset = records[-1][0] + 1
    assert got == produced[1][7:]


def test_fetch_out_of_range_and_unknown_partitions_name_the_partition(seglog_broker: Any, produced: Any) -> None:
    with ClusterClient(seglog_broker.bootstrap_servers, timeout=30) as client:
        with pytest.raises(OffsetOutOfRangeError, match=r"fetched-0 at offset 31; valid range is \[0, 30\]"):
            client.fetch(TopicPartition("fetched", 0), 31)
        with pytest.raises(UnknownTopicOrPartitionError, match="fetched-5"):
            client.fetch(TopicPartition("fetched", 5), 0)
        with pytest.raises(UnknownTopicOrPartitionError, match="nothing-0"):
            client.list_offsets({TopicPartition("nothing", 0): EARLIEST})


def test_read_committed_fetch_gives_the_last_stable_offset_and_aborted_transactions(seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    _create(bootstrap, "txns", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "client-test"})
    producer.init_transactions(30)
    for commit in (False, True):
        producer.begin_transaction()
        for i in range(3):
            producer.produce("txns", b"%s-%d" % (b"c" if commit else b"a", i), partition=0)
        producer.flush(30)
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    producer.begin_transaction()  # left open: the last stable offset stays at its first record
    producer.produce("txns", b"open", partition=0)
    producer.flush(30)
    tp = TopicPartition("txns", 0)
    with ClusterClient(bootstrap, timeout=30) as client:
        committed = client.fetch(tp, 0, isolation_level=READ_COMMITTED)
        uncommitted = client.fetch(tp, 0)
        # 3 aborted, their marker, 3 committed, their marker, then the open transaction's record
        assert (committed.high_watermark, committed.last_stable_offset) == (9, 8)
        assert [first for _, first in committed.aborted_transactions] == [0]
        assert uncommitted.aborted_transactions == ()
        assert client.list_offsets({tp: LATEST}, READ_COMMITTED)[tp].offset == 8
        assert client.list_offsets({tp: LATEST})[tp].offset == 9
        assert [v for _, _, v, _ in _records(committed.records)][-1] != b"open"  # not past the LSO
    producer.abort_transaction(30)


def test_bootstrap_tries_each_server_and_names_the_last_unreachable_one(seglog_broker: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with ClusterClient(f"{dead},{seglog_broker.bootstrap_servers}", timeout=5) as client:
        assert client.node_ids() == [seglog_broker.server.config["broker.id"]]
    with pytest.raises(BrokerNotAvailableError, match=f"cannot connect to {dead}"):
        ClusterClient(dead, timeout=5)


def test_a_broker_that_restarts_is_found_again(seglog_broker_factory: Any, tmp_path: Any) -> None:
    """Every connection the client holds dies with the broker; its next fetch waits for it to
    come back (within the timeout) through Metadata asked again, and reads on."""
    first = seglog_broker_factory(str(tmp_path), config={"num.partitions": 1})
    bootstrap, port = first.bootstrap_servers, first.port
    _create(bootstrap, "restarted", 1)
    _produce(bootstrap, "restarted", [(0, b"k%d" % i, b"v%d" % i, MS + i) for i in range(10)])
    tp = TopicPartition("restarted", 0)
    with ClusterClient(bootstrap, timeout=60) as client:
        assert [v for _, _, v, _ in _records(client.fetch(tp, 0).records)][:2] == [b"v0", b"v1"]
        first.stop()
        restart = threading.Timer(1.0, seglog_broker_factory, (str(tmp_path),), {"port": port})
        restart.start()
        try:
            again = client.fetch(tp, 5)
        finally:
            restart.join()
        assert [v for _, _, v, _ in _records(again.records, 5)] == [b"v%d" % i for i in range(5, 10)]


def test_metadata_reconnects_after_the_broker_closed_the_connection(seglog_broker_factory: Any, tmp_path: Any) -> None:
    """A broker that restarts closes the client's bootstrap connection; a request that meets the
    close fails (the broker was down for longer than the client's timeout), and the client's next
    Metadata, once the broker is back, connects again instead of failing on the closed one."""
    first = seglog_broker_factory(str(tmp_path), config={"num.partitions": 1})
    bootstrap, port, broker_id = first.bootstrap_servers, first.port, first.server.config["broker.id"]
    with ClusterClient(bootstrap, timeout=1) as client:
        assert [b.node_id for b in client.metadata([]).brokers] == [broker_id]
        first.stop()
        with pytest.raises(BrokerNotAvailableError):
            client.metadata([])  # the broker is down: met as closed, and no other broker answers
        seglog_broker_factory(str(tmp_path), port=port)
        client.renew_deadline()
        assert [b.node_id for b in client.metadata(None).brokers] == [broker_id]
