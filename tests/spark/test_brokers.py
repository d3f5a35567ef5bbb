"""format("seglog") through the brokers (kafka.bootstrap.servers): records produced by a real
client (confluent-kafka) into an embedded broker, read back by the session's SparkSession, each
row checked against what the producer was told it wrote."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient
from pyspark.errors import PySparkException, StreamingQueryException

import seglog.broker
from seglog.errors import CorruptRecordError
from seglog.records import BatchIterator
from seglog.spark import options as opt
from seglog.spark.offsets import DataLossError
from seglog.spark.source import SeglogBatchReader, read_task

from .brokers import create, produce, read, rows_of, stream
from .conftest import MS, fill

PER_PARTITION = 120


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    # records are stamped in 2023: no retention, which would delete them while the tests run
    return {
        "num.partitions": 1,
        "transaction.state.log.replication.factor": 1,
        "log.segment.bytes": 8192,
        "log.retention.ms": -1,
    }


@pytest.fixture(scope="module")
def events(seglog_broker: Any) -> tuple[str, list[tuple]]:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "events", 3)
    create(bootstrap, "other", 1)
    produced = produce(bootstrap, "events", 3, PER_PARTITION)
    produce(bootstrap, "other", 1, 10)
    return bootstrap, produced


def test_every_record_read_is_the_one_produced(spark: Any, events: Any) -> None:
    bootstrap, produced = events
    df = read(spark, bootstrap, subscribe="events", includeHeaders="true")
    assert len(produced) == 3 * PER_PARTITION
    assert rows_of(df) == produced
    assert {(r.topic, r.timestampType) for r in df.select("topic", "timestampType").distinct().collect()} == {
        ("events", 0)
    }


def test_tasks_cut_inside_batches_read_each_record_once(spark: Any, events: Any) -> None:
    bootstrap, produced = events
    df = read(spark, bootstrap, subscribe="events", includeHeaders="true", minPartitions="12")
    assert df.rdd.getNumPartitions() == 12
    assert rows_of(df) == produced


def test_small_fetches_build_the_same_rows(spark: Any, events: Any) -> None:
    bootstrap, produced = events
    df = read(spark, bootstrap, subscribe="events", includeHeaders="true", **{"kafka.max.partition.fetch.bytes": "300"})
    assert rows_of(df) == produced


def test_starting_and_ending_offsets(spark: Any, events: Any) -> None:
    bootstrap, produced = events
    starting = {"events": {"0": 5, "1": -2, "2": 100}}
    ending = {"events": {"0": 17, "1": 3, "2": -1}}
    got = rows_of(read(spark, bootstrap, subscribe="events", startingOffsets=starting, endingOffsets=ending))
    bounds = {0: (5, 17), 1: (0, 3), 2: (100, PER_PARTITION)}
    expected = [(*row[:5], []) for row in produced if bounds[row[0]][0] <= row[1] < bounds[row[0]][1]]
    assert got == expected


def test_timestamps_start_and_end_by_listoffsets(spark: Any, events: Any) -> None:
    bootstrap, produced = events
    got = rows_of(
        read(spark, bootstrap, subscribe="events", startingTimestamp=str(MS + 95), endingTimestamp=str(MS + 300))
    )
    assert got == [(*row[:5], []) for row in produced if MS + 100 <= row[4] < MS + 300]
    per_partition = {"events": {"0": MS + 1000, "1": MS, "2": MS + 1190}}
    got = rows_of(read(spark, bootstrap, subscribe="events", startingOffsetsByTimestamp=per_partition))
    firsts = {0: MS + 1000, 1: MS, 2: MS + 1190}
    assert got == [(*row[:5], []) for row in produced if row[4] >= firsts[row[0]]]


def test_subscribe_pattern_and_assign(spark: Any, events: Any) -> None:
    bootstrap, _ = events
    topics = read(spark, bootstrap, subscribePattern="ev.*|oth.*").groupBy("topic").count().collect()
    assert sorted((r.topic, r["count"]) for r in topics) == [("events", 3 * PER_PARTITION), ("other", 10)]
    df = read(spark, bootstrap, assign={"events": [2], "other": [0]})
    assert sorted((r.topic, r.partition) for r in df.select("topic", "partition").distinct().collect()) == [
        ("events", 2),
        ("other", 0),
    ]


BAD_OPTIONS = [
    ({"subscribe": "missing"}, "option subscribe: unknown topic 'missing'"),
    ({"subscribe": "events,missing"}, "option subscribe: unknown topic 'missing'"),
    ({"assign": {"missing": [0]}}, "option assign: no partition missing-0: unknown topic 'missing'"),
    (
        {"assign": {"events": [0, 7]}},
        r"option assign: no partition events-7: topic 'events' has partitions \[0, 1, 2\]",
    ),
    (
        {"subscribe": "events", "startingOffsets": {"events": {"0": 1, "1": 1, "2": 1, "7": 1}}},
        "startingOffsets names partitions the query does not read: events-7",
    ),
    (
        {"subscribe": "events", "endingOffsets": {"events": {"0": 1, "1": 1, "2": 1, "7": 1}}},
        "endingOffsets names partitions the query does not read: events-7",
    ),
    (
        {"assign": {"events": [0]}, "startingOffsetsByTimestamp": {"events": {"3": MS}}},
        "startingOffsetsByTimestamp names specific offsets or timestamps but not partitions events-0",
    ),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS, ids=repr)
def test_a_missing_topic_or_partition_is_one_error_naming_it(
    spark: Any, events: Any, options: dict[str, Any], message: str
) -> None:
    """As Spark's Kafka source, subscribe and assign both refuse a topic the cluster does not have
    (assign also a partition it does not have, where Spark's drops it unsaid)."""
    bootstrap, _ = events
    with pytest.raises(PySparkException, match=message):
        read(spark, bootstrap, **options).collect()


def test_a_stream_of_a_missing_topic_fails_naming_it(spark: Any, events: Any, tmp_path: Any) -> None:
    bootstrap, _ = events
    query = stream(spark, bootstrap, "missing", tmp_path).queryName("of_missing").start()
    with pytest.raises((StreamingQueryException, PySparkException), match="option subscribe: unknown topic 'missing'"):
        query.awaitTermination(60)


@contextlib.contextmanager
def _not_a_broker() -> Iterator[str]:
    """A server that answers whatever it is sent with an HTTP error, as a proxy would."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                with conn:
                    conn.recv(1024)
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()


def test_bootstrap_servers_that_cannot_be_read_are_one_error_naming_the_option(spark: Any) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(PySparkException, match=f"option kafka.bootstrap.servers={dead}: cannot connect to {dead}"):
        read(spark, dead, subscribe="events").collect()
    unknown = "no-such-host.invalid:9092"  # a name no resolver knows (RFC 2606)
    with pytest.raises(PySparkException, match=f"option kafka.bootstrap.servers={unknown}: cannot connect"):
        read(spark, unknown, subscribe="events").collect()
    with (
        _not_a_broker() as address,
        pytest.raises(PySparkException, match=f"option kafka.bootstrap.servers={address}: not a Kafka broker"),
    ):
        read(spark, address, subscribe="events").collect()


def test_offsets_removed_after_planning_are_data_loss(events: Any, seglog_broker: Any) -> None:
    """The task's own code, run here after its plan: DeleteRecords between the two."""
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "shrinking", 1)
    produced = produce(bootstrap, "shrinking", 1, 50)
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "shrinking"}
    strict = SeglogBatchReader(options).partitions()
    lenient = SeglogBatchReader({**options, "failOnDataLoss": "false"}).partitions()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deleted = admin.delete_records([KafkaPartition("shrinking", 0, 20)])
    for future in deleted.values():
        future.result(30)
    with pytest.raises(DataLossError, match=r"offsets 0\.\.19 of shrinking-0 were removed"):
        list(read_task(strict[0]))
    rows = [r for batch in read_task(lenient[0]) for r in batch.to_pylist()]
    assert [(r["offset"], r["value"]) for r in rows] == [(o, v) for _, o, _, v, _, _ in produced[20:]]


