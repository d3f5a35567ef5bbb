"""Request handlers for producing, fetching and metadata: Kafka's ``KafkaApis``.

Each handler takes a decoded request body (``seglog.protocol``'s dict, the message
spec's field names in snake_case) and returns the response body, or None when the
client wants none (acks=0). Errors go where Kafka puts them: per partition for
produce, fetch and offsets, per topic for metadata. The admin APIs are in ``admin.py``.
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

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
)
from ..protocol import ApiKey
from .metadata_cache import ZERO_UUID, TopicMetadata
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
from .routes import Route, Routes

log = logging.getLogger(__name__)

READ_COMMITTED = 1
LEADER_NOT_AVAILABLE = ErrorCode.LEADER_NOT_AVAILABLE
# Produce v7 (Kafka 2.1, KIP-110) is the first that may carry zstd batches: the codec in bits
# 0-2 of a v2 batch's attributes, an int16 at byte 21 (Kafka's ProduceRequest.validateRecords)
ZSTD_PRODUCE_VERSION = 7
ZSTD = 4
MAGIC_AT = 16
ATTRIBUTES_AT = 21


class AcksZeroProduceError(SeglogError):
    """An acks=0 produce that failed: the broker closes the connection, the only way to tell."""


Handler = Callable[[int, dict[str, Any]], Awaitable[dict[str, Any] | None]]


class KafkaApis:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        advertised: tuple[str, int],
        *,
        auto_create_topic: Callable[[str], Awaitable[object]] | None = None,
        internal_topic_creators: Mapping[str, Callable[[], Awaitable[object]]] | None = None,
    ) -> None:
        self.config = config
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
            ApiKey.PRODUCE: Route(self.produce, (3, 11)),
            ApiKey.FETCH: Route(self.fetch, (4, 16)),
            ApiKey.LIST_OFFSETS: Route(self.list_offsets, (1, 8)),
            ApiKey.METADATA: Route(self.metadata_request, (0, 12)),
            ApiKey.OFFSET_FOR_LEADER_EPOCH: Route(self.offset_for_leader_epoch, (0, 4)),
            ApiKey.DESCRIBE_CLUSTER: Route(self.describe_cluster, (0, 1)),
        }

    # --- Metadata -------------------------------------------------------------------------------------

    async def metadata_request(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        requested = body.get("topics")
        allow_create = body.get("allow_auto_topic_creation", True) and self.config["auto.create.topics.enable"]
        topics: list[dict[str, Any]] = []
        if requested is None or (version == 0 and not requested):
            topics = [self._topic_entry(t) for t in sorted(self.metadata.topics(), key=lambda t: t.name)]
        else:
            for entry in requested:
                topics.append(await self._requested_topic(entry.get("name"), entry.get("topic_id"), allow_create))
        brokers = self.metadata.brokers()  # after the awaits above: the same snapshot as the last topic's
        _hide_leaders_not_alive(topics, {b.broker_id for b in brokers})
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack} for b in brokers],
            "cluster_id": self.metadata.cluster_id,
            "controller_id": self.metadata.controller_id,
            "topics": topics,
            "cluster_authorized_operations": -(1 << 31),
        }

    async def _requested_topic(self, name: str | None, topic_id: uuid.UUID | None, allow_create: bool) -> dict:
        if name is None:
            found = self.metadata.topic_by_id(topic_id) if topic_id else None
            if found is None:
                return _topic_error(None, topic_id or ZERO_UUID, UnknownTopicIdError.error_code)
            return self._topic_entry(found)
        found = self.metadata.topic(name)
        if found is not None:
            return self._topic_entry(found)
        try:
            self.replicas.validate_topic_name(name)
        except InvalidTopicError as e:
            return _topic_error(name, ZERO_UUID, e.error_code)
        if not allow_create:
            return _topic_error(name, ZERO_UUID, UnknownTopicOrPartitionError.error_code)
        creator = self.internal_topic_creators.get(name)
        try:
            await (creator() if creator is not None else self.auto_create_topic(name))
        except SeglogError as e:
            if self.metadata.topic(name) is None:  # another connection may have made it meanwhile
                code = e.error_code if e.error_code != ErrorCode.UNKNOWN_SERVER_ERROR else LEADER_NOT_AVAILABLE
                return _topic_error(name, ZERO_UUID, code)
        created = self.metadata.topic(name)
        return self._topic_entry(created) if created else _topic_error(name, ZERO_UUID, LEADER_NOT_AVAILABLE)

    @staticmethod
    def _topic_entry(topic: TopicMetadata) -> dict[str, Any]:
        return {
            "error_code": NONE,
            "name": topic.name,
            "topic_id": topic.topic_id,
            "is_internal": topic.internal,
            "partitions": [
                {
                    "error_code": NONE,
                    "partition_index": p.partition,
                    "leader_id": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": list(p.replicas),
                    "isr_nodes": list(p.isr),
                    "offline_replicas": list(p.offline_replicas),
                }
                for p in topic.partitions
            ],
            "topic_authorized_operations": -(1 << 31),
        }

    # --- Produce -------------------------------------------------------------------------------------

    async def produce(self, version: int, body: dict[str, Any]) -> dict[str, Any] | None:
        acks = body["acks"]
        results: dict[TopicPartition, AppendResult] = {}
        batches: dict[TopicPartition, Any] = {}
        order: list[TopicPartition] = []
        for topic in body["topic_data"]:
            for part in topic["partition_data"]:
                tp = (topic["name"], part["index"])
                order.append(tp)
                if acks not in (-1, 0, 1):
                    results[tp] = _append_error(InvalidRequiredAcksError(f"acks must be -1, 0 or 1, not {acks}"))
                elif part["records"] is None or len(part["records"]) == 0:
                    results[tp] = _append_error(CorruptRecordError("a produce request without records"))
                elif self.metadata.topic(tp[0]) is None or not 0 <= tp[1] < self.metadata.partition_count(tp[0]):
                    results[tp] = _append_error(UnknownTopicOrPartitionError(f"unknown partition {tp[0]}-{tp[1]}"))
                elif version < ZSTD_PRODUCE_VERSION and _first_codec(part["records"]) == ZSTD:
                    results[tp] = _append_error(
                        UnsupportedCompressionTypeError(f"Produce v{version} may not carry zstd batches (v7+)")
                    )
                else:
                    batches[tp] = part["records"]
        if batches:
            results.update(await self.replicas.append_records(batches, acks=acks, timeout_ms=body["timeout_ms"]))
        if acks == 0:
            failed = next((tp for tp in order if results[tp].error_code != NONE), None)
            if failed is not None:  # as Kafka: no answer to carry the error, so the connection goes
                r = results[failed]
                raise AcksZeroProduceError(
                    f"an acks=0 produce to {failed[0]}-{failed[1]} failed (error {r.error_code}: {r.message}); "
                    "closing the connection so that the client refreshes its metadata"
                )
            return None
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in order:
            r = results[tp]
            by_topic.setdefault(tp[0], []).append(
                {
                    "index": tp[1],
                    "error_code": r.error_code,
                    "base_offset": r.base_offset,
                    "log_append_time_ms": r.log_append_time,
                    "log_start_offset": r.log_start_offset,
                    "record_errors": [],
                    "error_message": r.message,
                }
            )
        return {
            "responses": [{"name": t, "partition_responses": parts} for t, parts in by_topic.items()],
            "throttle_time_ms": 0,
        }

    # --- Fetch ---------------------------------------------------------------------------------------

    async def fetch(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        requests: list[FetchRequestPartition] = []
        errors: dict[int, int] = {}  # index in ``slots`` -> error code found before reading
        slots: list[tuple[str | None, uuid.UUID, int]] = []
        # a follower's fetch (KIP-903 moved its id into replica_state at v15)
        replica_id = body["replica_state"]["replica_id"] if version >= 15 else body["replica_id"]
        for topic in body["topics"]:
            name, topic_id, count = self._fetch_topic(version, topic)
            for part in topic["partitions"]:
                index = part["partition"]
                slots.append((name, topic_id, index))
                # the leader epoch is the partition's to check (the replica manager's read)
                if name is None:
                    errors[len(slots) - 1] = UnknownTopicIdError.error_code
                elif not 0 <= index < count:
                    errors[len(slots) - 1] = UnknownTopicOrPartitionError.error_code
                else:
                    requests.append(
                        FetchRequestPartition(
                            name,
                            index,
                            part["fetch_offset"],
                            part["partition_max_bytes"],
                            part.get("current_leader_epoch", -1),
                            part.get("log_start_offset", -1),
                        )
                    )
        results = await self.replicas.fetch_messages(
            requests,
            max_bytes=body.get("max_bytes", 0x7FFFFFFF),
            max_wait_ms=0 if errors else body["max_wait_ms"],  # a partition in error: answered at once
            min_bytes=body["min_bytes"],
            read_committed=body.get("isolation_level", 0) == READ_COMMITTED,
            replica_id=replica_id,
            while_parked=abandoned_on_disconnect,  # a long poll ends when its client goes
        )
        return self._fetch_response(version, body, slots, errors, results)

    def _fetch_topic(self, version: int, topic: dict[str, Any]) -> tuple[str | None, uuid.UUID, int]:
        """The topic a fetch names (by id from v13): its name (None: an unknown id), id
        and partition count (0: unknown)."""
        if version >= 13:
            topic_id = topic["topic_id"]
            found = self.metadata.topic_by_id(topic_id)
            return (found.name, topic_id, len(found.partitions)) if found else (None, topic_id, 0)
        name = topic["topic"]
        found = self.metadata.topic(name)
        return (name, found.topic_id, len(found.partitions)) if found else (name, ZERO_UUID, 0)

    def _fetch_response(
        self,
        version: int,
        body: dict[str, Any],
        slots: list[tuple[str | None, uuid.UUID, int]],
        errors: dict[int, int],
        results: list[FetchResult],
    ) -> dict[str, Any]:
        read_committed = body.get("isolation_level", 0) == READ_COMMITTED
        answers = iter(results)
        topics: list[dict[str, Any]] = []
        for i, (name, topic_id, index) in enumerate(slots):
            r = FetchResult(errors[i]) if i in errors else next(answers)
            entry: dict[str, Any] = {
                "partition_index": index,
                "error_code": r.error_code,
                "high_watermark": r.high_watermark,
                "last_stable_offset": r.last_stable_offset,
                "log_start_offset": r.log_start_offset,
                "aborted_transactions": _aborted(r.aborted_transactions) if read_committed else None,
                "preferred_read_replica": -1,
                "records": r.records if r.records is not None else b"",
            }
            if topics and topics[-1]["_key"] == (name, topic_id):
                topics[-1]["partitions"].append(entry)
            else:
                topics.append({"_key": (name, topic_id), "topic": name, "topic_id": topic_id, "partitions": [entry]})
        for t in topics:
            del t["_key"]
        return {"throttle_time_ms": 0, "error_code": NONE, "session_id": 0, "responses": topics}

    # --- ListOffsets, OffsetForLeaderEpoch -----------------------------------------------------------------

    async def list_offsets(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        lookups: list[ListOffsetsPartition] = []
        answers: list[tuple[str, dict[str, Any]]] = []
        for topic in body["topics"]:
            for part in topic["partitions"]:
                entry: dict[str, Any] = {
                    "partition_index": part["partition_index"],
                    "error_code": NONE,
                    "timestamp": -1,
                    "offset": -1,
                }
                if self._partition_unknown(topic["name"], part["partition_index"]):
                    entry["error_code"] = UnknownTopicOrPartitionError.error_code
                else:  # the leader epoch is the partition's to check (the replica manager's)
                    lookups.append(
                        ListOffsetsPartition(
                            topic["name"],
                            part["partition_index"],
                            part["timestamp"],
                            part.get("current_leader_epoch", -1),
                        )
                    )
                answers.append((topic["name"], entry))
        read_committed = body.get("isolation_level", 0) == READ_COMMITTED
        found = iter(await self.replicas.list_offsets(lookups, read_committed, body["replica_id"]))
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, entry in answers:
            if entry["error_code"] == NONE:
                r = next(found)
                # OFFSET_NOT_AVAILABLE came with v5; older clients are told LEADER_NOT_AVAILABLE, as Kafka does
                code = (
                    LEADER_NOT_AVAILABLE
                    if r.error_code == OffsetNotAvailableError.error_code and version < 5
                    else r.error_code
                )
                entry.update(error_code=code, timestamp=r.timestamp, offset=r.offset, leader_epoch=r.leader_epoch)
            by_topic.setdefault(name, []).append(entry)
        return {"throttle_time_ms": 0, "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()]}

    def _partition_unknown(self, name: str, index: int) -> bool:
        found = self.metadata.topic(name)
        return found is None or not 0 <= index < len(found.partitions)

    async def offset_for_leader_epoch(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        topics = []
        for topic in body["topics"]:
            parts = []
            for part in topic["partitions"]:
                entry = {"error_code": NONE, "partition": part["partition"], "leader_epoch": -1, "end_offset": -1}
                try:  # the partition's own leader epoch decides (a follower asks as soon as LeaderAndIsr came)
                    epoch, end = self.replicas.end_offset_for_epoch(
                        topic["topic"], part["partition"], part["leader_epoch"], part.get("current_leader_epoch", -1)
                    )
                    entry.update(leader_epoch=epoch, end_offset=end)
                except SeglogError as e:
                    entry["error_code"] = e.error_code
                parts.append(entry)
            topics.append({"topic": topic["topic"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # --- DescribeCluster -----------------------------------------------------------------------------------

    async def describe_cluster(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        endpoint_type = body.get("endpoint_type", 1)  # Kafka's EndpointType: 1 a broker, 2 a controller
        error: int = NONE
        message: str | None = None
        if endpoint_type != 1:  # as Kafka's AuthHelper: a controller's is mismatched here, another unsupported
            error = ErrorCode.MISMATCHED_ENDPOINT_TYPE if endpoint_type == 2 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"endpoint type {endpoint_type} is not served"
        return {
            "throttle_time_ms": 0,
            "error_code": error,
            "error_message": message,
            "endpoint_type": endpoint_type,
            "cluster_id": self.metadata.cluster_id,
            "controller_id": self.metadata.controller_id,
            "brokers": [
                {"broker_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in self.metadata.brokers()
            ],
            "cluster_authorized_operations": -(1 << 31),
        }


def _hide_leaders_not_alive(topics: list[dict[str, Any]], alive: set[int]) -> None:
    """Kafka's ``MetadataCache.getPartitionMetadata``: a leader the live brokers do not include is
    LEADER_NOT_AVAILABLE with no leader id. Between a broker's death and the controller's election
    the partition states still name it; a client given a leader it has no address for stays stuck
    (kafka-python's sender fails on it until its next metadata refresh, which it never reaches)."""
    for topic in topics:
        for p in topic.get("partitions") or ():
            if p["leader_id"] not in alive:  # no leader at all (-1) as well
                p["error_code"], p["leader_id"] = LEADER_NOT_AVAILABLE, -1


def _topic_error(name: str | None, topic_id: uuid.UUID, code: int) -> dict[str, Any]:
    return {
        "error_code": code,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": -(1 << 31),
    }


def _aborted(found: list[tuple[int, int]] | None) -> list[dict[str, int]]:
    return [{"producer_id": pid, "first_offset": first} for pid, first in found or ()]


def _append_error(e: SeglogError) -> AppendResult:
    return AppendResult(e.error_code, message=e.message)


def _first_codec(records: memoryview) -> int:
    """The codec of the first batch when it is a v2 one (else -1: the append refuses it)."""
    if len(records) < ATTRIBUTES_AT + 2 or records[MAGIC_AT] != 2:
        return -1
    return records[ATTRIBUTES_AT + 1] & 0x07


def advertised_host(host: str) -> str:
    """The host clients are told: the listener's, or this machine's name when it binds all."""
    return host or socket.getfqdn()
