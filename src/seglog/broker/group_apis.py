"""Request handlers of the group coordinator's APIs (the group half of Kafka's ``KafkaApis``).

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups, OffsetDelete and TxnOffsetCommit (the
transactions' offsets, completed by their markers): each handler maps the wire
body (``seglog.protocol``'s dict, at its version) to the request value of
``seglog.coordinator``, checks what the broker checks before calling in (this broker
coordinates the group: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; the topics of
offsets exist: UNKNOWN_TOPIC_OR_PARTITION), and maps the answer back at the request's
version. ``GroupMetadataManager`` runs the calls on the event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..common import GROUP_METADATA_TOPIC, TopicPartition
from ..coordinator.group_coordinator import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    SyncGroupRequest,
    SyncGroupResponse,
)
from ..coordinator.offset_manager import (
    FetchedOffset,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionCommit,
    TxnOffsetCommitRequest,
)
from ..errors import InvalidRequestError, SeglogError
from ..protocol import ApiKey, ErrorCode
from .group_metadata_manager import GroupMetadataManager
from .metadata_cache import MetadataCache
from .request_context import current_request
from .routes import Route, Routes

GROUP_KEY, TRANSACTION_KEY = 0, 1  # FindCoordinator's key types
NO_AUTHORIZED_OPERATIONS = -(2**31)

Body = dict[str, Any]
# a FindCoordinator key type's lookup: the key -> the (topic, partition) whose leader coordinates it
CoordinatorLookup = Callable[[str], Awaitable[tuple[str, int]]]


class GroupApis:
    def __init__(self, groups: GroupMetadataManager, metadata: MetadataCache) -> None:
        self.groups = groups
        self.metadata = metadata
        # FindCoordinator's key types; the transaction coordinator adds TRANSACTION_KEY
        self.coordinator_lookups: dict[int, CoordinatorLookup] = {GROUP_KEY: self._group_partition}

    def routes(self) -> Routes:
        """At Kafka 3.9's versions (a ZooKeeper-mode broker's: its group coordinator knows classic
        groups alone, so KIP-848's OffsetCommit v9 and OffsetFetch v9 are v8 with fields it leaves
        unchecked); FindCoordinator's key type 1 is answered through the transaction coordinator's
        lookup (``coordinator_lookups``), a share group's (v6) is an unknown key type."""
        return {
            ApiKey.FIND_COORDINATOR: Route(self.find_coordinator, (0, 6)),
            ApiKey.JOIN_GROUP: Route(self.join_group, (0, 9)),
            ApiKey.SYNC_GROUP: Route(self.sync_group, (0, 5)),
            ApiKey.HEARTBEAT: Route(self.heartbeat, (0, 4)),
            ApiKey.LEAVE_GROUP: Route(self.leave_group, (0, 5)),
            ApiKey.OFFSET_COMMIT: Route(self.offset_commit, (0, 9)),
            ApiKey.TXN_OFFSET_COMMIT: Route(self.txn_offset_commit, (0, 4)),
            ApiKey.OFFSET_FETCH: Route(self.offset_fetch, (0, 9)),
            ApiKey.LIST_GROUPS: Route(self.list_groups, (0, 5)),
            ApiKey.DESCRIBE_GROUPS: Route(self.describe_groups, (0, 5)),
            ApiKey.DELETE_GROUPS: Route(self.delete_groups, (0, 2)),
            ApiKey.OFFSET_DELETE: Route(self.offset_delete, (0, 0)),
        }

    # --- FindCoordinator ---------------------------------------------------------------------------

    async def find_coordinator(self, version: int, body: Body) -> Body:
        keys = body["coordinator_keys"] if version >= 4 else [body["key"]]
        found = [await self._find(body.get("key_type", GROUP_KEY), key) for key in keys]
        if version >= 4:
            return {"throttle_time_ms": 0, "coordinators": found}
        return {"throttle_time_ms": 0, **{k: v for k, v in found[0].items() if k != "key"}}

    async def _find(self, key_type: int, key: str) -> Body:
        answer: Body = {
            "key": key,
            "node_id": -1,
            "host": "",
            "port": -1,
            "error_code": ErrorCode.NONE,
            "error_message": None,
        }
        lookup = self.coordinator_lookups.get(key_type)
        if lookup is None:
            return {**answer, "error_code": ErrorCode.INVALID_REQUEST, "error_message": f"unknown key type {key_type}"}
        try:
            topic, partition = await lookup(key)
        except InvalidRequestError as e:  # a key no coordinator takes (an empty transactional id)
            return {**answer, "error_code": ErrorCode.INVALID_REQUEST, "error_message": e.message}
        except SeglogError as e:
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": e.message}
        found = self.metadata.topic(topic)
        known = found is not None and 0 <= partition < len(found.partitions)
        broker = self.metadata.broker(found.partitions[partition].leader) if found and known else None
        if broker is None:
            return {**answer, "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "error_message": "no leader"}
        return {**answer, "node_id": broker.broker_id, "host": broker.host, "port": broker.port}

    async def _group_partition(self, group_id: str) -> TopicPartition:
        await self.groups.ensure_offsets_topic()
        return TopicPartition(GROUP_METADATA_TOPIC, self.groups.partition_for(group_id))

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------

    async def join_group(self, version: int, body: Body) -> Body | None:
        error = self.groups.group_error(body["group_id"])
        if error:
            return _join_body(version, JoinGroupResponse(error))
        context = current_request()
        request = JoinGroupRequest(
            body["group_id"],
            body["member_id"],
            body["protocol_type"],
            tuple((p["name"], bytes(p["metadata"])) for p in body["protocols"]),
            body["session_timeout_ms"],
            body["rebalance_timeout_ms"] if version >= 1 else body["session_timeout_ms"],
            context.client_id,
            context.client_host,
            body.get("group_instance_id"),
            require_known_member_id=version >= 4,
            support_skipping_assignment=version >= 9,
        )
        response = await self.groups.call(lambda token, now: self.groups.coordinator.join_group(token, request, now))
        return None if response is None else _join_body(version, response)

    async def sync_group(self, version: int, body: Body) -> Body | None:
        error = self.groups.group_error(body["group_id"])
        if error:
            return _sync_body(SyncGroupResponse(error))
        request = SyncGroupRequest(
            body["group_id"],
            body["generation_id"],
            body["member_id"],
            {a["member_id"]: bytes(a["assignment"]) for a in body["assignments"]},
            body.get("group_instance_id"),
            body.get("protocol_type"),
            body.get("protocol_name"),
        )
        response = await self.groups.call(lambda token, now: self.groups.coordinator.sync_group(token, request, now))
        return None if response is None else _sync_body(response)

    async def heartbeat(self, version: int, body: Body) -> Body | None:
        error = self.groups.group_error(body["group_id"])
        if not error:
            request = HeartbeatRequest(
                body["group_id"], body["generation_id"], body["member_id"], body.get("group_instance_id")
            )
            response = await self.groups.call(lambda token, now: self.groups.coordinator.heartbeat(token, request, now))
            if response is None:
                return None
            error = response.error_code
        return {"throttle_time_ms": 0, "error_code": error}

    async def leave_group(self, version: int, body: Body) -> Body | None:
        if version >= 3:
            members = tuple(MemberIdentity(m["member_id"], m.get("group_instance_id")) for m in body["members"])
        else:
            members = (MemberIdentity(body["member_id"]),)
        error = self.groups.group_error(body["group_id"])
        if error:
            response = LeaveGroupResponse(error)
        else:
            request = LeaveGroupRequest(body["group_id"], members)
            response = await self.groups.call(
                lambda token, now: self.groups.coordinator.leave_group(token, request, now)
            )
            if response is None:
                return None
        if version >= 3:
            return {
                "throttle_time_ms": 0,
                "error_code": response.error_code,
                "members": [
                    {"member_id": m.member_id, "group_instance_id": m.group_instance_id, "error_code": e}
                    for m, e in response.members
                ],
            }
        # one member: its error is the request's (Kafka's LeaveGroupResponse for v0-2)
        member_error = response.members[0][1] if response.members else ErrorCode.NONE
        return {"throttle_time_ms": 0, "error_code": response.error_code or member_error}

    # --- OffsetCommit, OffsetFetch, OffsetDelete -----------------------------------------------------

    def _commits(
        self, version: int, body: Body
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, PartitionCommit]]:
        """An OffsetCommit's or TxnOffsetCommit's partitions: the errors found before the
        coordinator is asked (its group not coordinated here, an unknown partition), and
        the commits to ask it for."""
        errors: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, PartitionCommit] = {}
        group_error = self.groups.group_error(body["group_id"])
        for topic in body["topics"]:
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                if group_error:
                    errors[tp] = group_error
                elif not self._exists(tp):
                    errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    errors[tp] = ErrorCode.NONE
                    offsets[tp] = PartitionCommit(
                        p["committed_offset"],
                        p["committed_metadata"],
                        p.get("committed_leader_epoch", -1),
                        p.get("commit_timestamp", -1) if version == 1 else -1,
                    )
        return errors, offsets

    async def offset_commit(self, version: int, body: Body) -> Body:
        errors, offsets = self._commits(version, body)
        if offsets:
            request = OffsetCommitRequest(
                body["group_id"],
                offsets,
                body.get("generation_id_or_member_epoch", -1),
                body.get("member_id", ""),
                body.get("group_instance_id"),
                body.get("retention_time_ms", -1) if 2 <= version <= 4 else -1,
            )
            response = await self.groups.call(
                lambda token, now: self.groups.offsets.commit_offsets(token, request, now)
            )
            errors.update(response.errors)
        return {"throttle_time_ms": 0, "topics": _errors_by_topic(errors)}

    async def txn_offset_commit(self, version: int, body: Body) -> Body:
        """Offsets committed inside the producer's transaction: written to
        ``__consumer_offsets`` at once, visible to OffsetFetch from its COMMIT marker."""
        errors, offsets = self._commits(version, body)
        if offsets:
            request = TxnOffsetCommitRequest(
                body["transactional_id"],
                body["group_id"],
                body["producer_id"],
                body["producer_epoch"],
                offsets,
                body.get("generation_id", -1),
                body.get("member_id", ""),
                body.get("group_instance_id"),
            )
            response = await self.groups.call(
                lambda token, now: self.groups.offsets.txn_commit_offsets(token, request, now)
            )
            errors.update(response.errors)
        return {"throttle_time_ms": 0, "topics": _errors_by_topic(errors)}

    async def offset_fetch(self, version: int, body: Body) -> Body:
        if version >= 8:
            stable = body["require_stable"]
            groups = [self._fetch_group(version, g["group_id"], g["topics"], stable) for g in body["groups"]]
            return {"throttle_time_ms": 0, "groups": groups}
        answer = self._fetch_group(version, body["group_id"], body["topics"], body.get("require_stable", False))
        if version < 2 and answer["error_code"]:  # no group-level error before v2: each partition carries it
            for topic in answer["topics"]:
                for p in topic["partitions"]:
                    p["error_code"] = p["error_code"] or answer["error_code"]
        return {"throttle_time_ms": 0, "topics": answer["topics"], "error_code": answer["error_code"]}

    def _fetch_group(self, version: int, group_id: str, topics: list[Body] | None, require_stable: bool) -> Body:
        wanted = (
            None
            if topics is None
            else tuple(TopicPartition(t["name"], p) for t in topics for p in t["partition_indexes"])
        )
        error = self.groups.group_error(group_id)
        if error:
            response = OffsetFetchResponse(group_id, error, dict.fromkeys(wanted or (), FetchedOffset()))
        else:
            response = self.groups.offsets.fetch_offsets(OffsetFetchRequest(group_id, wanted, require_stable))
        parts = {
            tp: {
                "partition_index": tp[1],
                "committed_offset": o.offset,
                "committed_leader_epoch": o.leader_epoch,
                "metadata": o.metadata,
                "error_code": o.error_code,
            }
            for tp, o in response.partitions.items()
        }
        return {"group_id": group_id, "topics": _by_topic(parts), "error_code": response.error_code}

    async def offset_delete(self, version: int, body: Body) -> Body:
        group_id = body["group_id"]
        wanted = [TopicPartition(t["name"], p["partition_index"]) for t in body["topics"] for p in t["partitions"]]
        error = self.groups.group_error(group_id)
        if error:
            return {"error_code": error, "throttle_time_ms": 0, "topics": []}
        errors = {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for tp in wanted if not self._exists(tp)}
        request = OffsetDeleteRequest(group_id, tuple(tp for tp in wanted if tp not in errors))
        response = await self.groups.call(lambda token, now: self.groups.offsets.delete_offsets(token, request, now))
        if response.error_code:
            return {"error_code": response.error_code, "throttle_time_ms": 0, "topics": []}
        errors.update(response.errors)
        return {
            "error_code": ErrorCode.NONE,
            "throttle_time_ms": 0,
            "topics": _errors_by_topic(errors),
        }

    # --- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------------------

    async def list_groups(self, version: int, body: Body) -> Body:
        # every group here is a classic one: a types filter (v5) without "classic" lists none, as
        # Kafka's ZooKeeper-mode coordinator answers
        types = {t.lower() for t in body.get("types_filter") or ()}
        if types and "classic" not in types:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "groups": []}
        listed = self.groups.admin.list_groups(tuple(body.get("states_filter") or ()))
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.groups.loading else listed.error_code,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.group_state,
                    "group_type": "classic",
                }
                for g in listed.groups
                if self.groups.coordinates(g.group_id)
            ],
        }

    async def describe_groups(self, version: int, body: Body) -> Body:
        described = []
        for group_id in body["groups"]:
            error = self.groups.group_error(group_id)
            if error:
                described.append(_group_error(group_id, error))
                continue
            g = self.groups.admin.describe_groups((group_id,))[0]
            described.append(
                {
                    "error_code": g.error_code,
                    "group_id": g.group_id,
                    "group_state": g.group_state,
                    "protocol_type": g.protocol_type,
                    "protocol_data": g.protocol_data,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.member_metadata,
                            "member_assignment": m.member_assignment,
                        }
                        for m in g.members
                    ],
                    "authorized_operations": NO_AUTHORIZED_OPERATIONS,
                }
            )
        return {"throttle_time_ms": 0, "groups": described}

    async def delete_groups(self, version: int, body: Body) -> Body:
        results = {group_id: self.groups.group_error(group_id) for group_id in body["groups_names"]}
        deletable = tuple(group_id for group_id, error in results.items() if not error)

        def delete(now: int) -> list[Any]:
            errors, tombstones = self.groups.admin.delete_groups(deletable, now)
            results.update(errors)
            return tombstones

        if deletable:
            await self.groups.run(delete)  # answered once the tombstones are in the log
        return {
            "throttle_time_ms": 0,
            "results": [{"group_id": group_id, "error_code": error} for group_id, error in results.items()],
        }

    # --- small pieces ------------------------------------------------------------------------------

    def _exists(self, tp: TopicPartition) -> bool:
        return 0 <= tp[1] < self.metadata.partition_count(tp[0])


