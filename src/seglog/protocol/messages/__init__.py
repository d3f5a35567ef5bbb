"""Every API declared here, by key: the schemas written from Kafka's message specs."""

from __future__ import annotations

from seglog.protocol.messages import admin, cluster, cluster_admin, data, groups, inter_broker, sasl, txn
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
        groups.FIND_COORDINATOR,
        groups.JOIN_GROUP,
        groups.SYNC_GROUP,
        groups.HEARTBEAT,
        groups.LEAVE_GROUP,
        groups.OFFSET_COMMIT,
        groups.OFFSET_FETCH,
        groups.LIST_GROUPS,
        groups.DESCRIBE_GROUPS,
        groups.DELETE_GROUPS,
        groups.OFFSET_DELETE,
        txn.INIT_PRODUCER_ID,
        txn.ADD_PARTITIONS_TO_TXN,
        txn.ADD_OFFSETS_TO_TXN,
        txn.END_TXN,
        txn.TXN_OFFSET_COMMIT,
        txn.WRITE_TXN_MARKERS,
        txn.DESCRIBE_TRANSACTIONS,
        txn.LIST_TRANSACTIONS,
        inter_broker.LEADER_AND_ISR,
        inter_broker.STOP_REPLICA,
        inter_broker.UPDATE_METADATA,
        inter_broker.CONTROLLED_SHUTDOWN,
        inter_broker.ALTER_PARTITION,
        cluster_admin.ELECT_LEADERS,
        cluster_admin.ALTER_PARTITION_REASSIGNMENTS,
        cluster_admin.LIST_PARTITION_REASSIGNMENTS,
        sasl.SASL_HANDSHAKE,
        sasl.SASL_AUTHENTICATE,
        sasl.DESCRIBE_USER_SCRAM_CREDENTIALS,
        sasl.ALTER_USER_SCRAM_CREDENTIALS,
    )
}
