"""What the console shows, read from a cluster through Kafka's protocol: each function takes a
``ClusterClient`` and returns the JSON-able answer of one endpoint of the console's API (the README's
"Console" section lists them). Nothing here knows HTTP; nothing reads a broker's files, so any
Kafka-protocol cluster answers.

This is the console's one import of the routing client: the other modules reach the cluster
through ``open_client`` and the functions here."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from ..client import (
    PLAINTEXT,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    BlockingConnection,
    ClientSecurity,
    ClusterClient,
    FetchedPartition,
    MetadataTopic,
    check,
    check_partition,
    topics_by_name,
)
from ..common import TopicPartition
from ..errors import (
    BrokerNotAvailableError,
    ErrorCode,
    OffsetOutOfRangeError,
    SeglogError,
    UnsupportedVersionError,
    error_for,
)
from ..protocol import ApiKey
from ..protocol.enums import AlterConfigOpType, ConfigResourceType, CoordinatorType, config_source_name
from ..protocol.message_data import (
    CreatePartitionsRequestData,
    CreatePartitionsResponseData,
    CreateTopicsRequestData,
    CreateTopicsResponseData,
    DeleteRecordsRequestData,
    DeleteRecordsResponseData,
    DescribeConfigsRequestData,
    DescribeConfigsResponseData,
    DescribeLogDirsRequestData,
    DescribeLogDirsResponseData,
    IncrementalAlterConfigsRequestData,
    IncrementalAlterConfigsResponseData,
    MetadataResponseData,
)
from ..records import BatchIterator, ControlRecordType, EndTransactionMarker, Record, parse_control_record
from ..storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from ..tools.consumer_groups import (
    INACTIVE_STATES,
    assigned_partitions,
    commit_offsets,
    committed_offsets,
    consumer_groups,
    describe_group,
)
from ..tools.logdir import record_json
from ..tools.remote import describe_configs
from ..tools.transactions import described, listed

CLIENT_ID = "seglog-console"  # the client id of the console's requests, in the brokers' logs and quotas
FETCH_BYTES = 1 << 20  # a page of records is small: a fetch of at most one MiB a round
# a fetch asks for a byte at least, waiting this long at most: Tansu answers a Fetch of no wait with
# no partition at all; a broker holding records answers at once (only a read_committed fetch at an
# open transaction's last stable offset waits it out, before the read_uncommitted one)
FETCH_WAIT_MS = 100
MAX_MESSAGES = 500  # the most records one page of the browser asks
MAX_SCANNED = 20_000  # records a filtered page looks through before it answers with what it found
SHOWN_CHARS = 16 * 1024  # of a key, value or header: a record may hold megabytes, a page shows a glance
LISTED_KEPT_S = 10.0  # how long a topics list's Metadata serves the details that name it


class ConsoleInputError(SeglogError):
    """A request of the console's API that cannot be served as asked (a malformed offset, a limit
    out of range): the caller's mistake, answered 400."""


def open_client(bootstrap: str, timeout: float, security: ClientSecurity = PLAINTEXT) -> ClusterClient:
    """A client of the cluster for one request of the console (its ``timeout`` bounds the
    retries of that request: a ClusterClient's deadline starts when it is made), connecting as
    ``security`` says (``--command-config``'s TLS and SASL)."""
    return ClusterClient(bootstrap, timeout, client_id=CLIENT_ID, security=security)


# --- the cluster and its topics -----------------------------------------------------------------------


def cluster(client: ClusterClient) -> dict[str, Any]:
    """The brokers and the counts of topics, partitions, under-replicated and offline partitions.
    Metadata names the live brokers only: a broker that replicas name and Metadata does not is
    listed as down (``alive`` false, its address unknown)."""
    answer = client.metadata(None)
    live = {b.node_id for b in answer.brokers}
    partitions = [p for t in answer.topics if not t.error_code for p in t.partitions]
    down = {r for p in partitions for r in p.replica_nodes} - live
    controller = answer.controller_id
    brokers = [
        {
            "id": b.node_id,
            "host": b.host,
            "port": b.port,
            "rack": b.rack,
            "alive": True,
            "controller": b.node_id == controller,
        }
        for b in answer.brokers
    ]
    brokers += [{"id": b, "host": None, "port": None, "rack": None, "alive": False, "controller": False} for b in down]
    return {
        "clusterId": answer.cluster_id,
        "controller": answer.controller_id,
        "brokers": sorted(brokers, key=lambda b: b["id"]),
        "topics": sum(1 for t in answer.topics if not t.error_code),
        "partitions": len(partitions),
        "underReplicated": sum(1 for p in partitions if _under_replicated(p)),
        "offline": sum(1 for p in partitions if p.leader_id not in live),
    }


