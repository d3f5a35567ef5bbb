"""Where a client's requests go in a cluster, as Kafka's Admin, consumer and producer clients
send them: a partition's request to its leader (from Metadata), a group's or a transactional id's to
its coordinator (FindCoordinator), a broker's configs to that broker, the rest to the bootstrap
broker. Answers that say the leader or coordinator moved, is loading or is not known there yet
(NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) and a leader that cannot be reached are
retried with fresh Metadata until the client's timeout; a partition whose leader stays unavailable
then ends with its last error, naming it. A partition that fresh Metadata does not know at all is
not retried: it is UNKNOWN_TOPIC_OR_PARTITION at once.

The consumer's two reads are here too, as Kafka's consumer sends them: ``list_offsets`` (ListOffsets:
earliest, latest, or the first offset at a timestamp) and ``fetch`` (a sessionless Fetch of one
partition, its record bytes kept as the bytes the leader sent, with the high watermark, the last
stable offset and the aborted transactions that came with them)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple, Protocol, TypeVar

from ..common import ZERO_UUID, TopicPartition
from ..errors import ApiError, BrokerNotAvailableError, ErrorCode, OffsetOutOfRangeError, error_for, error_name
from ..protocol import ApiKey, Message
from ..protocol.message_data import (
    FetchRequestData,
    FetchResponseData,
    FindCoordinatorRequestData,
    FindCoordinatorResponseData,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    MetadataRequestData,
    MetadataResponseData,
)
from .connection import BlockingConnection, parse_address
from .security import PLAINTEXT, ClientSecurity

RETRIABLE_LEADER = frozenset(
    {
        int(ErrorCode.NOT_LEADER_OR_FOLLOWER),
        int(ErrorCode.LEADER_NOT_AVAILABLE),
        # a leader that has not heard of the partition yet (just created, or just moved to it)
        int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        # ListOffsets at a leader just elected that does not know its high watermark yet
        int(ErrorCode.OFFSET_NOT_AVAILABLE),
    }
)
RETRIABLE_COORDINATOR = frozenset(
    {
        int(ErrorCode.NOT_COORDINATOR),
        int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS),
        int(ErrorCode.COORDINATOR_NOT_AVAILABLE),
    }
)
RETRY_BACKOFF_S = 0.1  # Kafka's retry.backoff.ms
MetadataTopic = MetadataResponseData.MetadataResponseTopic
T = TypeVar("T")

# ListOffsets' timestamps that ask for the log start offset and for the end (Kafka's ListOffsetsRequest)
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
# the consumer's isolation levels, as Fetch and ListOffsets carry them (Kafka's IsolationLevel)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
# a consumer's requests name no replica (Kafka's FetchRequest.CONSUMER_REPLICA_ID)
CONSUMER_REPLICA_ID = -1
FETCH_MAX_BYTES = 50 * 1024 * 1024  # Kafka's fetch.max.bytes
MAX_PARTITION_FETCH_BYTES = 1024 * 1024  # Kafka's max.partition.fetch.bytes


class PartitionAnswer(Protocol):
    """A leader's answer for one partition of a request (Produce, Fetch, ListOffsets ...)."""

    @property
    def error_code(self) -> int: ...


A = TypeVar("A", bound=PartitionAnswer)


class Unanswered(NamedTuple):
    """A partition no leader answered for: it has none now, it could not be reached, or it moved
    until the timeout. ``error_code`` is the last error, ``why`` says what happened."""

    error_code: int
    why: str


class ListedOffset(NamedTuple):
    """A leader's answer to ListOffsets for one partition: -1 and -1 when no record matched."""

    offset: int
    timestamp: int


@dataclass(frozen=True)
class FetchedPartition:
    """One partition's share of a Fetch answer. ``records``: the batches as the leader sent them
    (the first may start below the offset asked, the last may be cut short), a view of the answer's
    own buffer (received into once, never reused: no copy is made of a fetch's megabytes);
    ``aborted_transactions``: with read_committed, the aborted transactions among them as
    (producer id, first offset)."""

    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[tuple[int, int], ...]


