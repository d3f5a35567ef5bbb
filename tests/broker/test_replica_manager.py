"""The replica manager over real log dirs: appends, reads (KIP-74), offsets, topics, and
fetches woken by appends."""

from __future__ import annotations

import asyncio
import os
import threading
import uuid

import pytest

from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import FetchRequestPartition, ListOffsetsPartition, ReplicaManager
from seglog.cluster.znodes import topic_uuid
from seglog.errors import InvalidPartitionsError
from seglog.records import Record
from seglog.records.batch import build_batch
from seglog.records.control import end_transaction_marker
from seglog.storage import _scan

from .test_replica_manager_replication import _state


def _manager(path: str, **config: object) -> ReplicaManager:
    return ReplicaManager(broker_config({"log.dirs": path, **config}), BrokerInfo(0, "127.0.0.1", 9092))


def _batch(n: int, size: int = 10) -> memoryview:
    return memoryview(bytearray(build_batch([Record(key=None, value=b"v" * size)] * n)))


def test_topics_appends_reads_and_ids(tmp_path) -> None:
    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        try:
            await rm.create_topic("t", 2, {"segment.bytes": "1048576"})
            meta = rm.metadata.topic("t")
            assert meta is not None and len(meta.partitions) == 2 and meta.topic_id != uuid.UUID(int=0)
            text = (tmp_path / "t-1" / "partition.metadata").read_text()
            assert topic_uuid(text.split("topic_id: ")[1].strip()) == meta.topic_id

            results = await rm.append_records({("t", 0): _batch(3), ("t", 1): _batch(2), ("nope", 0): _batch(1)})
            assert [results[("t", 0)].base_offset, results[("t", 1)].base_offset] == [0, 0]
            assert results[("nope", 0)].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
            second = await rm.append_records({("t", 0): _batch(1)})
            assert second[("t", 0)].base_offset == 3

            # max bytes 1: the first batch still comes whole (KIP-74), the next partition gets nothing
            reads = await rm.read(
                [FetchRequestPartition("t", 0, 0, 1_000_000), FetchRequestPartition("t", 1, 0, 1_000_000)], 1
            )
            assert reads[0].records is not None and reads[0].high_watermark == 4
            first = reads[0].records.batches()
            assert [b.base_offset for b in first] == [0]
            assert reads[1].records is None and reads[1].error_code == 0
            out_of_range = await rm.read([FetchRequestPartition("t", 0, 99, 100)], 100)
            assert out_of_range[0].error_code == 1 and out_of_range[0].high_watermark == 4

            offsets = await rm.list_offsets(
                [ListOffsetsPartition("t", 0, -2), ListOffsetsPartition("t", 0, -1), ListOffsetsPartition("t", 5, -1)]
            )
            assert [(o.error_code, o.offset) for o in offsets] == [(0, 0), (0, 4), (3, -1)]
            deleted = await rm.delete_records([("t", 0, 3), ("t", 0, 99)])
            assert deleted == [(0, 3), (1, -1)]

            await rm.create_partitions("t", 3)
            assert rm.metadata.partition_count("t") == 3
            with pytest.raises(InvalidPartitionsError):
                await rm.create_partitions("t", 3)
            await rm.delete_topic("t")
            assert rm.metadata.topic("t") is None and rm.metadata.topic_by_id(meta.topic_id) is None
        finally:
            rm.shutdown()

    asyncio.run(scenario())
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")


