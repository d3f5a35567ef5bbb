"""Compacting partitions that real Kafka brokers wrote, against a brute-force latest-per-key.

The topics that Kafka itself compacts (``_schemas``, ``__consumer_offsets``, Kafka
Connect's ``connect-*``) are copied out of shared/kafka-data, turned compacted, rolled so
that their data leaves the active segment, and cleaned: what remains must be exactly the
latest record of each key (tombstones included), then, once delete.retention.ms has
passed, the same without the tombstones.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import seglog

DAY = 86_400_000
T = 1_900_000_000_000  # long after the data was written

CONSUMER_OFFSETS = tuple(f"__consumer_offsets-{p}" for p in (0, 9, 13, 29, 37))
SOURCES = {
    "cp7.6": (
        "rjmfernandes_flink-on-prem__cp7.6_kraft/data",
        ("__consumer_offsets-36", "_schemas-0", "connect-configs-0", "connect-status-1"),
    ),
    "cp5.1.2": (
        "mscaldas2012_kafka-connect-spooldir__cp5.1.2/kafka-data",
        (
            "_schemas-0",
            "docker-connect-configs-0",
            "docker-connect-offsets-0",
            "docker-connect-status-0",
            *CONSUMER_OFFSETS,
        ),
    ),
    "kafka0.10-magic1": ("xpxwo100_bullShit__kafka0.10_magic1/tmp/kafka-logs", ("__consumer_offsets-40",)),
}


def copy_writable(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    os.chmod(dst, 0o755)
    for root, dirs, _ in os.walk(dst):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)


def full(log) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in log.records()]


def latest_per_key(records: list[tuple], tombstones: bool) -> list[tuple]:
    last: dict[bytes, tuple] = {}
    for r in records:
        last[r[1]] = r
    return sorted(r for r in last.values() if tombstones or r[2] is not None)


@pytest.mark.parametrize("source", list(SOURCES))
def test_real_compacted_topics_clean_to_the_latest_per_key(kafka_data, tmp_path, source):
    path, partitions = SOURCES[source]
    root = kafka_data / "real_segments" / path
    for name in partitions:
        copy_writable(root / name, tmp_path / "logs" / name)
    clock = [T]
    with seglog.open(str(tmp_path / "logs"), clock=lambda: clock[0], background=False) as logs:
        for topic in logs.topics():
            logs.alter_topic_config(topic, {"cleanup.policy": "compact"})
        originals = {}
        for log in logs.logs():
            log.roll()  # the data leaves the active segment: it becomes cleanable
            originals[log.name] = full(log)
            assert originals[log.name], log.name
        stats = logs.clean(force=True)
        assert {(s.topic, s.partition) for s in stats} == {(log.topic, log.partition) for log in logs.logs()}
        assert sum(s.records_removed for s in stats) > 0
        for log in logs.logs():
            assert full(log) == latest_per_key(originals[log.name], tombstones=True), log.name
            for batch in log.batches():
                batch.validate()
        clock[0] += DAY  # delete.retention.ms (a day by default) after the first cleaning
        logs.clean(force=True)
        for log in logs.logs():
            assert full(log) == latest_per_key(originals[log.name], tombstones=False), log.name
            assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(log.dir))
    with seglog.open(str(tmp_path / "logs"), clock=lambda: clock[0], background=False) as logs:
        for log in logs.logs():
            assert full(log) == latest_per_key(originals[log.name], tombstones=False)
