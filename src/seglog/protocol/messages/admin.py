"""Topics, partitions, records and configs: the AdminClient's APIs."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import (
    BOOL,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    UUID,
    Api,
    Array,
    Field,
    Struct,
    array_of,
    by_topic,
)


def _configs(*extra: Field) -> Field:
    """Names and nullable values (null: back to the default), as Alter* requests carry them."""
    return Field(
        "configs", array_of("AlterableConfig", Field("name", STRING), *extra, Field("value", STRING, null="0+"))
    )


def _resources(configs: Field) -> Field:
    return Field(
        "resources",
        array_of("AlterConfigsResource", Field("resource_type", INT8), Field("resource_name", STRING), configs),
    )


def _resource_responses() -> Field:
    return Field(
        "responses",
        array_of(
            "AlterConfigsResourceResponse",
            Field("error_code", INT16),
            Field("error_message", STRING, null="0+"),
            Field("resource_type", INT8),  # 2 topic, 4 broker, 8 broker logger
            Field("resource_name", STRING),
        ),
    )


def _error_message(versions: str = "0+") -> Field:
    return Field("error_message", STRING, versions, null=versions, default=None)


CREATE_TOPICS = Api(
    ApiKey.CREATE_TOPICS,
    "0-7",
    flexible="5+",
    request=Struct(
        Field(
            "topics",
            array_of(
                "CreatableTopic",
                Field("name", STRING),
                Field("num_partitions", INT32),  # -1: num.partitions (v4+)
                Field("replication_factor", INT16),  # -1: default.replication.factor (v4+)
                Field(
                    "assignments",
                    array_of(
                        "CreatableReplicaAssignment", Field("partition_index", INT32), Field("broker_ids", Array(INT32))
                    ),
                ),
                Field(
                    "configs",
                    array_of("CreatableTopicConfig", Field("name", STRING), Field("value", STRING, null="0+")),
                ),
            ),
        ),
        Field("timeout_ms", INT32, default=60000),
        Field("validate_only", BOOL, "1+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "2+"),
        Field(
            "topics",
            array_of(
                "CreatableTopicResult",
                Field("name", STRING),
                Field("topic_id", UUID, "7+"),
                Field("error_code", INT16),
                Field("error_message", STRING, "1+", null="0+"),
                Field("topic_config_error_code", INT16, "5+", tag=0),
                Field("num_partitions", INT32, "5+", default=-1),
                Field("replication_factor", INT16, "5+", default=-1),
                Field(
                    "configs",
                    array_of(
                        "CreatableTopicConfigs",
                        Field("name", STRING),
                        Field("value", STRING, null="0+"),
                        Field("read_only", BOOL),
                        Field("config_source", INT8, default=-1),
                        Field("is_sensitive", BOOL),
                    ),
                    "5+",
                    null="5+",
                ),
            ),
        ),
    ),
)

DELETE_TOPICS = Api(
    ApiKey.DELETE_TOPICS,
    "0-6",
    flexible="4+",
    request=Struct(
        Field(
            "topics",
            array_of("DeleteTopicState", Field("name", STRING, null="0+", default=None), Field("topic_id", UUID)),
            "6+",
        ),
        Field("topic_names", Array(STRING), "0-5"),
        Field("timeout_ms", INT32),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "responses",
            array_of(
                "DeletableTopicResult",
                Field("name", STRING, null="6+"),
                Field("topic_id", UUID, "6+"),
                Field("error_code", INT16),
                _error_message("5+"),
            ),
        ),
    ),
)

CREATE_PARTITIONS = Api(
    ApiKey.CREATE_PARTITIONS,
    "0-3",
    flexible="2+",
    request=Struct(
        Field(
            "topics",
            array_of(
                "CreatePartitionsTopic",
                Field("name", STRING),
                Field("count", INT32),  # the partition count wanted, not the number added
                Field(
                    "assignments",
                    array_of("CreatePartitionsAssignment", Field("broker_ids", Array(INT32))),
                    null="0+",
                ),
            ),
        ),
        Field("timeout_ms", INT32),
        Field("validate_only", BOOL),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            array_of(
                "CreatePartitionsTopicResult", Field("name", STRING), Field("error_code", INT16), _error_message()
            ),
        ),
    ),
)

DELETE_RECORDS = Api(
    ApiKey.DELETE_RECORDS,
    "0-2",
    flexible="2+",
    request=Struct(
        by_topic(
            "DeleteRecordsTopic",
            "DeleteRecordsPartition",
            Field("partition_index", INT32),
            Field("offset", INT64),  # -1: the high watermark
        ),
        Field("timeout_ms", INT32),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        by_topic(
            "DeleteRecordsTopicResult",
            "DeleteRecordsPartitionResult",
            Field("partition_index", INT32),
            Field("low_watermark", INT64),
            Field("error_code", INT16),
        ),
    ),
)

DESCRIBE_CONFIGS = Api(
    ApiKey.DESCRIBE_CONFIGS,
    "0-4",
    flexible="4+",
    request=Struct(
        Field(
            "resources",
            array_of(
                "DescribeConfigsResource",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("configuration_keys", Array(STRING), null="0+"),  # null: every key
            ),
        ),
        Field("include_synonyms", BOOL, "1+"),
        Field("include_documentation", BOOL, "3+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            array_of(
                "DescribeConfigsResult",
                Field("error_code", INT16),
                Field("error_message", STRING, null="0+"),
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field(
                    "configs",
                    array_of(
                        "DescribeConfigsResourceResult",
                        Field("name", STRING),
                        Field("value", STRING, null="0+"),
                        Field("read_only", BOOL),
                        Field("is_default", BOOL, "0"),
                        # 1 dynamic topic, 2 dynamic broker, 3 dynamic default broker,
                        # 4 static broker, 5 default, 6 dynamic broker logger
                        Field("config_source", INT8, "1+", default=-1),
                        Field("is_sensitive", BOOL),
                        Field(
                            "synonyms",
                            array_of(
                                "DescribeConfigsSynonym",
                                Field("name", STRING),
                                Field("value", STRING, null="0+"),
                                Field("source", INT8),
                            ),
                            "1+",
                        ),
                        Field("config_type", INT8, "3+"),
                        Field("documentation", STRING, "3+", null="0+"),
                    ),
                ),
            ),
        ),
    ),
)

ALTER_CONFIGS = Api(
    ApiKey.ALTER_CONFIGS,
    "0-2",
    flexible="2+",
    request=Struct(_resources(_configs()), Field("validate_only", BOOL)),
    response=Struct(Field("throttle_time_ms", INT32), _resource_responses()),
)

INCREMENTAL_ALTER_CONFIGS = Api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS,
    "0-1",
    flexible="1+",
    # config_operation: 0 set, 1 delete, 2 append, 3 subtract
    request=Struct(_resources(_configs(Field("config_operation", INT8))), Field("validate_only", BOOL)),
    response=Struct(Field("throttle_time_ms", INT32), _resource_responses()),
)

DESCRIBE_LOG_DIRS = Api(
    ApiKey.DESCRIBE_LOG_DIRS,
    "0-4",
    flexible="2+",
    request=Struct(
        # null: every partition of every log dir
        Field(
            "topics",
            array_of("DescribableLogDirTopic", Field("topic", STRING), Field("partitions", Array(INT32))),
            null="0+",
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16, "3+"),
        Field(
            "results",
            array_of(
                "DescribeLogDirsResult",
                Field("error_code", INT16),
                Field("log_dir", STRING),
                Field(
                    "topics",
                    array_of(
                        "DescribeLogDirsTopic",
                        Field("name", STRING),
                        Field(
                            "partitions",
                            array_of(
                                "DescribeLogDirsPartition",
                                Field("partition_index", INT32),
                                Field("partition_size", INT64),
                                Field("offset_lag", INT64),
                                Field("is_future_key", BOOL),
                            ),
                        ),
                    ),
                ),
                Field("total_bytes", INT64, "4+", default=-1),
                Field("usable_bytes", INT64, "4+", default=-1),
            ),
        ),
    ),
)
