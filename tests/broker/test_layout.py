"""A log dir written through the broker is what storage writes: the same files, byte for byte."""

from __future__ import annotations

import os
from pathlib import Path

from confluent_kafka import Producer

import seglog

from .conftest import PRODUCER

# small segments: lz4 makes the 3000 records about 50 KB (librdkafka compresses only once the broker
# serves FindCoordinator, its sign of a broker new enough for lz4)
CONFIG = {"log.segment.bytes": 16 * 1024, "log.index.interval.bytes": 512}
KAFKA_FILES = {".log", ".index", ".timeindex", ".snapshot"}


def _files(partition_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(partition_dir.iterdir()) if p.suffix in KAFKA_FILES}


def test_broker_dir_is_storage_dir(seglog_broker_factory, tmp_path) -> None:
    broker = seglog_broker_factory(str(tmp_path / "broker"), config=CONFIG)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **PRODUCER, "compression.type": "lz4"})
    for i in range(3000):
        producer.produce(
            "same", b"value %d " % i * 5, key=b"k%d" % (i % 7), partition=0, timestamp=1_700_000_000_000 + i
        )
        if i % 200 == 0:
            producer.flush(30)  # several requests, so several batches and segments
    assert producer.flush(30) == 0
    broker.stop()

    # the broker's batches appended again, one by one, through storage alone
    with seglog.open(str(tmp_path / "broker"), background=False, read_only=True) as logs:
        raw = [s.read() for s in _slices(logs.partition("same", 0))]
    with seglog.open(str(tmp_path / "storage"), CONFIG, background=False) as logs:
        logs.create_topic("same", 1)
        for batch in raw:
            logs.partition("same", 0).append_batches(batch)
    assert len(raw) > 10
    ours, theirs = _files(tmp_path / "broker" / "same-0"), _files(tmp_path / "storage" / "same-0")
    assert len(ours) > 3 and ours.keys() == theirs.keys()
    for name in ours:
        assert ours[name] == theirs[name], name
    # and nothing but Kafka's files in the partition dir
    names = set(os.listdir(tmp_path / "broker" / "same-0"))
    assert {n for n in names if Path(n).suffix not in KAFKA_FILES} == {"leader-epoch-checkpoint", "partition.metadata"}


def _slices(partition_log: seglog.PartitionLog) -> list:
    """Each batch's bytes as its own slice."""
    out, offset = [], partition_log.log_start_offset
    while offset < partition_log.log_end_offset:
        fetch = partition_log.read(offset, 1, upper_bound=partition_log.log_end_offset)
        assert fetch.slice is not None
        batch = next(iter(fetch.slice.batches()))
        out.append(type(fetch.slice)(fetch.slice.handle, fetch.slice.position, batch.size_in_bytes))
        offset = batch.last_offset + 1
    return out
