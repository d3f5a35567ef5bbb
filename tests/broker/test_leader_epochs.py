"""The leader epochs ListOffsets (v4+) and OffsetForLeaderEpoch answer with, as Kafka's
``Partition.fetchOffsetForTimestamp`` and ``LeaderEpochFileCache.endOffsetFor`` give them."""

from __future__ import annotations

import asyncio

import pytest

import seglog
from seglog.broker.apis import KafkaApis
from seglog.broker.metadata_cache import BrokerInfo
from seglog.broker.properties import broker_config
from seglog.broker.replica_manager import ReplicaManager
from seglog.protocol.message_data import ListOffsetsRequestData, OffsetForLeaderEpochRequestData

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


@pytest.fixture
def apis(tmp_path):
    """One broker over ``t-0``: offsets 0 and 1 written at leader epoch 2 (timestamps 1000 and
    9000, the largest), offset 2 at epoch 5 (timestamp 3000), the partition's epoch now."""
    with seglog.open(str(tmp_path)) as logs:
        logs.create_topic("t", partitions=1)
        log = logs.partition("t", 0)
        log.become_leader(2)
        log.append([seglog.Record(None, b"a", timestamp=1000), seglog.Record(None, b"b", timestamp=9000)])
        log.become_leader(5)
        log.append([seglog.Record(None, b"c", timestamp=3000)])
    config = broker_config({"log.dirs": str(tmp_path)})
    replicas = ReplicaManager(config, BrokerInfo(0, "127.0.0.1", 9092))
    yield KafkaApis(config, replicas, ("127.0.0.1", 9092))
    replicas.shutdown()


def _list_offsets(apis: KafkaApis, timestamp: int) -> tuple[int, int, int]:
    partition = ListOffsetsRequestData.ListOffsetsPartition(partition_index=0, timestamp=timestamp)
    body = ListOffsetsRequestData(
        replica_id=-1, topics=[ListOffsetsRequestData.ListOffsetsTopic(name="t", partitions=[partition])]
    )
    answer = asyncio.run(apis.list_offsets(7, body)).topics[0].partitions[0]
    assert answer.error_code == 0
    return answer.offset, answer.timestamp, answer.leader_epoch


def test_list_offsets_answers_the_epoch_of_the_batch_found(apis) -> None:
    """A timestamp's offset and the max timestamp's carry their batch's partitionLeaderEpoch; the
    earliest offset the first cached epoch (it starts at the log start); the latest the
    partition's current epoch."""
    assert _list_offsets(apis, 500) == (0, 1000, 2)
    assert _list_offsets(apis, 2000) == (1, 9000, 2)
    assert _list_offsets(apis, MAX_TIMESTAMP) == (1, 9000, 2)
    assert _list_offsets(apis, EARLIEST) == (0, -1, 2)
    assert _list_offsets(apis, LATEST) == (3, -1, 5)


@pytest.mark.parametrize(
    ("asked", "answer"),
    [
        (1, (1, 0)),  # below the first cached epoch: itself, ending where the first starts
        (2, (2, 2)),  # an older epoch ends where the next starts
        (3, (2, 2)),  # one never cached: the largest below it
        (5, (5, 3)),  # the latest ends at the log end
        (6, (-1, -1)),  # above the latest: unknown
        (-1, (-1, -1)),  # the undefined epoch
    ],
)
def test_offset_for_leader_epoch_answers_as_kafkas_epoch_cache(apis, asked, answer) -> None:
    partition = OffsetForLeaderEpochRequestData.OffsetForLeaderPartition(partition=0, leader_epoch=asked)
    body = OffsetForLeaderEpochRequestData(
        replica_id=-1, topics=[OffsetForLeaderEpochRequestData.OffsetForLeaderTopic(topic="t", partitions=[partition])]
    )
    part = asyncio.run(apis.offset_for_leader_epoch(4, body)).topics[0].partitions[0]
    assert (part.error_code, part.leader_epoch, part.end_offset) == (0, *answer)
