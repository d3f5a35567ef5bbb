"""Writing DataFrames to seglog and reading them back; refusals."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import time

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from pyspark.errors import PySparkException
from pyspark.sql.types import BinaryType, IntegerType, StructField, StructType

import seglog
from seglog.spark.sink import SeglogStreamWriter, SeglogWriter, StagedWrite

from .test_read import read


def kafka_partition(key, partitions):
    """Where kafka-python's DefaultPartitioner (the Java client's rule) sends a key."""
    return (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions


def staging(path):
    return sorted(p.name for p in path.iterdir() if p.name.startswith(".seglog-staging"))


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
        assert r.partition == kafka_partition(r.key, 3)
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
    df.write.format("seglog").option("path", str(tmp_path)).option("useTimestampColumn", "true").mode("append").save()
    got = read(spark, tmp_path, subscribe="a,b", includeHeaders="true").collect()
    by_topic = {r.topic: r for r in got}
    assert by_topic["a"].partition == 1 and by_topic["a"].key is None and by_topic["a"].value == b"x"
    assert [(h.key, h.value) for h in by_topic["a"].headers] == [("h", b"1")]
    with seglog.open(str(tmp_path), background=False) as logs:
        (rec,) = logs.partition("a", 1).records()
        assert rec.timestamp == 1700000000123


def test_the_topic_option_overrides_the_topic_column(spark, tmp_path):
    topic(tmp_path, "a", 1)
    topic(tmp_path, "b", 1)
    df = spark.sql("select * from values ('b', cast('x' as binary)), ('nope', cast('y' as binary)) as t(topic, value)")
    df.write.format("seglog").option("path", str(tmp_path)).option("topic", "a").mode("append").save()
    assert sorted((r.topic, r.value) for r in read(spark, tmp_path, subscribe="a,b").collect()) == [
        ("a", b"x"),
        ("a", b"y"),
    ]
    # and without the option, the column decides; a null topic is refused
    df.where("topic = 'b'").write.format("seglog").option("path", str(tmp_path)).mode("append").save()
    assert [r.value for r in read(spark, tmp_path, subscribe="b").collect()] == [b"x"]
    nulls = spark.sql("select * from values (cast(null as string), cast('z' as binary)) as t(topic, value)")
    with pytest.raises(PySparkException, match="a row has no topic"):
        nulls.write.format("seglog").option("path", str(tmp_path)).mode("append").save()


def test_unknown_topic_and_missing_value(spark, tmp_path):
    topic(tmp_path)
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(PySparkException, match="unknown topic 'nope'"):
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "nope").mode("append").save()
    with pytest.raises(PySparkException, match='needs a "value" column'):
        spark.createDataFrame([("v",)], "other string").write.format("seglog").option("path", str(tmp_path)).option(
            "topic", "out"
        ).mode("append").save()


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ("1L as value", "column value must be of type binary or string, not bigint"),
        ("'v' as value, 1.5 as key", "column key must be of type binary or string, not decimal"),
        ("'v' as value, 1L as partition", "column partition must be of type int, not bigint"),
        ("'v' as value, 7 as topic", "column topic must be of type string, not int"),
        ("'v' as value, array('h') as headers", "column headers must be of type array<struct<key:string,value:bi"),
        ("'v' as value, 5L as timestamp", "column timestamp must be of type timestamp, not bigint"),
    ],
)
def test_columns_of_the_wrong_type_are_refused(spark, tmp_path, columns, message):
    topic(tmp_path)
    df = spark.range(1).selectExpr(*columns.split(", "))
    with pytest.raises(PySparkException, match=re.escape(message)):
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").option(
            "useTimestampColumn", "true"
        ).mode("append").save()


def test_string_key_and_value_and_columns_the_sink_ignores(spark, tmp_path):
    topic(tmp_path)
    ok = spark.range(1).selectExpr("'v' as value", "'k' as key", "0 as partition", "'extra' as ignored")
    ok.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").mode("append").save()
    assert [(r.key, r.value, r.partition) for r in read(spark, tmp_path, subscribe="out").collect()] == [
        (b"k", b"v", 0)
    ]


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
    for _ in range(3):  # the other tasks of the failed job may still start after the abort
        with pytest.raises(PySparkException, match="boom"):
            df.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").mode("append").save()
        with seglog.open(str(tmp_path), background=False) as logs:
            assert logs.partition("out", 0).log_end_offset == 0
        time.sleep(1)  # and nothing they staged stays behind
        assert staging(tmp_path) == []


def test_rows_without_a_key_stick_to_one_partition_per_batch(spark, tmp_path):
    topic(tmp_path, partitions=6)
    df = spark.range(0, 3000, numPartitions=3).selectExpr("cast(cast(id as string) as binary) value")
    df.write.format("seglog").option("path", str(tmp_path)).option("topic", "out").mode("append").save()
    back = read(spark, tmp_path, subscribe="out").collect()
    assert sorted(int(r.value) for r in back) == list(range(3000))
    by_task: dict[int, set[int]] = {}
    for r in back:  # each task's rows came in one Arrow batch: one sticky partition each
        by_task.setdefault(int(r.value) // 1000, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_task.values())
    # smaller Arrow batches: each batch done moves keyless rows to another partition
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        topic(tmp_path, "small", partitions=6)
        df = spark.range(0, 1000, numPartitions=1).selectExpr("cast(cast(id as string) as binary) value")
        df.write.format("seglog").option("path", str(tmp_path)).option("topic", "small").mode("append").save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    by_batch: dict[int, set[int]] = {}
    for r in read(spark, tmp_path, subscribe="small").collect():
        by_batch.setdefault(int(r.value) // 100, set()).add(r.partition)
    assert len(by_batch) == 10 and all(len(parts) == 1 for parts in by_batch.values())
    sequence = [next(iter(by_batch[b])) for b in range(10)]
    assert all(a != b for a, b in itertools.pairwise(sequence))


# --- the writer's protocol, without Spark ---------------------------------------------------

SCHEMA = StructType([StructField("key", BinaryType()), StructField("value", BinaryType())])


def _rows(*values):
    return pa.RecordBatch.from_pydict(
        {"key": [b"k%d" % v for v in values], "value": [b"v%d" % v for v in values]},
        schema=pa.schema([("key", pa.binary()), ("value", pa.binary())]),
    )


def paths(staged):
    return [path for _, _, path in staged.files]


def _records(path):
    with seglog.open(str(path), background=False) as logs:
        return sorted(r.value for p in logs.partitions("out") for r in logs.partition("out", p).records())


def test_a_task_failing_part_way_stages_nothing_and_the_others_commit(tmp_path):
    topic(tmp_path)
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)

    def failing():
        yield _rows(1, 2, 3)  # encoded and staged before the failure
        raise RuntimeError("the task's input failed")

    with pytest.raises(RuntimeError, match="input failed"):
        writer.write(failing())
    done = writer.write(iter([_rows(4, 5)]))
    # the marker and the files of the task that finished
    assert staging(tmp_path) == sorted(os.path.basename(p) for p in [writer.staging.marker, *paths(done)])
    writer.commit([done, None])  # Spark gives None for a task that sent no message
    assert _records(tmp_path) == [b"v4", b"v5"]
    assert staging(tmp_path) == []


def test_files_of_dead_attempts_are_never_committed(tmp_path):
    topic(tmp_path)
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    first = writer.write(iter([_rows(1)]))
    lost = writer.write(iter([_rows(2)]))  # an attempt whose message never reached the driver
    writer.commit([first])
    assert _records(tmp_path) == [b"v1"]
    assert not any(os.path.exists(p) for p in paths(lost)) and staging(tmp_path) == []


def test_a_dir_taken_by_another_process_before_the_commit_gets_nothing(tmp_path):
    import subprocess
    import sys

    topic(tmp_path)
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    staged = writer.write(iter([_rows(1, 2)]))
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import seglog, sys, time; logs = seglog.open({str(tmp_path)!r}); print('held'); "
         "sys.stdout.flush(); time.sleep(60)"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(seglog.errors.LogDirLockedError, match="in use by another process"):
            writer.commit([staged])
    finally:
        holder.kill()
        holder.wait()
    assert staging(tmp_path) == [] and _records(tmp_path) == []  # refused whole, its staging gone


def test_batches_fit_a_topic_with_small_segments_and_messages(tmp_path):
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("out", 1, config={"segment.bytes": 64 * 1024, "max.message.bytes": 10_000})
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    values = [b"%05d" % i + b"x" * 95 for i in range(3000)]
    rows = pa.RecordBatch.from_pydict({"key": [None] * 3000, "value": values}, schema=_rows().schema)
    writer.commit([writer.write(iter([rows]))])  # neither limit refuses the sink's batches
    with seglog.open(str(tmp_path), background=False) as logs:
        log = logs.partition("out", 0)
        assert [r.value for r in log.records()] == values
        assert max(len(b.buffer) for b in log.batches()) <= 10_000 and len(log.segments) >= 5


def test_staging_files_of_a_dead_driver_go_when_the_next_write_starts(tmp_path):
    from seglog.storage.staged_append import remove_dead_staging

    topic(tmp_path)
    died_committing = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    orphans = paths(died_committing.write(iter([_rows(1)])))
    os.unlink(died_committing.staging.marker)  # the commit's first step; then the driver died
    died_early = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    stale = paths(died_early.write(iter([_rows(2)])))
    running = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    live = running.write(iter([_rows(3)]))
    stream = SeglogStreamWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)  # no marker
    streaming, stream_died = paths(stream.write(iter([_rows(5)]))), paths(stream.write(iter([_rows(6)])))
    week_ago = time.time() - 8 * 24 * 3600
    for path in [died_early.staging.marker, *stream_died]:
        os.utime(path, (week_ago, week_ago))

    SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)  # a new write clears what is dead
    assert not any(os.path.exists(p) for p in [*orphans, *stale, died_early.staging.marker, *stream_died])
    assert all(os.path.exists(p) for p in [*paths(live), running.staging.marker, *streaming])
    os.unlink(*streaming)
    assert remove_dead_staging(str(tmp_path)) == []  # a live write's marker and files stay
    running.commit([StagedWrite(live.files, 1)])
    assert _records(tmp_path) == [b"v3"] and len(staging(tmp_path)) == 1  # the marker of the new write


def test_a_dir_holding_some_of_a_topics_partitions_is_written_by_partition_number(tmp_path):
    """out-0 and out-2 only (a cluster broker's dir): keyless rows stick to partitions present, a
    row's own partition column names partition 2, and keys hash over the topic's three partitions
    (Kafka's rule); one hashing to the missing partition 1 is refused, naming it. By position, 2
    was refused as past the count of two and keyless rows went to the missing partition 1."""
    topic(tmp_path)
    shutil.rmtree(tmp_path / "out-1")
    schema = StructType([*SCHEMA.fields, StructField("partition", IntegerType())])
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, schema)
    keyless = [pa.RecordBatch.from_pydict({"value": [b"n%d" % i]}) for i in range(20)]
    given = pa.RecordBatch.from_pydict({"value": [b"two"], "partition": pa.array([2], pa.int32())})
    by_key = {kafka_partition(b"k%d" % i, 3): b"k%d" % i for i in range(30)}
    keyed = pa.RecordBatch.from_pydict({"key": [by_key[0], by_key[2]], "value": [b"to0", b"to2"]})
    writer.commit([writer.write(iter([*keyless, given, keyed]))])
    with seglog.open(str(tmp_path), background=False) as logs:
        held = {p: {r.value for r in logs.partition("out", p).records()} for p in logs.partitions("out")}
    everything = {b"n%d" % i for i in range(20)} | {b"two", b"to0", b"to2"}
    assert sorted(held) == [0, 2] and set().union(*held.values()) == everything
    assert {b"two", b"to2"} <= held[2] and b"to0" in held[0]
    missing = pa.RecordBatch.from_pydict({"key": [by_key[1]], "value": [b"to1"]})
    with pytest.raises(seglog.errors.UnknownTopicOrPartitionError, match="no partition 1"):
        writer.write(iter([missing]))
