"""One real local SparkSession for the whole test session (it takes seconds to start)."""

from __future__ import annotations

import os
import sys

import pytest

import seglog

MS = 1_700_000_000_000


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Spark's workers run this interpreter
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import seglog.spark

    session = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    seglog.spark.register(session)
    yield session
    session.stop()


def fill(path, topic="events", partitions=2, batches=20, per_batch=10, config=None, headers=True):
    """A log dir with ``partitions`` x ``batches`` x ``per_batch`` records whose timestamps
    grow by 1 ms per record (MS + offset). Returns the records per partition."""
    written = {}
    with seglog.open(str(path), background=False, clock=lambda: MS + 10**9) as logs:
        if topic not in logs.topics():
            logs.create_topic(topic, partitions, config or {"segment.bytes": 4096})
        for p in range(partitions):
            log = logs.partition(topic, p)
            for _ in range(batches):
                first = log.log_end_offset
                log.append(
                    [
                        seglog.Record(
                            b"key-%d" % (first + i),
                            b"value-%d-%d" % (p, first + i),
                            MS + first + i,
                            [("p", b"%d" % p)] if headers else (),
                        )
                        for i in range(per_batch)
                    ]
                )
            written[p] = list(log.records())
    return written
