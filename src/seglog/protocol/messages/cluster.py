"""ApiVersions, Metadata, DescribeCluster: what a client asks before anything else."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import BOOL, INT8, INT16, INT32, INT64, STRING, UUID, Api, Array, Field, Struct, array_of

API_VERSIONS = Api(
    ApiKey.API_VERSIONS,
    "0-4",
    flexible="3+",
    request=Struct(
        Field("client_software_name", STRING, "3+"),
        Field("client_software_version", STRING, "3+"),
    ),
    response=Struct(
        Field("error_code", INT16),
        Field(
            "api_keys",
            array_of("ApiVersion", Field("api_key", INT16), Field("min_version", INT16), Field("max_version", INT16)),
        ),
        Field("throttle_time_ms", INT32, "1+"),
        Field(
            "supported_features",
            array_of(
                "SupportedFeatureKey", Field("name", STRING), Field("min_version", INT16), Field("max_version", INT16)
            ),
            "3+",
            tag=0,
        ),
        Field("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
        Field(
            "finalized_features",
            array_of(
                "FinalizedFeatureKey",
                Field("name", STRING),
                Field("max_version_level", INT16),
                Field("min_version_level", INT16),
            ),
            "3+",
            tag=2,
        ),
        Field("zk_migration_ready", BOOL, "3+", tag=3, default=False),
    ),
)

METADATA = Api(
    ApiKey.METADATA,
    "0-12",
    flexible="9+",
    request=Struct(
        # null (v1+) asks for every topic; an empty array for none
        Field(
            "topics",
            array_of("MetadataRequestTopic", Field("topic_id", UUID, "10+"), Field("name", STRING, null="10+")),
            null="1+",
        ),
        Field("allow_auto_topic_creation", BOOL, "4+", default=True),
        Field("include_cluster_authorized_operations", BOOL, "8-10"),
        Field("include_topic_authorized_operations", BOOL, "8+"),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32, "3+"),
        Field(
            "brokers",
            array_of(
                "MetadataResponseBroker",
                Field("node_id", INT32),
                Field("host", STRING),
                Field("port", INT32),
                Field("rack", STRING, "1+", null="1+", default=None),
            ),
        ),
        Field("cluster_id", STRING, "2+", null="2+", default=None),
        Field("controller_id", INT32, "1+", default=-1),
        Field(
            "topics",
            array_of(
                "MetadataResponseTopic",
                Field("error_code", INT16),
                Field("name", STRING, null="12+"),
                Field("topic_id", UUID, "10+"),
                Field("is_internal", BOOL, "1+", default=False),
                Field(
                    "partitions",
                    array_of(
                        "MetadataResponsePartition",
                        Field("error_code", INT16),
                        Field("partition_index", INT32),
                        Field("leader_id", INT32),
                        Field("leader_epoch", INT32, "7+", default=-1),
                        Field("replica_nodes", Array(INT32)),
                        Field("isr_nodes", Array(INT32)),
                        Field("offline_replicas", Array(INT32), "5+"),
                    ),
                ),
                Field("topic_authorized_operations", INT32, "8+", default=-(2**31)),
            ),
        ),
        Field("cluster_authorized_operations", INT32, "8-10", default=-(2**31)),
    ),
)

DESCRIBE_CLUSTER = Api(
    ApiKey.DESCRIBE_CLUSTER,
    "0-1",
    flexible="0+",
    request=Struct(
        Field("include_cluster_authorized_operations", BOOL),
        Field("endpoint_type", INT8, "1+", default=1),  # 1 brokers, 2 controllers
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, null="0+", default=None),
        Field("endpoint_type", INT8, "1+", default=1),
        Field("cluster_id", STRING),
        Field("controller_id", INT32, default=-1),
        Field(
            "brokers",
            array_of(
                "DescribeClusterBroker",
                Field("broker_id", INT32),
                Field("host", STRING),
                Field("port", INT32),
                Field("rack", STRING, null="0+", default=None),
            ),
        ),
        Field("cluster_authorized_operations", INT32, default=-(2**31)),
    ),
)
