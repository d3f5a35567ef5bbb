"""A cluster's administration through the controller: ElectLeaders (KIP-460's preferred and unclean
elections) and KIP-455's AlterPartitionReassignments / ListPartitionReassignments."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import INT8, INT16, INT32, STRING, Api, Array, Field, Struct, array_of

ELECT_LEADERS = Api(
    ApiKey.ELECT_LEADERS,
    "0-2",
    flexible="2+",
    request=Struct(
        Field("election_type", INT8, "1+"),
        Field(
            "topic_partitions",
            array_of("TopicPartitions", Field("topic", STRING), Field("partitions", Array(INT32))),
            null="0+",
        ),
        Field("timeout_ms", INT32, default=60000),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "1+"),
        Field(
            "replica_election_results",
            array_of(
                "ReplicaElectionResult",
                Field("topic", STRING),
                Field(
                    "partition_result",
                    array_of(
                        "PartitionResult",
                        Field("partition_id", INT32),
                        Field("error_code", INT16),
                        Field("error_message", STRING, null="0+"),
                    ),
                ),
            ),
        ),
    ),
)

ALTER_PARTITION_REASSIGNMENTS = Api(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    "0",
    flexible="0+",
    request=Struct(
        Field("timeout_ms", INT32, default=60000),
        Field(
            "topics",
            array_of(
                "ReassignableTopic",
                Field("name", STRING),
                Field(
                    "partitions",
                    array_of(
                        "ReassignablePartition",
                        Field("partition_index", INT32),
                        Field("replicas", Array(INT32), null="0+", default=None),  # null: cancel
                    ),
                ),
            ),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, null="0+"),
        Field(
            "responses",
            array_of(
                "ReassignableTopicResponse",
                Field("name", STRING),
                Field(
                    "partitions",
                    array_of(
                        "ReassignablePartitionResponse",
                        Field("partition_index", INT32),
                        Field("error_code", INT16),
                        Field("error_message", STRING, null="0+"),
                    ),
                ),
            ),
        ),
    ),
)

LIST_PARTITION_REASSIGNMENTS = Api(
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
    "0",
    flexible="0+",
    request=Struct(
        Field("timeout_ms", INT32, default=60000),
        Field(
            "topics",
            array_of(
                "ListPartitionReassignmentsTopics", Field("name", STRING), Field("partition_indexes", Array(INT32))
            ),
            null="0+",
            default=None,
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, null="0+"),
        Field(
            "topics",
            array_of(
                "OngoingTopicReassignment",
                Field("name", STRING),
                Field(
                    "partitions",
                    array_of(
                        "OngoingPartitionReassignment",
                        Field("partition_index", INT32),
                        Field("replicas", Array(INT32)),
                        Field("adding_replicas", Array(INT32)),
                        Field("removing_replicas", Array(INT32)),
                    ),
                ),
            ),
        ),
    ),
)
