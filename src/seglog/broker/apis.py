"""Request handlers for producing, fetching and metadata: Kafka's ``KafkaApis``.

Each handler takes a decoded request body (the API's ``*RequestData``, from
``seglog.protocol``) and returns the response body (its ``*ResponseData``), or None when
the client wants none (acks=0). Errors go where Kafka puts them: per partition for
produce, fetch and offsets, per topic for metadata. The admin APIs are in ``admin.py``.

Every version Kafka 3.9 serves is served, the oldest clients' too: Produce v0-2 carry legacy
message sets, which the log converts to v2 batches on append (``storage.validator``); a Fetch
v0-3 reads its records converted down to the message format it carries (magic 0 for v0-1,
magic 1 for v2-3: ``records.conversion``), as Kafka's ``KafkaApis`` down-converts them; a
ListOffsets v0 is answered from the segments' base offsets (``legacy_offsets``).
"""

from __future__ import annotations

import copy
import logging
import socket
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..common import ZERO_UUID
from ..config import BrokerConfig
from ..errors import (
    CorruptRecordError,
    ErrorCode,
    InvalidRequiredAcksError,
    InvalidTopicError,
    OffsetNotAvailableError,
    SeglogError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
    UnsupportedCompressionTypeError,
    UnsupportedVersionError,
)
from ..protocol import ApiKey
from ..protocol.message_data import (
    DescribeClusterRequestData,
    DescribeClusterResponseData,
    FetchRequestData,
    FetchResponseData,
    ListOffsetsRequestData,
    ListOffsetsResponseData,
    MetadataRequestData,
    MetadataResponseData,
    OffsetForLeaderEpochRequestData,
    OffsetForLeaderEpochResponseData,
    ProduceRequestData,
    ProduceResponseData,
)
from ..records import Compression
from ..records.conversion import to_legacy
from ..records.layout import ATTRIBUTES_LENGTH, ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK, MAGIC, MAGIC_OFFSET
from ..security import CLUSTER_NAME, OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from ..storage import EARLIEST_TIMESTAMP
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .metadata_cache import BrokerInfo, TopicMetadata
from .network import abandoned_on_disconnect
from .replica_manager import (
    NONE,
    AppendResult,
    FetchRequestPartition,
    FetchResult,
    ListOffsetsPartition,
    ReplicaManager,
    TopicPartition,
)
from .request_context import current_request
from .routes import Route, Routes

log = logging.getLogger(__name__)
_tuple_new = tuple.__new__
_PartitionResponse = ProduceResponseData.PartitionProduceResponse
_TopicResponse = ProduceResponseData.TopicProduceResponse

READ_COMMITTED = 1
LEADER_NOT_AVAILABLE = ErrorCode.LEADER_NOT_AVAILABLE
TOPIC_AUTHORIZATION_FAILED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
TOPIC = ResourceType.TOPIC
# Produce v7 (Kafka 2.1, KIP-110) is the first that may carry zstd batches: the codec in bits
# 0-2 of a v2 batch's attributes (Kafka's ProduceRequest.validateRecords)
ZSTD_PRODUCE_VERSION = 7
# the newest message format each Fetch version carries (Kafka's FetchRequest: v2 brought magic 1,
# v4 magic 2): older versions read their records converted down to it
FETCH_MAGIC = {0: 0, 1: 0, 2: 1, 3: 1}


class AcksZeroProduceError(SeglogError):
    """An acks=0 produce that failed: the broker closes the connection, the only way to tell."""