def test_a_batch_damaged_on_the_leaders_disk_is_refused_naming_it(spark: Any, seglog_broker: Any) -> None:
    """A byte of a stored value flipped under the running broker (bit rot: the leader serves the
    file's bytes as they are, as Kafka's does): the task refuses the batch by its CRC, as the
    log-dir read does, with one error naming the partition and the batch's offset; no row of it
    is served."""
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "rotting", 1)
    for _ in range(2):  # two rounds, each flushed: two batches at least
        produce(bootstrap, "rotting", 1, 30)
    segment = Path(seglog_broker.server.config.log_dirs[0], "rotting-0", "00000000000000000000.log")
    data = bytearray(segment.read_bytes())
    at = data.rindex(b"value-0-20")  # inside a batch of the second round
    damaged = next(b for b in BatchIterator(bytes(data)) if b.position <= at < b.position + len(b.buffer))
    assert damaged.base_offset > 0
    with open(segment, "r+b") as f:
        f.seek(at)
        f.write(b"V")
    options = {"kafka.bootstrap.servers": bootstrap, "subscribe": "rotting"}
    (part,) = SeglogBatchReader(options).partitions()
    got: list[int] = []
    refused = "a batch of rotting-0 fetched from its leader is corrupt, refused: CRC mismatch"
    message = rf"{refused}.*offset {damaged.base_offset}\)"
    with pytest.raises(CorruptRecordError, match=message):
        for batch in read_task(part):
            got += batch.column("offset").to_pylist()
    assert all(o < damaged.base_offset for o in got)  # no row of the damaged batch or after it
    with pytest.raises(PySparkException, match=message):
        read(spark, bootstrap, subscribe="rotting").collect()