class RetriableError(ApiError):
    """An answer to retry after fresh Metadata (a leader or coordinator that moved or loads)."""

    def __init__(self, code: int, what: str) -> None:
        super().__init__(ErrorCode(code), f"{what}: {error_name(code)}")


def check(code: int, what: str, message: str | None = None) -> None:
    """Nothing for an answer without error; else the error of ``code`` (``error_for``): ``what``
    failed, with the broker's ``message`` when it gave one."""
    if code:
        raise error_for(code, message, what)


def check_coordinator(code: int, what: str, message: str | None = None) -> None:
    """``check`` for a coordinator's answer: a RetriableError while it moves or loads."""
    if code in RETRIABLE_COORDINATOR:
        raise RetriableError(code, what)
    check(code, what, message)


def check_partition(answer: A | Unanswered, what: str) -> A:
    """A partition's answer from ``to_leaders``, raised as ``check`` does when it is an error."""
    if isinstance(answer, Unanswered):
        raise error_for(answer.error_code, f"{error_name(answer.error_code)}: {answer.why}", what)
    # Produce's answers carry the leader's message; Fetch's, ListOffsets' and DeleteRecords' only a code
    check(answer.error_code, what, getattr(answer, "error_message", None))
    return answer


def metadata(connection: BlockingConnection, topics: list[str] | None) -> MetadataResponseData:
    """Metadata of ``topics`` asked by name (None: every topic; []: only the brokers and the
    controller), as Kafka's Admin asks: no topic is created by asking."""
    request = MetadataRequestData(
        topics=None if topics is None else [MetadataRequestData.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    answer: MetadataResponseData = connection.request(ApiKey.METADATA, request)
    return answer


def topics_by_name(answer: MetadataResponseData) -> dict[str, MetadataTopic]:
    """A Metadata answer's topics by name. A topic asked by name is answered with its name (a null
    name answers a topic id, which the tools never ask by)."""
    return {t.name: t for t in answer.topics if t.name is not None}


class ClusterClient:
    """Connections to the brokers of one cluster, opened as requests need them."""

    def __init__(
        self,
        bootstrap: str,
        timeout: float,
        answer_margin: float = 0.0,
        *,
        client_id: str = "seglog",
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        """``bootstrap``: ``host:port[,host:port...]``, tried in turn until one answers;
        ``timeout``: for the whole command's retries; a socket waits ``answer_margin`` longer
        (for requests whose broker answers at their own timeout_ms)."""
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.client_id = client_id
        self.security = security  # every connection's: TLS, SASL
        self._socket_timeout = timeout + answer_margin
        self._servers = bootstrap
        self.bootstrap = self._connect_bootstrap(bootstrap)
        self._brokers: dict[int, BlockingConnection] = {}
        self._metadata: MetadataResponseData | None = None
        self._topics_known: set[str] = set()
        self._leader_of: dict[TopicPartition, int] = {}
        self._topic_ids: dict[str, uuid.UUID] = {}

    def _connect_bootstrap(self, servers: str) -> BlockingConnection:
        """A connection to the first of ``servers`` that answers; the last one's error else."""
        addresses = [a for a in servers.split(",") if a.strip()]
        if not addresses:
            raise BrokerNotAvailableError(f"no bootstrap server in {servers!r}")
        for i, address in enumerate(addresses):
            host, port = parse_address(address)
            try:
                return self._open(host, port)
            except BrokerNotAvailableError:
                if i == len(addresses) - 1:
                    raise
        raise AssertionError("unreachable: the last address raises")

    def _open(self, host: str, port: int) -> BlockingConnection:
        return BlockingConnection(host, port, self.client_id, timeout=self._socket_timeout, security=self.security)

    def renew_deadline(self) -> None:
        """Retries from now on go on for ``timeout`` again (a long-lived client's next request)."""
        self.deadline = time.monotonic() + self.timeout

    # --- the bootstrap broker and Metadata -------------------------------------------------------

    def request(self, api_key: ApiKey, body: Message, version: int | None = None) -> Any:
        """A request any broker serves (Metadata, topic configs, and topic admin, which a seglog
        broker writes to ZooKeeper itself): to the bootstrap one. The answer is the API's response
        data class (``CreateTopicsResponseData`` ...), as ``BlockingConnection.request`` gives it."""
        return self.bootstrap.request(api_key, body, version)

    def version_for(self, api_key: ApiKey) -> int:
        return self.bootstrap.version_for(api_key)

    def metadata(self, topics: list[str] | None) -> MetadataResponseData:
        """Metadata from the bootstrap connection; when its broker went away, from another
        (``_reconnect``), as Kafka's clients ask any node they know."""
        try:
            return metadata(self.bootstrap, topics)
        except BrokerNotAvailableError:
            self.bootstrap.close()
            self.bootstrap = self._reconnect()
            return metadata(self.bootstrap, topics)

    def _reconnect(self) -> BlockingConnection:
        """A connection to the first broker that answers, of the bootstrap servers and the brokers
        the last Metadata named, tried in turn until the timeout; the last error after it."""
        known = [f"{b.host}:{b.port}" for b in self._metadata.brokers] if self._metadata is not None else []
        candidates = list(dict.fromkeys([a.strip() for a in self._servers.split(",") if a.strip()] + known))
        while True:
            for address in candidates:
                host, port = parse_address(address)
                try:
                    return self._open(host, port)
                except BrokerNotAvailableError:
                    if time.monotonic() + RETRY_BACKOFF_S > self.deadline:
                        raise
            time.sleep(RETRY_BACKOFF_S)

    def node_ids(self) -> list[int]:
        """The live brokers' ids."""
        return sorted(b.node_id for b in self.metadata([]).brokers)

    def _leaders(self, topics: list[str], fresh: bool) -> dict[TopicPartition, int]:
        """Each known partition's leader (-1: none now), from a fresh Metadata of ``topics`` unless
        the last one had them all and ``fresh`` is not asked."""
        if fresh or not set(topics) <= self._topics_known:
            self._metadata = self.metadata(topics)
            known = {name: t for name, t in topics_by_name(self._metadata).items() if not t.error_code}
            self._topics_known = set(known)
            self._topic_ids.update((name, t.topic_id) for name, t in known.items())
            self._leader_of = {
                TopicPartition(name, p.partition_index): p.leader_id if not p.error_code else -1
                for name, t in known.items()
                for p in t.partitions
            }
        return self._leader_of

    # --- connections ---------------------------------------------------------------------------------

    def broker(self, node_id: int) -> BlockingConnection:
        """A connection to broker ``node_id`` (the bootstrap one's Metadata tells where it is)."""
        if node_id in self._brokers:
            return self._brokers[node_id]
        brokers = (self._metadata or self.metadata([])).brokers
        found = next((b for b in brokers if b.node_id == node_id), None)
        if found is None:
            found = next((b for b in self.metadata([]).brokers if b.node_id == node_id), None)
        if found is None:
            raise BrokerNotAvailableError(f"broker {node_id} is not among the live brokers of the cluster")
        self._brokers[node_id] = self._open(found.host, found.port)
        return self._brokers[node_id]

    def _forget(self, node_id: int) -> None:
        client = self._brokers.pop(node_id, None)
        if client is not None:
            client.close()

    def coordinator(self, key: str, key_type: int) -> tuple[int, BlockingConnection]:
        """The coordinator of a group (key type 0) or transactional id (1): its id and a connection."""
        version = self.version_for(ApiKey.FIND_COORDINATOR)
        request = FindCoordinatorRequestData(key=key, key_type=key_type, coordinator_keys=[key])
        answer: FindCoordinatorResponseData = self.bootstrap.request(ApiKey.FIND_COORDINATOR, request, version)
        # version 4 batches the keys (KIP-699): one coordinator per key, the same fields as before
        found: FindCoordinatorResponseData | FindCoordinatorResponseData.Coordinator = (
            answer.coordinators[0] if version >= 4 else answer
        )
        what = f"cannot find the {'transaction' if key_type else 'group'} coordinator of {key}"
        check_coordinator(found.error_code, what, found.error_message)
        node = found.node_id
        if node not in self._brokers:
            self._brokers[node] = self._open(found.host, found.port)
        return node, self._brokers[node]

    # --- retries -------------------------------------------------------------------------------------

    def retrying(self, attempt: Callable[[], T]) -> T:
        """``attempt()`` again while it raises a RetriableError (a moved or loading coordinator),
        until the timeout; connections are opened anew for each try."""
        while True:
            try:
                return attempt()
            except RetriableError:
                if time.monotonic() + RETRY_BACKOFF_S > self.deadline:
                    raise
            self._close_brokers()
            time.sleep(RETRY_BACKOFF_S)

    def to_leaders(
        self,
        partitions: list[TopicPartition],
        send: Callable[[BlockingConnection, list[TopicPartition]], dict[TopicPartition, A]],
    ) -> dict[TopicPartition, A | Unanswered]:
        """Each partition's answer from its leader: ``send(leader, its partitions)`` once per leader,
        again for the partitions whose leader moved, until the timeout (then the last error stays in
        their answer). A partition the cluster does not know answers UNKNOWN_TOPIC_OR_PARTITION."""
        results: dict[TopicPartition, A | Unanswered] = {}
        pending = list(dict.fromkeys(partitions))
        fresh = False
        while True:
            leaders = self._leaders(sorted({t for t, _ in pending}), fresh)
            retry: list[TopicPartition] = []
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                if tp not in leaders:
                    results[tp] = Unanswered(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "the cluster does not know it")
                elif leaders[tp] < 0:
                    results[tp] = Unanswered(ErrorCode.LEADER_NOT_AVAILABLE, "it has no leader")
                    retry.append(tp)
                else:
                    by_leader.setdefault(leaders[tp], []).append(tp)
            for node, tps in by_leader.items():
                retry += self._send_to(node, tps, send, results)
            if not retry:
                return results
            if time.monotonic() + RETRY_BACKOFF_S > self.deadline:
                for tp in retry:
                    why = f"no leader answered within {self.timeout:g} s"
                    results[tp] = Unanswered(results[tp].error_code, why)
                return results
            pending, fresh = retry, True
            time.sleep(RETRY_BACKOFF_S)

    def _send_to(
        self,
        node: int,
        tps: list[TopicPartition],
        send: Callable[[BlockingConnection, list[TopicPartition]], dict[TopicPartition, A]],
        results: dict[TopicPartition, A | Unanswered],
    ) -> list[TopicPartition]:
        """The answers of one leader into ``results``; the partitions to retry."""
        try:
            answered = send(self.broker(node), tps)
        except BrokerNotAvailableError as e:  # a leader just stopped: Metadata will name the next one
            self._forget(node)
            for tp in tps:
                why = f"its leader, broker {node}, is unreachable ({e})"
                results[tp] = Unanswered(ErrorCode.LEADER_NOT_AVAILABLE, why)
            return tps
        retry = []
        for tp in tps:
            result: A | Unanswered
            if tp in answered:
                result = answered[tp]
            else:
                result = Unanswered(ErrorCode.UNKNOWN_SERVER_ERROR, f"broker {node} did not answer for it")
            results[tp] = result
            if result.error_code in RETRIABLE_LEADER:
                retry.append(tp)
        return retry

    # --- the consumer's reads ------------------------------------------------------------------------

    def list_offsets(
        self, timestamps: Mapping[TopicPartition, int], isolation_level: int = READ_UNCOMMITTED
    ) -> dict[TopicPartition, ListedOffset]:
        """Each partition's offset at its timestamp, from its leader: at EARLIEST_TIMESTAMP the log
        start offset, at LATEST_TIMESTAMP the high watermark, or with read_committed the last stable
        offset; at a time in ms, the first offset whose timestamp is at or after it (-1 when none
        is). A partition's error is raised, naming it."""
        found = self.to_leaders(list(timestamps), partial(_list_offsets, timestamps, isolation_level))
        out = {}
        for tp, answer in found.items():
            checked = check_partition(answer, f"cannot list the offsets of {tp}")
            out[tp] = ListedOffset(checked.offset, checked.timestamp)
        return out

    def fetch(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        isolation_level: int = READ_UNCOMMITTED,
        max_bytes: int = FETCH_MAX_BYTES,
        partition_max_bytes: int = MAX_PARTITION_FETCH_BYTES,
        max_wait_ms: int = 0,
    ) -> FetchedPartition:
        """The batches of ``tp`` from the one holding ``offset``, from its leader: at least one
        whole batch when there is one (Kafka's KIP-74), else up to ``partition_max_bytes``. The
        leader's error is raised, naming the partition and offset (OffsetOutOfRangeError below the
        log start or above the log end)."""
        send = partial(self._fetch_once, offset, isolation_level, max_bytes, partition_max_bytes, max_wait_ms)
        answered = self.to_leaders([tp], send)[tp]
        what = f"cannot fetch {tp} at offset {offset}"
        if answered.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            raise self._out_of_range(tp, what)
        answer = check_partition(answered, what)
        aborted = answer.aborted_transactions
        return FetchedPartition(
            records=b"" if answer.records is None else answer.records,
            high_watermark=answer.high_watermark,
            last_stable_offset=answer.last_stable_offset,
            log_start_offset=answer.log_start_offset,
            aborted_transactions=tuple((a.producer_id, a.first_offset) for a in aborted or ()),
        )

    def _out_of_range(self, tp: TopicPartition, what: str) -> OffsetOutOfRangeError:
        """The error of an offset outside the log, with the log's range as its leader lists it now
        (a Fetch's error answer carries no offsets that can be relied on)."""
        first = self.list_offsets({tp: EARLIEST_TIMESTAMP})[tp].offset
        end = self.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset
        return OffsetOutOfRangeError(what, log_start_offset=first, log_end_offset=end)

    def _fetch_once(
        self,
        offset: int,
        isolation_level: int,
        max_bytes: int,
        partition_max_bytes: int,
        max_wait_ms: int,
        leader: BlockingConnection,
        tps: list[TopicPartition],
    ) -> dict[TopicPartition, FetchResponseData.PartitionData]:
        # a consumer's sessionless fetch: the topic by name up to version 12, by id after
        (tp,) = tps
        partition = FetchRequestData.FetchPartition(
            partition=tp.partition,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            log_start_offset=-1,
            partition_max_bytes=partition_max_bytes,
        )
        topic = FetchRequestData.FetchTopic(
            topic=tp.topic, topic_id=self._topic_ids.get(tp.topic, ZERO_UUID), partitions=[partition]
        )
        request = FetchRequestData(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=max_wait_ms,
            min_bytes=0 if max_wait_ms == 0 else 1,
            max_bytes=max_bytes,
            isolation_level=isolation_level,
            session_id=0,
            session_epoch=-1,  # no fetch session (Kafka's FetchMetadata.FINAL_EPOCH)
            topics=[topic],
            forgotten_topics_data=[],
            rack_id="",
        )
        answer: FetchResponseData = leader.request(ApiKey.FETCH, request)
        check(answer.error_code, f"cannot fetch {tp} from {leader.address}")
        found = [p for t in answer.responses for p in t.partitions if p.partition_index == tp.partition]
        return {tp: found[0]} if found else {}

    # --- closing -------------------------------------------------------------------------------------

    def _close_brokers(self) -> None:
        for node in list(self._brokers):
            self._forget(node)

    def close(self) -> None:
        self._close_brokers()
        self.bootstrap.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _list_offsets(
    timestamps: Mapping[TopicPartition, int],
    isolation_level: int,
    leader: BlockingConnection,
    tps: list[TopicPartition],
) -> dict[TopicPartition, ListOffsetsResponseData.ListOffsetsPartitionResponse]:
    by_topic: dict[str, list[ListOffsetsRequestData.ListOffsetsPartition]] = {}
    for tp in tps:
        wanted = ListOffsetsRequestData.ListOffsetsPartition(
            partition_index=tp.partition, current_leader_epoch=-1, timestamp=timestamps[tp]
        )
        by_topic.setdefault(tp.topic, []).append(wanted)
    request = ListOffsetsRequestData(
        replica_id=CONSUMER_REPLICA_ID,
        isolation_level=isolation_level,
        topics=[ListOffsetsRequestData.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )
    answer: ListOffsetsResponseData = leader.request(ApiKey.LIST_OFFSETS, request)
    return {TopicPartition(t.name, r.partition_index): r for t in answer.topics for r in t.partitions}
