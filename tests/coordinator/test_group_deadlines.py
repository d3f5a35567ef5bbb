"""The group coordinator's timers across many groups, on a fake clock: each group's
earliest deadline kept in a heap, so a call visits only the groups it touches and a
tick only the groups due, and a group that moved, left or died wakes nobody."""

from __future__ import annotations

from seglog.coordinator.group_coordinator import (
    ErrorCode,
    GroupConfig,
    GroupCoordinator,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    MemberIdentity,
    Reply,
    StoreGroup,
    SyncGroupRequest,
)
from seglog.coordinator.group_deadlines import GroupDeadlines
from seglog.coordinator.group_state import GroupState
from seglog.coordinator.offset_manager import OffsetCommitRequest, OffsetManager, PartitionCommit

SESSION, REBALANCE = 10_000, 30_000


def join(c: GroupCoordinator, group_id: str, now: int, **kw) -> list:
    request = JoinGroupRequest(group_id, "", "consumer", (("range", b"r"),), SESSION, REBALANCE, **kw)
    return c.join_group(object(), request, now)


def pending_member(c: GroupCoordinator, group_id: str, now: int) -> str:
    """A new member told to come back with its id (MEMBER_ID_REQUIRED): that id."""
    (reply,) = join(c, group_id, now)
    assert isinstance(reply, Reply) and reply.response.error_code == ErrorCode.MEMBER_ID_REQUIRED
    return reply.response.member_id


def stable_group(c: GroupCoordinator, group_id: str, now: int) -> str:
    """A one-member group made Stable at ``now``; its member id."""
    assert join(c, group_id, now, require_known_member_id=False) == []  # answered when the rebalance completes
    c.tick(now)  # the initial delay (0) ends: the member leads generation 1
    (member_id,) = c.groups[group_id].members
    (store,) = c.sync_group(object(), SyncGroupRequest(group_id, 1, member_id, {member_id: b"a"}), now)
    assert isinstance(store, StoreGroup)
    c.complete_store(store.store_id, 0, now)
    assert c.groups[group_id].state is GroupState.STABLE
    return member_id


def heartbeat(c: GroupCoordinator, group_id: str, member_id: str, now: int) -> int:
    (reply,) = c.heartbeat(object(), HeartbeatRequest(group_id, 1, member_id), now)
    return reply.response.error_code


def test_a_groups_session_still_expires_after_other_groups_move_theirs():
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0))
    quiet = stable_group(c, "quiet", 0)
    busy = {g: stable_group(c, g, 0) for g in ("busy-a", "busy-b")}
    for now in range(1_000, SESSION, 1_000):  # the others heartbeat: their deadlines move, again and again
        for g, member_id in busy.items():
            assert heartbeat(c, g, member_id, now) == ErrorCode.NONE
        assert c.next_deadline() == SESSION  # the quiet group's session, under the moved ones
        c.tick(now)
    c.leave_group(object(), LeaveGroupRequest("busy-b", (MemberIdentity(busy["busy-b"]),)), SESSION - 1)
    assert c.next_deadline() == SESSION
    c.tick(SESSION)
    assert quiet not in c.groups["quiet"].members and c.groups["quiet"].state is GroupState.EMPTY
    assert busy["busy-a"] in c.groups["busy-a"].members  # its own session runs to 9,000 + SESSION
    assert c.next_deadline() == 9_000 + SESSION


def test_an_unloaded_group_leaves_no_wake_up_that_acts_on_its_successor():
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0))
    first = pending_member(c, "g", 0)  # a pending member: rejoin by SESSION
    assert c.next_deadline() == SESSION
    c.unload_group("g", 1_000)
    assert c.next_deadline() is None
    second = pending_member(c, "g", 5_000)  # the group comes back with another pending member
    assert c.next_deadline() == 5_000 + SESSION
    c.tick(SESSION)  # the first group's deadline: nothing of the new group is due
    assert c.groups["g"].pending_members == {second: 5_000 + SESSION} and first != second
    c.tick(5_000 + SESSION)
    assert not c.groups["g"].pending_members and c.next_deadline() is None


def test_an_emptied_group_and_an_expired_one_leave_no_deadline():
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0))
    member_id = stable_group(c, "left", 0)
    c.leave_group(object(), LeaveGroupRequest("left", (MemberIdentity(member_id),)), 100)
    assert c.groups["left"].state is GroupState.EMPTY and c.next_deadline() is None
    pending_member(c, "gone", 200)  # an Empty group with a pending member and no offsets
    assert c.next_deadline() == 200 + SESSION
    OffsetManager(c).cleanup(300)  # the offsets' expiry finds it Empty with nothing to keep: it dies
    assert "gone" not in c.groups and c.next_deadline() is None and c.tick(200 + SESSION) == []


def test_an_offset_commit_moves_the_members_deadline():
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0))
    member_id = stable_group(c, "g", 0)
    commit = OffsetCommitRequest("g", {("orders", 0): PartitionCommit(5)}, 1, member_id)
    OffsetManager(c).commit_offsets(commit, 4_000)  # a sign of life: the session restarts
    assert c.next_deadline() == 4_000 + SESSION


class VisitedDict(dict):
    """A group's member dict that notes in ``visits`` each walk over it."""

    def __init__(self, group_id: str, visits: list[str], items: dict) -> None:
        super().__init__(items)
        self.group_id, self.visits = group_id, visits

    def values(self):
        self.visits.append(self.group_id)
        return super().values()

    def items(self):
        self.visits.append(self.group_id)
        return super().items()


def test_a_call_visits_only_its_own_group_and_a_tick_only_the_groups_due():
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0))
    members = {f"g{i}": stable_group(c, f"g{i}", i) for i in range(200)}  # sessions end at SESSION + i
    visits: list[str] = []
    for g, group in c.groups.items():
        group.members = VisitedDict(g, visits, group.members)
        group.pending_members = VisitedDict(g, visits, group.pending_members)
    assert heartbeat(c, "g0", members["g0"], 500) == ErrorCode.NONE
    assert c.next_deadline() == SESSION + 1
    assert c.tick(SESSION) == []
    assert set(visits) == {"g0"}
    visits.clear()
    c.tick(SESSION + 2)  # g1 and g2 expire
    assert set(visits) == {"g1", "g2"}
    assert c.groups["g1"].state is GroupState.EMPTY and c.groups["g3"].state is GroupState.STABLE


def test_the_heap_gives_the_earliest_live_deadline_and_stays_bounded():
    d = GroupDeadlines()
    for i in range(10):
        d.set(f"g{i}", 100 + i)
    for moved in range(1_000):  # g0 heartbeats: each move leaves a stale entry, the heap is rebuilt now and then
        d.set("g0", 200 + moved)
    assert d.earliest() == 101 and len(d) == 10
    d.set("g1", None)
    assert d.pop_due(105) == ["g2", "g3", "g4", "g5"]
    assert d.earliest() == 106 and d.pop_due(105) == []
    assert d.pop_due(1_199) == ["g6", "g7", "g8", "g9", "g0"] and d.earliest() is None
