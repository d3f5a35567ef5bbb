"""The routing table: one handler per API, ranges cut to what the codec handles."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.broker.routes import Route, routing_table, served_versions
from seglog.client import connect
from seglog.protocol import ApiKey, supported_versions


async def _handler(version: int, body: Any) -> Any:
    return None


def test_ranges_are_cut_to_what_the_protocol_package_handles() -> None:
    low, high = supported_versions(ApiKey.METADATA)
    table = routing_table({ApiKey.METADATA: Route(_handler, (low - 5 if low else 0, high + 50))})
    assert table[ApiKey.METADATA].versions == (low, high)
    assert served_versions(table) == {int(ApiKey.METADATA): (low, high)}


def test_an_api_without_a_schema_or_a_version_in_common_is_left_out() -> None:
    high = supported_versions(ApiKey.PRODUCE)[1]
    table = routing_table(
        {ApiKey.EXPIRE_DELEGATION_TOKEN: Route(_handler, (0, 2))},  # no schema declared
        {ApiKey.PRODUCE: Route(_handler, (high + 1, high + 3))},
    )
    assert table == {}


def test_an_api_two_modules_claim_is_refused() -> None:
    with pytest.raises(ValueError, match="FETCH is routed twice"):
        routing_table({ApiKey.FETCH: Route(_handler, (4, 16))}, {ApiKey.FETCH: Route(_handler, (4, 12))})


# Kafka 3.9's ZooKeeper-mode broker: the "validVersions" of the message specs
# (clients/src/main/resources/common/message/*Request.json) of every API seglog implements
KAFKA_3_9 = {
    ApiKey.PRODUCE: (0, 11),
    ApiKey.FETCH: (0, 17),
    ApiKey.LIST_OFFSETS: (0, 9),
    ApiKey.METADATA: (0, 12),
    ApiKey.LEADER_AND_ISR: (0, 7),
    ApiKey.STOP_REPLICA: (0, 4),
    ApiKey.UPDATE_METADATA: (0, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 4),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 4),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ALTER_PARTITION: (0, 3),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
}


def test_api_versions_advertises_kafka_3_9s_ranges(seglog_broker) -> None:
    """Exactly Kafka 3.9's ranges, the old versions included (real tools still send them:
    Burrow's ListOffsets v0, librdkafka 2.0's compression, which it turns on only when Produce
    v0 is advertised); a broker alone leaves out the controller's requests."""
    with connect(seglog_broker.bootstrap_servers) as client:
        advertised = {ApiKey(k): v for k, v in client.versions.items()}
    assert advertised == {k: v for k, v in KAFKA_3_9.items() if k in advertised}
    assert set(KAFKA_3_9) - set(advertised) <= CLUSTER_ONLY


# the requests of a cluster's controller and brokers to each other, and its admin of leaders
CLUSTER_ONLY = {
    ApiKey.LEADER_AND_ISR,
    ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA,
    ApiKey.CONTROLLED_SHUTDOWN,
    ApiKey.ALTER_PARTITION,
    ApiKey.ELECT_LEADERS,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS,
}