def test_a_read_committed_consumers_offsets_stop_at_the_last_stable_offset(tmp_path) -> None:
    """Kafka's fetchOffsetForTimestamp: a read_committed consumer's latest offset is the first of an
    open transaction, and a timestamp found only at or past it is not found; read_uncommitted sees
    up to the high watermark."""

    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        try:
            await rm.create_topic("t", 1, {})
            plain = build_batch([Record(key=None, value=b"plain", timestamp=1_000)])
            open_txn = build_batch(
                [Record(key=None, value=b"open", timestamp=2_000)] * 2,
                producer_id=7,
                producer_epoch=0,
                base_sequence=0,
                transactional=True,
            )
            for batch in (plain, open_txn):
                assert (await rm.append_records({("t", 0): memoryview(batch)}))[("t", 0)].error_code == 0
            lookups = [ListOffsetsPartition("t", 0, ts) for ts in (-1, 1_000, 2_000)]
            committed = await rm.list_offsets(lookups, read_committed=True)
            assert [(o.error_code, o.offset, o.timestamp) for o in committed] == [
                (0, 1, -1),
                (0, 0, 1_000),
                (0, -1, -1),
            ]
            uncommitted = await rm.list_offsets(lookups)
            assert [o.offset for o in uncommitted] == [3, 0, 1]
        finally:
            rm.shutdown()

    asyncio.run(scenario())


def test_topic_ids_survive_a_restart(tmp_path) -> None:
    async def create() -> uuid.UUID:
        rm = _manager(str(tmp_path))
        try:
            await rm.create_topic("kept", 1, {})
            meta = rm.metadata.topic("kept")
            assert meta is not None
            return meta.topic_id
        finally:
            rm.shutdown()

    first = asyncio.run(create())
    rm = _manager(str(tmp_path))
    try:
        again = rm.metadata.topic("kept")
        assert again is not None and again.topic_id == first
    finally:
        rm.shutdown()


def test_an_append_wakes_a_waiting_fetch(tmp_path) -> None:
    from seglog.broker.purgatory import DelayedOperation

    class Waiter(DelayedOperation[bool]):
        def try_complete(self, event: object) -> bool:
            return self.force_complete()

        def on_complete(self, expired: bool) -> bool:
            return expired

    async def scenario() -> bool:
        rm = _manager(str(tmp_path))
        try:
            await rm.create_topic("w", 1, {})
            waiting = asyncio.ensure_future(rm.fetch_purgatory.wait(Waiter(60_000), [("w", 0)]))
            await asyncio.sleep(0)
            await rm.append_records({("w", 0): _batch(1)})
            return await asyncio.wait_for(waiting, 30)
        finally:
            rm.shutdown()

    assert asyncio.run(scenario()) is False  # completed by the append, not expired


def test_small_appends_run_on_the_loop_and_fsyncs_never_do(tmp_path, monkeypatch) -> None:
    """A small append that cannot wait is written from the event loop's thread (no hop to
    an I/O thread); one followed by an fsync (flush.messages) goes to an I/O thread."""
    calls: list[tuple[str, str]] = []

    def ours(fd: int) -> bool:
        # only this test's files: a thread left by another test may write its own meanwhile
        return os.readlink(f"/proc/self/fd/{fd}").startswith(str(tmp_path))

    for name in ("pwrite", "fsync"):
        real = getattr(os, name)

        def record(*a, _n=name, _f=real):
            if ours(a[0]):
                calls.append((_n, threading.current_thread().name))
            return _f(*a)

        monkeypatch.setattr(os, name, record)

    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        try:
            await rm.create_topic("lazy", 1, {})
            await rm.create_topic("eager", 1, {"flush.messages": "1"})
            loop_thread = threading.current_thread().name
            calls.clear()
            results = await rm.append_records({("lazy", 0): _batch(3)})
            assert results[("lazy", 0)].base_offset == 0
            assert calls and {thread for _, thread in calls} == {loop_thread}
            calls.clear()
            results = await rm.append_records({("eager", 0): _batch(3)})
            assert results[("eager", 0)].base_offset == 0
            assert ("fsync", loop_thread) not in calls and any(name == "fsync" for name, _ in calls)
            assert all(thread.startswith("seglog-io") for _, thread in calls)
        finally:
            rm.shutdown()

    asyncio.run(scenario())


