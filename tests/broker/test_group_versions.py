"""Every version the broker advertises of the group coordinator's APIs, spoken by a raw
client (``seglog.protocol``): a member joins, syncs, heartbeats, commits, fetches and
leaves at each version, and the administrative APIs answer at each of theirs. The real
clients' tests cover the versions they negotiate; this covers the others."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.client import BlockingConnection, connect
from seglog.protocol import ApiKey, ErrorCode
from seglog.protocol.message_data import (
    DeleteGroupsRequestData,
    DeleteGroupsResponseData,
    DescribeGroupsRequestData,
    FindCoordinatorRequestData,
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    ListGroupsRequestData,
    OffsetCommitRequestData,
    OffsetDeleteRequestData,
    OffsetFetchRequestData,
    SyncGroupRequestData,
)

from .test_groups import GROUP_BROKER, create_topic

CONSUMER_METADATA = b"\x00\x00\x00\x00\x00\x01\x00\x04vers\xff\xff\xff\xff"  # v0 subscription to "vers"


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return GROUP_BROKER


def versions(client: BlockingConnection, key: ApiKey) -> range:
    """The versions the broker advertises."""
    low, high = client.versions[key]
    return range(low, high + 1)


def test_a_member_at_every_version(seglog_broker) -> None:
    create_topic(seglog_broker.bootstrap_servers, "vers", 1)
    with connect(seglog_broker.bootstrap_servers) as client:
        for v in versions(client, ApiKey.FIND_COORDINATOR):
            body = FindCoordinatorRequestData("g", 0, ["g"])
            answer = client.request(ApiKey.FIND_COORDINATOR, body, v)
            found = answer.coordinators[0] if v >= 4 else answer
            assert (found.error_code, found.node_id, found.port) == (0, 0, seglog_broker.port), v
        empty = FindCoordinatorRequestData("", 1, [""])  # no transactional id: Kafka's INVALID_REQUEST
        answer = client.request(ApiKey.FIND_COORDINATOR, empty, 4)
        assert answer.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
        for v in versions(client, ApiKey.JOIN_GROUP):
            group = f"group-v{v}"
            protocol = JoinGroupRequestData.JoinGroupRequestProtocol("range", CONSUMER_METADATA)
            join = JoinGroupRequestData(group, 6000, 6000, "", None, "consumer", [protocol])
            joined = client.request(ApiKey.JOIN_GROUP, join, v)
            if v >= 4:  # a new member is first given its id
                assert joined.error_code == ErrorCode.MEMBER_ID_REQUIRED, v
                join.member_id = joined.member_id
                joined = client.request(ApiKey.JOIN_GROUP, join, v)
            member, generation = joined.member_id, joined.generation_id
            assert joined.error_code == 0 and joined.leader == member and generation == 1, v
            assert [m.member_id for m in joined.members] == [member] and joined.protocol_name == "range"
            assignment = SyncGroupRequestData.SyncGroupRequestAssignment(member, b"assigned")
            sync = SyncGroupRequestData(group, generation, member, None, "consumer", "range", [assignment])
            synced = client.request(ApiKey.SYNC_GROUP, sync, min(v, 5))
            assert (synced.error_code, bytes(synced.assignment)) == (0, b"assigned"), v
            heartbeat = HeartbeatRequestData(group, generation, member, None)
            assert client.request(ApiKey.HEARTBEAT, heartbeat, min(v, 4)).error_code == 0, v
            commit_version = min(v, 8)
            Commit = OffsetCommitRequestData
            partition = Commit.OffsetCommitRequestPartition(0, 10 + v, -1, -1, "meta")
            commit = Commit(group, generation, member, None, -1, [Commit.OffsetCommitRequestTopic("vers", [partition])])
            answer = client.request(ApiKey.OFFSET_COMMIT, commit, commit_version)
            # v0 names no member: a commit from outside a group that has one is refused
            expected = ErrorCode.UNKNOWN_MEMBER_ID if commit_version == 0 else ErrorCode.NONE
            assert answer.topics[0].partitions[0].error_code == expected, v
            Fetch = OffsetFetchRequestData
            fetch = Fetch(
                group,
                [Fetch.OffsetFetchRequestTopic("vers", [0])],
                [Fetch.OffsetFetchRequestGroup(group, topics=[Fetch.OffsetFetchRequestTopics("vers", [0])])],
                require_stable=True,
            )
            answer = client.request(ApiKey.OFFSET_FETCH, fetch, commit_version)
            topics = answer.groups[0].topics if commit_version >= 8 else answer.topics
            fetched = topics[0].partitions[0]
            wanted = (-1, "", 0) if commit_version == 0 else (10 + v, "meta", 0)
            assert (fetched.committed_offset, fetched.metadata, fetched.error_code) == wanted, v
            leave_version = min(v, 5)
            leave = LeaveGroupRequestData(group, member, [LeaveGroupRequestData.MemberIdentity(member)])
            left = client.request(ApiKey.LEAVE_GROUP, leave, leave_version)
            assert left.error_code == 0, v
            if leave_version >= 3:
                assert [(m.member_id, m.error_code) for m in left.members] == [(member, 0)]


def test_the_administrative_apis_at_every_version(seglog_broker) -> None:
    create_topic(seglog_broker.bootstrap_servers, "admin-vers", 1)
    with connect(seglog_broker.bootstrap_servers) as client:
        Commit = OffsetCommitRequestData
        for v in range(3):  # three standalone groups with an offset each
            partition = Commit.OffsetCommitRequestPartition(0, 1, committed_metadata=None)
            commit = Commit(f"standalone-{v}", topics=[Commit.OffsetCommitRequestTopic("admin-vers", [partition])])
            assert client.request(ApiKey.OFFSET_COMMIT, commit, 2).topics[0].partitions[0].error_code == 0
        for v in versions(client, ApiKey.LIST_GROUPS):
            answer = client.request(ApiKey.LIST_GROUPS, ListGroupsRequestData(["Empty"]), v)
            listed = {g.group_id: g for g in answer.groups}
            assert answer.error_code == 0 and {f"standalone-{i}" for i in range(3)} <= set(listed), v
            if v >= 4:
                assert listed["standalone-0"].group_state == "Empty"
            if v >= 5:  # every group is a classic one (KIP-848's types filter)
                assert {g.group_type for g in listed.values()} == {"classic"}
                for types, found in ((["Consumer"], False), (["consumer", "CLASSIC"], True)):
                    body = ListGroupsRequestData(["Empty"], types_filter=types)
                    answer = client.request(ApiKey.LIST_GROUPS, body, v)
                    assert ("standalone-0" in {g.group_id for g in answer.groups}) == found, types
        for v in versions(client, ApiKey.DESCRIBE_GROUPS):
            body = DescribeGroupsRequestData(["standalone-0", "nobody"])
            found = client.request(ApiKey.DESCRIBE_GROUPS, body, v).groups
            assert [(g.group_id, g.group_state, g.error_code) for g in found] == [
                ("standalone-0", "Empty", 0),
                ("nobody", "Dead", 0),
            ], v
        Delete = OffsetDeleteRequestData
        topic = Delete.OffsetDeleteRequestTopic("admin-vers", [Delete.OffsetDeleteRequestPartition(0)])
        answer = client.request(ApiKey.OFFSET_DELETE, Delete("standalone-0", [topic]), 0)
        assert answer.error_code == 0 and answer.topics[0].partitions[0].error_code == 0
        for v in versions(client, ApiKey.DELETE_GROUPS):
            answer = client.request(ApiKey.DELETE_GROUPS, DeleteGroupsRequestData([f"standalone-{v}"]), v)
            # standalone-0 died with its last offset: nothing is left to delete
            expected = DeleteGroupsResponseData.DeletableGroupResult(f"standalone-{v}", 69 if v == 0 else 0)
            assert answer.results == [expected], v
