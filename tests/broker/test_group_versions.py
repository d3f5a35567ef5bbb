"""Every version the broker advertises of the group coordinator's APIs, spoken by a raw
client (``seglog.protocol``): a member joins, syncs, heartbeats, commits, fetches and
leaves at each version, and the administrative APIs answer at each of theirs. The real
clients' tests cover the versions they negotiate; this covers the others."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.client import BlockingConnection, connect
from seglog.protocol import ApiKey, ErrorCode

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
            body = {"key": "g", "key_type": 0, "coordinator_keys": ["g"]}
            answer = client.request(ApiKey.FIND_COORDINATOR, body, v)
            found = answer["coordinators"][0] if v >= 4 else answer
            assert (found["error_code"], found["node_id"], found["port"]) == (0, 0, seglog_broker.port), v
        empty = {"key": "", "key_type": 1, "coordinator_keys": [""]}  # no transactional id: Kafka's INVALID_REQUEST
        answer = client.request(ApiKey.FIND_COORDINATOR, empty, 4)
        assert answer["coordinators"][0]["error_code"] == ErrorCode.INVALID_REQUEST
        for v in versions(client, ApiKey.JOIN_GROUP):
            group = f"group-v{v}"
            join = {
                "group_id": group,
                "session_timeout_ms": 6000,
                "rebalance_timeout_ms": 6000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": CONSUMER_METADATA}],
                "reason": None,
            }
            joined = client.request(ApiKey.JOIN_GROUP, join, v)
            if v >= 4:  # a new member is first given its id
                assert joined["error_code"] == ErrorCode.MEMBER_ID_REQUIRED, v
                joined = client.request(ApiKey.JOIN_GROUP, {**join, "member_id": joined["member_id"]}, v)
            member, generation = joined["member_id"], joined["generation_id"]
            assert joined["error_code"] == 0 and joined["leader"] == member and generation == 1, v
            assert [m["member_id"] for m in joined["members"]] == [member] and joined["protocol_name"] == "range"
            who = {"group_id": group, "generation_id": generation, "member_id": member, "group_instance_id": None}
            sync = {**who, "protocol_type": "consumer", "protocol_name": "range"}
            sync["assignments"] = [{"member_id": member, "assignment": b"assigned"}]
            synced = client.request(ApiKey.SYNC_GROUP, sync, min(v, 5))
            assert (synced["error_code"], bytes(synced["assignment"])) == (0, b"assigned"), v
            assert client.request(ApiKey.HEARTBEAT, who, min(v, 4))["error_code"] == 0, v
            commit_version = min(v, 8)
            commit = {
                "group_id": group,
                "generation_id_or_member_epoch": generation,
                "member_id": member,
                "group_instance_id": None,
                "retention_time_ms": -1,
                "topics": [
                    {
                        "name": "vers",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "committed_offset": 10 + v,
                                "committed_leader_epoch": -1,
                                "commit_timestamp": -1,
                                "committed_metadata": "meta",
                            }
                        ],
                    }
                ],
            }
            answer = client.request(ApiKey.OFFSET_COMMIT, commit, commit_version)
            # v0 names no member: a commit from outside a group that has one is refused
            expected = ErrorCode.UNKNOWN_MEMBER_ID if commit_version == 0 else ErrorCode.NONE
            assert answer["topics"][0]["partitions"][0]["error_code"] == expected, v
            fetch = {
                "group_id": group,
                "topics": [{"name": "vers", "partition_indexes": [0]}],
                "groups": [{"group_id": group, "topics": [{"name": "vers", "partition_indexes": [0]}]}],
                "require_stable": True,
            }
            answer = client.request(ApiKey.OFFSET_FETCH, fetch, commit_version)
            topics = answer["groups"][0]["topics"] if commit_version >= 8 else answer["topics"]
            fetched = topics[0]["partitions"][0]
            wanted = (-1, "", 0) if commit_version == 0 else (10 + v, "meta", 0)
            assert (fetched["committed_offset"], fetched["metadata"], fetched["error_code"]) == wanted, v
            leave_version = min(v, 5)
            leave = {"group_id": group, "member_id": member, "members": [{"member_id": member, "reason": None}]}
            left = client.request(ApiKey.LEAVE_GROUP, leave, leave_version)
            assert left["error_code"] == 0, v
            if leave_version >= 3:
                assert [(m["member_id"], m["error_code"]) for m in left["members"]] == [(member, 0)]


def test_the_administrative_apis_at_every_version(seglog_broker) -> None:
    create_topic(seglog_broker.bootstrap_servers, "admin-vers", 1)
    with connect(seglog_broker.bootstrap_servers) as client:
        for v in range(3):  # three standalone groups with an offset each
            commit = {
                "group_id": f"standalone-{v}",
                "topics": [
                    {
                        "name": "admin-vers",
                        "partitions": [{"partition_index": 0, "committed_offset": 1, "committed_metadata": None}],
                    }
                ],
            }
            assert client.request(ApiKey.OFFSET_COMMIT, commit, 2)["topics"][0]["partitions"][0]["error_code"] == 0
        for v in versions(client, ApiKey.LIST_GROUPS):
            body = {"states_filter": ["Empty"], "types_filter": []}
            answer = client.request(ApiKey.LIST_GROUPS, body, v)
            listed = {g["group_id"]: g for g in answer["groups"]}
            assert answer["error_code"] == 0 and {f"standalone-{i}" for i in range(3)} <= set(listed), v
            if v >= 4:
                assert listed["standalone-0"]["group_state"] == "Empty"
            if v >= 5:  # every group is a classic one (KIP-848's types filter)
                assert {g["group_type"] for g in listed.values()} == {"classic"}
                for types, found in ((["Consumer"], False), (["consumer", "CLASSIC"], True)):
                    answer = client.request(ApiKey.LIST_GROUPS, {**body, "types_filter": types}, v)
                    assert ("standalone-0" in {g["group_id"] for g in answer["groups"]}) == found, types
        for v in versions(client, ApiKey.DESCRIBE_GROUPS):
            body = {"groups": ["standalone-0", "nobody"], "include_authorized_operations": False}
            found = client.request(ApiKey.DESCRIBE_GROUPS, body, v)["groups"]
            assert [(g["group_id"], g["group_state"], g["error_code"]) for g in found] == [
                ("standalone-0", "Empty", 0),
                ("nobody", "Dead", 0),
            ], v
        offset_delete = {
            "group_id": "standalone-0",
            "topics": [{"name": "admin-vers", "partitions": [{"partition_index": 0}]}],
        }
        answer = client.request(ApiKey.OFFSET_DELETE, offset_delete, 0)
        assert answer["error_code"] == 0 and answer["topics"][0]["partitions"][0]["error_code"] == 0
        for v in versions(client, ApiKey.DELETE_GROUPS):
            answer = client.request(ApiKey.DELETE_GROUPS, {"groups_names": [f"standalone-{v}"]}, v)
            # standalone-0 died with its last offset: nothing is left to delete
            assert answer["results"] == [{"group_id": f"standalone-{v}", "error_code": 69 if v == 0 else 0}], v
