"""Admin request handlers: topics, partitions, records, configs and log dirs.

Kafka's ``ZkAdminManager`` and the admin half of ``KafkaApis``: each topic or resource
of a request is checked and answered on its own, with the error code (and message, from
the versions that carry one) where Kafka puts it. ``validate_only`` requests make every
check and change nothing.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..config import BROKER_KEYS, SYNONYMS, TOPIC_KEYS, BrokerConfig
from ..errors import (
    ApiError,
    ErrorCode,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    SeglogError,
    TopicDeletionDisabledError,
    TopicExistsError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from ..protocol import ApiKey
from .metadata_cache import ZERO_UUID
from .replica_manager import ReplicaManager
from .routes import Route, Routes

if TYPE_CHECKING:
    from .cluster_member import ClusterMember

INTERNAL_TOPIC_TIMEOUT_MS = 30_000  # how long a coordinator waits for its topic to reach the metadata

# DescribeConfigs' resource types and config sources (Kafka's ConfigResource.Type, ConfigSource)
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
# IncrementalAlterConfigs' operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
# DescribeConfigs' config types
_TYPES = {"bool": 1, "str": 2, "int": 5, "float": 6, "list": 7}


def config_string(value: Any) -> str | None:
    """A config value as Kafka's tools print it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    return str(value)


