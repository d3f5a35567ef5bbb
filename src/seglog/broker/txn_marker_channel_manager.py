"""Transaction markers sent to the partitions' leaders (Kafka's ``TransactionMarkerChannelManager``
and ``TransactionMarkerRequestCompletionHandler``).

A transaction ends (EndTxn, a timeout's abort, a coordinator taking over a transaction it found
prepared) only once its COMMIT or ABORT marker is in every partition of it. ``send`` looks each
partition's leader up in the metadata cache, groups the partitions by leader and writes them
all at once: to a partition this broker leads through the function that serves WriteTxnMarkers
here (no hop through a socket), to another broker's through that broker's queue. As Kafka's
``TxnMarkerQueue`` and its sender thread's ``drainQueuedTransactionMarkers``, each destination
broker has one queue and one request in flight on its connection (Kafka's marker channel
allows one per connection): the markers queued meanwhile, of every transaction, are drained
into the next WriteTxnMarkers request (API key 27) together, one entry per transaction, and
each transaction gets its own entry's answer (matched by producer id, as Kafka's completion
handler does). Both ways answer an error code per partition, acted on alike:

| answer                                                        | then                          |
|---------------------------------------------------------------|-------------------------------|
| NONE                                                          | done                          |
| NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,           | leader looked up again, sent  |
| NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,        | again after a back-off        |
| KAFKA_STORAGE_ERROR; the broker unreachable; no leader known  |                               |
| the partition gone from the metadata cache                    | done: its topic was deleted   |
| UNSUPPORTED_FOR_MESSAGE_FORMAT, UNSUPPORTED_VERSION           | done: it cannot hold a marker |
| INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED        | sending abandoned: the        |
|                                                               | producer or coordinator moved |
| anything else (Kafka throws IllegalStateException)            | logged, sending abandoned     |

Before each round the caller's ``still_current`` is asked whether the transaction is still
this coordinator's at the marker's coordinator epoch (Kafka's check of the transaction state
before it handles a response): once it is not, sending stops. ``send`` answers True only when
every partition is done, the moment the coordinator may log CompleteCommit / CompleteAbort.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from ..client import PLAINTEXT, AsyncConnection, ClientSecurity
from ..common import TopicPartition
from ..coordinator.transaction_coordinator import WriteTxnMarkers
from ..errors import BrokerNotAvailableError, InvalidResponseError
from ..protocol import ApiKey, ErrorCode
from ..protocol.message_data import WriteTxnMarkersRequestData, WriteTxnMarkersResponseData
from .metadata_cache import MetadataCache

log = logging.getLogger(__name__)

# a marker's partitions appended where this broker leads them: an error code per partition
LocalWrite = Callable[[WriteTxnMarkers, list[TopicPartition]], Awaitable[dict[TopicPartition, int]]]

_E = ErrorCode
RETRIABLE = frozenset(
    {
        _E.UNKNOWN_TOPIC_OR_PARTITION,
        _E.NOT_LEADER_OR_FOLLOWER,
        _E.NOT_ENOUGH_REPLICAS,
        _E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        _E.REQUEST_TIMED_OUT,
        _E.KAFKA_STORAGE_ERROR,
    }
)
# the partition will never take the marker, and needs none: its producer could not write to it
SKIPPED = frozenset({_E.UNSUPPORTED_FOR_MESSAGE_FORMAT, _E.UNSUPPORTED_VERSION})
FENCED = frozenset({_E.INVALID_PRODUCER_EPOCH, _E.TRANSACTION_COORDINATOR_FENCED})
NO_LEADER = -1  # a broker id no request can go to: the partition's leader is not known
RETRY_BACKOFF_S = 0.1


@dataclass
class QueuedMarker:
    """One transaction's marker for the partitions a broker leads, waiting in its queue (Kafka's
    ``TxnIdAndMarkerEntry``): ``answer`` gets an error code per partition."""

    marker: WriteTxnMarkers
    partitions: list[TopicPartition]
    answer: asyncio.Future[dict[TopicPartition, int]]


@dataclass
class BrokerQueue:
    """The markers for one broker not yet sent, and the task sending them (one request at a time)."""

    queued: list[QueuedMarker] = field(default_factory=list)
    in_flight: list[QueuedMarker] = field(default_factory=list)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    sender: asyncio.Task[None] | None = None


def markers_body(entries: Iterable[tuple[WriteTxnMarkers, Iterable[TopicPartition]]]) -> WriteTxnMarkersRequestData:
    """A WriteTxnMarkers request carrying each marker for its partitions."""
    markers = []
    for marker, partitions in entries:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(partitions):
            by_topic.setdefault(topic, []).append(index)
        markers.append(
            WriteTxnMarkersRequestData.WritableTxnMarker(
                producer_id=marker.producer_id,
                producer_epoch=marker.producer_epoch,
                transaction_result=marker.committed,
                topics=[
                    WriteTxnMarkersRequestData.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()
                ],
                coordinator_epoch=marker.coordinator_epoch,
            )
        )
    return WriteTxnMarkersRequestData(markers=markers)


def partition_errors(
    response: WriteTxnMarkersResponseData, producer_id: int, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """A WriteTxnMarkers response's error code for each of ``partitions`` it answers for
    ``producer_id``'s marker."""
    wanted = set(partitions)
    return {
        TopicPartition(topic.name, p.partition_index): p.error_code
        for marker in response.markers
        if marker.producer_id == producer_id
        for topic in marker.topics
        for p in topic.partitions
        if (topic.name, p.partition_index) in wanted
    }