def _under_replicated(p: MetadataResponseData.MetadataResponsePartition) -> bool:
    return len(p.isr_nodes) < len(p.replica_nodes)


class ListedMetadata:
    """The Metadata of every topic that recent topics lists answered from, each under the number
    the list answers with (``metadata``): the page asks the details right after drawing the list,
    naming it, and they reuse its Metadata rather than ask it again. Of 10,000 partitions, the
    broker encodes it in 16 ms of CPU and the console decodes it in 22 ms, a third of the details'
    work (the broker and its console share a process). Kept LISTED_KEPT_S seconds: details naming
    an older list, or none, ask Metadata anew."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._numbers = itertools.count(1)
        self._kept: dict[int, tuple[float, MetadataResponseData]] = {}

    def keep(self, answer: MetadataResponseData) -> int:
        now = time.monotonic()
        with self._lock:
            self._kept = {n: kept for n, kept in self._kept.items() if now - kept[0] < LISTED_KEPT_S}
            number = next(self._numbers)
            self._kept[number] = (now, answer)
        return number

    def get(self, number: int) -> MetadataResponseData | None:
        with self._lock:
            kept = self._kept.get(number)
        return kept[1] if kept is not None and time.monotonic() - kept[0] < LISTED_KEPT_S else None


def topics(
    client: ClusterClient, details: bool = False, listed: ListedMetadata | None = None, after: int | None = None
) -> dict[str, Any]:
    """Every topic: its partition count, replication factor and whether it is internal; with
    ``details``, its size too (its leaders' replicas, from DescribeLogDirs; null when a leader did
    not answer), retention.ms and cleanup.policy (one DescribeConfigs of every topic). The details
    cost a broker more on many topics: the page asks them after drawing the list, naming it
    (``after``: the list's ``metadata`` number in ``listed``), and they reuse its Metadata."""
    answer = listed.get(after) if listed is not None and after is not None else None
    if answer is None:
        answer = client.metadata(None)
    found = {name: t for name, t in topics_by_name(answer).items() if not t.error_code}
    summaries = {name: _topic_summary(name, t) for name, t in sorted(found.items())}
    if details:
        live = {b.node_id for b in answer.brokers}
        sizes = _sizes(client, found, live)
        kept = _retention(client, sorted(found), live)
        for name, summary in summaries.items():
            summary |= {"size": sizes.get(name)} | kept.get(name, {})
    elif listed is not None:
        return {"topics": list(summaries.values()), "metadata": listed.keep(answer)}
    return {"topics": list(summaries.values())}


def _sizes(client: ClusterClient, topics: dict[str, MetadataTopic], live: set[int]) -> dict[str, int]:
    """Each topic's bytes on disk at its partitions' leaders (one copy of its data); a topic with a
    leader that is not live, does not answer or does not serve DescribeLogDirs (Tansu) has none.
    The leaders are asked at once, each on its own connection: the page waits for the slowest
    broker, not for their sum."""
    # each topic's leaders by partition index (a dict a topic, not a tuple a partition: 10,000 tuples
    # made this the console's slowest line, their allocations running the collector)
    leaders = {name: {p.partition_index: p.leader_id for p in t.partitions} for name, t in topics.items()}
    led = {node for by_index in leaders.values() for node in set(by_index.values())}
    connections: dict[int, BlockingConnection] = {}
    for node in sorted(led & live):  # the client's own state: one thread
        with contextlib.suppress(BrokerNotAvailableError):
            connections[node] = client.broker(node)
    with ThreadPoolExecutor(max(len(connections), 1), thread_name_prefix="seglog-console-log-dirs") as pool:
        answers = dict(zip(connections, pool.map(_log_dirs, connections.values()), strict=True))
    answered = {node for node, answer in answers.items() if answer is not None}
    sizes = {name: 0 for name, by_index in leaders.items() if answered.issuperset(by_index.values())}
    for node, answer in answers.items():
        for d in answer.results if answer is not None else []:
            for t in d.topics if not d.error_code else []:
                if t.name in sizes:
                    by_index = leaders[t.name]
                    led_here = (p.partition_size for p in t.partitions if by_index.get(p.partition_index) == node)
                    sizes[t.name] += sum(led_here)
    return sizes


def _log_dirs(connection: BlockingConnection) -> DescribeLogDirsResponseData | None:
    """DescribeLogDirs of every partition of a broker; None when it cannot answer it."""
    try:
        answer: DescribeLogDirsResponseData = connection.request(
            ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequestData(topics=None)
        )
    except (BrokerNotAvailableError, UnsupportedVersionError):
        return None
    return answer


def _retention(client: ClusterClient, names: list[str], live: set[int]) -> dict[str, dict[str, str | None]]:
    """Each topic's retention.ms and cleanup.policy, in one DescribeConfigs of every topic asking
    those two keys: every config of 1,000 topics is 23,000 entries for the broker to build and the
    console to decode, which took them most of a second. Tansu closes the connection on a list of
    keys, so they are asked on a connection of their own (a live broker's), and when it is closed
    every config is asked on the bootstrap one."""
    keys = {"retention.ms": "retentionMs", "cleanup.policy": "cleanupPolicy"}
    try:
        answer = _describe_topic_configs(client.broker(min(live)), names, list(keys))
    except BrokerNotAvailableError:
        answer = _describe_topic_configs(client.bootstrap, names, None)
    return {
        r.resource_name: {keys[c.name]: c.value for c in r.configs if c.name in keys}
        for r in answer.results
        if not r.error_code
    }


def _describe_topic_configs(
    connection: BlockingConnection, names: list[str], keys: list[str] | None
) -> DescribeConfigsResponseData:
    Resource = DescribeConfigsRequestData.DescribeConfigsResource
    wanted = [Resource(resource_type=ConfigResourceType.TOPIC, resource_name=n, configuration_keys=keys) for n in names]
    request = DescribeConfigsRequestData(resources=wanted, include_synonyms=False, include_documentation=False)
    answer: DescribeConfigsResponseData = connection.request(ApiKey.DESCRIBE_CONFIGS, request)
    return answer


def _topic_summary(name: str, topic: MetadataTopic) -> dict[str, Any]:
    return {
        "name": name,
        "partitions": len(topic.partitions),
        "replicationFactor": max((len(p.replica_nodes) for p in topic.partitions), default=0),
        "internal": topic.is_internal,
        "underReplicated": sum(1 for p in topic.partitions if _under_replicated(p)),
    }


def _known_topic(client: ClusterClient, name: str) -> tuple[MetadataTopic, set[int]]:
    """The Metadata of topic ``name`` and the live brokers' ids; UnknownTopicOrPartitionError when
    the cluster has no such topic."""
    answer = client.metadata([name])
    found = topics_by_name(answer).get(name)
    if found is None:
        raise SeglogError(f"the cluster did not answer for topic {name}")
    check(found.error_code, f"topic {name}")
    return found, {b.node_id for b in answer.brokers}


def replicas(client: ClusterClient, name: str, partition: int) -> list[int]:
    """The brokers holding a replica of ``name``-``partition``, its leader first."""
    found, _ = _known_topic(client, name)
    for p in found.partitions:
        if p.partition_index == partition:
            return sorted(p.replica_nodes, key=lambda b: b != p.leader_id)
    raise ConsoleInputError(f"topic {name} has no partition {partition}")


def _offsets(client: ClusterClient, tps: list[TopicPartition], time: int) -> dict[TopicPartition, int]:
    """Each partition's offset at ``time`` (ListOffsets, one request a leader for them all)."""
    return {tp: found.offset for tp, found in client.list_offsets(dict.fromkeys(tps, time)).items()} if tps else {}


def topic(client: ClusterClient, name: str) -> dict[str, Any]:
    """A topic's partitions (leader, replicas, ISR, log start offset, high watermark) and configs.
    The offsets of a partition without a live leader are null: nobody can tell them."""
    found, live = _known_topic(client, name)
    led = [TopicPartition(name, p.partition_index) for p in found.partitions if p.leader_id in live]
    starts, ends = _offsets(client, led, EARLIEST_TIMESTAMP), _offsets(client, led, LATEST_TIMESTAMP)
    partitions = [
        {
            "partition": p.partition_index,
            "leader": p.leader_id,
            "replicas": list(p.replica_nodes),
            "isr": list(p.isr_nodes),
            "logStartOffset": starts.get(TopicPartition(name, p.partition_index)),
            "highWatermark": ends.get(TopicPartition(name, p.partition_index)),
        }
        for p in sorted(found.partitions, key=lambda p: p.partition_index)
    ]
    configs = [
        {
            "name": c.name,
            "value": None if c.is_sensitive else c.value,
            "source": config_source_name(c.config_source),
            "readOnly": c.read_only,
            "sensitive": c.is_sensitive,
        }
        for c in sorted(describe_configs(client, ConfigResourceType.TOPIC, name), key=lambda c: c.name)
    ]
    return {**_topic_summary(name, found), "partitionList": partitions, "configs": configs}


def create_topic(client: ClusterClient, body: dict[str, Any], timeout_ms: int) -> dict[str, Any]:
    """Create the topic ``body`` names (``{"name", "partitions", "replicationFactor", "configs"}``;
    the counts default to the broker's); the broker's refusal is raised with its message."""
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ConsoleInputError("a topic needs a name")
    partitions = _int_field(body, "partitions", -1)
    factor = _int_field(body, "replicationFactor", -1)
    configs = body.get("configs") or {}
    if not isinstance(configs, dict) or not all(isinstance(v, str) for v in configs.values()):
        raise ConsoleInputError("configs is an object of strings: {key: value}")
    creatable = CreateTopicsRequestData.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=factor,
        assignments=[],
        configs=[CreateTopicsRequestData.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()],
    )
    request = CreateTopicsRequestData(topics=[creatable], timeout_ms=timeout_ms, validate_only=False)
    answer: CreateTopicsResponseData = client.request(ApiKey.CREATE_TOPICS, request)
    result = answer.topics[0]
    check(result.error_code, f"cannot create topic {name}", result.error_message)
    return {"name": name, "partitions": result.num_partitions, "replicationFactor": result.replication_factor}


