"""Writing DataFrames to seglog and reading them back; refusals."""

from __future__ import annotations

import errno
import itertools
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2
from pyspark.errors import PySparkException
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType, TimestampType

import seglog
from seglog.spark.sink import SeglogStreamWriter, SeglogWriter, StagedWrite, WriteAbortedError

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
    assert staging(tmp_path) == sorted(os.path.basename(p) for p in [writer.marker, *paths(done)])
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


def test_a_task_that_starts_after_the_abort_removes_its_own_file(tmp_path):
    topic(tmp_path)
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    staged = writer.write(iter([_rows(1)]))
    writer.abort([staged])
    assert staging(tmp_path) == []
    with pytest.raises(WriteAbortedError, match="was closed before this task began"):
        writer.write(iter([_rows(2)]))
    assert staging(tmp_path) == [] and _records(tmp_path) == []


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


def test_staging_files_keep_each_partitions_order_and_a_cut_file_is_refused(tmp_path):
    from seglog.errors import CorruptRecordError
    from seglog.records import BatchIterator

    topic(tmp_path, "a", 2)
    topic(tmp_path, "b", 1)
    schema = StructType([*SCHEMA.fields, StructField("topic", StringType()), StructField("partition", IntegerType())])
    writer = SeglogWriter({"path": str(tmp_path)}, schema)

    def rows(start, count):
        values = range(start, start + count)
        return pa.RecordBatch.from_pydict(
            {
                "key": pa.array([None] * count, pa.binary()),
                "value": [b"%d" % v for v in values],
                "topic": ["ab"[v % 2] for v in values],
                "partition": pa.array([v % 3 % 2 if v % 2 == 0 else 0 for v in values], pa.int32()),
            }
        )

    staged = writer.write(iter([rows(0, 50), rows(50, 50)]))
    # one file per partition, each nothing but record batches, as a segment holds them
    assert sorted((t, p) for t, p, _ in staged.files) == [("a", 0), ("a", 1), ("b", 0)]
    for _, _, path in staged.files:
        scan = BatchIterator(Path(path).read_bytes())
        assert sum(b.record_count for b in scan) > 0 and scan.remaining == 0
    cut = next(path for t, p, path in staged.files if (t, p) == ("a", 1))
    with open(cut, "r+b") as f:  # a file cut inside its last batch
        f.truncate(os.path.getsize(cut) - 1)
    with pytest.raises(CorruptRecordError, match="partial batch") as refused:
        writer.commit([staged])
    assert any(cut in note for note in refused.value.__notes__)
    with seglog.open(str(tmp_path), background=False) as logs:  # all or nothing
        assert [logs.partition(t, p).log_end_offset for t, p in (("a", 0), ("a", 1), ("b", 0))] == [0, 0, 0]
    assert staging(tmp_path) == []

    writer = SeglogWriter({"path": str(tmp_path)}, schema)
    staged = writer.write(iter([rows(0, 50), rows(50, 50)]))
    writer.commit([staged])
    with seglog.open(str(tmp_path), background=False) as logs:
        for t, p in (("a", 0), ("a", 1), ("b", 0)):
            got = [int(r.value) for r in logs.partition(t, p).records()]
            want = [v for v in range(100) if "ab"[v % 2] == t and (v % 3 % 2 if v % 2 == 0 else 0) == p]
            assert got == want  # every row, in the task's order
    assert staging(tmp_path) == []


def test_a_staging_file_holds_no_more_than_a_segment(tmp_path):
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("out", 1, config={"segment.bytes": 1 << 20})
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    values = [b"%04d" % i + b"x" * 1000 for i in range(3000)]  # 3 MB in one Arrow batch
    rows = pa.RecordBatch.from_pydict({"key": [None] * 3000, "value": values}, schema=_rows().schema)
    staged = writer.write(iter([rows]))
    assert len(staged.files) >= 3 and all(os.path.getsize(p) <= 1 << 20 for p in paths(staged))
    writer.commit([staged])  # an append of more than segment.bytes would be refused
    with seglog.open(str(tmp_path), background=False) as logs:
        log = logs.partition("out", 0)
        assert [r.value for r in log.records()] == values
        assert len(log.segments) >= 3


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