def _join_body(version: int, r: JoinGroupResponse) -> Body:
    return {
        "throttle_time_ms": 0,
        "error_code": r.error_code,
        "generation_id": r.generation_id,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name if r.protocol_name is not None or version >= 7 else "",
        "leader": r.leader or "",
        "skip_assignment": r.skip_assignment,
        "member_id": r.member_id,
        "members": [
            {"member_id": member_id, "group_instance_id": instance_id, "metadata": metadata}
            for member_id, instance_id, metadata in r.members
        ],
    }


def _sync_body(r: SyncGroupResponse) -> Body:
    return {
        "throttle_time_ms": 0,
        "error_code": r.error_code,
        "protocol_type": r.protocol_type,
        "protocol_name": r.protocol_name,
        "assignment": r.assignment,
    }


def _group_error(group_id: str, error: int) -> Body:
    return {
        "error_code": error,
        "group_id": group_id,
        "group_state": "",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
        "authorized_operations": NO_AUTHORIZED_OPERATIONS,
    }


def _errors_by_topic(errors: Mapping[TopicPartition, int]) -> list[Body]:
    return _by_topic({tp: {"partition_index": tp[1], "error_code": e} for tp, e in errors.items()})


def _by_topic(entries: dict[TopicPartition, Body]) -> list[Body]:
    """Partitions' answers (each with its partition_index) nested by topic, in the order first seen."""
    topics: dict[str, list[Body]] = {}
    for (topic, _), entry in entries.items():
        parts = topics.get(topic)
        if parts is None:
            parts = topics[topic] = []
        parts.append(entry)
    return [{"name": name, "partitions": parts} for name, parts in topics.items()]
