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
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..common import ZERO_UUID
from ..config import BROKER_KEYS, SYNONYMS, TOPIC_KEYS, BrokerConfig, topic_value
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
from ..protocol.enums import AlterConfigOpType, ConfigResourceType, ConfigSource
from ..protocol.message_data import (
    AlterConfigsRequestData,
    AlterConfigsResponseData,
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteRecordsRequestData,
    DeleteRecordsResponseData,
    DeleteTopicsRequestData,
    DeleteTopicsResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeLogDirsRequestData,
    DescribeLogDirsResponseData,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
)
from ..security import CLUSTER_NAME, AclOperation, ResourceType
from ..security.quotas import ClientQuotas
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .dynamic_config import DynamicConfigs, dynamic_key
from .replica_manager import ReplicaManager
from .routes import Route, Routes
from .throttling import ControllerMutationQuota

if TYPE_CHECKING:
    from .cluster_member import ClusterMember

R = TypeVar("R")
TOPIC = ResourceType.TOPIC
INTERNAL_TOPIC_TIMEOUT_MS = 30_000  # how long a coordinator waits for its topic to reach the metadata

# DescribeConfigs' resource types and config sources, IncrementalAlterConfigs' operations
TOPIC_RESOURCE, BROKER_RESOURCE = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
TOPIC_CONFIG, STATIC_BROKER_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.STATIC_BROKER_CONFIG
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
)
DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
APPEND, SUBTRACT = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
# DescribeConfigs' config types
_TYPES = {"bool": 1, "str": 2, "int": 5, "float": 6, "list": 7}
_PASSWORD = 9


def config_string(value: Any) -> str | None:
    """A config value as Kafka's tools print it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return ",".join(str(v) for v in value)
    if isinstance(value, dict):  # a map (max.connections.per.ip.overrides): k:v,k:v
        return ",".join(f"{k}:{v}" for k, v in value.items())
    return str(value)


class _Found(NamedTuple):
    """A broker key's value from one source."""

    name: str
    value: Any
    source: int


