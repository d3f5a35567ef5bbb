"""Jobs written as Spark's Kafka integration guide writes them, with format("seglog"):
what a user of Spark's Kafka connector would notice behaves as it does there."""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException, StreamingQueryException
from pyspark.sql.types import BinaryType, StructField, StructType

import seglog
import seglog.spark
from seglog.records import Compression, build_batch
from seglog.records.control import end_transaction_marker
from seglog.spark.options import OptionError
from seglog.spark.sink import SeglogWriter
from seglog.spark.source import SeglogBatchReader, read_partition

from .conftest import MS, fill
from .test_read import read

README = Path(__file__).resolve().parents[2] / "README.md"


def topic(path, name, partitions=1, config=None):
    with seglog.open(str(path), background=False) as logs:
        logs.create_topic(name, partitions, config)


def records(path, name, partition=0):
    with seglog.open(str(path), background=False, read_only=True) as logs:
        return list(logs.partition(name, partition).records())


def spark_section():
    text = README.read_text()
    return text[text.index('## Spark: `format("seglog")`') : text.index("## Retention and compaction")]


# 1, 2: save modes ----------------------------------------------------------------------------


def test_the_readme_write_example_runs_and_other_save_modes_are_refused(spark, tmp_path):
    data = tmp_path / "data"
    topic(data, "t")
    df = spark.createDataFrame([("k1", "v1"), ("k2", "v2")], "key string, value string")
    (example,) = [line for line in spark_section().splitlines() if line.startswith("df.selectExpr(")]
    exec(example.replace('"data"', repr(str(data))), {"df": df})  # the README's own line
    assert [r.value for r in records(data, "t")] == [b"v1", b"v2"]
    # the default (ErrorIfExists) is stopped by Spark before seglog runs; the README says so
    with pytest.raises(PySparkException, match='cannot be written in the "ErrorIfExists" mode'):
        df.write.format("seglog").option("path", str(data)).option("topic", "t").save()
    assert "ErrorIfExists" in spark_section()
    with pytest.raises(PySparkException, match="Save mode Overwrite not allowed"):
        df.write.format("seglog").option("path", str(data)).option("topic", "t").mode("overwrite").save()
    with pytest.raises(PySparkException, match='cannot be written in the "Ignore" mode'):
        df.write.format("seglog").option("path", str(data)).option("topic", "t").mode("ignore").save()
    assert len(records(data, "t")) == 2  # nothing appended by the refused writes


# 3: kafka.* producer options -----------------------------------------------------------------


def test_kafka_producer_options_are_honoured(spark, tmp_path):
    topic(tmp_path, "t")
    df = spark.range(400).selectExpr("cast(id as string) key", "repeat('x', 100) value").coalesce(1)

    def writer():
        return df.write.format("seglog").option("path", str(tmp_path)).option("topic", "t").mode("append")

    writer().option("kafka.compression.type", "lz4").option("kafka.batch.size", "4096").option(
        "kafka.linger.ms", "5"
    ).save()
    with seglog.open(str(tmp_path), background=False, read_only=True) as logs:
        batches = list(logs.partition("t", 0).batches())
    assert {b.compression for b in batches} == {Compression.LZ4}
    assert len(batches) > 5  # 400 records of ~110 bytes in batches of at most ~4 KiB
    assert sum(b.record_count for b in batches) == 400
    with pytest.raises(PySparkException, match=r"larger than 150, the value of the kafka\.max\.request\.size"):
        writer().option("kafka.max.request.size", "150").save()
    with pytest.raises(PySparkException, match=r"Kafka option 'key\.serializer' is not supported"):
        writer().option("kafka.key.serializer", "x").save()
    assert sum(b.record_count for b in batches) == len(records(tmp_path, "t"))