def test_a_commit_makes_large_staging_files_segments_and_copies_small_ones(tmp_path, monkeypatch):
    from seglog.spark import sink

    monkeypatch.setattr(sink, "_ADOPT_BYTES", 4000)
    topic(tmp_path, partitions=2)
    with seglog.open(str(tmp_path), background=False) as logs:
        for p in range(2):
            logs.partition("out", p).append([seglog.Record(value=b"before")])
    schema = StructType([*SCHEMA.fields, StructField("partition", IntegerType())])
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, schema)

    def rows(partition, values):
        return _rows(*values).append_column("partition", pa.array([partition] * len(values), pa.int32()))

    large = writer.write(iter([rows(0, range(0, 300)), rows(1, range(300, 310))]))
    small = writer.write(iter([rows(1, range(310, 320))]))
    inodes = {path: os.stat(path).st_ino for path in paths(large) + paths(small)}
    (large_file,) = (path for _, p, path in large.files if p == 0)
    assert os.path.getsize(large_file) >= 4000 > max(os.path.getsize(p) for p in paths(small))
    removed = []
    real_unlink = os.unlink

    def unlink(path, *args, **kwargs):  # a copied file goes once its records are in the log
        if path in inodes and os.path.exists(path):
            with seglog.open(str(tmp_path), read_only=True) as logs:
                removed.append((path, logs.partition("out", 1).log_end_offset))
        return real_unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    writer.commit([large, small])
    with seglog.open(str(tmp_path), background=False) as logs:
        adopted, copied = logs.partition("out", 0), logs.partition("out", 1)
        assert [s.base_offset for s in adopted.segments] == [0, 1]
        assert os.stat(adopted.segments[1].log_path).st_ino == inodes[large_file]  # the very file, no copy
        assert [r.value for r in adopted.records()] == [b"before"] + [b"v%d" % v for v in range(300)]
        assert [s.base_offset for s in copied.segments] == [0]
        assert [r.value for r in copied.records()] == [b"before"] + [b"v%d" % v for v in range(300, 320)]
    (first_small,) = (path for _, p, path in large.files if p == 1)
    # a thread removes them, behind the appends: never a file before its records are in
    assert [path for path, _ in removed] == [first_small, paths(small)[0]]
    assert removed[0][1] >= 11 and removed[1][1] == 21
    assert staging(tmp_path) == []


def test_staging_files_on_another_filesystem_are_copied(tmp_path, monkeypatch):
    from seglog.spark import sink

    if not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on a filesystem of its own")
    monkeypatch.setattr(sink, "_ADOPT_BYTES", 4000)
    shm = tempfile.mkdtemp(dir="/dev/shm")
    try:
        dirs = f"{tmp_path},{shm}"  # partition 0 lands in the first dir, 1 in the second
        with seglog.open(dirs.split(","), background=False) as logs:
            logs.create_topic("out", 2)
            assert [os.path.dirname(logs.partition("out", p).dir) for p in range(2)] == [str(tmp_path), shm]
        schema = StructType([*SCHEMA.fields, StructField("partition", IntegerType())])
        writer = SeglogWriter({"path": dirs, "topic": "out"}, schema)
        staged = writer.write(
            iter([_rows(*range(p * 300, p * 300 + 300)).append_column("partition", pa.array([p] * 300, pa.int32()))
                  for p in range(2)])
        )  # fmt: skip
        inodes = {p: os.stat(path).st_ino for _, p, path in staged.files}
        writer.commit([staged])
        with seglog.open(dirs.split(","), background=False) as logs:
            for p in range(2):
                log = logs.partition("out", p)
                assert [r.value for r in log.records()] == [b"v%d" % v for v in range(p * 300, p * 300 + 300)]
            assert os.stat(logs.partition("out", 0).active_segment.log_path).st_ino == inodes[0]  # adopted
            assert os.stat(logs.partition("out", 1).active_segment.log_path).st_dev != os.stat(tmp_path).st_dev
        assert staging(tmp_path) == []
    finally:
        shutil.rmtree(shm)


def test_a_staging_file_that_cannot_be_renamed_into_the_log_is_copied(tmp_path, monkeypatch):
    from seglog.spark import sink
    from seglog.storage import fileio

    monkeypatch.setattr(sink, "_ADOPT_BYTES", 1)
    topic(tmp_path, partitions=1)
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    staged = writer.write(iter([_rows(*range(100))]))
    fileio.faults.inject("rename", errno.EXDEV, path=".seglog-staging-")  # a bind mount, say
    try:
        writer.commit([staged])
        assert fileio.faults._faults[0].times == 0  # the rename was tried, and refused
    finally:
        fileio.faults.clear()
    assert _records(tmp_path) == sorted(b"v%d" % i for i in range(100)) and staging(tmp_path) == []


def test_open_staging_files_are_capped_and_a_failed_sync_fails_the_task(tmp_path, monkeypatch):
    from seglog.errors import KafkaStorageError
    from seglog.spark import sink

    monkeypatch.setattr(sink, "_OPEN_FILES", 2)  # five partitions: files closed and opened again
    monkeypatch.setattr(sink, "_SYNC_BYTES", 1)  # and synced behind the task after every batch
    topic(tmp_path, partitions=5)
    schema = StructType([*SCHEMA.fields, StructField("partition", IntegerType())])
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, schema)

    def rows(start):
        return _rows(*range(start, start + 50)).append_column(
            "partition", pa.array([v % 5 for v in range(start, start + 50)], pa.int32())
        )

    writer.commit([writer.write(iter([rows(0), rows(50), rows(100)]))])
    with seglog.open(str(tmp_path), background=False) as logs:
        for p in range(5):
            want = [b"v%d" % v for v in range(150) if v % 5 == p]
            assert [r.value for r in logs.partition("out", p).records()] == want  # in order, none lost

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(sink, "_fdatasync", failing)
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, schema)
    with pytest.raises(KafkaStorageError, match="writing a staging file to disk failed: Input/output error"):
        writer.write(iter([rows(0), rows(50)]))
    assert staging(tmp_path) == [os.path.basename(writer.marker)]  # the task left nothing behind


