"""Produce, Fetch, ListOffsets, OffsetForLeaderEpoch: the APIs that move records and find offsets."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import (
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    Api,
    Array,
    Field,
    Struct,
    array_of,
    by_topic,
)


def node_endpoints(versions: str) -> Field:
    """The leaders' addresses a Produce or Fetch response names when it says NOT_LEADER (KIP-951)."""
    return Field(
        "node_endpoints",
        array_of(
            "NodeEndpoint",
            Field("node_id", INT32),
            Field("host", STRING),
            Field("port", INT32),
            Field("rack", STRING, null="0+", default=None),
        ),
        versions,
        tag=0,
    )


def leader_id_and_epoch(versions: str, tag: int) -> Field:
    return Field(
        "current_leader",
        Struct(
            Field("leader_id", INT32, default=-1), Field("leader_epoch", INT32, default=-1), name="LeaderIdAndEpoch"
        ),
        versions,
        tag=tag,
    )


PRODUCE = Api(
    ApiKey.PRODUCE,
    "0-11",
    flexible="9+",
    request=Struct(
        Field("transactional_id", STRING, "3+", null="3+", default=None),
        Field("acks", INT16),
        Field("timeout_ms", INT32),
        Field(
            "topic_data",
            array_of(
                "TopicProduceData",
                Field("name", STRING),
                Field(
                    "partition_data",
                    array_of("PartitionProduceData", Field("index", INT32), Field("records", RECORDS, null="0+")),
                ),
            ),
        ),
    ),
    response=Struct(
        Field(
            "responses",
            array_of(
                "TopicProduceResponse",
                Field("name", STRING),
                Field(
                    "partition_responses",
                    array_of(
                        "PartitionProduceResponse",
                        Field("index", INT32),
                        Field("error_code", INT16),
                        Field("base_offset", INT64),
                        Field("log_append_time_ms", INT64, "2+", default=-1),
                        Field("log_start_offset", INT64, "5+", default=-1),
                        Field(
                            "record_errors",
                            array_of(
                                "BatchIndexAndErrorMessage",
                                Field("batch_index", INT32),
                                Field("batch_index_error_message", STRING, null="0+", default=None),
                            ),
                            "8+",
                        ),
                        Field("error_message", STRING, "8+", null="8+", default=None),
                        leader_id_and_epoch("10+", tag=0),
                    ),
                ),
            ),
        ),
        Field("throttle_time_ms", INT32, "1+"),
        node_endpoints("10+"),
    ),
)

FETCH = Api(
    ApiKey.FETCH,
    "0-17",
    flexible="12+",
    request=Struct(
        Field("cluster_id", STRING, "12+", null="12+", tag=0, default=None),
        Field("replica_id", INT32, "0-14", default=-1),
        Field(
            "replica_state",
            Struct(
                Field("replica_id", INT32, default=-1), Field("replica_epoch", INT64, default=-1), name="ReplicaState"
            ),
            "15+",
            tag=1,
        ),
        Field("max_wait_ms", INT32),
        Field("min_bytes", INT32),
        Field("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        Field("isolation_level", INT8, "4+"),
        Field("session_id", INT32, "7+"),
        Field("session_epoch", INT32, "7+", default=-1),
        Field(
            "topics",
            array_of(
                "FetchTopic",
                Field("topic", STRING, "0-12"),
                Field("topic_id", UUID, "13+"),
                Field(
                    "partitions",
                    array_of(
                        "FetchPartition",
                        Field("partition", INT32),
                        Field("current_leader_epoch", INT32, "9+", default=-1),
                        Field("fetch_offset", INT64),
                        Field("last_fetched_epoch", INT32, "12+", default=-1),
                        Field("log_start_offset", INT64, "5+", default=-1),
                        Field("partition_max_bytes", INT32),
                        Field("replica_directory_id", UUID, "17+", tag=0),
                    ),
                ),
            ),
        ),
        Field(
            "forgotten_topics_data",
            array_of(
                "ForgottenTopic",
                Field("topic", STRING, "7-12"),
                Field("topic_id", UUID, "13+"),
                Field("partitions", Array(INT32)),
            ),
            "7+",
        ),
        Field("rack_id", STRING, "11+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "7+"),
        Field("session_id", INT32, "7+"),
        Field(
            "responses",
            array_of(
                "FetchableTopicResponse",
                Field("topic", STRING, "0-12"),
                Field("topic_id", UUID, "13+"),
                Field(
                    "partitions",
                    array_of(
                        "PartitionData",
                        Field("partition_index", INT32),
                        Field("error_code", INT16),
                        Field("high_watermark", INT64),
                        Field("last_stable_offset", INT64, "4+", default=-1),
                        Field("log_start_offset", INT64, "5+", default=-1),
                        Field(
                            "diverging_epoch",
                            Struct(
                                Field("epoch", INT32, default=-1),
                                Field("end_offset", INT64, default=-1),
                                name="EpochEndOffset",
                            ),
                            "12+",
                            tag=0,
                        ),
                        leader_id_and_epoch("12+", tag=1),
                        Field(
                            "snapshot_id",
                            Struct(
                                Field("end_offset", INT64, default=-1),
                                Field("epoch", INT32, default=-1),
                                name="SnapshotId",
                            ),
                            "12+",
                            tag=2,
                        ),
                        Field(
                            "aborted_transactions",
                            array_of("AbortedTransaction", Field("producer_id", INT64), Field("first_offset", INT64)),
                            "4+",
                            null="4+",
                        ),
                        Field("preferred_read_replica", INT32, "11+", default=-1),
                        Field("records", RECORDS, null="0+"),
                    ),
                ),
            ),
        ),
        node_endpoints("16+"),
    ),
)

LIST_OFFSETS = Api(
    ApiKey.LIST_OFFSETS,
    "0-10",
    flexible="6+",
    request=Struct(
        Field("replica_id", INT32),
        Field("isolation_level", INT8, "2+"),
        by_topic(
            "ListOffsetsTopic",
            "ListOffsetsPartition",
            Field("partition_index", INT32),
            Field("current_leader_epoch", INT32, "4+", default=-1),
            # -1 latest, -2 earliest, -3 max timestamp (v7+), -4 earliest local (v8+), -5 earliest tiered (v9+)
            Field("timestamp", INT64),
            Field("max_num_offsets", INT32, "0", default=1),
        ),
        Field("timeout_ms", INT32, "10+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "2+"),
        by_topic(
            "ListOffsetsTopicResponse",
            "ListOffsetsPartitionResponse",
            Field("partition_index", INT32),
            Field("error_code", INT16),
            Field("old_style_offsets", Array(INT64), "0"),
            Field("timestamp", INT64, "1+", default=-1),
            Field("offset", INT64, "1+", default=-1),
            Field("leader_epoch", INT32, "4+", default=-1),
        ),
    ),
)

OFFSET_FOR_LEADER_EPOCH = Api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH,
    "0-4",
    flexible="4+",
    request=Struct(
        Field("replica_id", INT32, "3+", default=-2),  # -2: a consumer (-1: a debugging replica)
        by_topic(
            "OffsetForLeaderTopic",
            "OffsetForLeaderPartition",
            Field("partition", INT32),
            Field("current_leader_epoch", INT32, "2+", default=-1),
            Field("leader_epoch", INT32),
            topic="topic",
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "2+"),
        by_topic(
            "OffsetForLeaderTopicResult",
            "EpochEndOffset",
            Field("error_code", INT16),
            Field("partition", INT32),
            Field("leader_epoch", INT32, "1+", default=-1),
            Field("end_offset", INT64, default=-1),
            topic="topic",
        ),
    ),
)