def test_kafka_batch_size_zero_writes_a_record_a_batch_and_acks_are_checked(tmp_path):
    # Kafka's producer takes batch.size=0 as "no batching"
    topic(tmp_path, "t")
    writer_schema = StructType([StructField("value", BinaryType())])
    writer = SeglogWriter({"path": str(tmp_path), "topic": "t", "kafka.batch.size": "0"}, writer_schema)
    writer.commit([writer.write(iter([pa.RecordBatch.from_pydict({"value": [b"a", b"b", b"c"]})]))])
    with seglog.open(str(tmp_path), background=False, read_only=True) as logs:
        assert [b.record_count for b in logs.partition("t", 0).batches()] == [1, 1, 1]
    with pytest.raises(OptionError, match=r"kafka\.acks must be all, -1, 0 or 1, not '2'"):
        SeglogWriter({"path": str(tmp_path), "topic": "t", "kafka.acks": "2"}, writer_schema)


# 4: the timestamp column ---------------------------------------------------------------------


def test_copying_a_topic_gives_its_records_the_write_time(spark, tmp_path):
    fill(tmp_path, partitions=1, batches=2)  # timestamps around 2023
    topic(tmp_path, "copy")
    topic(tmp_path, "kept")
    began = int(time.time() * 1000)
    source = read(spark, tmp_path, subscribe="events")
    source.write.format("seglog").option("path", str(tmp_path)).option("topic", "copy").mode("append").save()
    copied = records(tmp_path, "copy")
    assert len(copied) == 20 and all(r.timestamp >= began for r in copied)
    source.write.format("seglog").option("path", str(tmp_path)).option("topic", "kept").option(
        "useTimestampColumn", "true"
    ).mode("append").save()
    assert [r.timestamp for r in records(tmp_path, "kept")] == [r.timestamp for r in records(tmp_path, "events")]


# 5: internal topics and the metadata log -----------------------------------------------------


def test_a_pattern_reads_no_internal_topic_nor_the_metadata_log(spark, kafka_data, tmp_path):
    src = kafka_data / "real_segments" / "rjmfernandes_flink-on-prem__cp7.6_kraft" / "data"
    shutil.copytree(src, tmp_path / "data")
    topics = {
        r.topic for r in read(spark, tmp_path / "data", subscribePattern=".*").select("topic").distinct().collect()
    }
    assert "orders" in topics
    assert not topics & {"__consumer_offsets", "__cluster_metadata"}
    with pytest.raises(PySparkException, match="__cluster_metadata is KRaft's metadata log, not a topic"):
        read(spark, tmp_path / "data", subscribe="__cluster_metadata").count()
    with pytest.raises(PySparkException, match="not a topic"):
        read(spark, tmp_path / "data", assign={"__cluster_metadata": [0]}).count()


# 6, 10: a pattern query whose topic was deleted; the source metrics --------------------------


def run_pattern_query(spark, path, ckpt, fail_on_data_loss, sink):
    q = (
        spark.readStream.format("seglog")
        .option("path", str(path))
        .option("subscribePattern", "doomed.*|kept")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "15")
        .option("failOnDataLoss", fail_on_data_loss)
        .load()
        .selectExpr("key", "value")
        .writeStream.format("seglog")
        .option("path", str(sink))
        .option("topic", "out")
        .option("checkpointLocation", str(ckpt))
        .trigger(availableNow=True)
        .start()
    )
    with contextlib.suppress(StreamingQueryException):  # a failed query is looked at by the caller
        q.awaitTermination(120)
    return q