class KafkaApis:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        advertised: tuple[str, int],
        *,
        auto_create_topic: Callable[[str], Awaitable[object]] | None = None,
        internal_topic_creators: Mapping[str, Callable[[], Awaitable[object]]] | None = None,
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
    ) -> None:
        self.config = config
        self.authorizer = authorizer
        self.replicas = replicas
        self.metadata = replicas.metadata
        self.advertised = advertised
        # how Metadata creates a topic it is asked for (auto.create.topics.enable): here by default; a
        # cluster's goes through ZooKeeper, and the first answer is LEADER_NOT_AVAILABLE until the controller is done
        self.auto_create_topic = auto_create_topic or self._create_topic
        # the coordinators' topics are made by their coordinators, with their own partition counts,
        # replication factors and configs (Kafka's AutoTopicCreationManager.creatableTopic)
        self.internal_topic_creators = dict(internal_topic_creators or {})

    async def _create_topic(self, name: str) -> None:
        await self.replicas.create_topic(name, self.config["num.partitions"], {})

    def routes(self) -> Routes:
        return {
            ApiKey.PRODUCE: Route(self.produce, (0, 11)),
            ApiKey.FETCH: Route(self.fetch, (0, 17)),
            ApiKey.LIST_OFFSETS: Route(self.list_offsets, (0, 9)),
            ApiKey.METADATA: Route(self.metadata_request, (0, 12)),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: Route(self.offset_for_leader_epoch, (0, 4)),
            ApiKey.DESCRIBE_CLUSTER: Route(self.describe_cluster, (0, 1)),
        }

    # --- Metadata -------------------------------------------------------------------------------------

    async def metadata_request(self, version: int, body: MetadataRequestData) -> MetadataResponseData:
        requested = body.topics
        allow_create = body.allow_auto_topic_creation and self.config["auto.create.topics.enable"]
        topics: list[MetadataResponseData.MetadataResponseTopic] = []
        if requested is None or (version == 0 and not requested):  # all topics: those it may describe
            entries = self.metadata.derived("metadata topic entries", self._topic_entries)
            names = (t.name for t in entries if t.name is not None)  # every entry's: built of a named topic
            described = self.authorizer.authorized(AclOperation.DESCRIBE, TOPIC, names)
            topics = [t for t in entries if t.name in described]
        else:
            for entry in requested:
                topics.append(await self._requested_topic(entry.name, entry.topic_id, allow_create))
        brokers = _on_listener(self.metadata.brokers())  # after the awaits: the same snapshot as the last topic's
        topics = _hide_leaders_not_alive(topics, {b.broker_id for b, _ in brokers})
        if body.include_topic_authorized_operations:  # v8+
            topics = [self._with_operations(t) for t in topics]
        return MetadataResponseData(
            brokers=[
                MetadataResponseData.MetadataResponseBroker(node_id=b.broker_id, host=host, port=port, rack=b.rack)
                for b, (host, port) in brokers
            ],
            cluster_id=self.metadata.cluster_id,
            controller_id=self.metadata.controller_id,
            topics=topics,
            # the field is v8-10's: from v11 DescribeCluster answers it
            cluster_authorized_operations=self._cluster_operations(body.include_cluster_authorized_operations),
        )

    def _with_operations(
        self, topic: MetadataResponseData.MetadataResponseTopic
    ) -> MetadataResponseData.MetadataResponseTopic:
        """The entry with its KIP-430 bitfield, a copy (entries may be shared, ``derived``); those
        refused and unknown ids keep "not requested", as in Kafka's KafkaApis."""
        if topic.name is None or topic.error_code == TOPIC_AUTHORIZATION_FAILED:
            return topic
        described = copy.copy(topic)
        described.topic_authorized_operations = self.authorizer.authorized_operations(TOPIC, topic.name)
        return described

    def _cluster_operations(self, requested: bool) -> int:
        """KIP-430's cluster bitfield: 0 to a principal that may not describe the cluster."""
        if not requested:
            return OPERATIONS_NOT_REQUESTED
        if not self.authorizer.authorize_cluster(AclOperation.DESCRIBE):
            return 0
        return self.authorizer.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)

    async def _requested_topic(
        self, name: str | None, topic_id: uuid.UUID | None, allow_create: bool
    ) -> MetadataResponseData.MetadataResponseTopic:
        authorize = self.authorizer.authorize
        if name is None:
            found = self.metadata.topic_by_id(topic_id) if topic_id else None
            if found is None:
                return _topic_error(None, topic_id or ZERO_UUID, UnknownTopicIdError.error_code)
            if not authorize(AclOperation.DESCRIBE, TOPIC, found.name):
                return _topic_error(None, topic_id or ZERO_UUID, TOPIC_AUTHORIZATION_FAILED)
            return self._topic_entry(found)
        # refused whether it exists or not: a principal learns no topic names it may not describe
        if not authorize(AclOperation.DESCRIBE, TOPIC, name):
            return _topic_error(name, ZERO_UUID, TOPIC_AUTHORIZATION_FAILED)
        found = self.metadata.topic(name)
        if found is not None:
            return self._topic_entry(found)
        try:
            self.replicas.validate_topic_name(name)
        except InvalidTopicError as e:
            return _topic_error(name, ZERO_UUID, e.error_code)
        if not allow_create:
            return _topic_error(name, ZERO_UUID, UnknownTopicOrPartitionError.error_code)
        if not (self.authorizer.authorize_cluster(AclOperation.CREATE) or authorize(AclOperation.CREATE, TOPIC, name)):
            return _topic_error(name, ZERO_UUID, TOPIC_AUTHORIZATION_FAILED)
        creator = self.internal_topic_creators.get(name)
        try:
            await (creator() if creator is not None else self.auto_create_topic(name))
        except SeglogError as e:
            if self.metadata.topic(name) is None:  # another connection may have made it meanwhile
                code = e.error_code if e.error_code != ErrorCode.UNKNOWN_SERVER_ERROR else LEADER_NOT_AVAILABLE
                return _topic_error(name, ZERO_UUID, code)
        created = self.metadata.topic(name)
        return self._topic_entry(created) if created else _topic_error(name, ZERO_UUID, LEADER_NOT_AVAILABLE)

    @classmethod
    def _topic_entries(cls, topics: list[TopicMetadata]) -> list[MetadataResponseData.MetadataResponseTopic]:
        """Every topic's entry, in name order (shared by the requests of every topic: see ``derived``)."""
        return [cls._topic_entry(t) for t in sorted(topics, key=lambda t: t.name)]

    @staticmethod
    def _topic_entry(topic: TopicMetadata) -> MetadataResponseData.MetadataResponseTopic:
        return MetadataResponseData.MetadataResponseTopic(
            name=topic.name,
            topic_id=topic.topic_id,
            is_internal=topic.internal,
            partitions=[
                MetadataResponseData.MetadataResponsePartition(
                    partition_index=p.partition,
                    leader_id=p.leader,
                    leader_epoch=p.leader_epoch,
                    replica_nodes=list(p.replicas),
                    isr_nodes=list(p.isr),
                    offline_replicas=list(p.offline_replicas),
                )
                for p in topic.partitions
            ],
        )

    # --- Produce -------------------------------------------------------------------------------------

    async def produce(self, version: int, body: ProduceRequestData) -> ProduceResponseData | None:
        acks = body.acks
        results: dict[TopicPartition, AppendResult] = {}
        batches: dict[TopicPartition, Any] = {}
        order: list[TopicPartition] = []
        refused = self._produce_refusal(body.transactional_id)
        for topic in body.topic_data:
            # per topic, not per partition: the check's cost stays one call a topic
            denied = refused or self._write_refusal(topic.name)
            for part in topic.partition_data:
                tp = _tuple_new(TopicPartition, (topic.name, part.index))  # as TopicPartition(), without its __new__
                order.append(tp)
                if denied is not None:
                    results[tp] = denied
                elif acks not in (-1, 0, 1):
                    results[tp] = _append_error(InvalidRequiredAcksError(f"acks must be -1, 0 or 1, not {acks}"))
                elif part.records is None or len(part.records) == 0:
                    results[tp] = _append_error(CorruptRecordError("a produce request without records"))
                elif self.metadata.topic(tp[0]) is None or not 0 <= tp[1] < self.metadata.partition_count(tp[0]):
                    results[tp] = _append_error(UnknownTopicOrPartitionError(f"unknown partition {tp[0]}-{tp[1]}"))
                elif version < ZSTD_PRODUCE_VERSION and _first_codec(part.records) == Compression.ZSTD:
                    results[tp] = _append_error(
                        UnsupportedCompressionTypeError(f"Produce v{version} may not carry zstd batches (v7+)")
                    )
                else:
                    batches[tp] = part.records
        if batches:
            results.update(await self.replicas.append_records(batches, acks=acks, timeout_ms=body.timeout_ms))
        if acks == 0:
            failed = next((tp for tp in order if results[tp].error_code != NONE), None)
            if failed is not None:  # as Kafka: no answer to carry the error, so the connection goes
                r = results[failed]
                raise AcksZeroProduceError(
                    f"an acks=0 produce to {failed[0]}-{failed[1]} failed (error {r.error_code}: {r.message}); "
                    "closing the connection so that the client refreshes its metadata"
                )
            return None
        # positional arguments, in the spec's field order: a class called with keywords builds a
        # dict of them first (5,000 instructions more for this response under callgrind, 2 % of
        # all the broker spends on a 1-record produce request)
        by_topic: dict[str, list[ProduceResponseData.PartitionProduceResponse]] = {}
        for tp in order:
            r = results[tp]
            by_topic.setdefault(tp[0], []).append(
                _PartitionResponse(
                    tp[1], r.error_code, r.base_offset, r.log_append_time, r.log_start_offset, [], r.message
                )
            )
        return ProduceResponseData([_TopicResponse(t, parts) for t, parts in by_topic.items()])

    def _produce_refusal(self, transactional_id: str | None) -> AppendResult | None:
        """A transactional produce needs Write on its transactional id (else every partition fails)."""
        if transactional_id is None or self.authorizer.authorize(
            AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
        ):
            return None
        return AppendResult(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)

    def _write_refusal(self, topic: str) -> AppendResult | None:
        if self.authorizer.authorize(AclOperation.WRITE, TOPIC, topic):
            return None
        return AppendResult(TOPIC_AUTHORIZATION_FAILED)

    # --- Fetch ---------------------------------------------------------------------------------------

    async def fetch(self, version: int, body: FetchRequestData) -> FetchResponseData:
        requests: list[FetchRequestPartition] = []
        errors: dict[int, int] = {}  # index in ``slots`` -> error code found before reading
        slots: list[tuple[str | None, uuid.UUID, int]] = []
        # a follower's fetch (KIP-903 moved its id into replica_state at v15)
        replica_id = body.replica_state.replica_id if version >= 15 else body.replica_id
        # a follower needs ClusterAction (else every partition is refused), a consumer Read on each topic
        follower_denied = replica_id >= 0 and not self.authorizer.authorize_cluster(AclOperation.CLUSTER_ACTION)
        for topic in body.topics:
            name, topic_id, count = self._fetch_topic(version, topic)
            denied = name is not None and (
                follower_denied or (replica_id < 0 and not self.authorizer.authorize(AclOperation.READ, TOPIC, name))
            )
            for part in topic.partitions:
                index = part.partition
                slots.append((name, topic_id, index))
                # the leader epoch is the partition's to check (the replica manager's read)
                if denied:
                    errors[len(slots) - 1] = TOPIC_AUTHORIZATION_FAILED
                elif name is None:
                    errors[len(slots) - 1] = UnknownTopicIdError.error_code
                elif not 0 <= index < count:
                    errors[len(slots) - 1] = UnknownTopicOrPartitionError.error_code
                else:
                    requests.append(
                        FetchRequestPartition(
                            name,
                            index,
                            part.fetch_offset,
                            part.partition_max_bytes,
                            part.current_leader_epoch,
                            part.log_start_offset,
                        )
                    )
        read_committed = body.isolation_level == READ_COMMITTED
        results = await self.replicas.fetch_messages(
            requests,
            max_bytes=body.max_bytes,
            max_wait_ms=0 if errors else body.max_wait_ms,  # a partition in error: answered at once
            min_bytes=body.min_bytes,
            read_committed=read_committed,
            replica_id=replica_id,
            while_parked=abandoned_on_disconnect,  # a long poll ends when its client goes
        )
        # older versions read their records in the message format they carry
        magic = FETCH_MAGIC.get(version)
        offsets = [asked.fetch_offset for asked in requests]
        return _fetch_response(read_committed, slots, errors, results, magic, offsets)

    def _fetch_topic(self, version: int, topic: FetchRequestData.FetchTopic) -> tuple[str | None, uuid.UUID, int]:
        """The topic a fetch names (by id from v13): its name (None: an unknown id), id
        and partition count (0: unknown)."""
        if version >= 13:
            topic_id = topic.topic_id
            found = self.metadata.topic_by_id(topic_id)
            return (found.name, topic_id, len(found.partitions)) if found else (None, topic_id, 0)
        name = topic.topic
        found = self.metadata.topic(name)
        return (name, found.topic_id, len(found.partitions)) if found else (name, ZERO_UUID, 0)

    # --- ListOffsets, OffsetForLeaderEpoch -----------------------------------------------------------------

    async def list_offsets(self, version: int, body: ListOffsetsRequestData) -> ListOffsetsResponseData:
        if version == 0:
            return await self._legacy_list_offsets(body)
        lookups: list[ListOffsetsPartition] = []
        answers: list[tuple[str, ListOffsetsResponseData.ListOffsetsPartitionResponse]] = []
        for topic in body.topics:
            described = self.authorizer.authorize(AclOperation.DESCRIBE, TOPIC, topic.name)
            for part in topic.partitions:
                entry = ListOffsetsResponseData.ListOffsetsPartitionResponse(partition_index=part.partition_index)
                if not described:
                    entry.error_code = TOPIC_AUTHORIZATION_FAILED
                elif self._partition_unknown(topic.name, part.partition_index):
                    entry.error_code = UnknownTopicOrPartitionError.error_code
                else:  # the leader epoch is the partition's to check (the replica manager's)
                    lookups.append(
                        ListOffsetsPartition(
                            topic.name, part.partition_index, part.timestamp, part.current_leader_epoch
                        )
                    )
                answers.append((topic.name, entry))
        read_committed = body.isolation_level == READ_COMMITTED
        found = iter(await self.replicas.list_offsets(lookups, read_committed, body.replica_id))
        for _, entry in answers:
            if entry.error_code == NONE:
                r = next(found)
                # OFFSET_NOT_AVAILABLE came with v5; older clients are told LEADER_NOT_AVAILABLE, as Kafka does
                entry.error_code = (
                    LEADER_NOT_AVAILABLE
                    if r.error_code == OffsetNotAvailableError.error_code and version < 5
                    else r.error_code
                )
                entry.timestamp, entry.offset, entry.leader_epoch = r.timestamp, r.offset, r.leader_epoch
        return _list_offsets_response(answers)

    async def _legacy_list_offsets(self, body: ListOffsetsRequestData) -> ListOffsetsResponseData:
        """ListOffsets v0 (Kafka's ``handleListOffsetRequestV0``): up to ``max_num_offsets``
        offsets of each partition at or before its time; of the special times only -1
        (latest) and -2 (earliest), another is UNSUPPORTED_VERSION."""
        lookups: list[tuple[str, int, int, int]] = []
        answers: list[tuple[str, ListOffsetsResponseData.ListOffsetsPartitionResponse]] = []
        for topic in body.topics:
            described = self.authorizer.authorize(AclOperation.DESCRIBE, TOPIC, topic.name)
            for part in topic.partitions:
                entry = ListOffsetsResponseData.ListOffsetsPartitionResponse(partition_index=part.partition_index)
                if not described:
                    entry.error_code = TOPIC_AUTHORIZATION_FAILED
                elif part.timestamp < EARLIEST_TIMESTAMP:
                    entry.error_code = UnsupportedVersionError.error_code
                elif self._partition_unknown(topic.name, part.partition_index):
                    entry.error_code = UnknownTopicOrPartitionError.error_code
                else:
                    lookups.append((topic.name, part.partition_index, part.timestamp, part.max_num_offsets))
                answers.append((topic.name, entry))
        found = iter(await self.replicas.legacy_offsets(lookups, body.replica_id))
        for _, entry in answers:
            if entry.error_code == NONE:
                entry.error_code, entry.old_style_offsets = next(found)
        return _list_offsets_response(answers)

    def _partition_unknown(self, name: str, index: int) -> bool:
        found = self.metadata.topic(name)
        return found is None or not 0 <= index < len(found.partitions)

    async def offset_for_leader_epoch(
        self, version: int, body: OffsetForLeaderEpochRequestData
    ) -> OffsetForLeaderEpochResponseData:
        topics = []
        # a follower's (ClusterAction), or a consumer's after a leader change (Describe on the topic)
        follower = self.authorizer.authorize_cluster(AclOperation.CLUSTER_ACTION)
        for topic in body.topics:
            parts = []
            described = follower or self.authorizer.authorize(AclOperation.DESCRIBE, TOPIC, topic.topic)
            for part in topic.partitions:
                entry = OffsetForLeaderEpochResponseData.EpochEndOffset(partition=part.partition)
                if not described:
                    entry.error_code = TOPIC_AUTHORIZATION_FAILED
                    parts.append(entry)
                    continue
                try:  # the partition's own leader epoch decides (a follower asks as soon as LeaderAndIsr came)
                    entry.leader_epoch, entry.end_offset = self.replicas.end_offset_for_epoch(
                        topic.topic, part.partition, part.leader_epoch, part.current_leader_epoch
                    )
                except SeglogError as e:
                    entry.error_code = e.error_code
                parts.append(entry)
            topics.append(
                OffsetForLeaderEpochResponseData.OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts)
            )
        return OffsetForLeaderEpochResponseData(topics=topics)

    # --- DescribeCluster -----------------------------------------------------------------------------------

    async def describe_cluster(self, version: int, body: DescribeClusterRequestData) -> DescribeClusterResponseData:
        endpoint_type = body.endpoint_type  # Kafka's EndpointType: 1 a broker (v0's), 2 a controller
        response = DescribeClusterResponseData(
            endpoint_type=endpoint_type,
            cluster_id=self.metadata.cluster_id,
            controller_id=self.metadata.controller_id,
            cluster_authorized_operations=self._cluster_operations(body.include_cluster_authorized_operations),
            brokers=[
                DescribeClusterResponseData.DescribeClusterBroker(
                    broker_id=b.broker_id, host=host, port=port, rack=b.rack
                )
                for b, (host, port) in _on_listener(self.metadata.brokers())
            ],
        )
        if endpoint_type != 1:  # as Kafka's AuthHelper: a controller's is mismatched here, another unsupported
            error = ErrorCode.MISMATCHED_ENDPOINT_TYPE if endpoint_type == 2 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            response.error_code, response.error_message = error, f"endpoint type {endpoint_type} is not served"
        return response