class AdminManager:
    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        cluster: ClusterMember | None = None,
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
        quotas: ClientQuotas | None = None,
        dynamic: DynamicConfigs | None = None,
    ) -> None:
        self.config = config
        self.dynamic = dynamic  # the dynamic broker configs (AlterConfigs of a BROKER resource)
        self.authorizer = authorizer
        self.quotas = quotas or ClientQuotas()  # controller_mutation_rate's, for the topic mutations
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

    async def create_topics(self, version: int, body: CreateTopicsRequestData) -> CreateTopicsResponseData:
        names = [t.name for t in body.topics]
        results = []
        mutations = ControllerMutationQuota(self.quotas, ApiKey.CREATE_TOPICS, version)
        for topic in body.topics:
            if names.count(topic.name) > 1:
                fault = InvalidRequestError(f"topic {topic.name!r} appears more than once in the request")
                results.append(self._created(topic.name, fault))
                continue
            try:  # Create on the cluster, or on the topic
                if not self.authorizer.authorize_cluster(AclOperation.CREATE):
                    self.authorizer.check(AclOperation.CREATE, TOPIC, topic.name)
                count, overrides = self._check_new_topic(topic)
                factor = self._replication_factor(topic)
                if not body.validate_only:
                    mutations.record(count)
                    await self._create_topic(topic, count, factor, overrides, body.timeout_ms)
                results.append(self._created(topic.name, None, count, overrides, factor))
            except SeglogError as e:
                results.append(self._created(topic.name, e))
        return CreateTopicsResponseData(topics=results, throttle_time_ms=mutations.throttle_ms)

    async def _create_topic(
        self,
        topic: CreateTopicsRequestData.CreatableTopic,
        count: int,
        factor: int,
        overrides: dict[str, Any],
        timeout_ms: int,
    ) -> None:
        name = topic.name
        if self.cluster is None:
            await self.replicas.create_topic(name, count, overrides)
            return
        assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments or []}
        await self._in_zookeeper(self.cluster.create_topic, name, count, factor, overrides, assignment or None)
        await self._await_metadata(lambda: self.metadata.partition_count(name) == count, timeout_ms, f"topic {name}")

    async def create_internal_topic(self, name: str, count: int, factor: int, overrides: dict[str, Any]) -> None:
        """A coordinator's topic (``__consumer_offsets``), made on its first use: through ZooKeeper in
        a cluster (``factor`` replicas, refused while the cluster has fewer brokers, as Kafka's)."""
        topic = CreateTopicsRequestData.CreatableTopic(name=name)
        await self._create_topic(topic, count, factor, overrides, INTERNAL_TOPIC_TIMEOUT_MS)

    def _replication_factor(self, topic: CreateTopicsRequestData.CreatableTopic) -> int:
        if topic.assignments:
            return len(topic.assignments[0].broker_ids)
        factor = topic.replication_factor
        return self.config["default.replication.factor"] if factor == -1 else factor

    def _check_new_topic(self, topic: CreateTopicsRequestData.CreatableTopic) -> tuple[int, dict[str, Any]]:
        name = topic.name
        self.replicas.validate_topic_name(name)
        if self.metadata.topic(name) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        assignments = topic.assignments or []
        count, factor = topic.num_partitions, topic.replication_factor
        me = self.replicas.broker.broker_id
        if assignments:
            if count != -1 or factor != -1:
                raise InvalidRequestError("Both numPartitions or replicationFactor and replicasAssignments were set.")
            indexes = sorted(a.partition_index for a in assignments)
            if indexes != list(range(len(indexes))):
                raise InvalidReplicaAssignmentError(f"partitions must be numbered from 0: {indexes}")
            for a in assignments:
                if self.cluster is None and a.broker_ids != [me]:
                    raise InvalidReplicaAssignmentError(f"replicas {a.broker_ids} name brokers other than broker {me}")
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
        overrides = {c.name: c.value for c in topic.configs or [] if c.value is not None}
        self.replicas.validate_topic_config(overrides)
        return count, overrides

    def _created(
        self,
        name: str,
        error: SeglogError | None,
        count: int = -1,
        overrides: dict[str, Any] | None = None,
        factor: int = 1,
    ) -> CreateTopicsResponseData.CreatableTopicResult:
        if error is not None:
            return CreateTopicsResponseData.CreatableTopicResult(
                name=name, error_code=error.error_code, error_message=error.message, configs=None
            )
        found = self.metadata.topic(name)
        resolved = self.replicas.validate_topic_config(overrides or {})
        return CreateTopicsResponseData.CreatableTopicResult(
            name=name,
            topic_id=found.topic_id if found else ZERO_UUID,
            error_message=None,
            num_partitions=count,
            replication_factor=factor,
            configs=[
                CreateTopicsResponseData.CreatableTopicConfigs(
                    name=key,
                    value=config_string(resolved[key]),
                    config_source=self._topic_source(key, overrides or {})[0],
                )
                for key in TOPIC_KEYS
            ],
        )

    # --- DeleteTopics -----------------------------------------------------------------------------------

    async def delete_topics(self, version: int, body: DeleteTopicsRequestData) -> DeleteTopicsResponseData:
        wanted: list[tuple[str | None, uuid.UUID | None]] = (
            [(t.name, t.topic_id) for t in body.topics] if version >= 6 else [(name, None) for name in body.topic_names]
        )
        results = []
        mutations = ControllerMutationQuota(self.quotas, ApiKey.DELETE_TOPICS, version)
        for name, topic_id in wanted:
            if name is None and topic_id is not None:
                found = self.metadata.topic_by_id(topic_id)
                name = found.name if found else None
            entry = DeleteTopicsResponseData.DeletableTopicResult(name=name, topic_id=topic_id or ZERO_UUID)
            try:
                if name is None:
                    raise UnknownTopicIdError(f"no topic has id {topic_id}")
                self.authorizer.check(AclOperation.DELETE, TOPIC, name)
                found = self.metadata.topic(name)
                if found is None:
                    raise UnknownTopicOrPartitionError("This server does not host this topic-partition.")
                entry.topic_id = found.topic_id
                if not self.config["delete.topic.enable"]:
                    raise TopicDeletionDisabledError("Topic deletion is disabled.")
                mutations.record(len(found.partitions))
                await self._delete_topic(name, body.timeout_ms)
            except SeglogError as e:
                entry.error_code, entry.error_message = e.error_code, e.message
            results.append(entry)
        return DeleteTopicsResponseData(responses=results, throttle_time_ms=mutations.throttle_ms)

    async def _delete_topic(self, name: str, timeout_ms: int) -> None:
        if self.cluster is None:
            await self.replicas.delete_topic(name)
            return
        await self._in_zookeeper(self.cluster.delete_topic, name)
        await self._await_metadata(lambda: self.metadata.topic(name) is None, timeout_ms, f"deletion of {name}")

    # --- CreatePartitions ---------------------------------------------------------------------------------

    async def create_partitions(self, version: int, body: CreatePartitionsRequestData) -> CreatePartitionsResponseData:
        results = []
        mutations = ControllerMutationQuota(self.quotas, ApiKey.CREATE_PARTITIONS, version)
        for topic in body.topics:
            name, count = topic.name, topic.count
            entry = CreatePartitionsResponseData.CreatePartitionsTopicResult(name=name)
            try:
                self.authorizer.check(AclOperation.ALTER, TOPIC, name)
                current = self.metadata.partition_count(name)
                if current == 0:
                    raise UnknownTopicOrPartitionError(f"The topic '{name}' does not exist.")
                if count < current:
                    raise InvalidPartitionsError(
                        f"Topic currently has {current} partitions, which is higher than the requested {count}."
                    )
                if count == current:
                    raise InvalidPartitionsError(f"Topic already has {current} partitions.")
                assignments = topic.assignments
                if assignments is not None:
                    if len(assignments) != count - current:
                        raise InvalidReplicaAssignmentError(
                            f"Increasing the number of partitions by {count - current} but "
                            f"{len(assignments)} assignments provided.",
                        )
                    me = self.replicas.broker.broker_id
                    if self.cluster is not None:
                        raise InvalidReplicaAssignmentError("new partitions are assigned by the controller in seglog")
                    if any(a.broker_ids != [me] for a in assignments):
                        raise InvalidReplicaAssignmentError(f"replicas name brokers other than broker {me}")
                if not body.validate_only:
                    mutations.record(count - current)
                    await self._create_partitions(name, count, body.timeout_ms)
            except SeglogError as e:
                entry.error_code, entry.error_message = e.error_code, e.message
            results.append(entry)
        return CreatePartitionsResponseData(results=results, throttle_time_ms=mutations.throttle_ms)

    async def _create_partitions(self, name: str, count: int, timeout_ms: int) -> None:
        if self.cluster is None:
            await self.replicas.create_partitions(name, count)
            return
        await self._in_zookeeper(self.cluster.add_partitions, name, count)
        await self._await_metadata(lambda: self.metadata.partition_count(name) >= count, timeout_ms, f"topic {name}")

    # --- DeleteRecords ------------------------------------------------------------------------------------

    async def delete_records(self, version: int, body: DeleteRecordsRequestData) -> DeleteRecordsResponseData:
        deletable = self.authorizer.authorized(AclOperation.DELETE, TOPIC, (t.name for t in body.topics))
        lookups = [
            (t.name, p.partition_index, p.offset) for t in body.topics if t.name in deletable for p in t.partitions
        ]
        answers = iter(await self.replicas.delete_records(lookups, body.timeout_ms))
        refused = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
        topics = []
        for t in body.topics:
            parts = []
            for p in t.partitions:
                code, low = next(answers) if t.name in deletable else refused
                parts.append(
                    DeleteRecordsResponseData.DeleteRecordsPartitionResult(
                        partition_index=p.partition_index, low_watermark=low, error_code=code
                    )
                )
            topics.append(DeleteRecordsResponseData.DeleteRecordsTopicResult(name=t.name, partitions=parts))
        return DeleteRecordsResponseData(topics=topics)

    # --- DescribeConfigs ------------------------------------------------------------------------------------

    async def describe_configs(self, version: int, body: DescribeConfigsRequestData) -> DescribeConfigsResponseData:
        results = []
        for resource in body.resources:
            kind, name = resource.resource_type, resource.resource_name
            entry = DescribeConfigsResponseData.DescribeConfigsResult(
                error_message=None, resource_type=kind, resource_name=name
            )
            try:
                self._check_config_access(AclOperation.DESCRIBE_CONFIGS, kind, name)
                # no keys or an empty list: every config (Kafka's ConfigHelper: null or isEmpty)
                keys = set(resource.configuration_keys) if resource.configuration_keys else None
                entries = self._config_entries(kind, name, body.include_synonyms, body.include_documentation, keys)
                entry.configs = [e for e in entries if keys is None or e.name in keys]
            except SeglogError as e:
                entry.error_code, entry.error_message = e.error_code, e.message
            results.append(entry)
        return DescribeConfigsResponseData(results=results)

    def _config_entries(
        self, kind: int, name: str, synonyms: bool, docs: bool, keys: set[str] | None
    ) -> list[DescribeConfigsResponseData.DescribeConfigsResourceResult]:
        """The entries of a resource's configs, only of ``keys`` when given (a console asking two
        keys of a thousand topics has the rest left unbuilt)."""
        if kind == TOPIC_RESOURCE:
            if self.metadata.topic(name) is None:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
            # a topic's own settings, each asked key resolved alone: a whole LogConfig a topic (every
            # key resolved, the overrides validated again) was 40 ms of a DescribeConfigs of 1,000
            # topics asking two keys
            overrides = (self.replicas if self.cluster is None else self.cluster).topic_overrides(name)
            return [
                self._topic_entry(key, overrides, synonyms, docs) for key in TOPIC_KEYS if keys is None or key in keys
            ]
        if kind == BROKER_RESOURCE:
            if name == "" and self.dynamic is not None:  # the cluster's dynamic default, as Kafka tells it
                return [self._broker_entry(k, synonyms, docs, True) for k in sorted(self.dynamic.config.default)]
            self._check_broker(name)
            listeners = sorted(k for k in self.dynamic.config.broker.keys() | self.dynamic.config.default.keys()
                               if k not in BROKER_KEYS) if self.dynamic is not None else []  # fmt: skip
            return [self._broker_entry(key, synonyms, docs) for key in [*sorted(BROKER_KEYS), *listeners]]
        raise InvalidRequestError(f"resource type {kind} is not served (topics 2 and brokers 4 are)")

    def _check_broker(self, name: str) -> None:
        if name not in ("", str(self.replicas.broker.broker_id)):
            raise InvalidRequestError(f"this is broker {self.replicas.broker.broker_id}, not {name!r}")

    def _topic_source(
        self, key: str, overrides: dict[str, Any]
    ) -> tuple[int, list[DescribeConfigsResponseData.DescribeConfigsSynonym]]:
        """The source of a topic key's value and its synonyms in precedence order."""
        found: list[DescribeConfigsResponseData.DescribeConfigsSynonym] = []
        if key in overrides:
            found.append(_synonym(key, overrides[key], TOPIC_CONFIG))
        for syn, _factor in SYNONYMS[key]:
            if self.config.is_set(syn):
                found.append(_synonym(syn, self.config[syn], STATIC_BROKER_CONFIG))
        found.append(_synonym(SYNONYMS[key][0][0] if SYNONYMS[key] else key, TOPIC_KEYS[key].default, DEFAULT_CONFIG))
        return found[0].source, found

    def _topic_entry(
        self, key: str, overrides: dict[str, Any], synonyms: bool, docs: bool
    ) -> DescribeConfigsResponseData.DescribeConfigsResourceResult:
        source, found = self._topic_source(key, overrides)
        value = topic_value(self.config, overrides, key)
        return DescribeConfigsResponseData.DescribeConfigsResourceResult(
            name=key,
            value=config_string(value),
            is_default=source == DEFAULT_CONFIG,
            config_source=source,
            synonyms=found if synonyms else [],
            config_type=_config_type(value),
            documentation=TOPIC_KEYS[key].doc if docs else None,
        )

    def _broker_entry(
        self, key: str, synonyms: bool, docs: bool, default_only: bool = False
    ) -> DescribeConfigsResponseData.DescribeConfigsResourceResult:
        definition = BROKER_KEYS.get(key) or dynamic_key(key)
        assert definition is not None
        secret = definition.secret  # a password's value is not told, as Kafka tells none (is_sensitive)
        found = self._broker_sources(key, default_only)
        value = None if secret else found[0].value
        return DescribeConfigsResponseData.DescribeConfigsResourceResult(
            name=key,
            value=None if secret else config_string(value),
            read_only=dynamic_key(key) is None,  # the others are read from server.properties at start
            is_default=found[0].source == DEFAULT_CONFIG,
            config_source=found[0].source,
            is_sensitive=secret,
            synonyms=[_synonym(s.name, None if secret else s.value, s.source) for s in found] if synonyms else [],
            config_type=_PASSWORD if secret else _config_type(value),
            documentation=definition.doc if docs else None,
        )

    def _broker_sources(self, key: str, default_only: bool) -> list[_Found]:
        """A broker key's values by source, in precedence order (Kafka's synonyms): this
        broker's dynamic one, the cluster's dynamic default, server.properties, Kafka's default
        (``default_only``: the cluster's dynamic default alone, as Kafka describes ``<default>``)."""
        levels = []
        if self.dynamic is not None:
            levels = [(self.dynamic.config.default, DYNAMIC_DEFAULT_BROKER_CONFIG)]
            if not default_only:
                levels.insert(0, (self.dynamic.config.broker, DYNAMIC_BROKER_CONFIG))
        found = [_Found(key, level[key], source) for level, source in levels if key in level]
        if default_only:
            return found
        if self.config.is_set(key):
            found.append(_Found(key, self.config[key], STATIC_BROKER_CONFIG))
        if key in BROKER_KEYS:
            found.append(_Found(key, BROKER_KEYS[key].default, DEFAULT_CONFIG))
        return found

    # --- AlterConfigs, IncrementalAlterConfigs ----------------------------------------------------------------

    async def alter_configs(self, version: int, body: AlterConfigsRequestData) -> AlterConfigsResponseData:
        answer = AlterConfigsResponseData.AlterConfigsResourceResponse
        return AlterConfigsResponseData(responses=await self._alter(body, _replaced, answer))

    async def incremental_alter_configs(
        self, version: int, body: IncrementalAlterConfigsRequestData
    ) -> IncrementalAlterConfigsResponseData:
        answer = IncrementalAlterConfigsResponseData.AlterConfigsResourceResponse
        return IncrementalAlterConfigsResponseData(responses=await self._alter(body, _incremental, answer))

    async def _alter(
        self,
        body: AlterConfigsRequestData | IncrementalAlterConfigsRequestData,
        merge: Callable[[Any, dict[str, Any], int], dict[str, Any]],
        answer: Callable[..., R],
    ) -> list[R]:
        """Each resource's configs altered (``merge``: its configs, the topic's current overrides
        or the broker's dynamic configs, and the resource type -> those wanted), each answered
        on its own (``answer``: the API's per-resource response)."""
        responses = []
        for resource in body.resources:
            kind, name = resource.resource_type, resource.resource_name
            try:
                self._check_config_access(AclOperation.ALTER_CONFIGS, kind, name)
                if kind == BROKER_RESOURCE and self.dynamic is not None:
                    entity = self.dynamic.entity(name)
                    wanted = merge(resource.configs, dict(self.dynamic.stored[entity]), kind)
                    await self.dynamic.alter(entity, wanted, body.validate_only)
                    responses.append(answer(error_message=None, resource_type=kind, resource_name=name))
                    continue
                self._alter_resource(kind, name)
                resolved = self.replicas.topic_config(name) if self.cluster is None else self.cluster.topic_config(name)
                current = dict(resolved.overrides)
                wanted = merge(resource.configs, current, kind)
                self.replicas.validate_topic_config(wanted)
                if not body.validate_only:
                    await self._alter_topic_config(name, current, wanted)
            except SeglogError as e:
                responses.append(
                    answer(error_code=e.error_code, error_message=e.message, resource_type=kind, resource_name=name)
                )
            else:
                responses.append(answer(error_message=None, resource_type=kind, resource_name=name))
        return responses

    def _check_config_access(self, operation: AclOperation, kind: int, name: str) -> None:
        """A topic's configs need the operation on the topic, a broker's on the cluster."""
        if kind == TOPIC_RESOURCE:
            self.authorizer.check(operation, TOPIC, name)
        elif kind == BROKER_RESOURCE:
            self.authorizer.check(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def _alter_resource(self, kind: int, name: str) -> None:
        """Whether a resource's configs may be altered: a topic's that exists may, a broker's not."""
        if kind == BROKER_RESOURCE:
            self._check_broker(name)
            raise InvalidConfigurationError(
                "broker configs are static in seglog: set them in server.properties or --override"
            )
        if kind != TOPIC_RESOURCE:
            raise InvalidRequestError(f"resource type {kind} cannot be altered")
        if self.metadata.topic(name) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")

    async def _alter_topic_config(self, name: str, current: dict[str, Any], wanted: dict[str, Any]) -> None:
        if self.cluster is not None:
            await self._in_zookeeper(self.cluster.alter_topic_config, name, wanted)
        else:
            await self.replicas.alter_topic_config(name, wanted, [k for k in current if k not in wanted])

    # --- DescribeLogDirs -----------------------------------------------------------------------------------

    async def describe_log_dirs(self, version: int, body: DescribeLogDirsRequestData) -> DescribeLogDirsResponseData:
        if not self.authorizer.authorize_cluster(AclOperation.DESCRIBE):  # as Kafka: no log dirs, the error from v3
            return DescribeLogDirsResponseData(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
        wanted = body.topics
        asked = None if wanted is None else {t.topic: set(t.partitions) for t in wanted}
        Partition = DescribeLogDirsResponseData.DescribeLogDirsPartition
        results = []
        for path, by_topic in self.replicas.log_dirs().items():
            topics = []
            for name in sorted(by_topic if asked is None else by_topic.keys() & asked.keys()):
                held = by_topic[name]
                if asked is not None:
                    held = [p for p in held if p[0] in asked[name]]
                    if not held:
                        continue
                topics.append(DescribeLogDirsResponseData.DescribeLogDirsTopic(name, [Partition(*p) for p in held]))
            total, usable = _disk(path)
            results.append(
                DescribeLogDirsResponseData.DescribeLogDirsResult(
                    log_dir=path, topics=topics, total_bytes=total, usable_bytes=usable
                )
            )
        return DescribeLogDirsResponseData(results=results)


def _incremental(
    configs: list[IncrementalAlterConfigsRequestData.AlterableConfig], current: dict[str, Any], kind: int
) -> dict[str, Any]:
    """IncrementalAlterConfigs: each config's operation applied to the current overrides (a
    broker's keys are checked by the dynamic configs, and none of them is a list)."""
    out = dict(current)
    for c in configs:
        key, op, value = c.name, c.config_operation, c.value
        if kind == TOPIC_RESOURCE and key not in TOPIC_KEYS:
            raise InvalidConfigurationError(f"Unknown topic config name: {key}")
        if op == SET:
            out[key] = value
        elif op == DELETE:
            out.pop(key, None)
        elif op in (APPEND, SUBTRACT):
            if kind != TOPIC_RESOURCE or TOPIC_KEYS[key].parse.__name__ != "_list":
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


def _replaced(
    configs: list[AlterConfigsRequestData.AlterableConfig], current: dict[str, Any], kind: int
) -> dict[str, Any]:
    """AlterConfigs: the request's configs replace every override (the current ones go)."""
    return {c.name: c.value for c in configs if c.value is not None}


def _synonym(name: str, value: Any, source: int) -> DescribeConfigsResponseData.DescribeConfigsSynonym:
    return DescribeConfigsResponseData.DescribeConfigsSynonym(name=name, value=config_string(value), source=source)


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
