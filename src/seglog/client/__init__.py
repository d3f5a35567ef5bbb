"""seglog's Kafka client: connections to brokers, on ``protocol``'s sans-IO connection, and the
routing of requests in a cluster (``ClusterClient``: leaders, coordinators, retries, the
consumer's Fetch and ListOffsets), and the idempotent ``Producer`` on it.

Layering: uses ``protocol``, ``records``, ``partitioner``, ``common`` and ``errors``; the broker
(its inter-broker channels), the command-line tools and Spark use it.
"""

from seglog.client.cluster import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ClusterClient,
    FetchedPartition,
    ListedOffset,
    MetadataTopic,
    RetriableError,
    Unanswered,
    check,
    check_coordinator,
    check_partition,
    metadata,
    topics_by_name,
)
from seglog.client.connection import AsyncConnection, BlockingConnection, connect, parse_address
from seglog.client.producer import Delivered, Producer, ProducerConfig, ProducerIdAndEpoch

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "READ_COMMITTED",
    "READ_UNCOMMITTED",
    "AsyncConnection",
    "BlockingConnection",
    "ClusterClient",
    "Delivered",
    "FetchedPartition",
    "ListedOffset",
    "MetadataTopic",
    "Producer",
    "ProducerConfig",
    "ProducerIdAndEpoch",
    "RetriableError",
    "Unanswered",
    "check",
    "check_coordinator",
    "check_partition",
    "connect",
    "metadata",
    "parse_address",
    "topics_by_name",
]