def _fetch_response(
    read_committed: bool,
    slots: list[tuple[str | None, uuid.UUID, int]],
    errors: dict[int, int],
    results: list[FetchResult],
    magic: int | None,
    fetch_offsets: list[int],
) -> FetchResponseData:
    """The partitions' answers, in the request's order, grouped by topic as they came; their
    records converted down to ``magic`` when given."""
    answers = iter(zip(results, fetch_offsets, strict=True))
    topics: list[FetchResponseData.FetchableTopicResponse] = []
    last: tuple[str | None, uuid.UUID] | None = None
    for i, (name, topic_id, index) in enumerate(slots):
        r, fetch_offset = (FetchResult(errors[i]), -1) if i in errors else next(answers)
        code, records = (r.error_code, r.records) if magic is None else _down_converted(r, magic, fetch_offset)
        entry = FetchResponseData.PartitionData(
            partition_index=index,
            error_code=code,
            high_watermark=r.high_watermark,
            last_stable_offset=r.last_stable_offset,
            log_start_offset=r.log_start_offset,
            aborted_transactions=_aborted(r.aborted_transactions) if read_committed else None,
            records=records if records is not None else b"",
        )
        if last == (name, topic_id):
            topics[-1].partitions.append(entry)
        else:
            last = (name, topic_id)
            # a topic by id has no name to give (None: left out before v13, which is by name)
            topics.append(FetchResponseData.FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=[entry]))  # type: ignore[arg-type]
    return FetchResponseData(responses=topics)


