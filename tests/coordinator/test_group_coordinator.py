"""The classic group coordinator's membership rules, driven by requests and a fake clock:
joins with the initial delay, rebalances, sessions, static members, leaves, stores."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import seglog
from seglog.coordinator.group_coordinator import (
    NEW_MEMBER_JOIN_TIMEOUT_MS,
    ErrorCode,
    Forget,
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    Reply,
    StoreGroup,
    SyncGroupRequest,
)
from seglog.coordinator.group_loader import load_groups
from seglog.coordinator.group_records import GroupMetadataKey, decode_group_metadata_value, decode_key
from seglog.coordinator.group_state import GroupState
from seglog.errors import InvalidConfigurationError, SeglogError

G = "orders-app"
SESSION, REBALANCE, DELAY = 10_000, 30_000, 3_000


class Harness:
    """A coordinator, a clock, and every output kept by kind."""

    def __init__(self, **config) -> None:
        self.now = 0
        ids = itertools.count()
        self.coordinator = GroupCoordinator(GroupConfig(**config), new_uuid=lambda: f"u{next(ids)}")
        self.replies: dict = {}
        self.forgotten: list = []
        self.stores: list[StoreGroup] = []
        self.tokens = itertools.count()

    def _take(self, outputs) -> None:
        for out in outputs:
            if isinstance(out, Reply):
                assert out.token not in self.replies, "a token answered twice"
                self.replies[out.token] = out.response
            elif isinstance(out, Forget):
                self.forgotten.append(out.token)
            else:
                self.stores.append(out)

    def join(self, member_id: str = "", *, client: str = "c", protocols=(("range", b"r"),), **kw) -> int:
        token = next(self.tokens)
        kw.setdefault("session_timeout_ms", SESSION)
        kw.setdefault("rebalance_timeout_ms", REBALANCE)
        request = JoinGroupRequest(G, member_id, kw.pop("protocol_type", "consumer"), protocols, client_id=client, **kw)
        self._take(self.coordinator.join_group(token, request, self.now))
        return token

    def new_member(self, client: str, **kw) -> int:
        """A dynamic member's two JoinGroups: the id it is given, then the real join."""
        first = self.join(client=client, **kw)
        assert self.replies[first].error_code == ErrorCode.MEMBER_ID_REQUIRED
        return self.join(self.replies[first].member_id, client=client, **kw)

    def sync(self, member_id: str, generation: int, assignments=None, **kw) -> int:
        token = next(self.tokens)
        request = SyncGroupRequest(G, generation, member_id, assignments or {}, **kw)
        self._take(self.coordinator.sync_group(token, request, self.now))
        return token

    def heartbeat(self, member_id: str, generation: int, **kw) -> int:
        token = next(self.tokens)
        self._take(self.coordinator.heartbeat(token, HeartbeatRequest(G, generation, member_id, **kw), self.now))
        return self.replies[token].error_code

    def leave(self, *members: MemberIdentity):
        token = next(self.tokens)
        self._take(self.coordinator.leave_group(token, LeaveGroupRequest(G, members), self.now))
        return self.replies[token]

    def tick(self, to: int) -> None:
        self.now = to
        self._take(self.coordinator.tick(to))

    def run_until(self, to: int, *alive: tuple[str, int]) -> None:
        """Let time pass to ``to`` while the members ``alive`` (member id, generation)
        heartbeat every half session."""
        while self.now < to:
            self.tick(min(to, self.now + SESSION // 2))
            for member_id, generation in alive:
                self.heartbeat(member_id, generation)

    def store_done(self, error: int = 0) -> StoreGroup:
        store = self.stores.pop(0)
        self._take(self.coordinator.complete_store(store.store_id, error, self.now))
        return store

    @property
    def group(self):
        return self.coordinator.groups[G]


def stable_group(h: Harness, *clients: str) -> list[str]:
    """Members join together, the leader assigns, the group is Stable; their member ids."""
    tokens = [h.new_member(c) for c in clients]
    h.tick(h.coordinator.next_deadline())
    joins = [h.replies[t] for t in tokens]
    leader = joins[0].leader
    ids = [j.member_id for j in joins]
    generation = joins[0].generation_id
    syncs = [h.sync(i, generation, {m: m.encode() for m in ids} if i == leader else {}) for i in ids]
    h.store_done()
    assert all(h.replies[s].error_code == 0 for s in syncs)
    assert h.group.state is GroupState.STABLE
    return ids


def test_a_first_member_waits_the_initial_delay_then_leads_and_assigns():
    h = Harness(initial_rebalance_delay_ms=DELAY)
    first = h.join(client="app")
    assert h.replies[first] == JoinGroupResponse(ErrorCode.MEMBER_ID_REQUIRED, "app-u0")
    token = h.join("app-u0", client="app")
    assert token not in h.replies and h.group.state is GroupState.PREPARING_REBALANCE
    assert h.coordinator.next_deadline() == DELAY
    h.tick(DELAY - 1)
    assert token not in h.replies
    h.tick(DELAY)
    join = h.replies[token]
    assert (join.error_code, join.generation_id, join.leader, join.protocol_name) == (0, 1, "app-u0", "range")
    assert join.members == (("app-u0", None, b"r"),)
    sync = h.sync("app-u0", 1, {"app-u0": b"partitions", "stranger": b"x"})
    assert sync not in h.replies  # answered once the assignment is stored
    store = h.store_done()
    assert decode_key(store.key) == GroupMetadataKey(G)
    value = decode_group_metadata_value(store.value)
    assert (value.generation, value.leader, value.protocol, value.version) == (1, "app-u0", "range", 3)
    assert [(m.member_id, m.subscription, m.assignment) for m in value.members] == [("app-u0", b"r", b"partitions")]
    assert h.replies[sync].assignment == b"partitions"
    assert h.group.state is GroupState.STABLE


def test_the_initial_delay_extends_while_members_arrive_up_to_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=DELAY)
    a = h.new_member("a", rebalance_timeout_ms=10_000)
    h.tick(1_000)
    b = h.new_member("b", rebalance_timeout_ms=10_000)
    h.tick(DELAY)  # b came during the delay: wait another delay
    assert a not in h.replies and h.coordinator.next_deadline() == 2 * DELAY
    h.tick(2 * DELAY)
    assert h.replies[a].generation_id == h.replies[b].generation_id == 1
    assert len(h.replies[a].members) == 2 and h.replies[b].members == ()


def test_a_member_whose_session_expires_is_removed_and_the_rest_rebalance():
    h = Harness(initial_rebalance_delay_ms=0)
    a, b, c = stable_group(h, "a", "b", "c")
    h.tick(SESSION - 1)
    assert h.heartbeat(a, 1) == h.heartbeat(b, 1) == ErrorCode.NONE
    h.tick(SESSION)  # c sent none
    assert c not in h.group.members and h.group.state is GroupState.PREPARING_REBALANCE
    assert h.heartbeat(a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.heartbeat(c, 1) == ErrorCode.UNKNOWN_MEMBER_ID
    ja = h.join(a, client="a")
    assert ja not in h.replies
    jb = h.join(b, client="b")  # every member is back: no waiting for the rebalance timeout
    assert h.replies[ja].generation_id == h.replies[jb].generation_id == 2
    assert h.heartbeat(a, 1) == ErrorCode.ILLEGAL_GENERATION


def test_a_member_that_does_not_rejoin_in_time_is_left_out():
    h = Harness(initial_rebalance_delay_ms=0)
    a, b = stable_group(h, "a", "b")
    ja = h.join(a, client="a")  # the leader rejoins: a rebalance
    h.run_until(REBALANCE - 1, (b, 1))  # b is alive but does not rejoin
    assert ja not in h.replies
    h.tick(REBALANCE)
    assert h.replies[ja].members == ((a, None, b"r"),)
    assert b not in h.group.members


def test_a_follower_that_sends_no_sync_is_removed_after_the_rebalance_timeout():
    h = Harness(initial_rebalance_delay_ms=0)
    ta, tb = h.new_member("a"), h.new_member("b")
    h.tick(0)
    a, b = h.replies[ta].member_id, h.replies[tb].member_id
    sync = h.sync(a, 1, {a: b"1", b: b"2"})
    h.store_done()
    assert h.replies[sync].assignment == b"1"
    h.run_until(REBALANCE - 1, (a, 1), (b, 1))
    assert b in h.group.members
    h.tick(REBALANCE)
    assert b not in h.group.members and h.group.state is GroupState.PREPARING_REBALANCE


def test_a_failed_store_of_the_assignment_fails_every_waiting_sync_and_rebalances():
    h = Harness(initial_rebalance_delay_ms=0)
    ta, tb = h.new_member("a"), h.new_member("b")
    h.tick(0)
    a, b = h.replies[ta].member_id, h.replies[tb].member_id
    sb = h.sync(b, 1)
    sa = h.sync(a, 1, {a: b"1", b: b"2"})
    h.store_done(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert h.replies[sa].error_code == h.replies[sb].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert h.replies[sb].protocol_name is None
    assert h.group.state is GroupState.PREPARING_REBALANCE


def test_a_new_member_never_answered_expires_after_five_minutes():
    h = Harness(initial_rebalance_delay_ms=0)
    (a,) = stable_group(h, "a")
    late = h.new_member("late", rebalance_timeout_ms=10 * 60_000)
    for t in range(SESSION // 2, NEW_MEMBER_JOIN_TIMEOUT_MS, SESSION // 2):
        h.tick(t)
        assert h.heartbeat(a, 1) == ErrorCode.REBALANCE_IN_PROGRESS  # a keeps its session, never rejoins
    h.tick(NEW_MEMBER_JOIN_TIMEOUT_MS)
    assert h.replies[late] == JoinGroupResponse(ErrorCode.UNKNOWN_MEMBER_ID)
    h.tick(10 * 60_000)  # the rebalance ends with no member rejoined: the group is empty
    assert h.group.state is GroupState.EMPTY and h.group.generation_id == 2
    assert decode_group_metadata_value(h.stores[-1].value).members == ()


def test_a_pending_member_that_never_comes_back_is_forgotten():
    h = Harness()
    h.join(client="x")
    assert list(h.group.pending_members) == ["x-u0"]
    h.tick(SESSION)
    assert h.group.pending_members == {}


def test_a_restarted_static_member_takes_its_place_back_without_a_rebalance():
    h = Harness(initial_rebalance_delay_ms=0)
    first = h.join(client="c", group_instance_id="i-1")  # static members get their id at once
    h.tick(0)
    old = h.replies[first].member_id
    assert old == "i-1-u0"
    h.sync(old, 1, {old: b"mine"})
    h.store_done()
    again = h.join(client="c", group_instance_id="i-1")
    assert again not in h.replies  # its new id is answered once stored
    store = h.store_done()
    assert [m.member_id for m in decode_group_metadata_value(store.value).members] == ["i-1-u1"]
    join = h.replies[again]
    assert (join.member_id, join.generation_id, join.leader) == ("i-1-u1", 1, old)  # before v9: the old leader id
    assert h.group.state is GroupState.STABLE
    assert h.heartbeat(old, 1, group_instance_id="i-1") == ErrorCode.FENCED_INSTANCE_ID
    assert h.heartbeat("i-1-u1", 1, group_instance_id="i-1") == ErrorCode.NONE
    sync = h.sync("i-1-u1", 1, group_instance_id="i-1")
    assert h.replies[sync].assignment == b"mine"


def test_a_static_member_that_misses_a_rebalance_keeps_its_place():
    h = Harness(initial_rebalance_delay_ms=0)
    ts = h.join(client="s", group_instance_id="i-1")
    h.tick(0)
    static = h.replies[ts].member_id
    h.sync(static, 1, {static: b"s"})
    h.store_done()
    dynamic = h.new_member("d")  # a rebalance the static member does not join
    for t in range(SESSION // 2, REBALANCE + 1, SESSION // 2):
        h.tick(t)
        if t < REBALANCE:
            assert h.heartbeat(static, 1, group_instance_id="i-1") == ErrorCode.REBALANCE_IN_PROGRESS
    assert static in h.group.members and h.replies[dynamic].generation_id == 2
    # a new static member under that instance id is refused while the old one holds it
    assert h.heartbeat("someone-else", 2, group_instance_id="i-1") == ErrorCode.FENCED_INSTANCE_ID


def test_leaving_members_and_their_errors():
    h = Harness(initial_rebalance_delay_ms=0)
    a, b = stable_group(h, "a", "b")
    response = h.leave(MemberIdentity(b), MemberIdentity("nobody"))
    assert response.error_code == 0
    assert [e for _, e in response.members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    assert h.group.state is GroupState.PREPARING_REBALANCE
    ja = h.join(a, client="a")
    assert h.replies[ja].generation_id == 2 and len(h.replies[ja].members) == 1
    h.leave(MemberIdentity(a))  # the last one: the group empties at once, a generation on
    assert (h.group.state, h.group.generation_id, h.group.members) == (GroupState.EMPTY, 3, {})
    assert decode_group_metadata_value(h.stores[-1].value).members == ()


def test_request_errors_follow_kafka():
    h = Harness(initial_rebalance_delay_ms=0)
    bad = h.join(session_timeout_ms=5_999)
    assert h.replies[bad].error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    unknown = h.join("who")
    assert h.replies[unknown].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    a, b = stable_group(h, "a", "b")
    other = h.join(client="d", protocol_type="connect")
    assert h.replies[other].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other = h.join(a, client="a", protocols=(("roundrobin", b"x"),))
    assert h.replies[other].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.replies[h.sync(a, 7)].error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.replies[h.sync("who", 1)].error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.replies[h.sync(a, 1, protocol_name="sticky")].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    same = h.join(b, client="b")  # a follower rejoining unchanged gets the generation again
    assert (h.replies[same].generation_id, h.group.state) == (1, GroupState.STABLE)
    h.join(b, client="b", protocols=(("range", b"new topics"),))  # a change: a rebalance
    assert h.replies[h.sync(a, 1)].error_code == ErrorCode.REBALANCE_IN_PROGRESS
    token = next(h.tokens)
    h._take(h.coordinator.heartbeat(token, HeartbeatRequest("", 1, a), h.now))
    assert h.replies[token].error_code == ErrorCode.INVALID_GROUP_ID


def test_a_full_group_refuses_new_members():
    h = Harness(initial_rebalance_delay_ms=0, max_size=2)
    stable_group(h, "a", "b")
    full = h.join(client="c", require_known_member_id=False)
    assert h.replies[full] == JoinGroupResponse(ErrorCode.GROUP_MAX_SIZE_REACHED)
    assert len(h.group.members) == 2 and h.group.state is GroupState.STABLE


def test_a_second_join_from_the_same_member_drops_the_first_unanswered():
    h = Harness(initial_rebalance_delay_ms=DELAY)
    first = h.new_member("a")
    second = h.join("a-u0", client="a")
    assert h.forgotten == [first]
    h.tick(DELAY)
    assert second in h.replies and first not in h.replies


def test_groups_loaded_from_kafkas_consumer_offsets_take_heartbeats(kafka_data: Path):
    manager = seglog.open(
        str(kafka_data / "real_segments/rjmfernandes_flink-on-prem__cp7.6_kraft/data"), read_only=True, background=False
    )
    try:
        (loaded,) = load_groups(manager.partition("__consumer_offsets", 36)).values()
    finally:
        manager.close()
    coordinator = GroupCoordinator()
    coordinator.load_group(loaded, 0)
    group = coordinator.groups[loaded.group_id]
    assert (group.state, group.generation_id, len(group.members)) == (GroupState.STABLE, 5, 12)
    member = next(iter(group.members))
    (reply,) = coordinator.heartbeat("t", HeartbeatRequest(loaded.group_id, 5, member), 1)
    assert reply.response.error_code == ErrorCode.NONE
    assert coordinator.next_deadline() == 60_000  # their session timeout, from the record
    coordinator.tick(60_000)
    assert list(group.members) == [member] and group.state is GroupState.PREPARING_REBALANCE


def test_config_and_store_ids_are_checked():
    with pytest.raises(InvalidConfigurationError, match=r"group\.min\.session\.timeout\.ms"):
        GroupConfig(min_session_timeout_ms=10, max_session_timeout_ms=5)
    with pytest.raises(InvalidConfigurationError, match=r"group\.max\.size"):
        GroupConfig(max_size=0)
    with pytest.raises(SeglogError, match="store 3"):
        GroupCoordinator().complete_store(3, 0, 0)
