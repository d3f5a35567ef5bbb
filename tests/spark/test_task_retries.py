"""Tasks that Spark itself runs again within a job (master ``local[2,4]``: four attempts a task), in
a driver process of their own (retry_driver.py; the session's SparkSession gives a task one attempt)
against a real embedded broker. Each job's first attempt fails: by an exception in a step beside
the seglog task, or by SIGKILL of the Python worker running the seglog task (a reader mid-read, a
writer connected to the broker, its transaction open). Reads return every record once; the
exactly-once sink leaves every record once for read_committed readers (what the killed attempt
wrote is in the topic, aborted); the at-least-once batch write (its writer killed) leaves every
record, those the killed attempt wrote twice (Spark's Kafka sink's behaviour, documented in broker_sink.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from .brokers import TRANSACTIONAL_BROKER_CONFIG, create, values_read

DRIVER = Path(__file__).with_name("retry_driver.py")
SRC = str(Path(__file__).parents[2] / "src")
VALUE = 2000  # bytes a written value is padded to: 50 rows (an Arrow batch of the driver's) ~100 KB


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return dict(TRANSACTIONAL_BROKER_CONFIG)


def _driver(bootstrap: str, work: Path, phase: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    argv = [sys.executable, str(DRIVER), bootstrap, str(work), phase]
    done = subprocess.run(argv, env=env, capture_output=True, timeout=900)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-4000:]
    return done.stdout.decode()


@pytest.mark.slow
@pytest.mark.timeout(1000)  # a Spark driver of its own: a few minutes on a loaded machine
def test_read_tasks_run_again_read_every_record_once(seglog_broker: Any, tmp_path: Path) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    create(bootstrap, "in", 1)
    # ~12 MB: more than the sockets between the reader, Spark and the next step hold, so the
    # reader is still fetching (connected) when it is killed
    values = [b"%d-" % i + b"x" * VALUE for i in range(6000)]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for value in values:
        producer.produce("in", value, partition=0)
        producer.poll(0)
    assert producer.flush(60) == 0
    reads = json.loads(_driver(bootstrap, tmp_path, "read").splitlines()[-1])
    expected = {"offsets": list(range(len(values))), "sha256": hashlib.sha256(b"".join(values)).hexdigest()}
    for job in ("read-fail", "read-kill"):
        assert (tmp_path / f"{job}.done").exists(), f"{job}: the first attempt was not broken"
        assert reads[job] == expected, job


def _inputs(path: Path, files: int, per_file: int) -> list[bytes]:
    """``files`` parquet files of ``per_file`` rows (a micro-batch each, in a stream); the values."""
    path.mkdir()
    values = []
    for n in range(files):
        ids = range(n * per_file, (n + 1) * per_file)
        values += [b"v%d-" % i + b"x" * VALUE for i in ids]
        pq.write_table(pa.table({"key": [b"k%d" % i for i in ids], "value": values[-per_file:]}), path / f"{n}.parquet")
    return values


@pytest.mark.slow
@pytest.mark.timeout(1000)  # a Spark driver of its own: a few minutes on a loaded machine
def test_write_tasks_run_again_leave_every_record_exactly_or_at_least_once(seglog_broker: Any, tmp_path: Path) -> None:
    bootstrap = seglog_broker.bootstrap_servers
    for topic in ("alo", "eos-fail", "eos-kill"):
        create(bootstrap, topic, 2)
    values = _inputs(tmp_path / "in", 2, 2000)  # 4 MB a write: its producer's round trips take a while
    _driver(bootstrap, tmp_path, "write")
    for topic in ("eos-fail", "eos-kill", "alo"):
        assert (tmp_path / f"{topic}.done").exists(), f"{topic}: the first attempt was not broken"
    for topic in ("eos-fail", "eos-kill"):
        assert sorted(values_read(bootstrap, topic)) == sorted(values), topic
    # whatever the killed attempt had written is in the topic, aborted, skipped by read_committed
    # (the kill lands while the writer is connected, not always after its first records: the
    # driver-kill test of test_sink_exactly_once.py kills at every point of a batch's two phases)
    assert len(values_read(bootstrap, "eos-kill", "read_uncommitted")) >= len(values)
    at_least_once = Counter(values_read(bootstrap, "alo", "read_uncommitted"))
    assert set(at_least_once) == set(values)
    assert max(at_least_once.values()) <= 2  # what the failed attempt wrote, if anything, written again
