"""Request handlers of the group coordinator's APIs (the group half of Kafka's ``KafkaApis``).

FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
ListGroups, DescribeGroups, DeleteGroups, OffsetDelete and TxnOffsetCommit (the
transactions' offsets, completed by their markers): each handler maps the request
(``seglog.protocol``'s generated ``*RequestData``, at its version) to the request value of
``seglog.coordinator``, checks what the broker checks before calling in (this broker
coordinates the group: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS; the topics of
offsets exist: UNKNOWN_TOPIC_OR_PARTITION), and maps the answer back to the
``*ResponseData`` at the request's version. ``GroupMetadataManager`` runs the calls on the
event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any, TypeVar

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
from ..protocol.enums import CoordinatorType
from ..protocol.message_data import (
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribeGroupsRequestData,
    DescribeGroupsResponseData,
    FindCoordinatorRequestData,
    FindCoordinatorResponseData,
    HeartbeatRequestData,
    HeartbeatResponseData,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    ListGroupsRequestData,
    ListGroupsResponseData,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetDeleteRequestData,
    OffsetDeleteResponseData,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    SyncGroupRequestData,
    SyncGroupResponseData,
    TxnOffsetCommitRequestData,
    TxnOffsetCommitResponseData,
)
from ..security import AclOperation, ResourceType
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .group_metadata_manager import GroupMetadataManager
from .metadata_cache import MetadataCache
from .request_context import current_request
from .routes import Route, Routes

GROUP_KEY, TRANSACTION_KEY = CoordinatorType.GROUP, CoordinatorType.TRANSACTION  # FindCoordinator's key types
# what FindCoordinator's key names, and the error a principal that may not describe it gets
_KEY_RESOURCES: dict[int, tuple[ResourceType, ErrorCode]] = {
    GROUP_KEY: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
    TRANSACTION_KEY: (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
}
GROUP_AUTHORIZATION_FAILED = ErrorCode.GROUP_AUTHORIZATION_FAILED
READ, DESCRIBE = AclOperation.READ, AclOperation.DESCRIBE
# enum members as module constants where every request asks: on Python 3.11 an Enum class's
# attribute is a call through EnumType.__getattr__'s hook (~340 ns, a global ~25)
_GROUP, _TOPIC = ResourceType.GROUP, ResourceType.TOPIC
_NONE, _TOPIC_AUTHORIZATION_FAILED = ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED
_UNKNOWN_TOPIC_OR_PARTITION = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

# a FindCoordinator key type's lookup: the key -> the partition whose leader coordinates it
CoordinatorLookup = Callable[[str], Awaitable[TopicPartition]]
Coordinator = FindCoordinatorResponseData.Coordinator

P = TypeVar("P")
_tuple_new = tuple.__new__
T = TypeVar("T")
_topic_of = itemgetter(0)  # a TopicPartition's topic


class GroupApis:
    def __init__(
        self,
        groups: GroupMetadataManager,
        metadata: MetadataCache,
        transaction_partition: CoordinatorLookup,
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
    ) -> None:
        """``transaction_partition``: the transaction coordinator's lookup, FindCoordinator's key type 1."""
        self.groups = groups
        self.authorizer = authorizer
        self.metadata = metadata
        self._lookups: dict[int, CoordinatorLookup] = {
            GROUP_KEY: self._group_partition,
            TRANSACTION_KEY: transaction_partition,
        }

    def routes(self) -> Routes:
        """At Kafka 3.9's versions (a ZooKeeper-mode broker's: its group coordinator knows classic
        groups alone, so KIP-848's OffsetCommit v9 and OffsetFetch v9 are v8 with fields it leaves
        unchecked); FindCoordinator's key type 1 is answered through the transaction coordinator's
        lookup given to the constructor, a share group's (v6) is an unknown key type."""
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

    def _group_error(self, group_id: str, operation: AclOperation = READ) -> int:
        """Why the request may not act on the group (GROUP_AUTHORIZATION_FAILED first, as Kafka
        checks ACLs before it asks the coordinator), or NONE."""
        if not self.authorizer.authorize(operation, _GROUP, group_id):
            return GROUP_AUTHORIZATION_FAILED
        return self.groups.group_error(group_id)

    def _topic_allowed(self, operation: AclOperation, names: Iterable[str]) -> set[str]:
        return self.authorizer.authorized(operation, _TOPIC, names)

    # --- FindCoordinator ---------------------------------------------------------------------------

    async def find_coordinator(self, version: int, body: FindCoordinatorRequestData) -> FindCoordinatorResponseData:
        # one key before v4 (key_type's default, before v1, is GROUP_KEY), a batch of keys from v4
        keys = body.coordinator_keys if version >= 4 else [body.key]
        found = [await self._find(body.key_type, key) for key in keys]
        if version >= 4:
            return FindCoordinatorResponseData(coordinators=found)
        (c,) = found
        return FindCoordinatorResponseData(
            error_code=c.error_code, error_message=c.error_message, node_id=c.node_id, host=c.host, port=c.port
        )

    async def _find(self, key_type: int, key: str) -> Coordinator:
        def error(code: int, message: str) -> Coordinator:
            return Coordinator(key, -1, "", -1, code, message)

        lookup = self._lookups.get(key_type)
        if lookup is None:
            return error(ErrorCode.INVALID_REQUEST, f"unknown key type {key_type}")
        resource_type, refused = _KEY_RESOURCES[key_type]
        if not self.authorizer.authorize(DESCRIBE, resource_type, key):
            return error(refused, f"may not describe {resource_type.title} {key}")
        try:
            topic, partition = await lookup(key)
        except InvalidRequestError as e:  # a key no coordinator takes (an empty transactional id)
            return error(ErrorCode.INVALID_REQUEST, e.message)
        except SeglogError as e:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, e.message)
        found = self.metadata.topic(topic)
        known = found is not None and 0 <= partition < len(found.partitions)
        broker = self.metadata.broker(found.partitions[partition].leader) if found and known else None
        # its address on the listener the request came in on, as Metadata gives it
        address = broker.address(current_request().listener_name) if broker is not None else None
        if broker is None or address is None:
            return error(ErrorCode.COORDINATOR_NOT_AVAILABLE, "no leader")
        return Coordinator(key, broker.broker_id, *address, ErrorCode.NONE, None)

    async def _group_partition(self, group_id: str) -> TopicPartition:
        await self.groups.ensure_offsets_topic()
        return TopicPartition(GROUP_METADATA_TOPIC, self.groups.partition_for(group_id))

    # --- JoinGroup, SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------

    async def join_group(self, version: int, body: JoinGroupRequestData) -> JoinGroupResponseData | None:
        error = self._group_error(body.group_id)
        if error:
            return _join_data(version, JoinGroupResponse(error))
        context = current_request()
        request = JoinGroupRequest(
            body.group_id,
            body.member_id,
            body.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in body.protocols),
            body.session_timeout_ms,
            body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms,
            context.client_id,
            context.client_host,
            body.group_instance_id,
            require_known_member_id=version >= 4,
            support_skipping_assignment=version >= 9,
        )
        response = await self.groups.call(lambda token, now: self.groups.coordinator.join_group(token, request, now))
        return None if response is None else _join_data(version, response)

    async def sync_group(self, version: int, body: SyncGroupRequestData) -> SyncGroupResponseData | None:
        error = self._group_error(body.group_id)
        if error:
            return _sync_data(SyncGroupResponse(error))
        request = SyncGroupRequest(
            body.group_id,
            body.generation_id,
            body.member_id,
            {a.member_id: bytes(a.assignment) for a in body.assignments},
            body.group_instance_id,
            body.protocol_type,
            body.protocol_name,
        )
        response = await self.groups.call(lambda token, now: self.groups.coordinator.sync_group(token, request, now))
        return None if response is None else _sync_data(response)

    async def heartbeat(self, version: int, body: HeartbeatRequestData) -> HeartbeatResponseData | None:
        error = self._group_error(body.group_id)
        if not error:
            request = HeartbeatRequest(body.group_id, body.generation_id, body.member_id, body.group_instance_id)
            response = await self.groups.call(lambda token, now: self.groups.coordinator.heartbeat(token, request, now))
            if response is None:
                return None
            error = response.error_code
        return HeartbeatResponseData(error_code=error)

    async def leave_group(self, version: int, body: LeaveGroupRequestData) -> LeaveGroupResponseData | None:
        if version >= 3:
            members = tuple(MemberIdentity(m.member_id, m.group_instance_id) for m in body.members)
        else:
            members = (MemberIdentity(body.member_id),)
        error = self._group_error(body.group_id)
        if error:
            response = LeaveGroupResponse(error)
        else:
            request = LeaveGroupRequest(body.group_id, members)
            response = await self.groups.call(
                lambda token, now: self.groups.coordinator.leave_group(token, request, now)
            )
            if response is None:
                return None
        if version >= 3:
            return LeaveGroupResponseData(
                error_code=response.error_code,
                members=[
                    LeaveGroupResponseData.MemberResponse(m.member_id, m.group_instance_id, e)
                    for m, e in response.members
                ],
            )
        # one member: its error is the request's (Kafka's LeaveGroupResponse for v0-2)
        member_error = response.members[0][1] if response.members else ErrorCode.NONE
        return LeaveGroupResponseData(error_code=response.error_code or member_error)

    # --- OffsetCommit, OffsetFetch, OffsetDelete -----------------------------------------------------

    def _checked(
        self, group_id: str, commits: dict[TopicPartition, PartitionCommit]
    ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, PartitionCommit]]:
        """An OffsetCommit's or TxnOffsetCommit's partitions: the errors found before the
        coordinator is asked (Read refused on the group or a topic, its group not coordinated
        here, an unknown partition), and the commits to ask it for."""
        errors: dict[TopicPartition, int] = {}
        offsets: dict[TopicPartition, PartitionCommit] = {}
        group_error = self._group_error(group_id)
        readable = self._topic_allowed(READ, set(map(_topic_of, commits)))
        for tp, commit in commits.items():
            if group_error:
                errors[tp] = group_error
            elif tp.topic not in readable:
                errors[tp] = _TOPIC_AUTHORIZATION_FAILED
            elif not self.metadata.has_partition(tp):
                errors[tp] = _UNKNOWN_TOPIC_OR_PARTITION
            else:
                errors[tp] = _NONE
                offsets[tp] = commit
        return errors, offsets

    async def offset_commit(self, version: int, body: OffsetCommitRequestData) -> OffsetCommitResponseData:
        # the fields a version lacks hold their defaults: no leader epoch, no generation, no member
        # (tuple.__new__: the named tuples' own constructors cost as much again, on every commit;
        # loops, not comprehensions, here and below: on 3.11 each of those is a function made
        # and called)
        commits: dict[TopicPartition, PartitionCommit] = {}
        for t in body.topics:
            name = t.name
            for p in t.partitions:
                stamp = p.commit_timestamp if version == 1 else -1
                commit = (p.committed_offset, p.committed_metadata, p.committed_leader_epoch, stamp)
                commits[_tuple_new(TopicPartition, (name, p.partition_index))] = _tuple_new(PartitionCommit, commit)
        errors, offsets = self._checked(body.group_id, commits)
        if offsets:
            request = _tuple_new(
                OffsetCommitRequest,
                (
                    body.group_id,
                    offsets,
                    body.generation_id_or_member_epoch,
                    body.member_id,
                    body.group_instance_id,
                    body.retention_time_ms if 2 <= version <= 4 else -1,
                ),
            )
            errors.update((await self.groups.commit_offsets(request)).errors)
        Data = OffsetCommitResponseData
        return Data(topics=_by_topic(errors, Data.OffsetCommitResponseTopic, Data.OffsetCommitResponsePartition))

    async def txn_offset_commit(self, version: int, body: TxnOffsetCommitRequestData) -> TxnOffsetCommitResponseData:
        """Offsets committed inside the producer's transaction: written to
        ``__consumer_offsets`` at once, visible to OffsetFetch from its COMMIT marker."""
        commits = {
            TopicPartition(t.name, p.partition_index): PartitionCommit(
                p.committed_offset, p.committed_metadata, p.committed_leader_epoch
            )
            for t in body.topics
            for p in t.partitions
        }
        errors, offsets = self._checked(body.group_id, commits)
        if not self.authorizer.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, body.transactional_id):
            errors, offsets = dict.fromkeys(commits, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), {}
        if offsets:
            request = TxnOffsetCommitRequest(
                body.transactional_id,
                body.group_id,
                body.producer_id,
                body.producer_epoch,
                offsets,
                body.generation_id,
                body.member_id,
                body.group_instance_id,
            )
            errors.update((await self.groups.txn_commit_offsets(request)).errors)
        Data = TxnOffsetCommitResponseData
        return Data(topics=_by_topic(errors, Data.TxnOffsetCommitResponseTopic, Data.TxnOffsetCommitResponsePartition))

    async def offset_fetch(self, version: int, body: OffsetFetchRequestData) -> OffsetFetchResponseData:
        Data = OffsetFetchResponseData
        if version >= 8:
            groups = []
            for g in body.groups:
                wanted = None if g.topics is None else [(t.name, t.partition_indexes) for t in g.topics]
                fetched = self._fetch_group(g.group_id, wanted, body.require_stable)
                parts = {
                    tp: Data.OffsetFetchResponsePartitions(
                        tp.partition, o.offset, o.leader_epoch, o.metadata, o.error_code
                    )
                    for tp, o in fetched.partitions.items()
                }
                topics = _by_topic(parts, Data.OffsetFetchResponseTopics)
                groups.append(Data.OffsetFetchResponseGroup(g.group_id, topics, fetched.error_code))
            return Data(groups=groups)
        wanted = None if body.topics is None else [(t.name, t.partition_indexes) for t in body.topics]
        fetched = self._fetch_group(body.group_id, wanted, body.require_stable)
        # no group-level error before v2: each partition carries it
        pushed = fetched.error_code if version < 2 else ErrorCode.NONE
        parts_v0 = {
            tp: Data.OffsetFetchResponsePartition(
                tp.partition, o.offset, o.leader_epoch, o.metadata, o.error_code or pushed
            )
            for tp, o in fetched.partitions.items()
        }
        return Data(topics=_by_topic(parts_v0, Data.OffsetFetchResponseTopic), error_code=fetched.error_code)

    def _fetch_group(
        self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool
    ) -> OffsetFetchResponse:
        """``topics``: the partitions asked for, by topic; None: every committed one."""
        wanted = None if topics is None else tuple(TopicPartition(t, p) for t, ps in topics for p in ps)
        error = self._group_error(group_id, DESCRIBE)
        if error:
            return OffsetFetchResponse(group_id, error, dict.fromkeys(wanted or (), FetchedOffset()))
        fetched = self.groups.offsets.fetch_offsets(OffsetFetchRequest(group_id, wanted, require_stable))
        # a topic it may not describe: refused when asked for, left out of "every committed one"
        described = self._topic_allowed(DESCRIBE, {tp.topic for tp in fetched.partitions})
        refused = FetchedOffset(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        partitions = {
            tp: o if tp.topic in described else refused
            for tp, o in fetched.partitions.items()
            if tp.topic in described or wanted is not None
        }
        return OffsetFetchResponse(fetched.group_id, fetched.error_code, partitions)

    async def offset_delete(self, version: int, body: OffsetDeleteRequestData) -> OffsetDeleteResponseData:
        group_id = body.group_id
        wanted = [TopicPartition(t.name, p.partition_index) for t in body.topics for p in t.partitions]
        error = self._group_error(group_id, AclOperation.DELETE)
        if error:
            return OffsetDeleteResponseData(error_code=error)
        readable = self._topic_allowed(READ, {tp.topic for tp in wanted})
        errors = {tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in wanted if tp.topic not in readable}
        errors |= {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            for tp in wanted
            if tp not in errors and not self.metadata.has_partition(tp)
        }
        request = OffsetDeleteRequest(group_id, tuple(tp for tp in wanted if tp not in errors))
        response = await self.groups.call(lambda token, now: self.groups.offsets.delete_offsets(token, request, now))
        if response.error_code:
            return OffsetDeleteResponseData(error_code=response.error_code)
        errors.update(response.errors)
        Data = OffsetDeleteResponseData
        parts = {tp: Data.OffsetDeleteResponsePartition(tp.partition, e) for tp, e in errors.items()}
        return Data(topics=_by_topic(parts, Data.OffsetDeleteResponseTopic))

    # --- ListGroups, DescribeGroups, DeleteGroups ------------------------------------------------------

    async def list_groups(self, version: int, body: ListGroupsRequestData) -> ListGroupsResponseData:
        # every group here is a classic one: a types filter (v5) without "classic" lists none, as
        # Kafka's ZooKeeper-mode coordinator answers
        types = {t.lower() for t in body.types_filter}
        if types and "classic" not in types:
            return ListGroupsResponseData(error_code=ErrorCode.NONE, groups=[])
        listed = self.groups.admin.list_groups(tuple(body.states_filter))  # empty before v4: every state
        # Describe on the cluster lists them all, else those it may describe
        everything = self.authorizer.authorize_cluster(DESCRIBE)
        shown = {g.group_id for g in listed.groups} if everything else self._described_groups(listed.groups)
        return ListGroupsResponseData(
            error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.groups.loading else listed.error_code,
            groups=[
                ListGroupsResponseData.ListedGroup(
                    group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.group_state, group_type="classic"
                )
                for g in listed.groups
                if self.groups.coordinates(g.group_id) and g.group_id in shown
            ],
        )

    def _described_groups(self, groups: Iterable[Any]) -> set[str]:
        return self.authorizer.authorized(DESCRIBE, ResourceType.GROUP, (g.group_id for g in groups))

    async def describe_groups(self, version: int, body: DescribeGroupsRequestData) -> DescribeGroupsResponseData:
        Data = DescribeGroupsResponseData
        described = []
        for group_id in body.groups:
            error = self._group_error(group_id, DESCRIBE)
            if error:
                described.append(Data.DescribedGroup(error, group_id))
                continue
            g = self.groups.admin.describe_groups((group_id,))[0]
            members = [
                Data.DescribedGroupMember(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, m.member_metadata, m.member_assignment
                )
                for m in g.members
            ]
            group = Data.DescribedGroup(
                g.error_code, g.group_id, g.group_state, g.protocol_type, g.protocol_data, members
            )
            if body.include_authorized_operations and not g.error_code:  # v3+; Kafka's KafkaApis skips failures
                group.authorized_operations = self.authorizer.authorized_operations(ResourceType.GROUP, group_id)
            described.append(group)
        return Data(groups=described)

    async def delete_groups(self, version: int, body: DeleteGroupsRequestData) -> DeleteGroupsResponseData:
        results = {group_id: self._group_error(group_id, AclOperation.DELETE) for group_id in body.groups_names}
        deletable = tuple(group_id for group_id, error in results.items() if not error)

        def delete(now: int) -> list[Any]:
            errors, tombstones = self.groups.admin.delete_groups(deletable, now)
            results.update(errors)
            return tombstones

        if deletable:
            await self.groups.run(delete)  # answered once the tombstones are in the log
        return DeleteGroupsResponseData(
            results=[DeleteGroupsResponseData.DeletableGroupResult(g, error) for g, error in results.items()]
        )


def _join_data(version: int, r: JoinGroupResponse) -> JoinGroupResponseData:
    return JoinGroupResponseData(
        error_code=r.error_code,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        # not nullable before v7
        protocol_name=r.protocol_name if r.protocol_name is not None or version >= 7 else "",
        leader=r.leader or "",
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[
            JoinGroupResponseData.JoinGroupResponseMember(member_id, instance_id, metadata)
            for member_id, instance_id, metadata in r.members
        ],
    )


def _sync_data(r: SyncGroupResponse) -> SyncGroupResponseData:
    return SyncGroupResponseData(
        error_code=r.error_code, protocol_type=r.protocol_type, protocol_name=r.protocol_name, assignment=r.assignment
    )


def _by_topic(
    entries: Mapping[TopicPartition, Any],
    topic: Callable[[str, list[P]], T],
    partition: Callable[[int, int], P] | None = None,
) -> list[T]:
    """Partitions' answers nested by topic (``topic(name, partitions)``), in the order first
    seen; with ``partition``, ``entries`` are error codes, each answered ``partition(index, error)``."""
    topics: dict[str, list[P]] = {}
    for (name, index), entry in entries.items():
        found = topics.get(name)
        if found is None:
            found = topics[name] = []
        found.append(entry if partition is None else partition(index, entry))
    return list(map(topic, topics, topics.values()))  # (no comprehension: a commit's answer goes through here)