def test_a_pattern_query_goes_on_after_its_topic_was_deleted(spark, tmp_path):
    data, sink, ckpt = tmp_path / "data", tmp_path / "sink", tmp_path / "ckpt"
    fill(data, topic="doomed-p", partitions=1, batches=2)
    fill(data, topic="kept", partitions=1, batches=1)
    topic(sink, "out")
    q = run_pattern_query(spark, data, ckpt, "true", sink)
    assert q.exception() is None and len(records(sink, "out")) == 30
    # the first trigger read 15 of 30: the partitions were 10 and 5 behind the latest
    first = q.recentProgress[0]["sources"][0]
    assert seglog.spark.offsets_behind(first) == {
        "minOffsetsBehindLatest": "5",
        "maxOffsetsBehindLatest": "10",
        "avgOffsetsBehindLatest": "7.5",
    }
    assert seglog.spark.offsets_behind(q.lastProgress["sources"][0])["maxOffsetsBehindLatest"] == "0"
    with seglog.open(str(data), background=False) as logs:
        logs.delete_topic("doomed-p")
        logs.partition("kept", 0).append([seglog.Record(b"k", b"after", MS)])
    q = run_pattern_query(spark, data, ckpt, "true", sink)
    assert "doomed-p-0 are gone (their topic was deleted)" in str(q.exception())
    q = run_pattern_query(spark, data, ckpt, "false", sink)
    assert q.exception() is None
    assert [r.value for r in records(sink, "out")][-1] == b"after"


# 7: read_committed ---------------------------------------------------------------------------


def transactional_topic(path):
    """A topic as transactional producers leave it: a committed transaction, an aborted
    one, plain records, and a transaction still open at the end."""
    with seglog.open(str(path), background=False) as logs:
        logs.create_topic("txn", 1, {"segment.bytes": 300})
        log = logs.partition("txn", 0)

        def send(pid, seq, value):
            log.append([seglog.Record(None, value, MS)], producer_id=pid, producer_epoch=0, base_sequence=seq,
                       transactional=True)  # fmt: skip

        def end(pid, commit):
            marker = build_batch([end_transaction_marker(commit, timestamp=MS)], producer_id=pid, producer_epoch=0,
                                 transactional=True, control=True)  # fmt: skip
            log.append_batches(marker, origin="coordinator")

        send(1, 0, b"ok-1")
        send(2, 0, b"aborted-1")
        send(1, 1, b"ok-2")
        send(2, 1, b"aborted-2")
        end(2, commit=False)
        end(1, commit=True)
        log.append([seglog.Record(None, b"plain", MS)])
        send(3, 0, b"open")  # the last stable offset stops here
        log.append([seglog.Record(None, b"after-open", MS)])


def test_read_committed_skips_aborted_transactions_and_stops_at_the_lso(spark, tmp_path):
    transactional_topic(tmp_path)
    committed = read(spark, tmp_path, subscribe="txn", **{"kafka.isolation.level": "read_committed"})
    assert [r.value for r in committed.orderBy("offset").collect()] == [b"ok-1", b"ok-2", b"plain"]
    with pytest.raises(PySparkException, match=r"last stable offset is 7: offsets 7\.\.8 are not committed yet"):
        read(
            spark,
            tmp_path,
            subscribe="txn",
            endingOffsets={"txn": {"0": 9}},
            **{"kafka.isolation.level": "read_committed"},
        ).count()
    everything = read(spark, tmp_path, subscribe="txn").orderBy("offset").collect()
    assert [r.value for r in everything] == [
        b"ok-1", b"aborted-1", b"ok-2", b"aborted-2", b"plain", b"open", b"after-open"
    ]  # fmt: skip


def test_read_committed_tasks_split_inside_a_transaction(tmp_path):
    transactional_topic(tmp_path)
    options = {"path": str(tmp_path), "subscribe": "txn", "kafka.isolation.level": "read_committed"}
    tasks = SeglogBatchReader({**options, "minPartitions": "4"}).partitions()
    assert len(tasks) == 4 and tasks[-1].end == 7  # the LSO: "open" is at offset 7
    values = [v for t in tasks for b in read_partition(t) for v in b.column("value").to_pylist()]
    assert values == [b"ok-1", b"ok-2", b"plain"]