def test_a_write_closed_while_a_task_runs_leaves_none_of_its_files(tmp_path):
    topic(tmp_path)
    schema = StructType([*SCHEMA.fields, StructField("partition", IntegerType())])
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out"}, schema)

    def rows():
        yield _rows(*range(30)).append_column("partition", pa.array([0] * 30, pa.int32()))
        writer.abort([])  # the job failed elsewhere: the driver closes the write
        # a partition of its own: this task's next file, which sees it
        yield _rows(*range(30, 60)).append_column("partition", pa.array([1] * 30, pa.int32()))

    with pytest.raises(WriteAbortedError, match="was closed while this task ran"):
        writer.write(rows())
    assert staging(tmp_path) == [] and _records(tmp_path) == []


@pytest.mark.parametrize("adopt_bytes", [1, 1 << 30], ids=["made-segments", "copied"])
def test_a_commit_that_fails_part_way_leaves_every_partition_as_it_was(tmp_path, monkeypatch, adopt_bytes):
    from seglog.spark import sink

    monkeypatch.setattr(sink, "_ADOPT_BYTES", adopt_bytes)
    topic(tmp_path)
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.partition("out", 0).append([seglog.Record(value=b"before")])
        logs.alter_topic_config("out", {"message.timestamp.before.max.ms": "3600000"})
    extra = [StructField("partition", IntegerType()), StructField("timestamp", TimestampType())]
    schema = StructType([*SCHEMA.fields, *extra])
    writer = SeglogWriter({"path": str(tmp_path), "topic": "out", "useTimestampColumn": "true"}, schema)
    now_us = int(time.time() * 1e6)

    def rows(values, partition, ts_us):
        return pa.RecordBatch.from_pydict(
            {"key": [b"k"] * len(values), "value": values, "partition": [partition] * len(values),
             "timestamp": [ts_us] * len(values)},
            schema=pa.schema([("key", pa.binary()), ("value", pa.binary()), ("partition", pa.int32()),
                              ("timestamp", pa.timestamp("us"))]),
        )  # fmt: skip

    good = writer.write(iter([rows([b"a", b"b"], 0, now_us), rows([b"c"], 1, now_us)]))
    old = writer.write(iter([rows([b"too old"], 2, now_us - 7200 * 10**6)]))  # refused by the log
    with pytest.raises(seglog.errors.InvalidTimestampError, match=r"message\.timestamp\.before\.max\.ms"):
        writer.commit([good, old])
    with seglog.open(str(tmp_path), background=False) as logs:
        assert [r.value for r in logs.partition("out", 0).records()] == [b"before"]
        assert [logs.partition("out", p).log_end_offset for p in range(3)] == [1, 0, 0]
        for p in range(3):  # no segment of the write's is left, empty or not, beyond the active one
            log = logs.partition("out", p)
            assert sum(s.size for s in log.segments[1:]) == 0 and len(log.segments) <= 2
    assert staging(tmp_path) == []


def test_staging_files_of_a_dead_driver_go_when_the_next_write_starts(tmp_path):
    from seglog.spark.sink import remove_dead_staging

    topic(tmp_path)
    died_committing = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    orphans = paths(died_committing.write(iter([_rows(1)])))
    os.unlink(died_committing.marker)  # the commit's first step; then the driver died
    died_early = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    stale = paths(died_early.write(iter([_rows(2)])))
    running = SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)
    live = running.write(iter([_rows(3)]))
    stream = SeglogStreamWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)  # no marker
    streaming, stream_died = paths(stream.write(iter([_rows(5)]))), paths(stream.write(iter([_rows(6)])))
    week_ago = time.time() - 8 * 24 * 3600
    for path in [died_early.marker, *stream_died]:
        os.utime(path, (week_ago, week_ago))

    SeglogWriter({"path": str(tmp_path), "topic": "out"}, SCHEMA)  # a new write clears what is dead
    assert not any(os.path.exists(p) for p in [*orphans, *stale, died_early.marker, *stream_died])
    assert all(os.path.exists(p) for p in [*paths(live), running.marker, *streaming])
    os.unlink(*streaming)
    assert remove_dead_staging(str(tmp_path)) == []  # a live write's marker and files stay
    running.commit([StagedWrite(live.files, 1)])
    assert _records(tmp_path) == [b"v3"] and len(staging(tmp_path)) == 1  # the marker of the new write
