"""Filter pushdown on partition, offset and timestamp: exact, whether Spark pushes or not."""

from __future__ import annotations

import pytest

from .conftest import fill
from .test_read import read, rows

QUERIES = [
    "partition = 1",
    "partition in (0, 1) and offset >= 190",
    "offset > 10 and offset <= 20",
    "offset < 3",
    "timestamp >= timestamp_millis(1700000000150)",
    "timestamp < timestamp_millis(1700000000005) or partition = 0",
    "timestamp > timestamp_millis(1700000000100) and timestamp <= timestamp_millis(1700000000110)",
    "partition = 0 and offset = 7",
    "value = cast('value-1-17' as binary)",
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("pushdown")
    fill(path, config={"segment.bytes": 2048, "index.interval.bytes": 128})
    return path


@pytest.fixture
def pushdown(spark):
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    yield
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")


@pytest.mark.parametrize("where", QUERIES)
def test_pushed_filters_give_exact_results(spark, data_dir, pushdown, where):
    df = read(spark, data_dir, subscribe="events").where(where)
    everything = read(spark, data_dir, subscribe="events").collect()
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
    expected = rows(read(spark, data_dir, subscribe="events").where(where))
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    assert rows(df) == expected
    assert len(everything) == 400


def test_pushdown_prunes_tasks(spark, data_dir, pushdown):
    df = read(spark, data_dir, subscribe="events").where("partition = 1 and offset >= 150")
    assert df.rdd.getNumPartitions() == 1
    assert [o for _, o, *_ in rows(df)] == list(range(150, 200))
