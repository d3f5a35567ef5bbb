"""The classic group coordinator's membership rules, sans-IO (Kafka's GroupCoordinator).

JoinGroup, SyncGroup, Heartbeat and LeaveGroup go in as values with a ``token`` (any
hashable the caller uses to find the request again) and the time; what comes out is
a list of outputs, and time moves only through ``tick(now)``:

- ``Reply(token, response)``: answer that request. A JoinGroup is usually answered
  later, when the rebalance completes (a later call's output), a SyncGroup when the
  leader's assignment is stored;
- ``Forget(token)``: a request Kafka never answers (a member's earlier JoinGroup that
  a newer one replaced, the SyncGroup of a member removed meanwhile): drop it;
- ``StoreGroup(store_id, group_id, key, value)``: append this record to the group's
  ``__consumer_offsets`` partition, then call ``complete_store(store_id, error, now)``
  with Kafka's error code for the append (0 when it succeeded).

Timers, all driven by ``tick``: a member's session (``session.timeout.ms`` after its
last heartbeat; 5 minutes for a member that joined and was never answered), a
rebalance's wait for members to rejoin (the largest ``rebalance.timeout.ms``; the
first rebalance of an empty group waits ``group.initial.rebalance.delay.ms``, again
while new members keep coming, up to the rebalance timeout), the wait for every
member's SyncGroup (the rebalance timeout again), and a pending member's time to
rejoin with the id it was given (its session timeout). ``next_deadline()`` says when
``tick`` is next due. Each group's earliest timer is kept in a heap
(``group_deadlines``), set again after every call that touched the group, so neither
``next_deadline`` nor ``tick`` walks the groups whose timers are not due.

Static members (``group.instance.id``, KIP-345) keep their place across restarts: one
rejoining with an unknown member id takes over its old id, fencing the old one
(FENCED_INSTANCE_ID), and in a Stable group whose protocol does not change it gets
its old assignment back without a rebalance.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import NamedTuple

from ..config import BrokerConfig
from ..errors import InvalidConfigurationError
from ..protocol import ErrorCode
from .broker_keys import broker_key, from_broker
from .classic_group import ClassicGroup, Member, Protocols
from .group_deadlines import GroupDeadlines
from .group_loader import LoadedGroup
from .group_records import GroupMetadataKey, encode_group_metadata_value, encode_key
from .group_state import GroupState
from .stores import Outputs, PendingStores

NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
UNKNOWN_MEMBER_ID = ""
_MAX_PASSES = 16  # timer passes per tick
_S = GroupState


@dataclass(frozen=True)
class GroupConfig:
    """The broker keys of the classic group coordinator (their defaults are ``seglog.config``'s)."""

    min_session_timeout_ms: int = broker_key("group.min.session.timeout.ms")
    max_session_timeout_ms: int = broker_key("group.max.session.timeout.ms")
    initial_rebalance_delay_ms: int = broker_key("group.initial.rebalance.delay.ms")
    max_size: int = broker_key("group.max.size")
    offsets_topic_num_partitions: int = broker_key("offsets.topic.num.partitions")
    offsets_retention_ms: int = broker_key("offsets.retention.minutes", 60_000)
    offsets_retention_check_interval_ms: int = broker_key("offsets.retention.check.interval.ms")
    offset_metadata_max_bytes: int = broker_key("offset.metadata.max.bytes")

    @classmethod
    def from_broker(cls, broker: BrokerConfig) -> GroupConfig:
        """The coordinator's keys as the broker's config sets them."""
        return from_broker(cls, broker)

    def __post_init__(self) -> None:
        if not 0 <= self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise InvalidConfigurationError(
                f"group.min.session.timeout.ms {self.min_session_timeout_ms} must be between 0 and "
                f"group.max.session.timeout.ms {self.max_session_timeout_ms}"
            )
        if self.initial_rebalance_delay_ms < 0:
            raise InvalidConfigurationError(
                f"group.initial.rebalance.delay.ms must be at least 0, not {self.initial_rebalance_delay_ms}"
            )
        if self.max_size < 1:
            raise InvalidConfigurationError(f"group.max.size must be at least 1, not {self.max_size}")


# --- requests and responses (the fields the rules read; the broker maps wire versions) -------------


@dataclass(frozen=True)
class JoinGroupRequest:
    group_id: str
    member_id: str
    protocol_type: str
    protocols: Protocols
    session_timeout_ms: int
    rebalance_timeout_ms: int  # v0: the session timeout
    client_id: str = ""
    client_host: str = ""
    group_instance_id: str | None = None  # v5+
    require_known_member_id: bool = True  # v4+: a new member first gets MEMBER_ID_REQUIRED
    support_skipping_assignment: bool = False  # v9+


@dataclass(frozen=True)
class JoinGroupResponse:
    error_code: int
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = ""
    members: tuple[tuple[str, str | None, bytes], ...] = ()  # for the leader: (member id, instance id, metadata)
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    assignments: dict[str, bytes]  # from the leader; empty from followers
    group_instance_id: str | None = None
    protocol_type: str | None = None  # v5+
    protocol_name: str | None = None


@dataclass(frozen=True)
class SyncGroupResponse:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class HeartbeatResponse:
    error_code: int


@dataclass(frozen=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True)
class LeaveGroupRequest:
    group_id: str
    members: tuple[MemberIdentity, ...]  # v0-2 carry one member id


@dataclass(frozen=True)
class LeaveGroupResponse:
    error_code: int
    members: tuple[tuple[MemberIdentity, int], ...] = ()  # each leaving member and its error


class Reply(NamedTuple):  # a tuple: one per request answered, an offset commit's too
    token: Hashable
    response: object  # the response of the request `token` names (a dataclass of this package)


@dataclass(frozen=True)
class Forget:
    token: Hashable


@dataclass(frozen=True)
class StoreGroup:
    store_id: int
    group_id: str
    key: bytes
    value: bytes


Output = Reply | Forget | StoreGroup


class GroupCoordinator:
    """The classic groups of the partitions this broker coordinates."""

    def __init__(self, config: GroupConfig | None = None, *, new_uuid: Callable[[], str] | None = None) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        self._new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self._out: Outputs[Output] = Outputs()
        self._stores: PendingStores[tuple[str, Callable[[int, int], None]]] = PendingStores("group metadata")
        self._deadlines = GroupDeadlines()

    # --- loading ---------------------------------------------------------------------------------

    def load_group(self, loaded: LoadedGroup, now_ms: int) -> None:
        """Take over a group read back from ``__consumer_offsets`` (``group_loader``): Stable
        with its members and assignments, each on a fresh session, or Empty."""
        meta = loaded.metadata
        group = ClassicGroup(loaded.group_id)
        if meta is not None:
            group.generation_id = meta.generation
            group.protocol_type = meta.protocol_type or None
            group.protocol_name = meta.protocol
            group.current_state_timestamp = meta.current_state_timestamp
            for m in meta.members:
                protocols = ((meta.protocol or "", m.subscription),)
                member = Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout,
                    m.session_timeout,
                    meta.protocol_type,
                    protocols,
                    m.assignment,
                )
                group.add(member)
                member.heartbeat_deadline = now_ms + member.session_timeout_ms
            group.leader_id = meta.leader if meta.leader in group.members else group.leader_id
            if group.members:
                group.state = _S.STABLE
        group.offsets.offsets.update(loaded.offsets)
        for producer_id, slots in loaded.pending_offsets.items():
            group.offsets.pending_txn[producer_id] = dict(slots)
        self.groups[group.group_id] = group
        self.update_deadline(group.group_id)

    def unload_group(self, group_id: str, now_ms: int) -> list[Output]:
        """This broker no longer coordinates the group (its partition's leadership moved,
        Kafka's ``onGroupUnloaded``): it dies here, and its members' waiting JoinGroup and
        SyncGroup are answered NOT_COORDINATOR so that they find the new coordinator."""
        group = self.groups.pop(group_id, None)
        self._deadlines.set(group_id, None)
        if group is None:
            return []
        group.transition_to(_S.DEAD, now_ms)
        group.join_deadline = group.sync_deadline = None
        for member in group.members.values():
            self._answer_join(member, JoinGroupResponse(ErrorCode.NOT_COORDINATOR, member.member_id))
            self._answer_sync(member, SyncGroupResponse(ErrorCode.NOT_COORDINATOR))
            member.heartbeat_deadline = None
        return self._out.drain()

    # --- JoinGroup -------------------------------------------------------------------------------

    def join_group(self, token: Hashable, request: JoinGroupRequest, now_ms: int) -> list[Output]:
        self._join(token, request, now_ms)
        self.update_deadline(request.group_id)
        return self._out.drain()

    def _join(self, token: Hashable, req: JoinGroupRequest, now: int) -> None:
        c = self.config
        if not req.group_id:
            return self._reply(token, JoinGroupResponse(ErrorCode.INVALID_GROUP_ID, req.member_id))
        if not c.min_session_timeout_ms <= req.session_timeout_ms <= c.max_session_timeout_ms:
            return self._reply(token, JoinGroupResponse(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
        new_member = req.member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(req.group_id)
        if group is None:
            if not new_member:  # a member of a group this coordinator does not know
                return self._reply(token, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            group = self.groups[req.group_id] = ClassicGroup(req.group_id)
        if not self._accept_joining_member(group, req.member_id):
            group.remove(req.member_id)
            self._reply(token, JoinGroupResponse(ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif group.state is _S.DEAD:
            self._reply(token, JoinGroupResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
        elif not group.supports_protocols(req.protocol_type, [name for name, _ in req.protocols]):
            self._reply(token, JoinGroupResponse(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        elif new_member:
            self._new_member_join(group, token, req, now)
        else:
            self._current_member_join(group, token, req, now)
        if group.state is _S.PREPARING_REBALANCE:
            self._try_complete_join(group, now)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        # the awaiting count, not the size, in a rebalance: members that do not rejoin will go
        if group.state in (_S.EMPTY, _S.DEAD):
            return True
        member = group.members.get(member_id)
        if group.state is _S.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join) or group.num_awaiting_join < self.config.max_size
        return member is not None or len(group.members) < self.config.max_size

    def _new_member_join(self, group: ClassicGroup, token: Hashable, req: JoinGroupRequest, now: int) -> None:
        new_id = f"{req.group_instance_id or req.client_id}-{self._new_uuid()}"
        if req.group_instance_id is not None:
            old_id = group.static_members.get(req.group_instance_id)
            if old_id is not None:
                self._replace_static_member(group, token, req, old_id, new_id, now)
            else:
                self._add_member_and_rebalance(group, token, req, new_id, now)
        elif req.require_known_member_id:
            # the member must come back with this id: until it does, it only holds a place
            group.pending_members[new_id] = now + req.session_timeout_ms
            self._reply(token, JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(group, token, req, new_id, now)

    def _current_member_join(self, group: ClassicGroup, token: Hashable, req: JoinGroupRequest, now: int) -> None:
        if req.member_id in group.pending_members:
            if req.group_instance_id is not None:  # Kafka: IllegalStateException
                return self._reply(token, JoinGroupResponse(ErrorCode.UNKNOWN_SERVER_ERROR, req.member_id))
            return self._add_member_and_rebalance(group, token, req, req.member_id, now)
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            return self._reply(token, JoinGroupResponse(error, req.member_id))
        member = group.members[req.member_id]
        same = member.protocols == req.protocols
        if group.state is _S.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, token, req, now)
        elif group.state is _S.COMPLETING_REBALANCE:
            if same:  # it missed its JoinGroup answer: give it again
                self._reply(token, self._join_response(group, member))
            else:
                self._update_member_and_rebalance(group, member, token, req, now)
        elif group.state is _S.STABLE:
            # the leader rejoins to rebalance on changes its metadata does not show (topics)
            if group.leader_id == member.member_id or not same:
                self._update_member_and_rebalance(group, member, token, req, now)
            else:
                self._reply(token, self._join_response(group, member, with_members=False))
        else:
            self._reply(token, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))

    def _join_response(self, group: ClassicGroup, member: Member, *, with_members: bool = True) -> JoinGroupResponse:
        leader = group.leader_id == member.member_id
        return JoinGroupResponse(
            ErrorCode.NONE,
            member.member_id,
            group.generation_id,
            group.protocol_type,
            group.protocol_name,
            group.leader_id,
            group.member_metadata() if leader and with_members else (),
        )

    def _add_member_and_rebalance(
        self, group: ClassicGroup, token: Hashable, req: JoinGroupRequest, member_id: str, now: int
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.rebalance_timeout_ms,
            req.session_timeout_ms,
            req.protocol_type,
            req.protocols,
            join_token=token,
            is_new=True,
        )
        if group.state is _S.PREPARING_REBALANCE and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        # it cannot heartbeat before its JoinGroup is answered: a defunct one goes after 5 minutes
        member.heartbeat_deadline = now + NEW_MEMBER_JOIN_TIMEOUT_MS
        self._maybe_prepare_rebalance(group, now)

    def _update_member(
        self, group: ClassicGroup, member: Member, token: Hashable | None, req: JoinGroupRequest
    ) -> None:
        group.update_protocols(member, req.protocols)
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.session_timeout_ms = req.session_timeout_ms
        if member.join_token is not None and member.join_token != token:
            self._out.append(Forget(member.join_token))  # Kafka drops the replaced callback unanswered
        member.join_token = token

    def _update_member_and_rebalance(
        self, group: ClassicGroup, member: Member, token: Hashable, req: JoinGroupRequest, now: int
    ) -> None:
        self._update_member(group, member, token, req)
        self._maybe_prepare_rebalance(group, now)

    def _replace_static_member(
        self, group: ClassicGroup, token: Hashable, req: JoinGroupRequest, old_id: str, new_id: str, now: int
    ) -> None:
        instance_id = req.group_instance_id
        assert instance_id is not None
        old_leader = group.leader_id
        member = group.members[old_id]
        # whoever still waits under the old id is a duplicate of this instance: fenced
        self._answer_join(member, JoinGroupResponse(ErrorCode.FENCED_INSTANCE_ID, old_id))
        self._answer_sync(member, SyncGroupResponse(ErrorCode.FENCED_INSTANCE_ID))
        group.replace_static_member(instance_id, old_id, new_id)
        member.heartbeat_deadline = now + member.session_timeout_ms
        before = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        self._update_member(group, member, token, req)
        if group.state is _S.STABLE:
            if group.select_protocol() != group.protocol_name:
                return self._maybe_prepare_rebalance(group, now)
            generation = group.generation_id

            def stored(error: int, now: int) -> None:
                if error != ErrorCode.NONE:  # put the old member id back
                    member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = before
                    member.join_token = None
                    group.replace_static_member(instance_id, new_id, old_id)
                    member.heartbeat_deadline = now + member.session_timeout_ms
                    response = JoinGroupResponse(
                        error, UNKNOWN_MEMBER_ID, generation, group.protocol_type, group.protocol_name, old_leader
                    )
                    self._reply(token, response)
                elif req.support_skipping_assignment:
                    # v9+: the leader is told it leads, but not to run the assignor in a stable group
                    leader = group.leader_id == new_id
                    response = self._join_response(group, member, with_members=leader)
                    self._answer_join(member, dataclasses.replace(response, skip_assignment=leader))
                else:
                    # before v9: the old leader id, so a returning leader does not assign for nothing
                    response = self._join_response(group, member, with_members=False)
                    self._answer_join(member, dataclasses.replace(response, leader=old_leader))

            self._store(group, {m.member_id: m.assignment for m in group.members.values()}, stored)
        elif group.state is _S.COMPLETING_REBALANCE:
            # the leader may have been sent the old member id to assign to: assign again
            self._prepare_rebalance(group, now)

    # --- rebalances ------------------------------------------------------------------------------

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: int) -> None:
        if group.state is _S.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, now)
        group.pending_sync.clear()
        group.sync_deadline = None
        if group.state is _S.EMPTY:
            delay = self.config.initial_rebalance_delay_ms
            group.initial_delay = (delay, max(group.rebalance_timeout_ms - delay, 0))
            group.join_deadline = now + delay
        else:
            group.initial_delay = None
            group.join_deadline = now + group.rebalance_timeout_ms
        group.transition_to(_S.PREPARING_REBALANCE, now)
        self._try_complete_join(group, now)

    def _try_complete_join(self, group: ClassicGroup, now: int) -> None:
        # an initial delayed join always waits its delay, to gather the members starting together
        if group.initial_delay is None and group.has_all_members_joined:
            self._complete_join(group, now)

    def _join_deadline_passed(self, group: ClassicGroup, now: int) -> None:
        if group.initial_delay is not None:
            delay, remaining = group.initial_delay
            if group.new_member_added and remaining != 0:
                group.new_member_added = False
                next_delay = min(self.config.initial_rebalance_delay_ms, remaining)
                group.initial_delay = (next_delay, max(remaining - delay, 0))
                group.join_deadline = now + next_delay
                return
        self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: int) -> None:
        group.join_deadline = group.initial_delay = None
        for member in [m for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]:
            self._drop_member(group, member)
        if group.state is _S.DEAD:
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # nobody rejoined: wait again, until sessions remove the silent members
            group.join_deadline = now + group.rebalance_timeout_ms
            return
        group.init_next_generation(now)
        if group.state is _S.EMPTY:
            self._store(group, {}, lambda error, now: None)  # a failed write of an empty group is harmless
            return
        for member in group.members.values():
            self._answer_join(member, self._join_response(group, member))
            member.heartbeat_deadline = now + member.session_timeout_ms
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_deadline = now + group.rebalance_timeout_ms

    # --- SyncGroup -------------------------------------------------------------------------------

    def sync_group(self, token: Hashable, request: SyncGroupRequest, now_ms: int) -> list[Output]:
        self._sync(token, request, now_ms)
        self.update_deadline(request.group_id)
        return self._out.drain()

    def _sync(self, token: Hashable, req: SyncGroupRequest, now: int) -> None:
        if not req.group_id:
            return self._reply(token, SyncGroupResponse(ErrorCode.INVALID_GROUP_ID))
        group = self.groups.get(req.group_id)
        if group is None:
            return self._reply(token, SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        error = self._validate_sync(group, req)
        if error is not None:
            return self._reply(token, SyncGroupResponse(error))
        if group.state is _S.EMPTY:
            return self._reply(token, SyncGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is _S.PREPARING_REBALANCE:
            return self._reply(token, SyncGroupResponse(ErrorCode.REBALANCE_IN_PROGRESS))
        member = group.members[req.member_id]
        self._remove_pending_sync(group, member.member_id)
        if group.state is _S.STABLE:
            response = SyncGroupResponse(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
            self._reply(token, response)
            member.heartbeat_deadline = now + member.session_timeout_ms
            return
        if member.sync_token is not None and member.sync_token != token:
            self._out.append(Forget(member.sync_token))  # Kafka drops the replaced callback unanswered
        member.sync_token = token  # CompletingRebalance: answered once the leader's assignment is stored
        if group.leader_id == member.member_id:
            assignment = {mid: req.assignments.get(mid, b"") for mid in group.members}
            generation = group.generation_id

            def stored(error: int, now: int) -> None:
                # a member may have joined meanwhile: only the same rebalance completes
                if group.state is not _S.COMPLETING_REBALANCE or group.generation_id != generation:
                    return
                if error != ErrorCode.NONE:
                    self._reset_and_propagate_assignment_error(group, error, now)
                    self._maybe_prepare_rebalance(group, now)
                else:
                    for m in group.members.values():
                        m.assignment = assignment.get(m.member_id, b"")
                    self._propagate_assignment(group, ErrorCode.NONE, now)
                    group.transition_to(_S.STABLE, now)

            self._store(group, assignment, stored)

    def _validate_sync(self, group: ClassicGroup, req: SyncGroupRequest) -> ErrorCode | None:
        if group.state is _S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if req.protocol_type is not None and req.protocol_type != group.protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if req.protocol_name is not None and req.protocol_name != group.protocol_name:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return None

    def _remove_pending_sync(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            group.sync_deadline = None

    def _sync_deadline_passed(self, group: ClassicGroup, now: int) -> None:
        group.sync_deadline = None
        if group.state in (_S.COMPLETING_REBALANCE, _S.STABLE) and group.pending_sync:
            for member_id in list(group.pending_sync):
                self._drop_member(group, group.members[member_id])
            self._prepare_rebalance(group, now)

    def _reset_and_propagate_assignment_error(self, group: ClassicGroup, error: int, now: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now)

    def _propagate_assignment(self, group: ClassicGroup, error: int, now: int) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            if member.sync_token is not None:
                response = SyncGroupResponse(
                    error,
                    member.assignment,
                    group.protocol_type if ok else None,
                    group.protocol_name if ok else None,
                )
                self._answer_sync(member, response)
                # its session restarts now: it could not heartbeat while waiting for this answer
                member.heartbeat_deadline = now + member.session_timeout_ms

    # --- Heartbeat and LeaveGroup ----------------------------------------------------------------

    def heartbeat(self, token: Hashable, request: HeartbeatRequest, now_ms: int) -> list[Output]:
        self._reply(token, HeartbeatResponse(self._heartbeat(request, now_ms)))
        self.update_deadline(request.group_id)
        return self._out.drain()

    def _heartbeat(self, req: HeartbeatRequest, now: int) -> int:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(req.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.state is _S.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is _S.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members[req.member_id]
        member.heartbeat_deadline = now + member.session_timeout_ms
        if group.state is _S.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave_group(self, token: Hashable, request: LeaveGroupRequest, now_ms: int) -> list[Output]:
        group = self.groups.get(request.group_id)
        if not request.group_id:
            response = LeaveGroupResponse(ErrorCode.INVALID_GROUP_ID)
        elif group is None:
            response = LeaveGroupResponse(
                ErrorCode.NONE, tuple((m, ErrorCode.UNKNOWN_MEMBER_ID) for m in request.members)
            )
        elif group.state is _S.DEAD:
            response = LeaveGroupResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        else:
            results = tuple((m, self._leave(group, m, now_ms)) for m in request.members)
            response = LeaveGroupResponse(ErrorCode.NONE, results)
        self._reply(token, response)
        self.update_deadline(request.group_id)
        return self._out.drain()

    def _leave(self, group: ClassicGroup, who: MemberIdentity, now: int) -> int:
        if who.member_id == UNKNOWN_MEMBER_ID:  # an administrator removing a static member by instance id
            member_id = None if who.group_instance_id is None else group.static_members.get(who.group_instance_id)
            if member_id is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            self._remove_member_and_update_group(group, group.members[member_id], now)
            return ErrorCode.NONE
        if who.member_id in group.pending_members:
            self._remove_pending_member_and_update_group(group, who.member_id, now)
            return ErrorCode.NONE
        error = self._validate_member(group, who.member_id, who.group_instance_id)
        if error is not None:
            return error
        self._remove_member_and_update_group(group, group.members[who.member_id], now)
        return ErrorCode.NONE

    # --- members leaving -------------------------------------------------------------------------

    def _drop_member(self, group: ClassicGroup, member: Member) -> None:
        """Remove a member whose requests no longer matter; what it still waits on is dropped."""
        if member.sync_token is not None:
            self._out.append(Forget(member.sync_token))
            member.sync_token = None
        member.heartbeat_deadline = None
        group.remove(member.member_id)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: Member, now: int) -> None:
        # a member that times out while its JoinGroup waits is told so, and may rejoin
        self._answer_join(member, JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID))
        self._drop_member(group, member)
        if group.state in (_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now)
        elif group.state is _S.PREPARING_REBALANCE:
            self._try_complete_join(group, now)

    def _remove_pending_member_and_update_group(self, group: ClassicGroup, member_id: str, now: int) -> None:
        group.remove(member_id)
        if group.state is _S.PREPARING_REBALANCE:
            self._try_complete_join(group, now)

    # --- time ------------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Output]:
        """Run every timer due at ``now_ms``: expired sessions, pending members that never
        rejoined, rebalances whose wait ended, members that never sent SyncGroup. Only the
        groups with a timer due are visited. A timer may set another already due (a zero
        delay): passes repeat while one is, a bounded number of times (a group whose
        timeouts are all zero would spin, as in Kafka)."""
        for _ in range(_MAX_PASSES):
            due = self._deadlines.pop_due(now_ms)
            if not due:
                break
            try:
                for group_id in due:
                    group = self.groups.get(group_id)
                    if group is not None:
                        self._run_timers(group, now_ms)
            finally:  # rearmed even when a timer fails: no group loses its wake-up
                for group_id in due:
                    self.update_deadline(group_id)
        return self._out.drain()

    def _run_timers(self, group: ClassicGroup, now_ms: int) -> None:
        for member_id, deadline in list(group.pending_members.items()):
            if deadline <= now_ms:
                self._remove_pending_member_and_update_group(group, member_id, now_ms)
        for member in list(group.members.values()):
            if member.heartbeat_deadline is None or member.heartbeat_deadline > now_ms:
                continue
            if member.member_id not in group.members:
                continue  # removed by an earlier expiry of this pass
            member.heartbeat_deadline = None
            # a member waiting for a rebalance to answer it cannot heartbeat: it does not expire,
            # unless it never got an answer at all (a new member)
            if member.is_new or not (member.awaiting_join or member.awaiting_sync):
                self._remove_member_and_update_group(group, member, now_ms)
        if group.join_deadline is not None and group.join_deadline <= now_ms:
            self._join_deadline_passed(group, now_ms)
        if group.sync_deadline is not None and group.sync_deadline <= now_ms:
            self._sync_deadline_passed(group, now_ms)

    def next_deadline(self) -> int | None:
        """When ``tick`` is next due; None when no timer runs."""
        return self._deadlines.earliest()

    def update_deadline(self, group_id: str) -> None:
        """Take the group's timers as they are now (after a call that may have moved them,
        or removed the group) into the next deadline."""
        group = self.groups.get(group_id)
        self._deadlines.set(group_id, None if group is None else group.next_deadline)

    def remove_group(self, group_id: str) -> None:
        """Forget a group that died (its offsets expired or deleted), with its timers."""
        self.groups.pop(group_id, None)
        self._deadlines.set(group_id, None)

    # --- storing ---------------------------------------------------------------------------------

    def _store(self, group: ClassicGroup, assignment: dict[str, bytes], stored: Callable[[int, int], None]) -> None:
        store_id = self._stores.add((group.group_id, stored))
        key = encode_key(GroupMetadataKey(group.group_id))
        value = encode_group_metadata_value(group.record_value(assignment))
        self._out.append(StoreGroup(store_id, group.group_id, key, value))

    def complete_store(self, store_id: int, error_code: int, now_ms: int) -> list[Output]:
        """The append of a ``StoreGroup`` record ended with ``error_code`` (0: written)."""
        group_id, stored = self._stores.pop(store_id)
        stored(error_code, now_ms)
        self.update_deadline(group_id)
        return self._out.drain()

    # --- small pieces ----------------------------------------------------------------------------

    def _validate_member(self, group: ClassicGroup, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.FENCED_INSTANCE_ID if current != member_id else None
        return None if member_id in group.members else ErrorCode.UNKNOWN_MEMBER_ID

    def _reply(
        self, token: Hashable, response: JoinGroupResponse | SyncGroupResponse | HeartbeatResponse | LeaveGroupResponse
    ) -> None:
        self._out.append(Reply(token, response))

    def _answer_join(self, member: Member, response: JoinGroupResponse) -> None:
        if member.join_token is not None:
            self._reply(member.join_token, response)
            member.join_token = None

    def _answer_sync(self, member: Member, response: SyncGroupResponse) -> None:
        if member.sync_token is not None:
            self._reply(member.sync_token, response)
            member.sync_token = None