def add_partitions(client: ClusterClient, body: dict[str, Any], timeout_ms: int, *, name: str) -> dict[str, Any]:
    """Grow topic ``name`` to ``body["count"]`` partitions (CreatePartitions, the broker placing
    the new ones); the broker's refusal (fewer than it has ...) is raised with its message."""
    count = _int_field(body, "count", -1)
    if count < 1:
        raise ConsoleInputError("count is the topic's new number of partitions, from 1")
    more = CreatePartitionsRequestData.CreatePartitionsTopic(name=name, count=count, assignments=None)
    request = CreatePartitionsRequestData(topics=[more], timeout_ms=timeout_ms, validate_only=False)
    answer: CreatePartitionsResponseData = client.request(ApiKey.CREATE_PARTITIONS, request)
    result = answer.results[0]
    check(result.error_code, f"cannot add partitions to {name}", result.error_message)
    return {"name": name, "partitions": count}


def alter_configs(client: ClusterClient, body: dict[str, Any], timeout_ms: int, *, name: str) -> dict[str, Any]:
    """Set (``body["set"]``: {key: value}) and delete (``body["delete"]``: [key], back to the
    broker's value) configs of topic ``name`` with IncrementalAlterConfigs; the broker's refusal (an
    unknown key, a bad value) is raised with its message."""
    changed, deleted = body.get("set") or {}, body.get("delete") or []
    if not isinstance(changed, dict) or not all(isinstance(v, str) for v in changed.values()):
        raise ConsoleInputError("set is an object of strings: {key: value}")
    if not isinstance(deleted, list) or not all(isinstance(k, str) for k in deleted):
        raise ConsoleInputError("delete is a list of config names")
    if not changed and not deleted:
        raise ConsoleInputError("nothing to change: give set or delete")
    Op = IncrementalAlterConfigsRequestData.AlterableConfig
    operations = [Op(name=k, config_operation=AlterConfigOpType.SET, value=v) for k, v in changed.items()]
    operations += [Op(name=k, config_operation=AlterConfigOpType.DELETE, value=None) for k in deleted]
    resource = IncrementalAlterConfigsRequestData.AlterConfigsResource(
        resource_type=ConfigResourceType.TOPIC, resource_name=name, configs=operations
    )
    request = IncrementalAlterConfigsRequestData(resources=[resource], validate_only=False)
    answer: IncrementalAlterConfigsResponseData = client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request)
    result = answer.responses[0]
    check(result.error_code, f"cannot alter the configs of {name}", result.error_message)
    return {"name": name, "set": changed, "delete": deleted}


