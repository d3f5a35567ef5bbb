"""The group coordinator's APIs: finding it, joining and syncing groups, committed offsets."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    Api,
    Array,
    Field,
    Struct,
    array_of,
    by_topic,
)


def _group_instance_id(versions: str) -> Field:
    """A static member's id (KIP-345), null for a dynamic member."""
    return Field("group_instance_id", STRING, versions, null=versions, default=None)


def _member_of_generation() -> tuple[Field, ...]:
    """Who a SyncGroup or Heartbeat request comes from."""
    return (
        Field("group_id", STRING),
        Field("generation_id", INT32),
        Field("member_id", STRING),
        _group_instance_id("3+"),
    )


def _protocol() -> tuple[Field, ...]:
    """The group's protocol type and name, which SyncGroup v5+ repeats to check (KIP-559)."""
    return (_nullable("protocol_type", "5+"), _nullable("protocol_name", "5+"))


def _nullable(name: str, versions: str) -> Field:
    return Field(name, STRING, versions, null=versions, default=None)


FIND_COORDINATOR = Api(
    ApiKey.FIND_COORDINATOR,
    "0-6",
    flexible="3+",
    request=Struct(
        Field("key", STRING, "0-3"),
        Field("key_type", INT8, "1+"),  # 0 group, 1 transaction, 2 share
        Field("coordinator_keys", Array(STRING), "4+"),  # batched lookups (KIP-699)
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0-3"),
        Field("error_message", STRING, "1-3", null="1-3"),
        Field("node_id", INT32, "0-3"),
        Field("host", STRING, "0-3"),
        Field("port", INT32, "0-3"),
        Field(
            "coordinators",
            array_of(
                "Coordinator",
                Field("key", STRING),
                Field("node_id", INT32),
                Field("host", STRING),
                Field("port", INT32),
                Field("error_code", INT16),
                Field("error_message", STRING, null="0+"),
            ),
            "4+",
        ),
    ),
)

