"""The Spark source's read_committed plan beside a live owner, Kafka's way: the driver's
read-only view takes the last stable offset from the owner's latest producer snapshot and
the batch headers after it, and the aborted transactions from the .txnindex files before
that snapshot and from its own replay after it (the owner writes an entry just after its
marker: a plan made between the two must still drop the transaction)."""

from __future__ import annotations

import random
from pathlib import Path

import seglog
from seglog.spark.source import SeglogBatchReader, read_partition

from ..storage.txn_walk import Writer, committed_by_walk


def test_a_plan_beside_a_live_owner_drops_what_the_walk_drops(tmp_path) -> None:
    owner = seglog.open(str(tmp_path), background=False)
    try:
        owner.create_topic("txn", 1, {"segment.bytes": 400})
        log = owner.partition("txn", 0)
        writer, rng = Writer(log), random.Random(3)
        for _ in range(60):
            writer.step(rng)
        assert len(log.segments) > 3
        # as if the plan came between the owner's last marker and its entry
        Path(log.active_segment.txn_index_path).unlink(missing_ok=True)

        options = {"path": str(tmp_path), "subscribe": "txn", "kafka.isolation.level": "read_committed"}
        tasks = SeglogBatchReader({**options, "minPartitions": "3"}).partitions()
        with seglog.open(str(tmp_path), read_only=True) as readers:
            expected = committed_by_walk(readers.partition("txn", 0))
            assert tasks[-1].end == readers.partition("txn", 0).last_stable_offset
        values = [v for t in tasks for b in read_partition(t) for v in b.column("value").to_pylist()]
        assert values == [v for _, v in expected]
    finally:
        for partition_log in owner.logs():
            partition_log.close_without_flush()  # (its index went behind its back: no clean close)
        owner._closed = True
        for d in owner._dirs:
            d.unlock()
