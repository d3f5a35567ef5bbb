"""The exactly-once streaming sink (``exactlyOnce``, spark/eos_sink.py) with the session's
SparkSession and a real embedded broker, read back by confluent-kafka under read_committed: every
input record once after a clean run, after tasks that failed part way (the query run again from its
checkpoint), and after a driver process killed with SIGKILL ten times at random points and started
again. Batch writes refuse the option."""

from __future__ import annotations

import functools
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from pyspark.errors import PySparkException
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

from .brokers import create

END = b"end of the test's read"  # a record the test appends to each partition before it reads
DRIVER = Path(__file__).with_name("eos_driver.py")
SRC = str(Path(__file__).parents[2] / "src")


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {
        "num.partitions": 2,
        "transaction.state.log.num.partitions": 4,
        "offsets.topic.num.partitions": 4,
        "log.retention.ms": -1,
    }


def _wait(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _inputs(path: Path, files: int, per_file: int) -> list[bytes]:
    """``files`` parquet files of ``per_file`` rows (a micro-batch each); the values written."""
    path.mkdir()
    values = []
    for n in range(files):
        ids = range(n * per_file, (n + 1) * per_file)
        values += [b"v%d" % i for i in ids]
        table = pa.table({"key": [b"k%d" % (i % 7) for i in ids], "value": [b"v%d" % i for i in ids]})
        pq.write_table(table, path / f"part-{n:04d}.parquet")
    return values


def _ends(bootstrap: str, topic: str, isolation: str) -> list[int]:
    """Each partition's end: the high watermark, or under read_committed the last stable offset."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": isolation})
    try:
        count = len(consumer.list_topics(topic, 10).topics[topic].partitions)
        return [consumer.get_watermark_offsets(KafkaPartition(topic, p), 10, cached=False)[1] for p in range(count)]
    finally:
        consumer.close()


def _committed_values(bootstrap: str, topic: str) -> list[bytes]:
    """The values read_committed sees in ``topic``, once no transaction is open there (LSO = HW):
    read up to an end mark the test appends to each partition (a consumer's position does not pass
    aborted records and markers at a partition's end)."""
    _wait(lambda: _ends(bootstrap, topic, "read_committed") == _ends(bootstrap, topic, "read_uncommitted"), "LSO = HW")
    count = len(_ends(bootstrap, topic, "read_uncommitted"))
    marks = Producer({"bootstrap.servers": bootstrap})
    for p in range(count):
        marks.produce(topic, END, partition=p)
    assert marks.flush(30) == 0
    config = {"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed"}
    consumer = Consumer({**config, "enable.auto.commit": False})
    try:
        consumer.assign([KafkaPartition(topic, p, 0) for p in range(count)])
        got: list[bytes] = []
        ended: set[int] = set()

        def at_the_end() -> bool:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                if msg.value() == END:
                    ended.add(msg.partition())
                else:
                    got.append(msg.value())
            return len(ended) == count

        _wait(at_the_end, "the topic read to its end")
        return got
    finally:
        consumer.close()


def _query(df: Any, bootstrap: str, topic: str, checkpoint: Path) -> Any:
    return (
        df.writeStream.format("seglog")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
        .option("exactlyOnce", "true")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def test_a_streaming_query_writes_every_record_once(spark: Any, seglog_broker: Any, tmp_path: Path) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "eos-out", 2)
    values = _inputs(tmp_path / "in", 3, 100)
    source = spark.readStream.schema("key binary, value binary").option("maxFilesPerTrigger", 1)
    query = _query(source.parquet(str(tmp_path / "in")).repartition(2), bootstrap, "eos-out", tmp_path / "cp")
    query.awaitTermination(300)
    assert query.exception() is None
    assert len(query.recentProgress) >= 3
    assert sorted(_committed_values(bootstrap, "eos-out")) == sorted(values)
    # the records are transactional: a read_uncommitted reader sees them and the markers' offsets too
    assert sum(_ends(bootstrap, "eos-out", "read_uncommitted")) > len(values)


def _failing_once_per_batch(markers: str) -> Any:
    """The value, except that each task of each micro-batch fails once, half way through its rows,
    the first time it runs (a marker file remembers it)."""

    def value(v: bytes) -> bytes:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        batch = context.getLocalProperty("streaming.sql.batchId")
        marker = Path(markers) / f"{batch}-{context.partitionId()}"
        if int(v[1:]) % 100 >= 50 and not marker.exists():
            marker.touch()
            raise RuntimeError(f"injected failure of batch {batch}")
        return v

    return udf(value, BinaryType())


def test_failed_tasks_run_again_write_every_record_once(spark: Any, seglog_broker: Any, tmp_path: Path) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "eos-retried", 2)
    values = _inputs(tmp_path / "in", 3, 100)
    (tmp_path / "markers").mkdir()
    fail = _failing_once_per_batch(str(tmp_path / "markers"))
    failures = 0
    while True:  # local mode does not retry a task: the query fails and is started again, as a user would
        source = spark.readStream.schema("key binary, value binary").option("maxFilesPerTrigger", 1)
        rows = source.parquet(str(tmp_path / "in")).repartition(2)
        query = _query(rows.select("key", fail("value").alias("value")), bootstrap, "eos-retried", tmp_path / "cp")
        try:
            query.awaitTermination(300)
        except PySparkException as e:
            assert "injected failure" in str(e)
            failures += 1
            continue
        break
    assert failures >= 3  # a task of each batch failed at least once, after writing some of its rows
    assert sorted(_committed_values(bootstrap, "eos-retried")) == sorted(values)


def test_a_batch_write_refuses_the_option(spark: Any, seglog_broker: Any) -> None:
    df = spark.range(3).selectExpr("CAST(id AS STRING) AS value")
    writer = df.write.format("seglog").option("kafka.bootstrap.servers", seglog_broker.bootstrap_servers)
    with pytest.raises(PySparkException, match="option exactlyOnce: only a streaming write"):
        writer.option("topic", "eos-batch").option("exactlyOnce", "true").mode("append").save()


# --- the driver killed ------------------------------------------------------------------------------


def _start_driver(bootstrap: str, source: Path, checkpoint: Path, topic: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    argv = [sys.executable, str(DRIVER), bootstrap, str(source), str(checkpoint), topic]
    # its own process group: the kill takes the JVM and the Python workers with it
    return subprocess.Popen(argv, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _writing(driver: subprocess.Popen[bytes], bootstrap: str, topic: str, before: int) -> bool:
    return driver.poll() is not None or sum(_ends(bootstrap, topic, "read_uncommitted")) > before


@pytest.mark.slow
@pytest.mark.timeout(1500)  # eleven Spark drivers started in turn: some 6 minutes on a loaded machine
def test_a_driver_killed_ten_times_leaves_every_record_once(seglog_broker: Any, tmp_path: Path) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    topic = "eos-killed"
    create(bootstrap, topic, 2)
    values = _inputs(tmp_path / "in", 50, 20)
    rng = random.Random()
    kills = 0
    for _ in range(10):
        before = sum(_ends(bootstrap, topic, "read_uncommitted"))
        driver = _start_driver(bootstrap, tmp_path / "in", tmp_path / "cp", topic)
        try:
            # this run's tasks are writing (records or markers past where the last run left the topic),
            # then a random moment: during tasks, before the driver's commit, during it
            _wait(functools.partial(_writing, driver, bootstrap, topic, before), "a write")
            time.sleep(rng.uniform(0, 1.5))
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                kills += 1
            driver.wait()
    assert kills == 10, "the query finished before it was killed ten times: give it more input"
    driver = _start_driver(bootstrap, tmp_path / "in", tmp_path / "cp", topic)
    _, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err.decode(errors="replace")[-3000:]
    assert sorted(_committed_values(bootstrap, topic)) == sorted(values)