def _down_converted(result: FetchResult, magic: int, fetch_offset: int) -> tuple[int, bytes | None]:
    """(error code, records) of a partition's fetch in message format ``magic``; a zstd batch,
    which no older format can carry, is UNSUPPORTED_COMPRESSION_TYPE (as Kafka answers)."""
    if result.records is None or result.error_code != NONE:
        return result.error_code, None
    try:
        return NONE, to_legacy(result.records.read(), magic, fetch_offset)
    except UnsupportedCompressionTypeError as e:
        return e.error_code, None


def _list_offsets_response(
    answers: list[tuple[str, ListOffsetsResponseData.ListOffsetsPartitionResponse]],
) -> ListOffsetsResponseData:
    by_topic: dict[str, list[ListOffsetsResponseData.ListOffsetsPartitionResponse]] = defaultdict(list)
    for name, entry in answers:
        by_topic[name].append(entry)
    return ListOffsetsResponseData(
        topics=[ListOffsetsResponseData.ListOffsetsTopicResponse(name=n, partitions=p) for n, p in by_topic.items()]
    )


def _on_listener(brokers: list[BrokerInfo]) -> list[tuple[BrokerInfo, tuple[str, int]]]:
    """The brokers with their addresses on the listener the request came in on (Kafka's
    ``getAliveBrokerNodes(listenerName)``): a broker without that listener is left out."""
    listener = current_request().listener_name
    found = [(b, b.address(listener)) for b in brokers]
    return [(b, address) for b, address in found if address is not None]