JOIN_GROUP = Api(
    ApiKey.JOIN_GROUP,
    "0-9",
    flexible="6+",
    request=Struct(
        Field("group_id", STRING),
        Field("session_timeout_ms", INT32),
        Field("rebalance_timeout_ms", INT32, "1+", default=-1),
        Field("member_id", STRING),
        _group_instance_id("5+"),
        Field("protocol_type", STRING),
        Field("protocols", array_of("JoinGroupRequestProtocol", Field("name", STRING), Field("metadata", BYTES))),
        _nullable("reason", "8+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "2+"),
        Field("error_code", INT16),
        Field("generation_id", INT32, default=-1),
        _nullable("protocol_type", "7+"),
        Field("protocol_name", STRING, null="7+"),
        Field("leader", STRING),
        Field("skip_assignment", BOOL, "9+"),
        Field("member_id", STRING),
        Field(
            "members",
            array_of(
                "JoinGroupResponseMember",
                Field("member_id", STRING),
                _group_instance_id("5+"),
                Field("metadata", BYTES),
            ),
        ),
    ),
)

SYNC_GROUP = Api(
    ApiKey.SYNC_GROUP,
    "0-5",
    flexible="4+",
    request=Struct(
        *_member_of_generation(),
        *_protocol(),
        Field(
            "assignments",
            array_of("SyncGroupRequestAssignment", Field("member_id", STRING), Field("assignment", BYTES)),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16),
        *_protocol(),
        Field("assignment", BYTES),
    ),
)

HEARTBEAT = Api(
    ApiKey.HEARTBEAT,
    "0-4",
    flexible="4+",
    request=Struct(
        *_member_of_generation(),
    ),
    response=Struct(Field("throttle_time_ms", INT32, "1+"), Field("error_code", INT16)),
)

LEAVE_GROUP = Api(
    ApiKey.LEAVE_GROUP,
    "0-5",
    flexible="4+",
    request=Struct(
        Field("group_id", STRING),
        Field("member_id", STRING, "0-2"),
        Field(
            "members",
            array_of("MemberIdentity", Field("member_id", STRING), _group_instance_id("3+"), _nullable("reason", "5+")),
            "3+",
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16),
        Field(
            "members",
            array_of(
                "MemberResponse",
                Field("member_id", STRING),
                Field("group_instance_id", STRING, null="3+"),
                Field("error_code", INT16),
            ),
            "3+",
        ),
    ),
)

OFFSET_COMMIT = Api(
    ApiKey.OFFSET_COMMIT,
    "0-9",
    flexible="8+",
    request=Struct(
        Field("group_id", STRING),
        Field("generation_id_or_member_epoch", INT32, "1+", default=-1),
        Field("member_id", STRING, "1+"),
        _group_instance_id("7+"),
        Field("retention_time_ms", INT64, "2-4", default=-1),
        by_topic(
            "OffsetCommitRequestTopic",
            "OffsetCommitRequestPartition",
            Field("partition_index", INT32),
            Field("committed_offset", INT64),
            Field("committed_leader_epoch", INT32, "6+", default=-1),
            Field("commit_timestamp", INT64, "1", default=-1),
            Field("committed_metadata", STRING, null="0+"),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "3+"),
        by_topic(
            "OffsetCommitResponseTopic",
            "OffsetCommitResponsePartition",
            Field("partition_index", INT32),
            Field("error_code", INT16),
        ),
    ),
)


def _offset_fetch_partitions(name: str, versions: str) -> Field:
    """A topic's committed offsets: ``OffsetFetchResponsePartition`` by v7, ``...Partitions`` in a group."""
    return Field(
        "partitions",
        array_of(
            name,
            Field("partition_index", INT32),
            Field("committed_offset", INT64),
            Field("committed_leader_epoch", INT32, "5+", default=-1),
            Field("metadata", STRING, null="0+"),
            Field("error_code", INT16),
        ),
        versions,
    )


OFFSET_FETCH = Api(
    ApiKey.OFFSET_FETCH,
    "0-9",
    flexible="6+",
    request=Struct(
        Field("group_id", STRING, "0-7"),
        # null (v2+): every partition the group committed
        Field(
            "topics",
            array_of("OffsetFetchRequestTopic", Field("name", STRING), Field("partition_indexes", Array(INT32))),
            "0-7",
            null="2-7",
        ),
        Field(
            "groups",
            array_of(
                "OffsetFetchRequestGroup",
                Field("group_id", STRING),
                _nullable("member_id", "9+"),
                Field("member_epoch", INT32, "9+", default=-1),
                Field(
                    "topics",
                    array_of(
                        "OffsetFetchRequestTopics", Field("name", STRING), Field("partition_indexes", Array(INT32))
                    ),
                    null="8+",
                ),
            ),
            "8+",
        ),
        Field("require_stable", BOOL, "7+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "3+"),
        Field(
            "topics",
            array_of(
                "OffsetFetchResponseTopic",
                Field("name", STRING),
                _offset_fetch_partitions("OffsetFetchResponsePartition", "0+"),
            ),
            "0-7",
        ),
        Field("error_code", INT16, "2-7"),
        Field(
            "groups",
            array_of(
                "OffsetFetchResponseGroup",
                Field("group_id", STRING),
                Field(
                    "topics",
                    array_of(
                        "OffsetFetchResponseTopics",
                        Field("name", STRING),
                        _offset_fetch_partitions("OffsetFetchResponsePartitions", "0+"),
                    ),
                ),
                Field("error_code", INT16),
            ),
            "8+",
        ),
    ),
)

LIST_GROUPS = Api(
    ApiKey.LIST_GROUPS,
    "0-5",
    flexible="3+",
    request=Struct(Field("states_filter", Array(STRING), "4+"), Field("types_filter", Array(STRING), "5+")),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16),
        Field(
            "groups",
            array_of(
                "ListedGroup",
                Field("group_id", STRING),
                Field("protocol_type", STRING),
                Field("group_state", STRING, "4+"),
                Field("group_type", STRING, "5+"),
            ),
        ),
    ),
)

DESCRIBE_GROUPS = Api(
    ApiKey.DESCRIBE_GROUPS,
    "0-5",
    flexible="5+",
    request=Struct(Field("groups", Array(STRING)), Field("include_authorized_operations", BOOL, "3+")),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "groups",
            array_of(
                "DescribedGroup",
                Field("error_code", INT16),
                Field("group_id", STRING),
                Field("group_state", STRING),
                Field("protocol_type", STRING),
                Field("protocol_data", STRING),
                Field(
                    "members",
                    array_of(
                        "DescribedGroupMember",
                        Field("member_id", STRING),
                        _group_instance_id("4+"),
                        Field("client_id", STRING),
                        Field("client_host", STRING),
                        Field("member_metadata", BYTES),
                        Field("member_assignment", BYTES),
                    ),
                ),
                Field("authorized_operations", INT32, "3+", default=-(2**31)),
            ),
        ),
    ),
)

DELETE_GROUPS = Api(
    ApiKey.DELETE_GROUPS,
    "0-2",
    flexible="2+",
    request=Struct(Field("groups_names", Array(STRING))),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("results", array_of("DeletableGroupResult", Field("group_id", STRING), Field("error_code", INT16))),
    ),
)

OFFSET_DELETE = Api(
    ApiKey.OFFSET_DELETE,
    "0",
    flexible="none",
    request=Struct(
        Field("group_id", STRING),
        by_topic("OffsetDeleteRequestTopic", "OffsetDeleteRequestPartition", Field("partition_index", INT32)),
    ),
    response=Struct(
        Field("error_code", INT16),
        Field("throttle_time_ms", INT32),
        by_topic(
            "OffsetDeleteResponseTopic",
            "OffsetDeleteResponsePartition",
            Field("partition_index", INT32),
            Field("error_code", INT16),
        ),
    ),
)