def test_read_committed_skips_aborted_and_open_transactions(spark: Any, seglog_broker: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "txns", 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "spark-test"})
    producer.init_transactions(30)
    committed = []
    for n, commit in enumerate((True, False, True, False, True)):
        producer.begin_transaction()
        values = [b"%d-%d" % (n, i) for i in range(4)]
        for v in values:
            producer.produce("txns", v, partition=0)
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
            committed += values
        else:
            producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce("txns", b"open", partition=0)
    producer.flush(30)
    try:
        df = read(spark, bootstrap, subscribe="txns", **{"kafka.isolation.level": "read_committed"})
        assert [r.value for r in df.orderBy("offset").collect()] == committed
        everything = read(spark, bootstrap, subscribe="txns")
        assert everything.count() == 21  # read_uncommitted: aborted and open records too, never markers
    finally:
        producer.abort_transaction(30)


def test_stream_available_now_reads_every_record_once(spark: Any, events: Any, tmp_path: Any) -> None:
    bootstrap, produced = events
    query = stream(spark, bootstrap, "events", tmp_path, {"maxOffsetsPerTrigger": "50"}).trigger(availableNow=True)
    query = query.queryName("through_brokers").start()
    query.awaitTermination(300)
    assert query.exception() is None
    assert len(query.recentProgress) >= 3 * PER_PARTITION // 50  # the limit made several micro-batches
    assert rows_of(spark.sql("select * from through_brokers")) == produced


# --- the jobs the log-dir tests run, through a broker serving the same dir --------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: Any) -> Any:
    """The log dir the log-dir tests read (``fill``), served by a broker: the same data both ways."""
    path = tmp_path_factory.mktemp("served")
    fill(path, config={"segment.bytes": 2048, "index.interval.bytes": 128})
    fill(path, topic="other", partitions=1, batches=3)
    # its records are stamped in 2023: retention would delete them while the tests run
    with seglog.broker.start(str(path), config={"log.retention.ms": -1}) as broker:
        yield path, broker.bootstrap_servers


@pytest.fixture
def pushdown(spark: Any) -> Any:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


SAME_JOBS = [
    ({"subscribe": "events", "includeHeaders": "true"}, None),
    ({"subscribePattern": "e.*|o.*"}, None),
    ({"assign": {"events": [1], "other": [0]}}, None),
    (
        {
            "subscribe": "events",
            "startingOffsets": {"events": {"0": 23, "1": -2}},
            "endingOffsets": {"events": {"0": 150, "1": -1}},
        },
        None,
    ),
    ({"subscribe": "events", "startingTimestamp": str(MS + 50), "endingTimestamp": str(MS + 120)}, None),
    ({"subscribe": "events", "startingOffsetsByTimestamp": {"events": {"0": MS + 10, "1": MS + 190}}}, None),
    ({"subscribe": "events", "minPartitions": "7", "includeHeaders": "true"}, None),
    ({"subscribe": "events", "endingOffsetsByTimestamp": {"events": {"0": MS + 120, "1": MS + 3}}}, None),
    (  # no record of partition 1 is that late: it starts at its latest offset
        {
            "subscribe": "events",
            "startingOffsetsByTimestamp": {"events": {"0": MS + 150, "1": MS + 10**6}},
            "startingOffsetsByTimestampStrategy": "latest",
        },
        None,
    ),
    ({"subscribe": "events"}, "partition = 1 and offset >= 150"),
    (
        {"subscribe": "events"},
        "timestamp > timestamp_millis(1700000000100) and timestamp <= timestamp_millis(1700000000110)",
    ),
]