def delete_records(client: ClusterClient, body: dict[str, Any], timeout_ms: int, *, name: str) -> dict[str, Any]:
    """Delete the records of partition ``body["partition"]`` of topic ``name`` below offset
    ``body["offset"]`` (-1: its high watermark, as kafka-delete-records.sh takes it) with
    DeleteRecords; the leader's refusal (an offset past the high watermark) is raised."""
    tp = TopicPartition(name, _int_field(body, "partition", -1))
    below = _int_field(body, "offset", -2)
    if tp.partition < 0 or below < -1:
        raise ConsoleInputError("delete records needs a partition and an offset (-1: the high watermark)")

    def send(leader: Any, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
        wanted = DeleteRecordsRequestData.DeleteRecordsPartition(partition_index=tp.partition, offset=below)
        topics = [DeleteRecordsRequestData.DeleteRecordsTopic(name=name, partitions=[wanted])]
        # the leader answers by timeout_ms; the client's socket waits as long: half of it, to hear it
        request = DeleteRecordsRequestData(topics=topics, timeout_ms=timeout_ms // 2)
        answer: DeleteRecordsResponseData = leader.request(ApiKey.DELETE_RECORDS, request)
        return {TopicPartition(t.name, r.partition_index): r for t in answer.topics for r in t.partitions}

    _known_topic(client, name)
    result = check_partition(client.to_leaders([tp], send)[tp], f"cannot delete the records of {tp} below {below}")
    return {"topic": name, "partition": tp.partition, "lowWatermark": result.low_watermark}


def _int_field(body: dict[str, Any], key: str, default: int) -> int:
    value = body.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConsoleInputError(f"{key} is a whole number, not {value!r}")
    try:
        return int(value)
    except ValueError:
        raise ConsoleInputError(f"{key} is a whole number, not {value!r}") from None


# --- consumer groups -----------------------------------------------------------------------------------


def groups(client: ClusterClient) -> dict[str, Any]:
    """Every consumer group: its state, member count and total lag."""
    out = []
    for group_id in consumer_groups(client):
        described = client.retrying(partial(_group, client, group_id))
        summary = {k: described[k] for k in ("id", "state", "protocol", "totalLag")}
        out.append(summary | {"members": len(described["members"])})
    return {"groups": out}


def group(client: ClusterClient, group_id: str) -> dict[str, Any]:
    """A consumer group: state, protocol, members with their assignments, committed offsets and the
    lag of each partition (high watermark - committed offset; null without a live leader to ask)."""
    return client.retrying(lambda: _group(client, group_id))


def _led(client: ClusterClient, partitions: list[TopicPartition]) -> list[TopicPartition]:
    """The partitions that have a live leader to ask their offsets of: not those of a deleted
    topic (a group keeps its offsets) nor those whose leader is down."""
    if not partitions:
        return []
    answer = client.metadata(sorted({tp.topic for tp in partitions}))
    live = {b.node_id for b in answer.brokers}
    leaders = {
        TopicPartition(name, p.partition_index): p.leader_id
        for name, t in topics_by_name(answer).items()
        if not t.error_code
        for p in t.partitions
    }
    return [tp for tp in partitions if leaders.get(tp) in live]


def _group(client: ClusterClient, group_id: str) -> dict[str, Any]:
    _, coordinator = client.coordinator(group_id, CoordinatorType.GROUP)
    described = describe_group(coordinator, group_id)
    if described.group_state == "Dead":
        raise error_for(ErrorCode.GROUP_ID_NOT_FOUND, f"consumer group {group_id} does not exist")
    committed = committed_offsets(coordinator, group_id)
    members = [(m, assigned_partitions(bytes(m.member_assignment))) for m in described.members]
    holder = {tp: m.member_id for m, tps in members for tp in tps}
    partitions = sorted(set(holder) | set(committed))
    ends = _offsets(client, _led(client, partitions), LATEST_TIMESTAMP)
    offsets = []
    for tp in partitions:
        at, end = committed.get(tp), ends.get(tp)
        lag = None if at is None or end is None else max(end - at, 0)
        offsets.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed": at,
                "highWatermark": end,
                "lag": lag,
                "member": holder.get(tp),
            }
        )
    return {
        "id": group_id,
        "state": described.group_state,
        "protocolType": described.protocol_type,
        "protocol": described.protocol_data,
        "members": [
            {
                "memberId": m.member_id,
                "clientId": m.client_id,
                "host": m.client_host,
                "assignment": [{"topic": t, "partition": p} for t, p in sorted(tps)],
            }
            for m, tps in members
        ],
        "offsets": offsets,
        "totalLag": sum(o["lag"] or 0 for o in offsets),
    }


