"""The demo's live pipeline (make demo) at a small scale, in the test session's Spark, with an\nembedded broker."""

from __future__ import annotations

import re

import pytest

import seglog
from seglog.cluster.zookeeper_server import zookeeper_unavailable
from seglog.demo import pipeline


def test_the_live_pipeline_runs_and_gives_the_same_result_again(spark, tmp_path, capfd):
    digests = [pipeline.run(spark, str(tmp_path / f"run{i}"), minutes=10, rate=15.0) for i in range(2)]
    out, err = capfd.readouterr()  # the file descriptors': librdkafka logs from C
    # its clients are gone before the embedded broker stops: no "Disconnected" or "Connection
    # refused" lines in the middle of the demo's progress
    assert "rdkafka#" not in out + err
    # a fixed seed, and a table that does not depend on where the micro-batches cut the stream
    assert digests[0] == digests[1]
    assert out.count("read_committed: ") == 2 and ": consistent" in out
    assert out.count("Page views and error rates per minute") == 2 and out.count("Top paths") == 2
    produced = [int(n.replace(",", "")) for n in re.findall(r"([\d,]+) requests produced; the query read", out)]
    read = [int(n.replace(",", "")) for n in re.findall(r"the query read ([\d,]+) records", out)]
    assert produced == read and produced[0] > 0  # every record read once, by the live query
    with seglog.open(str(tmp_path / "run0" / "logs"), read_only=True) as logs:
        assert len(logs.partitions(pipeline.ACCESS_LOG)) == 6
        assert sum(logs.partition(pipeline.ACCESS_LOG, p).log_end_offset for p in range(6)) == produced[0]
        assert "compact" in logs.topic_config(pipeline.PAGEVIEWS).cleanup_policy
    table = spark.read.parquet(str(tmp_path / "run0" / "pageviews.parquet"))
    assert table.count() == table.select("minute", "path").distinct().count() > 0  # one row per key
    assert table.agg({"views": "sum"}).first()[0] == produced[0]  # every request counted once
    assert {r.minute for r in table.select("minute").distinct().collect()} == {
        f"2026-11-22T10:{m:02d}" for m in range(10)
    }


@pytest.mark.slow
def test_on_a_cluster_that_loses_a_broker_the_result_is_the_same(spark, tmp_path, capfd):
    reason = zookeeper_unavailable()
    if reason is not None:
        pytest.skip(reason)
    on_a_cluster = pipeline.run(spark, str(tmp_path / "cluster"), minutes=10, rate=15.0, cluster=True)
    out, err = capfd.readouterr()
    assert re.search(r"killed broker 2 \(127\.0\.0\.2:\d+\) \(SIGKILL\)", out)
    assert "rdkafka#" not in out + err  # the killed broker's refused connections are not the demo's output
    produced = re.findall(r"([\d,]+) requests produced; the query read ([\d,]+) records", out)
    assert len(produced) == 1 and produced[0][0] == produced[0][1]
    assert ": consistent" in out
    # the same table as one broker gives, whatever the kill did to the micro-batches
    assert on_a_cluster == pipeline.run(spark, str(tmp_path / "single"), minutes=10, rate=15.0)


def test_the_workdir_is_recreated_only_if_the_demo_made_it(tmp_path):
    pipeline.fresh_workdir(str(tmp_path / "demo"))
    (tmp_path / "demo" / "logs").mkdir()
    pipeline.fresh_workdir(str(tmp_path / "demo"))  # the demo's own: wiped and made again
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == [pipeline.WORKDIR_MARKER]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("years of work")
    with pytest.raises(SystemExit, match="holds files the demo did not write"):
        pipeline.fresh_workdir(str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "thesis.tex").exists()
