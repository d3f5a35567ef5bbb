"""ListGroups, DescribeGroups and DeleteGroups over a coordinator's groups, their
tombstones appended to a real __consumer_offsets log and read back."""

from __future__ import annotations

from seglog.coordinator import group_records as g
from seglog.coordinator.group_admin import DescribedGroup, DescribedMember, GroupAdmin, ListedGroup
from seglog.coordinator.group_coordinator import JoinGroupRequest, MemberIdentity
from seglog.coordinator.group_loader import load_groups
from seglog.coordinator.group_state import GroupState
from seglog.coordinator.offset_manager import ErrorCode, PartitionCommit

from .test_group_coordinator import G, Harness, stable_group
from .test_offset_manager import Offsets

T0 = ("t", 0)


def groups_of_every_kind(h: Harness, o: Offsets) -> list[str]:
    """G Stable with two members, "simple" with offsets only, "joining" preparing a rebalance."""
    ids = stable_group(h, "a", "b")
    o.commit({T0: PartitionCommit(4)}, group="simple")
    o.append()
    join = JoinGroupRequest("joining", "", "connect", (("v1", b"m"),), 10_000, 30_000, require_known_member_id=False)
    h.coordinator.join_group("j", join, h.now)
    return ids


def test_list_groups_with_and_without_a_states_filter(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    groups_of_every_kind(h, o)
    admin = GroupAdmin(o.manager)
    assert set(admin.list_groups().groups) == {
        ListedGroup(G, "consumer", "Stable"),
        ListedGroup("simple", "", "Empty"),
        ListedGroup("joining", "connect", "PreparingRebalance"),
    }
    assert admin.list_groups(("Empty", "Stable")).groups == (
        ListedGroup(G, "consumer", "Stable"),
        ListedGroup("simple", "", "Empty"),
    )
    assert admin.list_groups(("Dead",)).groups == ()


def test_describe_shows_protocol_and_assignments_only_when_stable(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    a, b = groups_of_every_kind(h, o)
    admin = GroupAdmin(o.manager)
    stable, joining, unknown = admin.describe_groups((G, "joining", "nobody"))
    assert stable == DescribedGroup(
        0,
        G,
        "Stable",
        "consumer",
        "range",
        (DescribedMember(a, None, "a", "", b"r", a.encode()), DescribedMember(b, None, "b", "", b"r", b.encode())),
    )
    (member,) = joining.members
    assert (joining.group_state, joining.protocol_type, joining.protocol_data) == ("PreparingRebalance", "connect", "")
    assert (member.member_metadata, member.member_assignment) == (b"", b"")
    assert unknown == DescribedGroup(0, "nobody", "Dead")
    h.join(a)  # the leader rejoins: generation 1's protocol stays chosen, but is not shown
    (rebalancing,) = admin.describe_groups((G,))
    assert (rebalancing.group_state, rebalancing.protocol_data) == ("PreparingRebalance", "")
    assert {(m.member_metadata, m.member_assignment) for m in rebalancing.members} == {(b"", b"")}


def test_delete_groups_removes_only_empty_ones_with_their_offsets(log):
    h = Harness(initial_rebalance_delay_ms=0)
    o = Offsets(h, log)
    a, b = groups_of_every_kind(h, o)
    o.commit({T0: PartitionCommit(9)}, generation_id=1, member_id=a)
    o.append()
    admin = GroupAdmin(o.manager)
    errors, outputs = admin.delete_groups((G, "simple", "nobody"), h.now)
    assert errors == {G: ErrorCode.NON_EMPTY_GROUP, "simple": 0, "nobody": ErrorCode.GROUP_ID_NOT_FOUND}
    (store,) = outputs
    assert store.records == ((g.encode_key(g.OffsetCommitKey("simple", "t", 0)), None),)  # generation 0: no metadata
    o.take(outputs)
    o.append()
    h.leave(MemberIdentity(a), MemberIdentity(b))
    h.store_done()
    assert h.group.state is GroupState.EMPTY
    errors, outputs = admin.delete_groups((G,), h.now)
    assert errors == {G: 0}
    assert [k for k, _ in outputs[0].records] == [
        g.encode_key(g.OffsetCommitKey(G, "t", 0)),
        g.encode_key(g.GroupMetadataKey(G)),
    ]
    o.take(outputs)
    o.append()
    assert set(load_groups(log)) == set() and set(h.coordinator.groups) == {"joining"}
    assert admin.delete_groups((G,), h.now)[0] == {G: ErrorCode.GROUP_ID_NOT_FOUND}