RESETS = ("earliest", "latest", "offset", "timestamp")


def reset_offsets(client: ClusterClient, body: dict[str, Any], timeout_ms: int, *, group_id: str) -> dict[str, Any]:
    """Commit new offsets for a group, as ``kafka-consumer-groups.sh --reset-offsets --execute``:
    ``body["to"]`` is earliest, latest, offset (``body["offset"]``, kept within each partition's
    log start and high watermark) or timestamp (``body["timestamp"]`` ms: the first offset at or
    after it, else the high watermark), for ``body["topic"]``'s partitions or, without one, every
    partition the group committed. Refused, as Kafka refuses it, unless the group is empty."""
    to = body.get("to")
    if to not in RESETS:
        raise ConsoleInputError(f"to is one of {', '.join(RESETS)}, not {to!r}")
    value = _int_field(body, to, -1) if to in ("offset", "timestamp") else 0
    if value < 0:
        raise ConsoleInputError(f"a reset to an {to} needs {to}: a whole number from 0")
    topic = body.get("topic") or None
    if topic is not None and not isinstance(topic, str):
        raise ConsoleInputError("topic is a topic's name")
    return client.retrying(lambda: _reset(client, group_id, to, value, topic))


def _reset(client: ClusterClient, group_id: str, to: str, value: int, topic: str | None) -> dict[str, Any]:
    _, coordinator = client.coordinator(group_id, CoordinatorType.GROUP)
    state = describe_group(coordinator, group_id).group_state
    if state not in INACTIVE_STATES:  # Kafka's words (ConsumerGroupCommand)
        raise error_for(
            ErrorCode.NON_EMPTY_GROUP,
            f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state is {state}.",
        )
    if topic is not None:
        found, _ = _known_topic(client, topic)
        partitions = [
            TopicPartition(topic, p.partition_index) for p in sorted(found.partitions, key=lambda p: p.partition_index)
        ]
    else:
        partitions = sorted(committed_offsets(coordinator, group_id))
    if not partitions:
        raise ConsoleInputError(f"group {group_id} committed no offsets: name a topic to reset")
    earliest = _offsets(client, partitions, EARLIEST_TIMESTAMP)
    latest = _offsets(client, partitions, LATEST_TIMESTAMP)
    if to == "earliest":
        new = earliest
    elif to == "latest":
        new = latest
    elif to == "offset":
        new = {tp: min(max(value, earliest[tp]), latest[tp]) for tp in partitions}
    else:
        found_at = _offsets(client, partitions, value)
        new = {tp: found_at[tp] if found_at[tp] >= 0 else latest[tp] for tp in partitions}
    commit_offsets(coordinator, group_id, new)
    return {
        "group": group_id,
        "offsets": [{"topic": tp.topic, "partition": tp.partition, "offset": new[tp]} for tp in partitions],
    }


