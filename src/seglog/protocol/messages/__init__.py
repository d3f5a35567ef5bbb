"""Every API declared here, by key: the schemas written from Kafka's message specs."""

from __future__ import annotations

from seglog.protocol.messages import cluster, data
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
    )
}
