"""Batch reads through format("seglog") against seglog's own reads, and every option."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.errors import PySparkException

import seglog
from seglog.spark.source import SeglogBatchReader, read_partition

from .conftest import MS, fill


def read(spark, path, **options):
    reader = spark.read.format("seglog").option("path", str(path))
    for k, v in options.items():
        reader = reader.option(k, v if isinstance(v, str) else json.dumps(v))
    return reader.load()


def rows(df):
    return sorted((r.partition, r.offset, r.key, r.value) for r in df.collect())


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("read")
    written = fill(path, config={"segment.bytes": 4096, "index.interval.bytes": 256})
    fill(path, topic="other", partitions=1, batches=3)
    return path, written


KAFKA_SCHEMA = (
    "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,timestampType:int"
)


def test_the_schema_of_sparks_kafka_source(spark, data_dir):
    path, _ = data_dir
    assert read(spark, path, subscribe="events").schema.simpleString() == KAFKA_SCHEMA + ">"
    with_headers = read(spark, path, subscribe="events", includeHeaders="true").schema.simpleString()
    assert with_headers == KAFKA_SCHEMA + ",headers:array<struct<key:string,value:binary>>>"


def test_batch_read_equals_seglogs_own_read(spark, data_dir):
    path, written = data_dir
    df = read(spark, path, subscribe="events", includeHeaders="true")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    got = sorted(df.collect(), key=lambda r: (r.partition, r.offset))
    expected = [(p, r) for p in sorted(written) for r in written[p]]
    assert len(got) == len(expected) == 400
    for row, (p, rec) in zip(got, expected, strict=True):
        assert (row.partition, row.offset, row.key, row.value, row.topic) == (
            p,
            rec.offset,
            rec.key,
            rec.value,
            "events",
        )
        assert row.timestamp == dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=rec.timestamp)
        assert row.timestampType == 0
        assert [(h.key, h.value) for h in row.headers] == list(rec.headers)


def test_subscribe_pattern_and_assign(spark, data_dir):
    path, _ = data_dir
    assert read(spark, path, subscribePattern="ev.*").select("topic").distinct().collect()[0].topic == "events"
    assert read(spark, path, subscribePattern="e.*|o.*").count() == 400 + 30
    df = read(spark, path, assign={"events": [1], "other": [0]})
    assert {(r.topic, r.partition) for r in df.select("topic", "partition").distinct().collect()} == {
        ("events", 1),
        ("other", 0),
    }


def test_starting_and_ending_offsets(spark, data_dir):
    path, _ = data_dir
    df = read(
        spark,
        path,
        subscribe="events",
        startingOffsets={"events": {"0": 5, "1": -2}},
        endingOffsets={"events": {"0": 15, "1": -1}},
    )
    got = rows(df)
    assert [o for p, o, *_ in got if p == 0] == list(range(5, 15))
    assert [o for p, o, *_ in got if p == 1] == list(range(0, 200))
    assert read(spark, path, subscribe="events", startingOffsets="earliest", endingOffsets="latest").count() == 400


def test_timestamps(spark, data_dir):
    path, _ = data_dir
    df = read(spark, path, subscribe="events", startingTimestamp=str(MS + 50), endingTimestamp=str(MS + 60))
    got = rows(df)
    assert {o for _, o, *_ in got} == set(range(50, 60))
    df = read(
        spark,
        path,
        subscribe="events",
        startingOffsetsByTimestamp={"events": {"0": MS + 190, "1": MS}},
        endingOffsetsByTimestamp={"events": {"0": MS + 10**6, "1": MS + 3}},
    )
    got = rows(df)
    assert [o for p, o, *_ in got if p == 0] == list(range(190, 200))
    assert [o for p, o, *_ in got if p == 1] == [0, 1, 2]


def test_timestamp_options_take_precedence_as_in_spark(spark, data_dir):
    # startingTimestamp > startingOffsetsByTimestamp > startingOffsets (and the same for the ending ones)
    path, _ = data_dir
    offsets = {"events": {"0": 1, "1": 1}}
    by_timestamp = {"events": {"0": MS + 10, "1": MS + 10}}
    df = read(
        spark,
        path,
        subscribe="events",
        startingOffsets=offsets,
        startingOffsetsByTimestamp=by_timestamp,
        startingTimestamp=str(MS + 100),
        endingOffsets={"events": {"0": 150, "1": 150}},
        endingOffsetsByTimestamp={"events": {"0": MS + 140, "1": MS + 140}},
        endingTimestamp=str(MS + 120),
    )
    assert {o for _, o, *_ in rows(df)} == set(range(100, 120))
    df = read(
        spark,
        path,
        subscribe="events",
        startingOffsets=offsets,
        startingOffsetsByTimestamp=by_timestamp,
        endingOffsets={"events": {"0": 150, "1": 150}},
        endingOffsetsByTimestamp={"events": {"0": MS + 140, "1": MS + 140}},
    )
    assert {o for _, o, *_ in rows(df)} == set(range(10, 140))


def test_timestamp_strategy(spark, data_dir):
    path, _ = data_dir
    with pytest.raises(PySparkException, match="no offset matched timestamp"):
        read(spark, path, subscribe="events", startingTimestamp=str(MS + 10**6)).count()
    df = read(
        spark, path, subscribe="events", startingTimestamp=str(MS + 10**6), startingOffsetsByTimestampStrategy="latest"
    )
    assert df.count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"subscribe": "events", "assign": '{"events": [0]}'}, "exactly one of the options"),
        ({}, "exactly one of the options"),
        ({"subscribe": "nope"}, "unknown topic 'nope'"),
        ({"assign": '{"events": [7]}'}, "no partition events-7"),
        ({"assign": "{not json"}, "option assign is not valid JSON"),
        ({"subscribe": "events", "startingOffsets": '{"events": {"0": 1}}'}, "not partitions events-1"),
        ({"subscribe": "events", "startingOffsets": "latest"}, "cannot be latest"),
        ({"subscribe": "events", "endingOffsets": '{"events": {"0": -2, "1": -1}}'}, "cannot be earliest"),
        ({"subscribe": "events", "maxOffsetsPerTrigger": "5"}, "streaming queries only"),
        ({"subscribe": "events", "failOnDataLoss": "maybe"}, "true or false"),
        ({"subscribe": "events", "subscribePattern": "e.*"}, r"exactly one of .*\(got subscribe, subscribePattern"),
        ({"subscribePattern": "ev(ents"}, "not a valid pattern"),
        ({"subscribe": " , "}, "names no topic"),
        ({"subscribe": "events,nope"}, "unknown topic 'nope'"),
        ({"assign": '["events", 0]'}, "must be a JSON object like"),
        ({"assign": '{"events": ["zero"]}'}, "not a number"),
        ({"subscribe": "events", "startingOffsets": "{bad"}, "option startingOffsets is not valid JSON"),
        ({"subscribe": "events", "startingOffsets": '{"events": {"0": 1, "1": 1, "2": 1}}'}, "does not read: events-2"),
        ({"subscribe": "events", "startingOffsets": '{"events": {"0": -3, "1": 1}}'}, "neither an offset, -2 nor -1"),
        ({"subscribe": "events", "startingOffsets": '{"events": [0, 1]}'}, "must map partitions to numbers"),
        ({"subscribe": "events", "endingOffsets": "{bad"}, "option endingOffsets is not valid JSON"),
        ({"subscribe": "events", "startingOffsetsByTimestamp": "[]"}, "must be a JSON object"),
        ({"subscribe": "events", "startingOffsetsByTimestamp": "{bad"}, "is not valid JSON"),
        ({"subscribe": "events", "startingTimestamp": "yesterday"}, "must be an integer"),
        ({"subscribe": "events", "startingOffsetsByTimestampStrategy": "earliest"}, "must be error or latest"),
        ({"subscribe": "events", "startingOffsets": '{"events": {"0": 500, "1": 0}}'}, "is after its ending offset"),
        ({"subscribe": "events", "minPartitions": "0"}, "minPartitions must be at least 1"),
        ({"subscribe": "events", "minOffsetsPerTrigger": "5"}, "streaming queries only"),
        ({"subscribe": "events", "includeHeaders": "yes"}, "true or false"),
    ],
)
def test_option_errors(spark, data_dir, options, message):
    path, _ = data_dir
    with pytest.raises(PySparkException, match=message):
        read(spark, path, **options).count()


def test_min_partitions_splits_ranges_evenly_by_offset(spark, data_dir):
    path, _ = data_dir
    df = read(spark, path, subscribe="events", minPartitions="8")
    assert df.rdd.getNumPartitions() == 8
    assert rows(df) == rows(read(spark, path, subscribe="events"))
    assert read(spark, path, subscribe="events", minPartitions="2").rdd.getNumPartitions() == 2  # one per partition


def test_min_partitions_cuts_anywhere_and_each_record_is_read_once(data_dir):
    path, _ = data_dir
    tasks = SeglogBatchReader({"path": str(path), "subscribe": "events", "minPartitions": "6"}).partitions()
    assert len(tasks) == 6
    for p in (0, 1):
        ranges = sorted((t.start, t.end) for t in tasks if t.partition == p)
        assert ranges == [(0, 66), (66, 133), (133, 200)]  # even, cut inside batches of 10
        offsets = [
            o for t in tasks if t.partition == p for b in read_partition(t) for o in b.column("offset").to_pylist()
        ]
        assert sorted(offsets) == list(range(200))


def test_fail_on_data_loss(spark, tmp_path):
    fill(tmp_path, partitions=1, batches=10)
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.partition("events", 0).truncate_fully_and_start_at(150)
    starting = {"events": {"0": 20}}
    with pytest.raises(PySparkException, match="were removed before they were read"):
        read(spark, tmp_path, subscribe="events", startingOffsets=starting).count()
    df = read(spark, tmp_path, subscribe="events", startingOffsets=starting, failOnDataLoss="false")
    assert df.count() == 0  # the log now starts empty at 150


def test_real_kafka_dir(spark, kafka_data, tmp_path):
    import shutil

    src = kafka_data / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"
    shutil.copytree(src, tmp_path / "data")
    df = read(spark, tmp_path / "data", subscribe="orders,_confluent-monitoring", includeHeaders="true")
    assert df.count() == 17212 + 2827
    assert df.where("topic = '_confluent-monitoring'").where("timestampType = 1").count() == 2827
