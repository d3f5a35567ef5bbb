"""Writing DataFrames to seglog and reading them back; refusals."""

from __future__ import annotations

import pytest
from pyspark.errors import PySparkException

import seglog
from seglog.partitioner import partition_for_key

from .test_read import read


def topic(path, name="out", partitions=3):
    with seglog.open(str(path), background=False) as logs:
        logs.create_topic(name, partitions)


def test_write_and_read_back(spark, tmp_path):
    topic(tmp_path)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(500)], "key string, value string").selectExpr(
        "cast(key as binary) key", "cast(value as binary) value"
    )
    df.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").mode("append").save()
    back = read(spark, tmp_path, subscribe="out").collect()
    assert sorted((r.key, r.value) for r in back) == sorted((b"k%d" % i, b"v%d" % i) for i in range(500))
    for r in back:  # Kafka's default partitioner decides where each key goes
        assert r.partition == partition_for_key(r.key, 3)
    with seglog.open(str(tmp_path), background=False) as logs:
        assert sum(logs.partition("out", p).log_end_offset for p in range(3)) == 500
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".seglog-staging")]


def test_topic_partition_headers_and_timestamp_columns(spark, tmp_path):
    topic(tmp_path, "a", 2)
    topic(tmp_path, "b", 1)
    df = spark.sql(
        """select * from values
             ('a', 1, cast('x' as binary), array(named_struct('key', 'h', 'value', cast('1' as binary))),
              timestamp_millis(1700000000123)),
             ('b', 0, cast('y' as binary), array(), timestamp_millis(1700000000456))
           as t(topic, partition, value, headers, timestamp)"""
    )
    df.write.format("seglog").option("path", str(tmp_path)).mode("append").save()
    got = read(spark, tmp_path, subscribe="a,b", includeHeaders="true").collect()
    by_topic = {r.topic: r for r in got}
    assert by_topic["a"].partition == 1 and by_topic["a"].key is None and by_topic["a"].value == b"x"
    assert [(h.key, h.value) for h in by_topic["a"].headers] == [("h", b"1")]
    with seglog.open(str(tmp_path), background=False) as logs:
        (rec,) = logs.partition("a", 1).records()
        assert rec.timestamp == 1700000000123


def test_unknown_topic_and_missing_value(spark, tmp_path):
    topic(tmp_path)
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match="unknown topic 'nope'"):
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "nope").mode("append").save()
    with pytest.raises(PySparkException, match='needs a "value" column'):
        spark.createDataFrame([("v",)], "other string").write.format("seglog").option("path", str(tmp_path)).option(
            "topic", "out"
        ).mode("append").save()


def test_a_dir_owned_by_another_process_is_refused(spark, tmp_path):
    topic(tmp_path)
    df = spark.createDataFrame([("v",)], "value string")
    with seglog.open(str(tmp_path), background=False), pytest.raises(PySparkException, match="in use by another"):
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").mode("append").save()


def test_a_failed_task_leaves_no_records(spark, tmp_path):
    topic(tmp_path, partitions=1)
    df = spark.range(0, 1000, numPartitions=4).selectExpr(
        "cast(cast(id as string) as binary) value",
        "if(id = 900, raise_error('boom'), 0) partition",
    )
    with pytest.raises(PySparkException, match="boom"):
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").mode("append").save()
    with seglog.open(str(tmp_path), background=False) as logs:
        assert logs.partition("out", 0).log_end_offset == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".seglog-staging")]
