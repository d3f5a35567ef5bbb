"""Spark jobs whose tasks fail once and that Spark itself runs again within the job, as its own
driver process because the master is ``local[2,4]`` (four attempts a task; the test session's
``local[2]`` gives one) — test_task_retries.py runs it:

    python retry_driver.py BOOTSTRAP WORK PHASE

PHASE is ``read`` (topic ``in``: one partition, read through the brokers twice) or ``write`` (the
parquet files under WORK/in: a batch write to ``alo``, exactly-once streaming writes to ``eos-fail``
and ``eos-kill``). Each job's first task attempt is broken once:

- ``fail``: a UDF on the value, in the seglog task's stage, raises part way through its rows;
- ``kill``: a thread of this driver SIGKILLs the Python worker running the seglog task, found as the
  task worker of this driver's Spark with a connection to the broker: a reader as soon as it
  fetches, a writer once its topic's high watermark rose (records of the attempt are in; with
  ``kafka.linger.ms=0`` its producer sends each batch as it gets it). (A UDF beside the seglog
  task cannot do it: Spark hands the UDF a reader's rows, and a writer the UDF's rows, only once
  all of them are there.)

It touches WORK/<job>.done when it broke the attempt, and prints each read's offsets and a digest of
its values as JSON."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark import TaskContext

DEADLINE = 120  # seconds a killer waits for the seglog task it kills
BREAK_AT = 250  # the row at which a UDF breaks its attempt
BATCH_ID = "streaming.sql.batchId"  # the local property Spark gives a micro-batch's tasks
WORKER = sys.executable.encode() + b"\0-m\0pyspark.daemon\0pyspark.worker\0"  # a task worker's command line


def _until(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + DEADLINE
    while not (found := condition()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"retry_driver: {what} never happened")
        time.sleep(0.01)
    return found


def _high_watermarks(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        count = len(consumer.list_topics(topic, 10).topics[topic].partitions)
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1] for p in range(count))
    finally:
        consumer.close()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _connected_task_workers(port: int, driver: int) -> list[int]:
    """The task workers of ``driver``'s Spark (forked by a pyspark daemon of its JVM; not the
    driver's sink runner), other than this process, with a TCP connection to ``port``."""
    sockets = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[2].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # ESTABLISHED
                    sockets.add(f"socket:[{fields[9]}]")
    found = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() != WORKER:
                    continue
            if _parent(_parent(_parent(pid))) != driver:  # worker <- daemon <- JVM <- driver
                continue
            fds = set()
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):  # closed meanwhile
                    fds.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:  # gone meanwhile, or not ours
            continue
        if fds & sockets:
            found.append(pid)
    return found


def breaking(work: str, job: str) -> Any:
    """A UDF passing a binary column through, except that the first attempt of the job's first
    task (of micro-batch 0 in a stream) raises at row BREAK_AT."""
    from pyspark.sql.functions import udf
    from pyspark.sql.types import BinaryType

    rows = [0]  # this task's, in its worker (the function is unpickled once a task)

    def value(v: bytes) -> bytes:
        context = TaskContext.get()
        assert context is not None
        if context.attemptNumber() or context.partitionId() or context.getLocalProperty(BATCH_ID) not in (None, "0"):
            return v
        rows[0] += 1
        if rows[0] == BREAK_AT:
            (Path(work) / f"{job}.done").touch()
            raise RuntimeError(f"injected failure of {job}")
        return v

    return udf(value, BinaryType()).asNondeterministic()


def killer(bootstrap: str, work: str, job: str, written: str | None = None) -> None:
    """A thread of this driver that kills the first seglog task's worker it sees connected to the
    broker: a reader as soon as it fetches, a writer once the topic ``written`` has its records."""
    port = int(bootstrap.rsplit(":", 1)[1])

    def ready() -> list[int]:
        workers = _connected_task_workers(port, os.getpid())
        return workers if workers and (written is None or _high_watermarks(bootstrap, written)) else []

    def run() -> None:
        for pid in _until(ready, f"{job}: a seglog task's worker"):
            os.kill(pid, signal.SIGKILL)
        (Path(work) / f"{job}.done").touch()

    threading.Thread(target=run, daemon=True).start()


def session() -> Any:
    from pyspark.sql import SparkSession

    import seglog.spark

    spark = (
        SparkSession.builder.master("local[2,4]")
        .appName("seglog-task-retries")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        # small Arrow batches (~100 KB of these rows): each reaches the next step as it is made
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "50")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    seglog.spark.register(spark)
    return spark


def read(spark: Any, bootstrap: str, work: str) -> dict[str, Any]:
    # small fetches: reading the topic takes seconds, in which the killer finds the reader
    df = spark.read.format("seglog").option("kafka.bootstrap.servers", bootstrap).option("subscribe", "in")
    df = df.option("kafka.max.partition.fetch.bytes", "4096").load()
    out = {}
    for job in ("read-fail", "read-kill"):
        if job == "read-kill":
            killer(bootstrap, work, job)
        rows = df.select("offset", breaking(work, job)("value").alias("value")) if job == "read-fail" else df
        got = sorted((r.offset, r.value) for r in rows.collect())
        digest = hashlib.sha256(b"".join(v for _, v in got)).hexdigest()
        out[job] = {"offsets": [o for o, _ in got], "sha256": digest}
    return out


def write(spark: Any, bootstrap: str, work: str) -> None:
    source = os.path.join(work, "in")
    schema = "key binary, value binary"
    rows = spark.read.schema(schema).parquet(source).coalesce(1)  # one task: its writer is the one written
    killer(bootstrap, work, "alo", written="alo")
    rows = rows.write.format("seglog").option("kafka.bootstrap.servers", bootstrap)
    rows.option("topic", "alo").option("kafka.linger.ms", "0").mode("append").save()
    for how in ("fail", "kill"):
        topic = f"eos-{how}"
        stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source).repartition(1)
        if how == "fail":
            stream = stream.select("key", breaking(work, topic)("value").alias("value"))
        else:
            killer(bootstrap, work, topic, written=topic)
        query = (
            stream.writeStream.format("seglog")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("topic", topic)
            .option("exactlyOnce", "true")
            .option("kafka.linger.ms", "0")
            .option("checkpointLocation", os.path.join(work, f"checkpoint-{how}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()


def main(bootstrap: str, work: str, phase: str) -> None:
    spark = session()
    try:
        if phase == "read":
            print(json.dumps(read(spark, bootstrap, work)))
        else:
            write(spark, bootstrap, work)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