def test_markers_and_mid_sized_appends_run_on_the_loop(tmp_path, monkeypatch) -> None:
    """A transaction's marker is written from the event loop's thread (no hop to an I/O
    thread before the transaction can complete), unless an fsync follows it; so is a
    produce request of a transaction's 1,000 records of 100 bytes (~113 KiB), while one
    over INLINE_APPEND_BYTES goes to an I/O thread."""
    threads: list[str] = []
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda *a: threads.append(threading.current_thread().name) or real(*a))
    one_call = _scan.append_batch  # a producer's usual batch is written there, in C

    def appending(*args: object) -> object:
        done = one_call(*args)
        if isinstance(done, tuple):  # (written; None: the general path writes it, through os.pwrite)
            threads.append(threading.current_thread().name)
        return done

    monkeypatch.setattr(_scan, "append_batch", appending)

    def marker(producer_id: int) -> memoryview:
        records = [end_transaction_marker(True)]
        return memoryview(build_batch(records, producer_id=producer_id, producer_epoch=0, control=True))

    def transactional(producer_id: int) -> memoryview:
        records = [Record(key=None, value=b"v")]
        batch = build_batch(records, producer_id=producer_id, producer_epoch=0, base_sequence=0, transactional=True)
        return memoryview(batch)

    async def scenario() -> None:
        rm = _manager(str(tmp_path))
        try:
            await rm.create_topic("lazy", 1, {})
            await rm.create_topic("eager", 1, {"flush.messages": "1"})
            loop_thread = threading.current_thread().name
            for tp in (("lazy", 0), ("eager", 0)):
                assert (await rm.append_records({tp: transactional(7)}))[tp].error_code == 0
            threads.clear()
            results = await rm.append_records({("lazy", 0): marker(7)}, acks=-1, origin="coordinator")
            assert results[("lazy", 0)].base_offset == 1 and threads == [loop_thread]
            threads.clear()
            results = await rm.append_records({("eager", 0): marker(7)}, acks=-1, origin="coordinator")
            assert results[("eager", 0)].base_offset == 1
            assert threads and all(thread.startswith("seglog-io") for thread in threads)
            threads.clear()
            # at once, or None: refused (an error is told by append_records), or it would wait
            assert rm.try_append_inline(("lazy", 0), _batch(1), origin="coordinator").base_offset == 2
            assert rm.try_append_inline(("gone", 0), _batch(1)) is None
            assert rm.try_append_inline(("eager", 0), _batch(1)) is None
            assert threads == [loop_thread]
            threads.clear()
            assert (await rm.append_records({("lazy", 0): _batch(1000, 100)}))[("lazy", 0)].error_code == 0
            assert threads == [loop_thread]
            threads.clear()
            assert (await rm.append_records({("lazy", 0): _batch(3000, 100)}))[("lazy", 0)].error_code == 0
            assert threads and all(thread.startswith("seglog-io") for thread in threads)
        finally:
            rm.shutdown()

    asyncio.run(scenario())


def test_an_inline_append_at_acks_all_waits_for_other_replicas(tmp_path) -> None:
    """A coordinator's acks=all record is written at once only where this broker is the
    whole ISR (the high watermark passes it in the append); with a follower in the ISR
    nothing is written inline, and the caller's ``append_records`` waits for it."""
    config = {"broker.id": 0, "zookeeper.connect": "127.0.0.1:1"}  # a cluster's broker, no controller

    async def scenario() -> None:
        rm = _manager(str(tmp_path), **config)
        try:
            ids = {"c": uuid.uuid4()}
            assert rm.become_leader_or_follower(9, 1, [_state("c", 0, 1, [0, 1], [0, 1])], ids) == {("c", 0): 0}
            assert rm.try_append_inline(("c", 0), _batch(1), acks=-1) is None
            assert rm.try_append_inline(("c", 0), _batch(1)).base_offset == 0  # acks=1 waits for nobody
            assert rm.become_leader_or_follower(9, 1, [_state("c", 0, 2, [0], [0, 1])], ids) == {("c", 0): 0}
            assert rm.try_append_inline(("c", 0), _batch(1), acks=-1).base_offset == 1
            assert rm.partition("c", 0).high_watermark == 2
        finally:
            rm.shutdown()

    asyncio.run(scenario())
