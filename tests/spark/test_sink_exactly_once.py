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
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.errors import PySparkException
from pyspark.sql.functions import udf
from pyspark.sql.types import BinaryType

from .brokers import TRANSACTIONAL_BROKER_CONFIG, create, ends, values_read, wait

DRIVER = Path(__file__).with_name("eos_driver.py")
SRC = str(Path(__file__).parents[2] / "src")


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return dict(TRANSACTIONAL_BROKER_CONFIG)


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
    assert sorted(values_read(bootstrap, "eos-out")) == sorted(values)
    # the records are transactional: a read_uncommitted reader sees them and the markers' offsets too
    assert sum(ends(bootstrap, "eos-out", "read_uncommitted")) > len(values)


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
    assert sorted(values_read(bootstrap, "eos-retried")) == sorted(values)


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
    return driver.poll() is not None or sum(ends(bootstrap, topic, "read_uncommitted")) > before


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
        before = sum(ends(bootstrap, topic, "read_uncommitted"))
        driver = _start_driver(bootstrap, tmp_path / "in", tmp_path / "cp", topic)
        try:
            # this run's tasks are writing (records or markers past where the last run left the topic),
            # then a random moment: during tasks, before the driver's commit, during it
            wait(functools.partial(_writing, driver, bootstrap, topic, before), "a write")
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
    assert sorted(values_read(bootstrap, topic)) == sorted(values)
