"""One classic consumer group in memory: its members, generation, protocol and leader
(Kafka's ``GroupMetadata`` and ``MemberMetadata``), without the rules of when it moves,
which ``group_coordinator.py`` holds.

A member waiting for its JoinGroup or SyncGroup answer holds the caller's token for
that request (``join_token``, ``sync_token``): the coordinator answers it later, when
the rebalance gets that far. Members are kept in the order they joined; the first
becomes leader, and when the leader goes the next one in that order takes over.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from .group_offsets import GroupOffsets
from .group_records import GroupMetadataValue, MemberMetadata
from .group_state import GroupState, check_group_transition

Protocols = tuple[tuple[str, bytes], ...]  # (name, metadata) in the member's order of preference


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_token: Hashable | None = None  # a JoinGroup waiting for the rebalance
    sync_token: Hashable | None = None  # a SyncGroup waiting for the leader's assignment
    is_new: bool = False  # joined, never answered: expires after the new member join timeout
    heartbeat_deadline: int | None = None

    @property
    def awaiting_join(self) -> bool:
        return self.join_token is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_token is not None

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among those every member supports."""
        return next(name for name, _ in self.protocols if name in candidates)


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    current_state_timestamp: int = -1
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # member id -> deadline to rejoin by
    pending_sync: set[str] = field(default_factory=set)  # members yet to send SyncGroup this generation
    join_deadline: int | None = None  # when a rebalance's wait for members ends
    initial_delay: tuple[int, int] | None = None  # (delay, rebalance time left) of an initial delayed join
    new_member_added: bool = False  # a member joined during an initial delay: wait once more
    sync_deadline: int | None = None  # when members that sent no SyncGroup are removed
    offsets: GroupOffsets = field(default_factory=GroupOffsets)
    _protocol_votes: Counter[str] = field(default_factory=Counter)

    # --- membership ----------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._protocol_votes.update(name for name, _ in member.protocols)
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._protocol_votes.subtract(name for name, _ in member.protocols)
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)

    def update_protocols(self, member: Member, protocols: Protocols) -> None:
        self._protocol_votes.subtract(name for name, _ in member.protocols)
        member.protocols = protocols
        self._protocol_votes.update(name for name, _ in protocols)

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """A static member came back with a new member id: the old id is fenced."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    # --- what the rules ask ---------------------------------------------------------------------

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        check_group_transition(self.group_id, self.state, state)
        self.state = state
        self.current_state_timestamp = now_ms

    @property
    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY)

    @property
    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.awaiting_join)

    @property
    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    @property
    def next_deadline(self) -> int | None:
        """The earliest of the group's timers (sessions, pending members' rejoin, the
        join and sync waits); None when none runs."""
        deadlines = [d for d in (self.join_deadline, self.sync_deadline) if d is not None]
        deadlines += self.pending_members.values()
        deadlines += (m.heartbeat_deadline for m in self.members.values() if m.heartbeat_deadline is not None)
        return min(deadlines, default=None)

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports_protocols(self, protocol_type: str, protocols: Sequence[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocols)
        return self.protocol_type == protocol_type and any(
            self._protocol_votes[p] == len(self.members) for p in protocols
        )

    def select_protocol(self) -> str:
        """The protocol most members prefer among those all of them support (ties: the
        first to reach the top count, in member order)."""
        candidates = {p for p, n in self._protocol_votes.items() if n == len(self.members)}
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader did not rejoin, hand leadership to a member that did; False when
        there is no leader or no member rejoined."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join:
            return True
        joined = next((m.member_id for m in self.members.values() if m.awaiting_join), None)
        if joined is None:
            return False
        self.leader_id = joined
        return True

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def member_metadata(self) -> tuple[tuple[str, str | None, bytes], ...]:
        """What the leader's JoinGroup answer lists: (member id, instance id, metadata)."""
        assert self.protocol_name is not None
        return tuple((m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values())

    def record_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        """The group as ``__consumer_offsets`` stores it (Kafka writes value version 3)."""
        members = tuple(
            MemberMetadata(
                m.member_id,
                m.client_id,
                m.client_host,
                m.session_timeout_ms,
                m.metadata(self.protocol_name) if self.protocol_name is not None else b"",
                assignment.get(m.member_id, b""),
                m.rebalance_timeout_ms,
                m.group_instance_id,
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            self.protocol_type or "",
            self.generation_id,
            self.protocol_name,
            self.leader_id,
            members,
            self.current_state_timestamp,
        )
