"""ListGroups, DescribeGroups and DeleteGroups, answered as Kafka's classic GroupCoordinator
answers them, over the groups of a ``GroupCoordinator`` and their offsets.

- ListGroups: every group this coordinator holds (group id, protocol type, state),
  only those in one of ``states`` when that filter is given (Kafka's state names,
  "Stable", "Empty", ...; an empty filter lists all);
- DescribeGroups: per group its state, protocol type and members; the chosen protocol
  and each member's subscription and assignment only when the group is Stable (Kafka
  leaves them empty while a rebalance runs). An unknown group is described as Dead
  with no error, as Kafka does;
- DeleteGroups: an Empty group dies and tombstones of its offsets and metadata are
  appended (``StoreOffsets`` outputs); a group with members is NON_EMPTY_GROUP, an
  unknown one GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from dataclasses import dataclass

from .group_state import GroupState
from .offset_manager import ErrorCode, OffsetManager, Output

NO_PROTOCOL = ""


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str


@dataclass(frozen=True)
class ListGroupsResponse:
    error_code: int
    groups: tuple[ListedGroup, ...]


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error_code: int
    group_id: str
    group_state: str
    protocol_type: str = ""
    protocol_data: str = NO_PROTOCOL  # the chosen protocol
    members: tuple[DescribedMember, ...] = ()


class GroupAdmin:
    """The administrative requests about groups, over an ``OffsetManager`` and its groups."""

    def __init__(self, offsets: OffsetManager) -> None:
        self.offsets = offsets
        self.groups = offsets.coordinator.groups

    def list_groups(self, states: tuple[str, ...] = ()) -> ListGroupsResponse:
        listed = tuple(
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if not states or g.state.value in states
        )
        return ListGroupsResponse(ErrorCode.NONE, listed)

    def describe_groups(self, group_ids: tuple[str, ...]) -> tuple[DescribedGroup, ...]:
        return tuple(self._describe(group_id) for group_id in group_ids)

    def _describe(self, group_id: str) -> DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return DescribedGroup(ErrorCode.NONE, group_id, GroupState.DEAD.value)
        stable = group.state is GroupState.STABLE and group.protocol_name is not None
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable and group.protocol_name is not None else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        protocol = group.protocol_name if stable and group.protocol_name is not None else NO_PROTOCOL
        return DescribedGroup(ErrorCode.NONE, group_id, group.state.value, group.protocol_type or "", protocol, members)

    def delete_groups(self, group_ids: tuple[str, ...], now_ms: int) -> tuple[dict[str, int], list[Output]]:
        """Each group's error (0: deleted), and the tombstones to append."""
        errors: dict[str, int] = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None or group.state is GroupState.DEAD:
                errors[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is not GroupState.EMPTY:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
            else:
                self.offsets.delete_group(group, now_ms)
                errors[group_id] = ErrorCode.NONE
        return errors, self.offsets.take_outputs()