class TransactionMarkerChannelManager:
    """The markers of the transactions this broker coordinates, on their way to the leaders."""

    def __init__(
        self,
        metadata: MetadataCache,
        broker_id: int,
        write_locally: LocalWrite,
        *,
        timeout_s: float,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.security = security  # the markers' connections' (the inter-broker listener's TLS, SASL)
        self.metadata = metadata
        self.broker_id = broker_id
        self.write_locally = write_locally
        self.timeout_s = timeout_s
        self._connections: dict[int, AsyncConnection] = {}
        self._queues: dict[int, BrokerQueue] = {}
        self._closed = False

    async def send(self, marker: WriteTxnMarkers, still_current: Callable[[], bool]) -> bool:
        """Write ``marker`` to every partition's leader until each is done (see the table above);
        True once they all are and the transaction is still ``still_current()``."""
        pending = set(marker.partitions)
        while pending:
            if self._closed or not still_current():
                return False
            by_leader = self._leaders(marker, pending)
            answers = await asyncio.gather(*(self._write(b, marker, tps) for b, tps in by_leader.items()))
            for errors in answers:
                for tp, code in errors.items():
                    if code == _E.NONE or code in SKIPPED:
                        pending.discard(tp)
                    elif code not in RETRIABLE:
                        # fenced: a newer producer epoch or coordinator has taken the transaction over
                        level = logging.INFO if code in FENCED else logging.WARNING
                        log.log(
                            level,
                            "marker of %r refused by %s-%d (error %d): abandoned",
                            marker.transactional_id,
                            *tp,
                            code,
                        )
                        return False
            if pending:
                await asyncio.sleep(RETRY_BACKOFF_S)
        return not self._closed and still_current()

    def _leaders(self, marker: WriteTxnMarkers, pending: set[TopicPartition]) -> dict[int, list[TopicPartition]]:
        """The pending partitions by their leader now; those gone from the cache leave ``pending``."""
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in list(pending):
            topic = self.metadata.topic(tp[0])
            state = next((p for p in topic.partitions if p.partition == tp[1]), None) if topic else None
            if state is None:  # as Kafka: no leader endpoint at all, the partition is likely deleted
                log.info("%s-%d is gone: transaction marker of %r not needed", *tp, marker.transactional_id)
                pending.discard(tp)
                continue
            by_leader.setdefault(state.leader, []).append(tp)
        return by_leader

    async def _write(
        self, leader: int, marker: WriteTxnMarkers, partitions: list[TopicPartition]
    ) -> dict[TopicPartition, int]:
        if leader == self.broker_id:
            return await self.write_locally(marker, partitions)
        if self._closed:
            return _retry(partitions)
        queue = self._queues.setdefault(leader, BrokerQueue())
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[TopicPartition, int]] = loop.create_future()
        queue.queued.append(QueuedMarker(marker, partitions, answer))
        queue.ready.set()
        if queue.sender is None:
            queue.sender = loop.create_task(self._drain(leader, queue))
        return await answer

    async def _drain(self, broker_id: int, queue: BrokerQueue) -> None:
        """Kafka's ``drainQueuedTransactionMarkers`` for one broker: whatever is queued goes in one
        request, the next once it is answered. Ended by ``close`` (or a failure): every marker
        still waiting is answered as to be sent again, and ``send`` then sees the channel closed."""
        try:
            while not self._closed:
                await queue.ready.wait()
                queue.ready.clear()
                # a marker whose ``send`` was cancelled meanwhile goes no further
                queue.in_flight = [q for q in queue.queued if not q.answer.done()]
                queue.queued = []
                if not queue.in_flight:
                    continue
                answers = await self._send_request(broker_id, queue.in_flight)
                for entry, errors in zip(queue.in_flight, answers, strict=True):
                    if not entry.answer.done():
                        entry.answer.set_result(errors)
                queue.in_flight = []
        except Exception:  # a bug: the markers waiting are sent again through a new sender
            log.exception("transaction markers to broker %d: the sender failed", broker_id)
        finally:
            for entry in [*queue.in_flight, *queue.queued]:
                if not entry.answer.done():
                    entry.answer.set_result(_retry(entry.partitions))
            queue.in_flight, queue.queued, queue.sender = [], [], None

    async def _send_request(self, broker_id: int, entries: list[QueuedMarker]) -> list[dict[TopicPartition, int]]:
        """One WriteTxnMarkers request of every entry's marker: each entry's error codes (a
        partition the answer leaves out is sent again)."""
        retries = [_retry(entry.partitions) for entry in entries]
        connection = self._connection(broker_id)
        if connection is None:  # no leader, or one not (yet) known to this broker
            return retries
        body = markers_body((entry.marker, entry.partitions) for entry in entries)
        try:
            answer = await connection.request(ApiKey.WRITE_TXN_MARKERS, body)
        except (BrokerNotAvailableError, InvalidResponseError) as e:  # the connection is closed: connect again
            log.info("transaction markers to broker %d: %s; retrying", broker_id, e)
            return retries
        return [
            {**retry, **partition_errors(answer.body, entry.marker.producer_id, entry.partitions)}
            for entry, retry in zip(entries, retries, strict=True)
        ]

    def _connection(self, broker_id: int) -> AsyncConnection | None:
        broker = self.metadata.broker(broker_id) if broker_id != NO_LEADER else None
        if broker is None or broker.port < 0:
            return None
        found = self._connections.get(broker_id)
        if found is None or (found.host, found.port) != (broker.host, broker.port):
            if found is not None:
                found.close()
            found = AsyncConnection(
                broker.host, broker.port, f"seglog-txn-markers-{self.broker_id}", self.timeout_s, self.security
            )
            self._connections[broker_id] = found
        return found

    def close(self) -> None:
        self._closed = True
        for queue in self._queues.values():
            if queue.sender is not None:
                queue.sender.cancel()
        self._queues.clear()
        for connection in self._connections.values():
            connection.close()
        self._connections.clear()


def _retry(partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """Every partition answered as one whose leader must be looked up again."""
    return dict.fromkeys(partitions, int(_E.NOT_LEADER_OR_FOLLOWER))
