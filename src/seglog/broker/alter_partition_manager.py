"""A leader's ISR changes sent to the controller: Kafka's ``AlterPartitionManager`` (KIP-497).

A leader that finds a follower fallen behind (or caught up again) proposes the new ISR with
the leader epoch and partition epoch it was made from; the controller checks both, writes
the partition's state znode and answers the ISR written with its new partition epoch, which
only then counts (``Partition.commit_isr``). The controller stays the one writer of
partition state, as in Kafka 2.7+; leaders never write ``/isr_change_notification``.

``AlterPartitionChannel`` is how a change reaches the controller; ``WireAlterPartitionChannel``
sends AlterPartition on a ``seglog.client.AsyncConnection`` to the controller's endpoint, and a
test may put any other channel in its place to receive the changes itself.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..client import PLAINTEXT, AsyncConnection, ClientSecurity
from ..common import ZERO_UUID
from ..errors import BrokerNotAvailableError, InvalidResponseError, NotControllerError
from ..protocol import ApiKey
from ..protocol.message_data import AlterPartitionRequestData, AlterPartitionResponseData

log = logging.getLogger(__name__)

MAX_VERSION = 3


@dataclass(frozen=True)
class IsrChange:
    topic: str
    topic_id: uuid.UUID
    partition: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True)
class IsrChangeResult:
    """The controller's answer: an error code, or the state it wrote."""

    error_code: int
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


class AlterPartitionChannel(Protocol):
    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange) -> IsrChangeResult: ...


class WireAlterPartitionChannel:
    """AlterPartition over the wire to the controller that ``controller()`` names (id, host,
    port), or NOT_CONTROLLER when none is known."""

    def __init__(
        self,
        controller: Callable[[], tuple[int, str, int] | None],
        timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self._controller = controller
        self._timeout_s = timeout_s
        self._security = security
        self._connection: tuple[tuple[int, str, int], AsyncConnection] | None = None

    async def alter_partition(self, broker_id: int, broker_epoch: int, change: IsrChange) -> IsrChangeResult:
        node = self._controller()
        if node is None:
            return IsrChangeResult(NotControllerError.error_code)
        if self._connection is None or self._connection[0] != node:
            self.close()
            self._connection = (
                node,
                AsyncConnection(
                    node[1], node[2], f"broker-{broker_id}-alter-partition", self._timeout_s, self._security
                ),
            )
        connection = self._connection[1]
        by_id = change.topic_id != ZERO_UUID
        partition = AlterPartitionRequestData.PartitionData(
            partition_index=change.partition,
            leader_epoch=change.leader_epoch,
            new_isr=list(change.new_isr),
            new_isr_with_epochs=[AlterPartitionRequestData.BrokerState(broker_id=b) for b in change.new_isr],
            partition_epoch=change.partition_epoch,
        )
        body = AlterPartitionRequestData(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            topics=[
                AlterPartitionRequestData.TopicData(
                    topic_name=change.topic, topic_id=change.topic_id, partitions=[partition]
                )
            ],
        )
        try:
            # v2 names topics by id: a topic without one (made before topic ids) goes by name, at v1
            answer = await connection.request(ApiKey.ALTER_PARTITION, body, MAX_VERSION if by_id else 1)
        except (BrokerNotAvailableError, InvalidResponseError) as e:
            log.warning("AlterPartition of %s-%d failed: %s", change.topic, change.partition, e)
            return IsrChangeResult(e.error_code)
        return _result(answer.body)

    def close(self) -> None:
        if self._connection is not None:
            self._connection[1].close()
            self._connection = None


def _result(response: AlterPartitionResponseData) -> IsrChangeResult:
    if response.error_code:
        return IsrChangeResult(response.error_code)
    for topic in response.topics:
        for p in topic.partitions:
            return IsrChangeResult(p.error_code, p.leader_id, p.leader_epoch, tuple(p.isr), p.partition_epoch)
    return IsrChangeResult(BrokerNotAvailableError.error_code)
