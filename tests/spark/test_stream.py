"""Structured Streaming over seglog: appends while running, read limits, restarts, data loss."""

from __future__ import annotations

import functools
import time

import pytest
from pyspark.errors import PySparkException, StreamingQueryException

import seglog

from .conftest import MS, fill


def stream(spark, path, **options):
    reader = spark.readStream.format("seglog").option("path", str(path)).option("subscribe", "events")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def append(path, partition, n, start_value=0):
    with seglog.open(str(path), background=False) as logs:
        log = logs.partition("events", partition)
        log.append([seglog.Record(b"k", b"new-%d" % (start_value + i), MS + i) for i in range(n)])


def test_new_records_appear_in_the_next_micro_batch(spark, tmp_path):
    fill(tmp_path, batches=5)
    q = (
        stream(spark, tmp_path, startingOffsets="earliest")
        .writeStream.format("memory")
        .queryName("grow")
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        q.processAllAvailable()
        assert spark.sql("select count(*) c from grow").first().c == 100
        append(tmp_path, 1, 25)
        q.processAllAvailable()
        rows = spark.sql("select partition, offset, value from grow").collect()
        assert len(rows) == 125
        assert sorted(r.offset for r in rows if r.partition == 1)[-25:] == list(range(50, 75))
    finally:
        q.stop()


def test_starting_latest_skips_what_is_there(spark, tmp_path):
    fill(tmp_path, batches=2)
    q = stream(spark, tmp_path).writeStream.format("memory").queryName("latest").start()
    try:
        q.processAllAvailable()
        append(tmp_path, 0, 3)
        q.processAllAvailable()
        assert sorted(r.value for r in spark.sql("select value from latest").collect()) == [
            b"new-0",
            b"new-1",
            b"new-2",
        ]
    finally:
        q.stop()


def test_max_offsets_per_trigger_with_available_now(spark, tmp_path):
    fill(tmp_path, batches=10)  # 200 records
    q = (
        stream(spark, tmp_path, startingOffsets="earliest", maxOffsetsPerTrigger="30")
        .writeStream.format("memory")
        .queryName("limited")
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 200 and max(sizes) <= 30 and len(sizes) >= 7
    assert spark.sql("select count(distinct partition, offset) c from limited").first().c == 200


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(spark, tmp_path):
    fill(tmp_path, batches=1)  # 20 records, below the minimum
    q = (
        stream(spark, tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="30", maxTriggerDelay="4s")
        .writeStream.format("memory")
        .queryName("waiting")
        .trigger(processingTime="200 milliseconds")
        .start()
    )

    def count():
        return spark.sql("select count(*) c from waiting").first().c

    def wait_for(n):
        deadline = time.time() + 60
        while count() < n and time.time() < deadline:
            time.sleep(0.2)
        return time.time()

    try:
        wait_for(20)  # as Spark's Kafka source, the first trigger does not wait
        assert count() == 20
        append(tmp_path, 0, 5)  # 5 new: below the minimum, they wait for the delay
        appended = time.time()
        time.sleep(1.5)
        assert count() == 20  # a slower machine only waits longer: this cannot fail by load
        assert wait_for(25) - appended >= 2.5 and count() == 25
        append(tmp_path, 1, 40)  # 40 new: at least the minimum (that they come at once: below)
        wait_for(65)
        assert count() == 65
    finally:
        q.stop()


def test_min_offsets_per_trigger_admits_by_backlog_and_delay(tmp_path):
    # the trigger's decision itself, on a fake clock: a backlog below the minimum waits until
    # maxTriggerDelay has passed since the last batch; one at the minimum is read at once
    from seglog.spark.source import SeglogStreamReader

    fill(tmp_path, batches=1)  # 20 records
    options = {"path": str(tmp_path), "subscribe": "events", "startingOffsets": "earliest"}
    reader = SeglogStreamReader({**options, "minOffsetsPerTrigger": "30", "maxTriggerDelay": "4s"})
    now = [100.0]
    reader.clock = lambda: now[0]
    limit = reader.getDefaultReadLimit()

    def read(start):
        end = reader.latestOffset(start, limit)
        return end, sum(end["events"].values()) - sum(start["events"].values())

    first, n = read(reader.initialOffset())
    assert n == 20  # the first trigger does not wait
    append(tmp_path, 0, 5)
    now[0] += 3.9
    assert read(first) == (first, 0)  # 5 < 30 and 3.9 s < 4 s: wait
    now[0] += 0.1
    second, n = read(first)
    assert n == 5  # the delay passed: what there is
    append(tmp_path, 1, 40)
    now[0] += 0.1
    assert read(second)[1] == 40  # at the minimum: at once


def test_restart_from_checkpoint_loses_nothing_and_duplicates_nothing(spark, tmp_path):
    logs, out, ckpt = tmp_path / "logs", tmp_path / "out", tmp_path / "ckpt"
    fill(logs, batches=3)

    def run():
        q = (
            stream(spark, logs, startingOffsets="earliest")
            .selectExpr("partition", "offset", "value")
            .writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)

    run()
    append(logs, 0, 7)
    append(logs, 1, 5, start_value=100)
    run()
    rows = spark.read.parquet(str(out)).collect()
    keys = [(r.partition, r.offset) for r in rows]
    assert len(keys) == len(set(keys)) == 60 + 12


@pytest.mark.parametrize("how", ["retention", "truncation"])
@pytest.mark.parametrize("fail", [True, False])
def test_data_removed_under_a_running_query(spark, tmp_path, fail, how):
    fill(tmp_path, partitions=1, batches=10, config={"segment.bytes": 1024})  # offsets 0..99, many segments
    name = f"loss_{how}_{fail}"
    q = (
        stream(spark, tmp_path, startingOffsets="earliest", maxOffsetsPerTrigger="10", failOnDataLoss=str(fail).lower())
        .writeStream.format("memory")
        .queryName(name)
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    try:
        deadline = time.time() + 60
        while not q.recentProgress and time.time() < deadline:
            time.sleep(0.2)
        before = q.lastProgress["batchId"]
        with seglog.open(str(tmp_path), background=False) as logs:
            log = logs.partition("events", 0)
            if how == "retention":  # every segment but the active one goes, unread
                logs.alter_topic_config("events", set={"retention.bytes": 1})
                assert logs.enforce_retention() and log.log_start_offset > 50
            else:
                log.truncate_fully_and_start_at(500)  # everything unread goes
            kept = list(log.records())
            first = log.log_start_offset
            log.append([seglog.Record(b"k", b"after", MS)])
        if fail:
            with pytest.raises((StreamingQueryException, PySparkException), match="removed before they were read"):
                q.awaitTermination(60)
        else:
            after = f"select offset from {name} where value = cast('after' as binary)"
            deadline = time.time() + 60
            while time.time() < deadline and not spark.sql(after).collect():
                time.sleep(0.3)
            assert q.isActive and q.exception() is None
            assert spark.sql(after).first()[0] == first + len(kept)
            # the gap is skipped, not read through 10 offsets a trigger (500 offsets: 50 triggers)
            assert q.lastProgress["batchId"] - before <= 5, q.lastProgress["batchId"] - before
            # what was left after the loss is read whole, once: nothing skipped but what went
            got = [r.offset for r in spark.sql(f"select offset from {name} where offset >= {first}").collect()]
            assert sorted(got) == list(range(first, first + len(kept) + 1))
    finally:
        q.stop()


def test_streaming_writes_to_seglog_restart_without_loss_or_duplicates(spark, tmp_path):
    source, sink, ckpt = tmp_path / "source", tmp_path / "sink", tmp_path / "ckpt"
    fill(source, batches=3)  # 2 partitions x 30 records
    with seglog.open(str(sink), background=False) as logs:
        logs.create_topic("copy", 2)

    def run():
        q = (
            stream(spark, source, startingOffsets="earliest", maxOffsetsPerTrigger="25", includeHeaders="true")
            .select("key", "value", "partition", "headers")
            .writeStream.format("seglog")
            .option("path", str(sink))
            .option("topic", "copy")
            .option("checkpointLocation", str(ckpt))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None
        return sum(p["numInputRows"] for p in q.recentProgress)

    assert run() == 60
    append(source, 0, 7)
    append(source, 1, 5, start_value=100)
    assert run() == 12  # the restart goes on from the checkpoint
    with seglog.open(str(source), background=False, read_only=True) as logs:
        expected = sorted((p, r.key, r.value, r.headers) for p in (0, 1) for r in logs.partition("events", p).records())
    with seglog.open(str(sink), background=False, read_only=True) as logs:
        copied = sorted((p, r.key, r.value, r.headers) for p in (0, 1) for r in logs.partition("copy", p).records())
    assert copied == expected and len(copied) == 72
    assert not [p for p in sink.iterdir() if p.name.startswith(".seglog-staging")]


def test_available_now_reads_everything_whatever_the_minimum(spark, tmp_path):
    # a minimum that the backlog never reaches must not end an availableNow query early
    fill(tmp_path, batches=2)  # 40 records
    q = (
        stream(spark, tmp_path, startingOffsets="earliest", minOffsetsPerTrigger="1000", maxOffsetsPerTrigger="15")
        .writeStream.format("memory")
        .queryName("available_min")
        .trigger(availableNow=True)
        .start()
    )
    assert q.awaitTermination(120)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 40 and max(sizes) <= 15
    assert spark.sql("select count(distinct partition, offset) c from available_min").first().c == 40


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"endingOffsets": "latest"}, "endingOffsets applies to batch queries only"),
        ({"endingTimestamp": "1"}, "endingTimestamp applies to batch queries only"),
        ({"startingOffsets": "{bad"}, "option startingOffsets is not valid JSON"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger must be at least 1"),
        ({"minOffsetsPerTrigger": "many"}, "minOffsetsPerTrigger must be an integer"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay must be a duration"),
        ({"startingTimestamp": str(MS + 10**6)}, "no offset matched timestamp"),
    ],
)
def test_streaming_option_errors(spark, tmp_path, options, message):
    fill(tmp_path, batches=1)
    with pytest.raises((StreamingQueryException, PySparkException), match=message):
        q = stream(spark, tmp_path, **options).writeStream.format("noop").trigger(availableNow=True).start()
        q.awaitTermination(60)


def test_partitions_of_a_pattern_that_appear_while_running_are_read_from_their_start(spark, tmp_path):
    fill(tmp_path, batches=1)
    reader = spark.readStream.format("seglog").option("path", str(tmp_path)).option("subscribePattern", "ev.*")
    q = reader.load().writeStream.format("memory").queryName("pattern").trigger(processingTime="300 milliseconds")
    q = q.start()  # startingOffsets latest: what events holds now is not read
    try:
        q.processAllAvailable()
        fill(tmp_path, topic="evolved", partitions=1, batches=2)  # 20 records in a new topic
        deadline = time.time() + 60
        while time.time() < deadline and spark.sql("select count(*) c from pattern").first().c < 20:
            time.sleep(0.3)
        got = spark.sql("select topic, offset from pattern").collect()
        assert sorted((r.topic, r.offset) for r in got) == [("evolved", o) for o in range(20)]
    finally:
        q.stop()


@pytest.mark.parametrize("fail", [True, False])
def test_segments_deleted_while_a_task_reads_them(tmp_path, monkeypatch, fail):
    # a task lists the segments when it opens the log and opens their files as it reaches
    # them: retention may delete one in between, and that is data loss, not an I/O error
    from seglog.spark import source
    from seglog.spark.offsets import DataLossError

    monkeypatch.setattr(source, "ArrowAssembler", functools.partial(source.ArrowAssembler, max_rows=10))
    fill(tmp_path, partitions=1, batches=10, config={"segment.bytes": 1024})  # offsets 0..99, ~10 segments
    with seglog.open(str(tmp_path), background=False, read_only=True) as logs:
        log = logs.partition("events", 0)
        part = source.SeglogPartition("events", 0, log.dir, 0, 100, 0, fail, False, log.config)
    reading = source.read_partition(part)
    first = next(reading)
    assert first.column("offset").to_pylist() == list(range(10))
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.alter_topic_config("events", set={"retention.bytes": 1})
        logs.enforce_retention()
        kept = logs.partition("events", 0).log_start_offset
    assert kept > 30
    # what the task had open it still reads (as a Kafka reader would); the rest is lost
    if fail:
        with pytest.raises(DataLossError, match=rf"offsets \d+\.\.{kept - 1} of events-0 were removed"):
            list(reading)
    else:
        rest = [o for b in reading for o in b.column("offset").to_pylist()]
        lost_from = rest.index(kept)
        assert rest == list(range(10, 10 + lost_from)) + list(range(kept, 100)) and 10 + lost_from < kept


def test_planning_looks_again_when_a_file_goes_under_it(tmp_path):
    # the driver's read-only view lists segments, then opens them; a writer's truncation or
    # retention in between is a file that vanished: the question is asked again, over a new view
    from seglog.errors import KafkaStorageError
    from seglog.spark.offsets import read_logs

    fill(tmp_path, partitions=1, batches=1)
    asked = []

    def question(logs):
        asked.append(logs)
        if len(asked) == 1:
            raise KafkaStorageError("open failed", file=str(tmp_path / "events-0" / "gone.log"))
        return logs.partition("events", 0).log_end_offset

    assert read_logs([str(tmp_path)], question) == 10 and len(asked) == 2 and asked[0] is not asked[1]

    def broken(logs):
        raise KafkaStorageError("read failed", file=str(tmp_path / "events-0"))  # still there: a real I/O error

    with pytest.raises(KafkaStorageError, match="read failed"):
        read_logs([str(tmp_path)], broken)


def test_a_task_whose_whole_range_was_truncated_away_reads_nothing(tmp_path):
    # planned over offsets 50..99, then the log is truncated to 20: with failOnDataLoss=false
    # the task logs the loss and reads nothing, rather than asking the log for offsets past its end
    from seglog.spark import source

    fill(tmp_path, partitions=1, batches=10)  # offsets 0..99
    with seglog.open(str(tmp_path), background=False, read_only=True) as logs:
        log = logs.partition("events", 0)
        part = source.SeglogPartition("events", 0, log.dir, 50, 100, 0, False, False, log.config)
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.partition("events", 0).truncate_to(20)
    assert [b.num_rows for b in source.read_partition(part)] == []
