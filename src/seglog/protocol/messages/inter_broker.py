"""Between brokers of a ZooKeeper-mode cluster: the controller's LeaderAndIsr, StopReplica and
UpdateMetadata, a broker's ControlledShutdown, a leader's AlterPartition (ISR changes)."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, Api, Array, Field, Struct, array_of


def _controller(kraft: str, broker_epoch: str) -> tuple[Field, ...]:
    return (
        Field("controller_id", INT32),
        Field("is_k_raft_controller", BOOL, kraft),
        Field("controller_epoch", INT32),
        Field("broker_epoch", INT64, broker_epoch, default=-1),
    )


def _leadership(topic_name: str) -> tuple[Field, ...]:
    """A partition's leader and ISR as the controller sends them (the topic's name in each
    partition until the versions that group partitions by topic)."""
    return (
        Field("topic_name", STRING, topic_name),
        Field("partition_index", INT32),
        Field("controller_epoch", INT32),
        Field("leader", INT32),
        Field("leader_epoch", INT32),
        Field("isr", Array(INT32)),
    )


def _leader_and_isr_partition_state() -> Struct:
    return Struct(
        *_leadership("0-1"),
        Field("partition_epoch", INT32),
        Field("replicas", Array(INT32)),
        Field("adding_replicas", Array(INT32), "3+"),
        Field("removing_replicas", Array(INT32), "3+"),
        Field("is_new", BOOL, "1+"),
        Field("leader_recovery_state", INT8, "6+"),
        name="LeaderAndIsrPartitionState",
    )


def _partition_errors(versions: str) -> Field:
    return Field(
        "partition_errors",
        array_of(
            "LeaderAndIsrPartitionError",
            Field("topic_name", STRING, "0-4"),
            Field("partition_index", INT32),
            Field("error_code", INT16),
        ),
        versions,
    )


LEADER_AND_ISR = Api(
    ApiKey.LEADER_AND_ISR,
    "0-7",
    flexible="4+",
    request=Struct(
        *_controller(kraft="7+", broker_epoch="2+"),
        Field("type", INT8, "5+"),  # 0 incremental, 1 full
        Field("ungrouped_partition_states", Array(_leader_and_isr_partition_state()), "0-1"),
        Field(
            "topic_states",
            array_of(
                "LeaderAndIsrTopicState",
                Field("topic_name", STRING),
                Field("topic_id", UUID, "5+"),
                Field("partition_states", Array(_leader_and_isr_partition_state())),
            ),
            "2+",
        ),
        Field(
            "live_leaders",
            array_of(
                "LeaderAndIsrLiveLeader", Field("broker_id", INT32), Field("host_name", STRING), Field("port", INT32)
            ),
        ),
    ),
    response=Struct(
        Field("error_code", INT16),
        _partition_errors("0-4"),
        Field("topics", array_of("LeaderAndIsrTopicError", Field("topic_id", UUID), _partition_errors("0+")), "5+"),
    ),
)

STOP_REPLICA = Api(
    ApiKey.STOP_REPLICA,
    "0-4",
    flexible="2+",
    request=Struct(
        *_controller(kraft="4+", broker_epoch="1+"),
        Field("delete_partitions", BOOL, "0-2"),
        Field(
            "ungrouped_partitions",
            array_of("StopReplicaPartitionV0", Field("topic_name", STRING), Field("partition_index", INT32)),
            "0",
        ),
        Field(
            "topics",
            array_of("StopReplicaTopicV1", Field("name", STRING), Field("partition_indexes", Array(INT32))),
            "1-2",
        ),
        Field(
            "topic_states",
            array_of(
                "StopReplicaTopicState",
                Field("topic_name", STRING),
                Field(
                    "partition_states",
                    array_of(
                        "StopReplicaPartitionState",
                        Field("partition_index", INT32),
                        Field("leader_epoch", INT32, default=-1),
                        Field("delete_partition", BOOL),
                    ),
                ),
            ),
            "3+",
        ),
    ),
    response=Struct(
        Field("error_code", INT16),
        Field(
            "partition_errors",
            array_of(
                "StopReplicaPartitionError",
                Field("topic_name", STRING),
                Field("partition_index", INT32),
                Field("error_code", INT16),
            ),
        ),
    ),
)


def _update_metadata_partition_state() -> Struct:
    return Struct(
        *_leadership("0-4"),
        Field("zk_version", INT32),
        Field("replicas", Array(INT32)),
        Field("offline_replicas", Array(INT32), "4+"),
        name="UpdateMetadataPartitionState",
    )


UPDATE_METADATA = Api(
    ApiKey.UPDATE_METADATA,
    "0-8",
    flexible="6+",
    request=Struct(
        *_controller(kraft="8+", broker_epoch="5+"),
        Field("type", INT8, "8+", tag=0),  # 0 unknown, 1 incremental, 2 full
        Field("ungrouped_partition_states", Array(_update_metadata_partition_state()), "0-4"),
        Field(
            "topic_states",
            array_of(
                "UpdateMetadataTopicState",
                Field("topic_name", STRING),
                Field("topic_id", UUID, "7+"),
                Field("partition_states", Array(_update_metadata_partition_state())),
            ),
            "5+",
        ),
        Field(
            "live_brokers",
            array_of(
                "UpdateMetadataBroker",
                Field("id", INT32),
                Field("v0_host", STRING, "0"),
                Field("v0_port", INT32, "0"),
                Field(
                    "endpoints",
                    array_of(
                        "UpdateMetadataEndpoint",
                        Field("port", INT32),
                        Field("host", STRING),
                        Field("listener", STRING, "3+"),
                        Field("security_protocol", INT16),
                    ),
                    "1+",
                ),
                Field("rack", STRING, "2+", null="0+"),
            ),
        ),
    ),
    response=Struct(Field("error_code", INT16)),
)

CONTROLLED_SHUTDOWN = Api(
    ApiKey.CONTROLLED_SHUTDOWN,
    "0-3",  # v0 is the one request with header v0 (no client id)
    flexible="3+",
    request=Struct(Field("broker_id", INT32), Field("broker_epoch", INT64, "2+", default=-1)),
    response=Struct(
        Field("error_code", INT16),
        Field(
            "remaining_partitions",
            array_of("RemainingPartition", Field("topic_name", STRING), Field("partition_index", INT32)),
        ),
    ),
)

ALTER_PARTITION = Api(
    ApiKey.ALTER_PARTITION,
    "0-3",
    flexible="0+",
    request=Struct(
        Field("broker_id", INT32),
        Field("broker_epoch", INT64, default=-1),
        Field(
            "topics",
            array_of(
                "TopicData",
                Field("topic_name", STRING, "0-1"),
                Field("topic_id", UUID, "2+"),
                Field(
                    "partitions",
                    array_of(
                        "PartitionData",
                        Field("partition_index", INT32),
                        Field("leader_epoch", INT32),
                        Field("new_isr", Array(INT32), "0-2"),
                        Field(
                            "new_isr_with_epochs",
                            array_of(
                                "BrokerState", Field("broker_id", INT32), Field("broker_epoch", INT64, default=-1)
                            ),
                            "3+",
                        ),
                        Field("leader_recovery_state", INT8, "1+"),
                        Field("partition_epoch", INT32),
                    ),
                ),
            ),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field(
            "topics",
            array_of(
                "TopicData",
                Field("topic_name", STRING, "0-1"),
                Field("topic_id", UUID, "2+"),
                Field(
                    "partitions",
                    array_of(
                        "PartitionData",
                        Field("partition_index", INT32),
                        Field("error_code", INT16),
                        Field("leader_id", INT32),
                        Field("leader_epoch", INT32),
                        Field("isr", Array(INT32)),
                        Field("leader_recovery_state", INT8, "1+"),
                        Field("partition_epoch", INT32),
                    ),
                ),
            ),
        ),
    ),
)
