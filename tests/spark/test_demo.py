"""The demo pipeline (make demo) at a small scale, in the test session's Spark."""

from __future__ import annotations

import re

import pytest

import seglog
from seglog.demo import pipeline


def test_the_pipeline_runs_and_gives_the_same_result_again(spark, tmp_path, capfd):
    digests = [pipeline.run(spark, str(tmp_path / f"run{i}"), minutes=10, rate=15.0) for i in range(2)]
    out, err = capfd.readouterr()  # the file descriptors': librdkafka logs from C
    # its clients are gone before the embedded broker stops: no "Disconnected" or "Connection
    # refused" lines in the middle of the demo's progress
    assert "rdkafka#" not in out + err
    assert digests[0] == digests[1]  # a fixed seed: the same table every run
    assert "no duplicates" in out and ": consistent" in out
    assert out.count("Page views and error rates per minute") == 2 and out.count("Top paths") == 2
    assert re.search(r"access_log \(per partition: (\d[\d,]*(, )?){6}\)", out)  # 6 partitions, each written
    with seglog.open(str(tmp_path / "run0" / "logs"), read_only=True) as logs:
        assert len(logs.partitions(pipeline.ACCESS_LOG)) == 6
        assert "compact" in logs.topic_config(pipeline.PAGEVIEWS).cleanup_policy
        keys = [
            r.key for p in logs.partitions(pipeline.PAGEVIEWS) for r in logs.partition(pipeline.PAGEVIEWS, p).records()
        ]
        assert len(keys) == len(set(keys)) > 0
        assert all(re.fullmatch(rb"2026-11-22T10:\d\d\|/\S*", k) for k in keys)  # minute and path
    table = spark.read.parquet(str(tmp_path / "run0" / "pageviews.parquet"))
    assert table.count() == len(keys)
    assert {r.minute for r in table.select("minute").distinct().collect()} == {
        f"2026-11-22T10:{m:02d}" for m in range(10)
    }


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