# --- transactions --------------------------------------------------------------------------------------


def transactions(client: ClusterClient) -> dict[str, Any]:
    """Every transactional id the coordinators hold: its coordinator, producer id and state."""
    found = client.retrying(partial(listed, client))
    return {
        "transactions": [
            {
                "transactionalId": t.transactional_id,
                "coordinator": node,
                "producerId": t.producer_id,
                "state": t.transaction_state,
            }
            for node, t in sorted(found, key=lambda found: found[1].transactional_id)
        ]
    }


def transaction(client: ClusterClient, txn_id: str) -> dict[str, Any]:
    """A transactional id's state: its producer, the transaction's start and partitions."""
    coordinator, state = client.retrying(partial(described, client, txn_id))
    return {
        "transactionalId": txn_id,
        "coordinator": coordinator,
        "producerId": state.producer_id,
        "producerEpoch": state.producer_epoch,
        "state": state.transaction_state,
        "timeoutMs": state.transaction_timeout_ms,
        "startTimeMs": state.transaction_start_time_ms if state.transaction_start_time_ms >= 0 else None,
        "partitions": [{"topic": t.topic, "partition": p} for t in state.topics for p in sorted(t.partitions)],
    }


# --- messages ------------------------------------------------------------------------------------------


def messages(
    client: ClusterClient,
    name: str,
    partition: int,
    offset: int | None,
    limit: int,
    timestamp: int | None = None,
    contains: str | None = None,
) -> dict[str, Any]:
    """Up to ``limit`` records of one partition from ``offset``, or from the first record at or
    after ``timestamp`` (ms; ListOffsets finds it), else from its log start; below its high
    watermark. Each record's key, value and headers are text when UTF-8, else hex; each is marked
    ``control`` (a control record's type) and ``aborted`` (in a transaction that aborted).

    With ``contains``, only the data records whose key or value holds that text (any case), looked
    for among at most ``MAX_SCANNED`` records: ``nextOffset`` says where a next page goes on."""
    if not 1 <= limit <= MAX_MESSAGES:
        raise ConsoleInputError(f"limit is from 1 to {MAX_MESSAGES}, not {limit}")
    if offset is not None and timestamp is not None:
        raise ConsoleInputError("messages start at an offset or at a timestamp, not both")
    found, _ = _known_topic(client, name)
    tp = TopicPartition(name, partition)
    if partition not in {p.partition_index for p in found.partitions}:
        raise ConsoleInputError(f"topic {name} has no partition {partition}")
    start = _offsets(client, [tp], EARLIEST_TIMESTAMP)[tp]
    end = _offsets(client, [tp], LATEST_TIMESTAMP)[tp]
    at = start if offset is None else offset
    if timestamp is not None:
        found_at = _offsets(client, [tp], timestamp)[tp]
        at = end if found_at < 0 else found_at  # -1: no record is that recent
    if not start <= at <= end:
        raise OffsetOutOfRangeError(
            f"offset {at} of {tp} is not between its log start and its high watermark",
            log_start_offset=start,
            log_end_offset=end,
        )
    browse = _Browse(client, tp, contains.casefold() if contains else None)
    records: list[dict[str, Any]] = []
    while at < end and len(records) < limit and browse.scanned < MAX_SCANNED:
        fetched, after = browse.fetch(at)
        if not fetched and after < end and after == at:
            break  # nothing whole came back: no more can be shown from here
        at = after
        for r in fetched:
            records.append(r)
            if len(records) == limit:
                at = r["offset"] + 1
                break
    return {
        "topic": name,
        "partition": partition,
        "logStartOffset": start,
        "highWatermark": end,
        "filter": contains or None,
        "scanned": browse.scanned,
        "nextOffset": min(at, end),
        "messages": records,
    }


