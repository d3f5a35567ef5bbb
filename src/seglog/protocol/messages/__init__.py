"""Every API declared here, by key: the schemas written from Kafka's message specs."""

from __future__ import annotations

from seglog.protocol.messages import admin, cluster, data
from seglog.protocol.schema import Api

SCHEMAS: dict[int, Api] = {
    api.key: api
    for api in (
        data.PRODUCE,
        data.FETCH,
        data.LIST_OFFSETS,
        cluster.METADATA,
        cluster.API_VERSIONS,
        cluster.DESCRIBE_CLUSTER,
        admin.DELETE_RECORDS,
        data.OFFSET_FOR_LEADER_EPOCH,
        admin.CREATE_TOPICS,
        admin.DELETE_TOPICS,
        admin.CREATE_PARTITIONS,
        admin.DESCRIBE_CONFIGS,
        admin.ALTER_CONFIGS,
        admin.INCREMENTAL_ALTER_CONFIGS,
        admin.DESCRIBE_LOG_DIRS,
    )
}