@pytest.mark.parametrize(("options", "where"), SAME_JOBS, ids=repr)
def test_a_job_reads_the_same_rows_through_the_broker_as_from_the_dir(
    spark: Any, served: Any, pushdown: Any, options: dict[str, Any], where: str | None
) -> None:
    path, bootstrap = served
    by_path = spark.read.format("seglog").option("path", str(path))
    by_broker = spark.read.format("seglog").option("kafka.bootstrap.servers", bootstrap)
    # planned by the broker, read from the files of its dir beside the tasks
    beside = by_broker.option("path", str(path))
    # a dir that is not on the tasks' machine: fetched
    elsewhere = by_broker.option("path", str(path / "not-here"))
    readers = [by_path, by_broker, beside, elsewhere]
    for k, v in options.items():
        text = v if isinstance(v, str) else json.dumps(v)
        readers = [reader.option(k, text) for reader in readers]
    frames = [reader.load() for reader in readers]
    if where is not None:
        frames = [df.where(where) for df in frames]
    from_dir, *others = (sorted(df.collect(), key=lambda r: (r.topic, r.partition, r.offset)) for df in frames)
    assert from_dir  # each job reads something
    assert others == [from_dir] * 3


def test_a_stream_reads_what_producers_write_while_it_runs(spark: Any, seglog_broker: Any, tmp_path: Any) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "live", 2)
    first = produce(bootstrap, "live", 2, 30)
    query = stream(spark, bootstrap, "live", tmp_path).trigger(processingTime="500 milliseconds")
    query = query.queryName("live_through_brokers").start()
    try:
        query.processAllAvailable()
        later = produce(bootstrap, "live", 2, 40)  # offsets 30..69 of each partition
        query.processAllAvailable()
    finally:
        query.stop()
    assert rows_of(spark.sql("select * from live_through_brokers")) == sorted(first + later)


def test_the_client_options_and_their_mistakes() -> None:
    given = {"kafka.bootstrap.servers": "a:1,b:2", "kafka.client.id": "job", "kafka.request.timeout.ms": "5000"}
    client = opt.client_options({**given, "kafka.max.partition.fetch.bytes": "4096", "subscribe": "t"})
    assert client == opt.ClientOptions("a:1,b:2", "job", 5000, 50 * 1024 * 1024, 4096)
    assert opt.client_options({"path": "/data", "subscribe": "t"}) is None  # the log dirs' read
    mistakes = {
        "kafka.bootstrap.servers": ("a", "'a' is not HOST:PORT"),
        "kafka.request.timeout.ms": ("0", "kafka.request.timeout.ms must be at least 1"),
        "kafka.fetch.max.bytes": ("lots", "kafka.fetch.max.bytes must be an integer"),
    }
    for name, (value, message) in mistakes.items():
        with pytest.raises(opt.OptionError, match=message):
            opt.client_options({"kafka.bootstrap.servers": "a:1", name: value})
    with pytest.raises(opt.OptionError, match=r"kafka\.sasl\.\* and kafka\.ssl\.\* options: sasl\.mechanism is GSSAPI"):
        opt.client_options({"kafka.bootstrap.servers": "a:1", "kafka.security.protocol": "sasl_ssl"})
    with pytest.raises(opt.OptionError, match=r"security\.protocol is KERBEROS, not one of"):
        opt.client_options({"kafka.bootstrap.servers": "a:1", "kafka.security.protocol": "kerberos"})
    with pytest.raises(opt.OptionError, match=r'option "path" \(the seglog log dir\) is required'):
        opt.client_options({"subscribe": "t"})