# 8, 9: option errors at load, and an ending offset past the end ------------------------------


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("maxOffsetsPerTrigger", "lots", "option maxOffsetsPerTrigger must be an integer"),
        ("startingOffsets", "{bad", "option startingOffsets is not valid JSON"),
        ("kafka.isolation.level", "serializable", "must be read_uncommitted or read_committed"),
        ("kafka.auto.offset.reset", "earliest", "set the source option 'startingOffsets' instead"),
    ],
)
def test_streaming_option_errors_show_at_load(spark, tmp_path, option, value, message):
    reader = spark.readStream.format("seglog").option("path", str(tmp_path)).option("subscribe", "t")
    with pytest.raises(PySparkException, match=re.escape(message)):
        reader.option(option, value).load()  # no query started


def test_ending_offsets_past_the_log_end_say_they_were_never_written(spark, tmp_path):
    fill(tmp_path, partitions=1, batches=1)  # offsets 0..9
    with pytest.raises(PySparkException, match=r"its log ends at offset 10 .*offsets 10\.\.98 have not been written"):
        read(spark, tmp_path, subscribe="events", endingOffsets={"events": {"0": 99}}).count()


# 11: minPartitions ---------------------------------------------------------------------------


def test_min_partitions_splits_ranges_evenly(spark, tmp_path):
    fill(tmp_path, partitions=1, batches=3, per_batch=20, config={"segment.bytes": 1 << 20})  # 60 records, 3 batches
    df = read(spark, tmp_path, subscribe="events", minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    sizes = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
    assert sizes == [10] * 6


# 12: Update mode -----------------------------------------------------------------------------


def test_update_mode_through_foreach_batch_as_the_readme_shows(spark, tmp_path):
    fill(tmp_path, partitions=1, batches=2)
    topic(tmp_path, "counts")
    counts = (
        spark.readStream.format("seglog")
        .option("path", str(tmp_path))
        .option("subscribe", "events")
        .option("startingOffsets", "earliest")
        .load()
        .groupBy("partition")
        .count()
        .selectExpr("cast(partition as string) key", "cast(count as string) value")
    )
    section = spark_section()
    assert 'outputMode("update")' in section and "foreachBatch" in section
    with pytest.raises(PySparkException, match="Update"):
        counts.writeStream.outputMode("update").format("seglog").option("path", str(tmp_path)).option(
            "topic", "counts"
        ).option("checkpointLocation", str(tmp_path / "ck1")).start().awaitTermination(60)
    block = section[section.index("def write_batch") :]
    block = block[: block.index("```")].replace('"data"', repr(str(tmp_path)))
    # the README's job as it stands, given a checkpoint and run once
    block = block.replace("counts.writeStream", "q = counts.writeStream").replace(
        ".start()", ".option('checkpointLocation', ck).trigger(availableNow=True).start()"
    )
    scope = {"counts": counts, "ck": str(tmp_path / "ck2")}
    exec(block, scope)
    scope["q"].awaitTermination(120)
    assert scope["q"].exception() is None
    assert [(r.key, r.value) for r in records(tmp_path, "counts")] == [(b"0", b"20")]


# issue 10, 19: the topic's config ------------------------------------------------------------


def test_tasks_open_partitions_with_the_topic_config(tmp_path, caplog):
    topic(tmp_path, "t", config={"segment.index.bytes": 4096, "index.interval.bytes": 1})
    with seglog.open(str(tmp_path), background=False) as logs:  # the writer keeps the dir open
        log = logs.partition("t", 0)
        for i in range(30):
            log.append([seglog.Record(b"k", b"v" * 100, MS + i)])
        (task,) = SeglogBatchReader({"path": str(tmp_path), "subscribe": "t"}).partitions()
        with caplog.at_level(logging.WARNING):
            assert sum(b.num_rows for b in read_partition(task)) == 30
    assert task.config.segment_index_bytes == 4096
    assert not [r for r in caplog.records if "corrupt index" in r.getMessage()]