class _Browse:
    """The records of one partition fetched in offset order, each marked aborted as a
    read_committed consumer tells (Kafka's ``CompletedFetch``): a transactional batch of a
    producer whose aborted transaction (the Fetch's ``aborted_transactions``: producer id, first
    offset) began at or before it is aborted, until that producer's ABORT marker.

    A broker lists aborted transactions only to a read_committed Fetch, which stops at the last
    stable offset; and unlike a consumer the browser shows the aborted records. So below the last
    stable offset it fetches read_committed (every record comes, the aborted ones with the list),
    and from there to the high watermark read_uncommitted: records of transactions still open,
    whose end nobody knows yet (``aborted`` false)."""

    def __init__(self, client: ClusterClient, tp: TopicPartition, needle: str | None) -> None:
        self.client, self.tp, self.needle = client, tp, needle
        self.scanned = 0
        self._starts: list[tuple[int, int]] = []  # (first offset, producer id) of aborted transactions ahead
        self._aborting: set[int] = set()  # producers whose batches are aborted until their marker

    def fetch(self, offset: int) -> tuple[list[dict[str, Any]], int]:
        """The records shown of one Fetch from ``offset``, and the offset to fetch next."""
        fetched = self._fetch(offset, READ_COMMITTED)
        if not fetched.records and offset >= fetched.last_stable_offset:
            fetched = self._fetch(offset, READ_UNCOMMITTED)
        self._starts = sorted({*self._starts, *((first, pid) for pid, first in fetched.aborted_transactions)})
        found, after = [], offset
        for batch in BatchIterator(fetched.records):
            aborted = self._aborted(batch)
            label = batch.timestamp_type.label
            for r in batch.records():
                if r.offset < offset:
                    continue
                self.scanned += 1
                if self.needle is not None and (batch.is_control or not self._matches(r)):
                    continue
                control = _control_type(r) if batch.is_control else None
                extra = {"transactional": batch.is_transactional, "control": control, "aborted": aborted}
                found.append(record_json(r, label, shown, **extra))
            after = max(after, batch.last_offset + 1)
        return found, after

    def _fetch(self, offset: int, isolation_level: int) -> FetchedPartition:
        return self.client.fetch(
            self.tp,
            offset,
            isolation_level=isolation_level,
            max_bytes=FETCH_BYTES,
            partition_max_bytes=FETCH_BYTES,
            max_wait_ms=FETCH_WAIT_MS,
        )

    def _aborted(self, batch: Any) -> bool:
        if not batch.is_transactional:
            return False
        pid = batch.producer_id
        while self._starts and self._starts[0][0] <= batch.last_offset:
            self._aborting.add(self._starts.pop(0)[1])
        if batch.is_control:
            marker = parse_control_record(next(iter(batch.records())))
            if isinstance(marker, EndTransactionMarker) and marker.type is ControlRecordType.ABORT:
                self._aborting.discard(pid)
            return False  # the marker itself is a control record, shown as one
        return pid in self._aborting

    def _matches(self, record: Record) -> bool:
        assert self.needle is not None
        return any(
            data is not None and self.needle in bytes(data).decode("utf-8", "replace").casefold()
            for data in (record.key, record.value)
        )


def _control_type(record: Record) -> str:
    parsed = parse_control_record(record)
    return parsed.type.name if isinstance(parsed, EndTransactionMarker) else type(parsed).__name__


def shown(data: bytes | None) -> dict[str, Any] | None:
    """Bytes as the console shows them: ``{"text": ...}`` when they are UTF-8, else ``{"hex": ...}``
    (None stays None: a null key, a tombstone); at most SHOWN_CHARS characters of either, with the
    whole ``size`` in bytes when they are cut."""
    if data is None:
        return None
    raw = bytes(data)
    try:
        text = raw.decode("utf-8")
        out, whole = {"text": text[:SHOWN_CHARS]}, len(text) <= SHOWN_CHARS
    except UnicodeDecodeError:
        out, whole = {"hex": raw[: SHOWN_CHARS // 2].hex()}, len(raw) <= SHOWN_CHARS // 2
    return out if whole else {**out, "size": len(raw)}