def _hide_leaders_not_alive(
    topics: list[MetadataResponseData.MetadataResponseTopic], alive: set[int]
) -> list[MetadataResponseData.MetadataResponseTopic]:
    """Kafka's ``MetadataCache.getPartitionMetadata``: a leader the live brokers do not include is
    LEADER_NOT_AVAILABLE with no leader id. Between a broker's death and the controller's election
    the partition states still name it; a client given a leader it has no address for stays stuck
    (kafka-python's sender fails on it until its next metadata refresh, which it never reaches).
    The entries given are left as they are (they may be shared, ``derived``): a topic with such a
    partition is answered with a copy."""
    return [t if all(p.leader_id in alive for p in t.partitions) else _leaders_hidden(t, alive) for t in topics]


def _leaders_hidden(
    topic: MetadataResponseData.MetadataResponseTopic, alive: set[int]
) -> MetadataResponseData.MetadataResponseTopic:
    Partition = MetadataResponseData.MetadataResponsePartition
    return MetadataResponseData.MetadataResponseTopic(
        error_code=topic.error_code,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[
            p
            if p.leader_id in alive
            else Partition(
                error_code=LEADER_NOT_AVAILABLE,
                partition_index=p.partition_index,
                leader_id=-1,
                leader_epoch=p.leader_epoch,
                replica_nodes=p.replica_nodes,
                isr_nodes=p.isr_nodes,
                offline_replicas=p.offline_replicas,
            )
            for p in topic.partitions
        ],
        topic_authorized_operations=topic.topic_authorized_operations,
    )


def _topic_error(name: str | None, topic_id: uuid.UUID, code: int) -> MetadataResponseData.MetadataResponseTopic:
    return MetadataResponseData.MetadataResponseTopic(error_code=code, name=name, topic_id=topic_id)


def _aborted(found: list[tuple[int, int]] | None) -> list[FetchResponseData.AbortedTransaction]:
    return [FetchResponseData.AbortedTransaction(producer_id=pid, first_offset=first) for pid, first in found or ()]


def _append_error(e: SeglogError) -> AppendResult:
    return AppendResult(e.error_code, message=e.message)


def _first_codec(records: memoryview) -> int:
    """The codec of the first batch when it is a v2 one (else -1: a legacy message set, Produce
    v0-2's, which has no zstd)."""
    if len(records) < ATTRIBUTES_OFFSET + ATTRIBUTES_LENGTH or records[MAGIC_OFFSET] != MAGIC:
        return -1
    return records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK  # the int16's low byte


def advertised_host(host: str) -> str:
    """The host clients are told: the listener's, or this machine's name when it binds all."""
    return host or socket.getfqdn()