class AdminManager:
    def __init__(self, config: BrokerConfig, replicas: ReplicaManager, cluster: ClusterMember | None = None) -> None:
        self.config = config
        self.replicas = replicas
        self.metadata = replicas.metadata
        # in a cluster, topics change through ZooKeeper and the controller (Kafka's ZkAdminManager)
        self.cluster = cluster

    async def _in_zookeeper(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def _await_metadata(self, done: Callable[[], bool], timeout_ms: int, what: str) -> None:
        """Kafka's DelayedCreateTopics/DelayedDeleteTopics: answer once the controller's UpdateMetadata
        shows the change here, or REQUEST_TIMED_OUT."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        while not done():
            if time.monotonic() >= deadline:
                raise ApiError(ErrorCode.REQUEST_TIMED_OUT, f"{what}: not done within {timeout_ms} ms")
            await asyncio.sleep(0.02)

    # --- CreateTopics ---------------------------------------------------------------------------------

    def routes(self) -> Routes:
        return {
            ApiKey.CREATE_TOPICS: Route(self.create_topics, (0, 7)),
            ApiKey.DELETE_TOPICS: Route(self.delete_topics, (0, 6)),
            ApiKey.CREATE_PARTITIONS: Route(self.create_partitions, (0, 3)),
            ApiKey.DELETE_RECORDS: Route(self.delete_records, (0, 2)),
            ApiKey.DESCRIBE_CONFIGS: Route(self.describe_configs, (0, 4)),
            ApiKey.ALTER_CONFIGS: Route(self.alter_configs, (0, 2)),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: Route(self.incremental_alter_configs, (0, 1)),
            ApiKey.DESCRIBE_LOG_DIRS: Route(self.describe_log_dirs, (0, 4)),
        }

    async def create_topics(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        names = [t["name"] for t in body["topics"]]
        results = []
        for topic in body["topics"]:
            if names.count(topic["name"]) > 1:
                fault = InvalidRequestError(f"topic {topic['name']!r} appears more than once in the request")
                results.append(self._created(topic["name"], fault))
                continue
            try:
                count, overrides = self._check_new_topic(topic)
                factor = self._replication_factor(topic)
                if not body.get("validate_only", False):
                    await self._create_topic(topic, count, factor, overrides, body.get("timeout_ms", 30_000))
                results.append(self._created(topic["name"], None, count, overrides, factor))
            except SeglogError as e:
                results.append(self._created(topic["name"], e))
        return {"throttle_time_ms": 0, "topics": results}

    async def _create_topic(
        self, topic: dict[str, Any], count: int, factor: int, overrides: dict[str, Any], timeout_ms: int
    ) -> None:
        name = topic["name"]
        if self.cluster is None:
            await self.replicas.create_topic(name, count, overrides)
            return
        assignment = {a["partition_index"]: list(a["broker_ids"]) for a in topic.get("assignments") or []}
        await self._in_zookeeper(self.cluster.create_topic, name, count, factor, overrides, assignment or None)
        await self._await_metadata(lambda: self.metadata.partition_count(name) == count, timeout_ms, f"topic {name}")

    async def create_internal_topic(self, name: str, count: int, factor: int, overrides: dict[str, Any]) -> None:
        """A coordinator's topic (``__consumer_offsets``), made on its first use: through ZooKeeper in
        a cluster (``factor`` replicas, refused while the cluster has fewer brokers, as Kafka's)."""
        topic = {"name": name, "assignments": []}
        await self._create_topic(topic, count, factor, overrides, INTERNAL_TOPIC_TIMEOUT_MS)

    def _replication_factor(self, topic: dict[str, Any]) -> int:
        if topic.get("assignments"):
            return len(topic["assignments"][0]["broker_ids"])
        factor = topic["replication_factor"]
        return self.config["default.replication.factor"] if factor == -1 else factor

    def _check_new_topic(self, topic: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = topic["name"]
        self.replicas.validate_topic_name(name)
        if self.metadata.topic(name) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        assignments = topic.get("assignments") or []
        count, factor = topic["num_partitions"], topic["replication_factor"]
        me = self.replicas.broker.broker_id
        if assignments:
            if count != -1 or factor != -1:
                raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set.")
            indexes = sorted(a["partition_index"] for a in assignments)
            if indexes != list(range(len(indexes))):
                raise InvalidReplicaAssignmentError(f"partitions must be numbered from 0: {indexes}")
            for a in assignments:
                if self.cluster is None and a["broker_ids"] != [me]:
                    raise InvalidReplicaAssignmentError(
                        f"replicas {a['broker_ids']} name brokers other than broker {me}"
                    )
            count = len(indexes)
        else:
            count = self.config["num.partitions"] if count == -1 else count
            factor = self.config["default.replication.factor"] if factor == -1 else factor
            if count <= 0:
                raise InvalidPartitionsError("Number of partitions must be larger than 0.")
            if factor <= 0:
                raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
            brokers = len(self.metadata.brokers())
            if factor > brokers:
                raise InvalidReplicationFactorError(
                    f"Replication factor: {factor} larger than available brokers: {brokers}.",
                )
        overrides = {c["name"]: c["value"] for c in topic.get("configs") or [] if c["value"] is not None}
        self.replicas.validate_topic_config(overrides)
        return count, overrides

    def _created(
        self,
        name: str,
        error: SeglogError | None,
        count: int = -1,
        overrides: dict[str, Any] | None = None,
        factor: int = 1,
    ) -> dict[str, Any]:
        found = self.metadata.topic(name)
        entry: dict[str, Any] = {
            "name": name,
            "topic_id": found.topic_id if found and error is None else None,
            "error_code": error.error_code if error else ErrorCode.NONE,
            "error_message": error.message if error else None,
            "num_partitions": count if error is None else -1,
            "replication_factor": factor if error is None else -1,
            "configs": None,
        }
        if entry["topic_id"] is None:
            entry["topic_id"] = ZERO_UUID
        if error is None:
            resolved = self.replicas.validate_topic_config(overrides or {})
            entry["configs"] = [
                {
                    "name": key,
                    "value": config_string(resolved[key]),
                    "read_only": False,
                    "config_source": self._topic_source(key, overrides or {})[0],
                    "is_sensitive": False,
                }
                for key in TOPIC_KEYS
            ]
        return entry

    # --- DeleteTopics -----------------------------------------------------------------------------------

    async def delete_topics(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        wanted: list[tuple[str | None, Any]] = (
            [(t.get("name"), t.get("topic_id")) for t in body["topics"]]
            if version >= 6
            else [(name, None) for name in body["topic_names"]]
        )
        results = []
        for name, topic_id in wanted:
            if name is None and topic_id is not None:
                found = self.metadata.topic_by_id(topic_id)
                name = found.name if found else None
            entry: dict[str, Any] = {
                "name": name,
                "topic_id": topic_id,
                "error_code": ErrorCode.NONE,
                "error_message": None,
            }
            try:
                if name is None:
                    raise UnknownTopicIdError(f"no topic has id {topic_id}")
                found = self.metadata.topic(name)
                if found is None:
                    raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
                entry["topic_id"] = found.topic_id
                if not self.config["delete.topic.enable"]:
                    raise TopicDeletionDisabledError("Topic deletion is disabled.")
                await self._delete_topic(name, body.get("timeout_ms", 30_000))
            except SeglogError as e:
                entry.update(error_code=e.error_code, error_message=e.message)
            if entry["topic_id"] is None:
                entry["topic_id"] = ZERO_UUID
            results.append(entry)
        return {"throttle_time_ms": 0, "responses": results}

    async def _delete_topic(self, name: str, timeout_ms: int) -> None:
        if self.cluster is None:
            await self.replicas.delete_topic(name)
            return
        await self._in_zookeeper(self.cluster.delete_topic, name)
        await self._await_metadata(lambda: self.metadata.topic(name) is None, timeout_ms, f"deletion of {name}")

    # --- CreatePartitions ---------------------------------------------------------------------------------

    async def create_partitions(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        results = []
        for topic in body["topics"]:
            name, count = topic["name"], topic["count"]
            entry: dict[str, Any] = {"name": name, "error_code": ErrorCode.NONE, "error_message": None}
            try:
                current = self.metadata.partition_count(name)
                if current == 0:
                    raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
                if count < current:
                    raise InvalidPartitionsError(
                        f"Topic currently has {current} partitions, which is higher than the requested {count}."
                    )
                if count == current:
                    raise InvalidPartitionsError(f"Topic already has {current} partitions.")
                assignments = topic.get("assignments")
                if assignments is not None:
                    if len(assignments) != count - current:
                        raise InvalidReplicaAssignmentError(
                            f"Increasing the number of partitions by {count - current} but "
                            f"{len(assignments)} assignments provided.",
                        )
                    me = self.replicas.broker.broker_id
                    if self.cluster is not None:
                        raise InvalidReplicaAssignmentError("new partitions are assigned by the controller in seglog")
                    if any(a["broker_ids"] != [me] for a in assignments):
                        raise InvalidReplicaAssignmentError(f"replicas name brokers other than broker {me}")
                if not body.get("validate_only", False):
                    await self._create_partitions(name, count, body.get("timeout_ms", 30_000))
            except SeglogError as e:
                entry.update(error_code=e.error_code, error_message=e.message)
            results.append(entry)
        return {"throttle_time_ms": 0, "results": results}

    async def _create_partitions(self, name: str, count: int, timeout_ms: int) -> None:
        if self.cluster is None:
            await self.replicas.create_partitions(name, count)
            return
        await self._in_zookeeper(self.cluster.add_partitions, name, count)
        await self._await_metadata(lambda: self.metadata.partition_count(name) >= count, timeout_ms, f"topic {name}")

    # --- DeleteRecords ------------------------------------------------------------------------------------

    async def delete_records(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        lookups = [(t["name"], p["partition_index"], p["offset"]) for t in body["topics"] for p in t["partitions"]]
        answers = iter(await self.replicas.delete_records(lookups, body["timeout_ms"]))
        topics = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                code, low = next(answers)
                parts.append({"partition_index": p["partition_index"], "low_watermark": low, "error_code": code})
            topics.append({"name": t["name"], "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    # --- DescribeConfigs ------------------------------------------------------------------------------------

    async def describe_configs(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        synonyms = body.get("include_synonyms", False)
        docs = body.get("include_documentation", False)
        results = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            entry: dict[str, Any] = {
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "resource_type": kind,
                "resource_name": name,
                "configs": [],
            }
            try:
                entries = self._config_entries(kind, name, synonyms, docs)
                keys = resource.get("configuration_keys")
                entry["configs"] = [e for e in entries if keys is None or e["name"] in keys]
            except SeglogError as e:
                entry.update(error_code=e.error_code, error_message=e.message)
            results.append(entry)
        return {"throttle_time_ms": 0, "results": results}

    def _config_entries(self, kind: int, name: str, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
        if kind == TOPIC_RESOURCE:
            if self.metadata.topic(name) is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            resolved = self.replicas.topic_config(name) if self.cluster is None else self.cluster.topic_config(name)
            return [self._topic_entry(key, resolved, synonyms, docs) for key in TOPIC_KEYS]
        if kind == BROKER_RESOURCE:
            self._check_broker(name)
            return [self._broker_entry(key, synonyms, docs) for key in sorted(BROKER_KEYS)]
        raise InvalidRequestError(f"resource type {kind} is not served (topics 2 and brokers 4 are)")

    def _check_broker(self, name: str) -> None:
        if name not in ("", str(self.replicas.broker.broker_id)):
            raise InvalidRequestError(f"this is broker {self.replicas.broker.broker_id}, not {name!r}")

    def _topic_source(self, key: str, overrides: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
        """The source of a topic key's value and its synonyms in precedence order."""
        found: list[dict[str, Any]] = []
        if key in overrides:
            found.append({"name": key, "value": config_string(overrides[key]), "source": TOPIC_CONFIG})
        for syn, _factor in SYNONYMS[key]:
            if self.config.is_set(syn):
                found.append({"name": syn, "value": config_string(self.config[syn]), "source": STATIC_BROKER_CONFIG})
        default = TOPIC_KEYS[key].default
        found.append(
            {
                "name": SYNONYMS[key][0][0] if SYNONYMS[key] else key,
                "value": config_string(default),
                "source": DEFAULT_CONFIG,
            }
        )
        return int(found[0]["source"]), found

    def _topic_entry(self, key: str, resolved: Any, synonyms: bool, docs: bool) -> dict[str, Any]:
        source, found = self._topic_source(key, resolved.overrides)
        spec = TOPIC_KEYS[key]
        return {
            "name": key,
            "value": config_string(resolved[key]),
            "read_only": False,
            "is_default": source == DEFAULT_CONFIG,
            "config_source": source,
            "is_sensitive": False,
            "synonyms": found if synonyms else [],
            "config_type": _config_type(resolved[key]),
            "documentation": spec.doc if docs else None,
        }

    def _broker_entry(self, key: str, synonyms: bool, docs: bool) -> dict[str, Any]:
        spec = BROKER_KEYS[key]
        value = self.config[key]
        source = STATIC_BROKER_CONFIG if self.config.is_set(key) else DEFAULT_CONFIG
        return {
            "name": key,
            "value": config_string(value),
            "read_only": True,  # static: read from server.properties at start
            "is_default": source == DEFAULT_CONFIG,
            "config_source": source,
            "is_sensitive": False,
            "synonyms": [{"name": key, "value": config_string(value), "source": source}] if synonyms else [],
            "config_type": _config_type(value),
            "documentation": spec.doc if docs else None,
        }

    # --- AlterConfigs, IncrementalAlterConfigs ----------------------------------------------------------------

    async def alter_configs(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        return await self._alter(body, incremental=False)

    async def incremental_alter_configs(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        return await self._alter(body, incremental=True)

    async def _alter(self, body: dict[str, Any], incremental: bool) -> dict[str, Any]:
        results = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            entry = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": kind, "resource_name": name}
            try:
                if kind == BROKER_RESOURCE:
                    self._check_broker(name)
                    raise InvalidConfigurationError(
                        "broker configs are static in seglog: set them in server.properties or --override"
                    )
                if kind != TOPIC_RESOURCE:
                    raise InvalidRequestError(f"resource type {kind} cannot be altered")
                if self.metadata.topic(name) is None:
                    raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
                resolved = self.replicas.topic_config(name) if self.cluster is None else self.cluster.topic_config(name)
                current = dict(resolved.overrides)
                wanted = (
                    self._incremental(current, resource["configs"]) if incremental else _replace(resource["configs"])
                )
                self.replicas.validate_topic_config(wanted)
                if not body.get("validate_only", False):
                    await self._alter_topic_config(name, current, wanted)
            except SeglogError as e:
                entry.update(error_code=e.error_code, error_message=e.message)
            results.append(entry)
        return {"throttle_time_ms": 0, "responses": results}

    async def _alter_topic_config(self, name: str, current: dict[str, Any], wanted: dict[str, Any]) -> None:
        if self.cluster is not None:
            await self._in_zookeeper(self.cluster.alter_topic_config, name, wanted)
        else:
            await self.replicas.alter_topic_config(name, wanted, [k for k in current if k not in wanted])

    @staticmethod
    def _incremental(current: dict[str, Any], configs: list[dict[str, Any]]) -> dict[str, Any]:
        out = dict(current)
        for c in configs:
            key, op, value = c["name"], c["config_operation"], c["value"]
            if key not in TOPIC_KEYS:
                raise InvalidConfigurationError(f"Unknown topic config name: {key}")
            if op == SET:
                out[key] = value
            elif op == DELETE:
                out.pop(key, None)
            elif op in (APPEND, SUBTRACT):
                if TOPIC_KEYS[key].parse.__name__ != "_list":
                    raise InvalidConfigurationError(f"Config value append is not allowed for config key: {key}")
                items = list(config_string(out.get(key, TOPIC_KEYS[key].default)).split(","))  # type: ignore[union-attr]
                given = [v.strip() for v in (value or "").split(",") if v.strip()]
                if op == APPEND:
                    items += [v for v in given if v not in items]
                else:
                    items = [v for v in items if v not in given]
                out[key] = ",".join(items)
            else:
                raise InvalidRequestError(f"unknown config operation {op}")
        return out

    # --- DescribeLogDirs -----------------------------------------------------------------------------------

    async def describe_log_dirs(self, version: int, body: dict[str, Any]) -> dict[str, Any]:
        wanted = body.get("topics")
        filter_: set[tuple[str, int]] | None = (
            None if wanted is None else {(t["topic"], p) for t in wanted for p in t["partitions"]}
        )
        results = []
        for path, partitions in self.replicas.log_dirs().items():
            by_topic: dict[str, list[dict[str, Any]]] = {}
            for p in partitions:
                if filter_ is None or (p.topic, p.partition) in filter_:
                    by_topic.setdefault(p.topic, []).append(
                        {
                            "partition_index": p.partition,
                            "partition_size": p.size,
                            "offset_lag": p.offset_lag,
                            "is_future_key": False,
                        }
                    )
            total, usable = _disk(path)
            results.append(
                {
                    "error_code": ErrorCode.NONE,
                    "log_dir": path,
                    "topics": [{"name": t, "partitions": ps} for t, ps in sorted(by_topic.items())],
                    "total_bytes": total,
                    "usable_bytes": usable,
                }
            )
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": results}


def _replace(configs: list[dict[str, Any]]) -> dict[str, Any]:
    return {c["name"]: c["value"] for c in configs if c["value"] is not None}


def _config_type(value: Any) -> int:
    if isinstance(value, bool):
        return _TYPES["bool"]
    if isinstance(value, int):
        return _TYPES["int"]
    if isinstance(value, float):
        return _TYPES["float"]
    if isinstance(value, tuple | list):
        return _TYPES["list"]
    return _TYPES["str"]


def _disk(path: str) -> tuple[int, int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return -1, -1
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
