"""Filter pushdown on partition, offset and timestamp: exact, whether Spark pushes or not."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    Not,
    StringStartsWith,
)

from seglog.spark.source import SeglogFilteringReader

from .conftest import MS, fill
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
    # literals that are not whole numbers, or not numbers: never rounded into a wrong bound
    "offset < 5.5",
    "offset <= 10.9",
    "offset = 7.0",
    "offset = 7.5",
    "offset > 5.5",
    "partition = 1.0",
    "offset < 3e0",
    "offset >= cast(190 as decimal(10, 1))",
    "offset between 100 and 104",
    "offset >= 190 and offset < 190",
    "not (partition = 1)",
    "offset != 5 and partition = 0 and offset < 8",
    "timestamp >= '2023-11-14 22:13:20.150'",
    "timestamp > timestamp_millis(1700000000100) + interval 500 microseconds",
    "timestamp < timestamp_micros(1700000000003001)",
    "timestamp = timestamp_millis(1700000000042)",
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


# --- the reader's side, without Spark: what it accepts, and how it prunes ----------------------


def _utc(ms):
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def test_accepted_filters_prune_ranges_through_the_indexes(data_dir):
    reader = SeglogFilteringReader({"path": str(data_dir), "subscribe": "events"})
    filters = [
        GreaterThanOrEqual(("timestamp",), _utc(MS + 150)),  # record o of a partition is stamped MS + o
        In(("partition",), [1, 5]),
        LessThan(("offset",), 180),
        IsNotNull(("offset",)),
        EqualTo(("value",), b"value-1-170"),
    ]
    assert list(reader.pushFilters(filters)) == filters[3:]  # the rest are Spark's to apply
    assert [(p.partition, p.start, p.end) for p in reader.partitions()] == [(1, 150, 180)]


@pytest.mark.parametrize(
    "refused",
    [
        EqualTo(("offset",), 7.5),  # never rounded into a bound
        LessThan(("offset",), Decimal("5.5")),
        EqualTo(("partition",), True),
        In(("partition",), [0, 1.5]),
        GreaterThan(("partition",), 0),  # a range on partition
        EqualTo(("offset",), None),
        GreaterThanOrEqual(("timestamp",), dt.datetime(2023, 11, 14, 22, 13, 20)),  # naive: whose time zone?
        Not(EqualTo(("partition",), 1)),
        StringStartsWith(("topic",), "ev"),
    ],
    ids=repr,
)
def test_filters_it_cannot_apply_exactly_are_left_to_spark(data_dir, refused):
    reader = SeglogFilteringReader({"path": str(data_dir), "subscribe": "events"})
    assert list(reader.pushFilters([refused])) == [refused]
    assert sorted((p.partition, p.start, p.end) for p in reader.partitions()) == [(0, 0, 200), (1, 0, 200)]
