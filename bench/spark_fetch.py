"""The Spark source's task through the brokers against its baselines, in one run.

One partition of RECORDS records of 100-byte values (batches of PER_BATCH) in a log dir, served
by a seglog broker in a process of its own; one task's read of it, to Arrow, three ways:

1. the log dir (``path``): today's fast path, the baseline;
2. the brokers (``kafka.bootstrap.servers``), at Kafka's default max.partition.fetch.bytes (1 MiB)
   and at 16 MiB: the same task code Spark runs (``read_task``), without Spark around it;
3. a confluent-kafka Consumer loop building the same key, value, offset and timestamp columns:
   the pure-Python alternative a user would write.

Both task reads check every batch's CRC (the log dir's reads, and the column builder on fetched
bytes), as Kafka's Java consumer does; the consumer loop does not (librdkafka's check.crcs is off
by default).

The three task reads are taken in turn, ROUNDS rounds, and each one's median is given, with the
range of the per-round ratios to the log dir (how much the machine's noise moved them); the
consumer loop runs once. Run: ``.venv/bin/python bench/spark_fetch.py [RECORDS]``.
"""

from __future__ import annotations

import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import pyarrow as pa

import seglog
from seglog.spark.source import SeglogBatchReader, read_task

RECORDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
PER_BATCH = 500
ROUNDS = 7
MS = 1_700_000_000_000


def build_log(path: str) -> None:
    with seglog.open(path, background=False) as logs:
        logs.create_topic("t", 1, {"segment.bytes": 256 * 1024 * 1024, "retention.ms": -1})
        log = logs.partition("t", 0)
        for b in range(RECORDS // PER_BATCH):
            first = b * PER_BATCH
            log.append([seglog.Record(b"key-%d" % (first + i), b"x" * 100, MS + first + i) for i in range(PER_BATCH)])


def start_broker(path: str) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = f"import seglog.broker, time; seglog.broker.start({path!r}, port={port}); time.sleep(10**6)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return proc, f"127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def task_read(options: dict[str, str]) -> int:
    rows = 0
    for part in SeglogBatchReader({**options, "subscribe": "t"}).partitions():
        for batch in read_task(part):
            rows += batch.num_rows
    return rows


def consumer_loop(bootstrap: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition("t", 0, 0)])
    keys, values, offsets, stamps = [], [], [], []
    while len(offsets) < RECORDS:
        for m in consumer.consume(10_000, 1.0):
            keys.append(m.key())
            values.append(m.value())
            offsets.append(m.offset())
            stamps.append(m.timestamp()[1] * 1000)
    consumer.close()
    pa.record_batch(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(offsets, pa.int64()),
            pa.array(stamps, pa.timestamp("us", tz="UTC")),
        ],
        names=["key", "value", "offset", "timestamp"],
    )
    return len(offsets)


def seconds(read: Callable[[], int]) -> float:
    start = time.perf_counter()
    rows = read()
    took = time.perf_counter() - start
    assert rows == RECORDS, rows
    return took


def in_turn(reads: dict[str, Callable[[], int]], rounds: int = ROUNDS) -> dict[str, list[float]]:
    """Each read's times, the reads taken in turn round after round: a burst of load from the
    machine's other users falls on all of them alike, not on the one that ran then."""
    times: dict[str, list[float]] = {name: [] for name in reads}
    for _ in range(rounds):
        for name, read in reads.items():
            times[name].append(seconds(read))
    return times


def main() -> None:
    path = tempfile.mkdtemp(prefix="bench-spark-fetch-")
    build_log(path)
    broker, bootstrap = start_broker(path)
    try:
        task_read({"kafka.bootstrap.servers": bootstrap})  # warm: the broker's first reads of the files
        big = {"kafka.bootstrap.servers": bootstrap, "kafka.max.partition.fetch.bytes": str(16 << 20)}
        times = in_turn(
            {
                "dir": lambda: task_read({"path": path}),
                "1m": lambda: task_read({"kafka.bootstrap.servers": bootstrap}),
                "16m": lambda: task_read(big),
            }
        )
        loop = seconds(lambda: consumer_loop(bootstrap))
    finally:
        broker.kill()
        broker.wait()
    median = {name: statistics.median(t) for name, t in times.items()}
    rate = lambda s: RECORDS / s / 1e6  # noqa: E731

    def spread(name: str) -> str:
        ratios = sorted(d / t for d, t in zip(times["dir"], times[name], strict=True))
        return f"(rounds: {ratios[0]:.2f}..{ratios[-1]:.2f})"

    print(f"{RECORDS} records of 100 B, one partition, one task; medians of {ROUNDS} rounds in turn (M records/s)")
    print(f"log dir (path), baseline             {rate(median['dir']):6.2f}")
    for name, label in (("1m", "1 MiB"), ("16m", "16 MiB")):
        ratio = median["dir"] / median[name]
        figure = f"{rate(median[name]):6.2f}   {ratio:.2f} x the log dir {spread(name)}"
        print(f"brokers, {label:6} partition fetches    {figure}")
    print(f"confluent-kafka Consumer loop        {rate(loop):6.2f}   brokers (1 MiB): {loop / median['1m']:.1f} x it")


if __name__ == "__main__":
    main()
