"""An acks=all produce whose partition is stopped while its append runs in an I/O thread (a
reassignment's StopReplica reaching the old leader between its append and its wait for the
ISR): it is NOT_LEADER_OR_FOLLOWER, never acknowledged. Found by
tests/cluster/test_reassignment_load.py under load: the old leader acknowledged a batch no
follower had, and the new leader wrote other records at its offsets."""

from __future__ import annotations

import asyncio
import uuid

from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import INLINE_APPEND_BYTES, ReplicaManager
from seglog.protocol import ErrorCode
from seglog.records import Record
from seglog.records.batch import build_batch

from .test_replica_manager_replication import _state


def test_a_partition_stopped_during_an_acks_all_append_is_not_acknowledged(tmp_path) -> None:
    config = broker_config({"log.dirs": str(tmp_path), "broker.id": 0, "zookeeper.connect": "127.0.0.1:1"})

    async def run() -> None:
        rm = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
        await rm.startup()
        try:
            assert rm.become_leader_or_follower(1, 1, [_state("t", 0, 1, [0, 1], [0, 1])], {"t": uuid.uuid4()}) == {
                ("t", 0): 0
            }
            append_all = rm._append_all

            def append_then_stop(*args: object) -> object:  # StopReplica lands as the append ends
                done = append_all(*args)  # type: ignore[arg-type]
                rm.stop_replicas(1, 1, [("t", 0, False, 1)])
                return done

            rm._append_all = append_then_stop  # type: ignore[method-assign]
            value = b"v" * 1024
            batch = memoryview(bytearray(build_batch([Record(key=None, value=value)] * 300)))
            assert len(batch) > INLINE_APPEND_BYTES  # appended in an I/O thread
            results = await rm.append_records({("t", 0): batch}, acks=-1, timeout_ms=2000)
            assert results[("t", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        finally:
            await rm.stop_replication()
            rm.shutdown()

    asyncio.run(run())
