"""Kafka's znodes: every path seglog's cluster uses and the JSON stored there.

Kafka 3.x with ZooKeeper (``core/src/main/scala/kafka/zk/ZkData.scala``); the
same bytes, so that Kafka's tools and a seglog cluster read each other's::

    /cluster/id                                  {"version":"1","id":"<cluster id>"}
    /controller                  ephemeral       {"version":2,"brokerid":1,"timestamp":"<ms>","kraftControllerEpoch":-1}
    /controller_epoch                            5        (plain text; zkVersion compare-and-set)
    /brokers/ids/<id>            ephemeral       {"version":5,"host":"h","port":9092,"endpoints":["PLAINTEXT://h:9092"],
                                                  "listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},
                                                  "jmx_port":-1,"timestamp":"<ms>","features":{},"rack":"r1"}
    /brokers/topics/<t>                          {"version":3,"partitions":{"0":[1,2]},"adding_replicas":{},
                                                  "removing_replicas":{},"topic_id":"<22-char base64 uuid>"}
    /brokers/topics/<t>/partitions/<p>/state     {"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,
                                                  "isr":[1,2]}
                                                 (its zkVersion is the partition epoch)
    /config/topics/<t>                           {"version":1,"config":{"retention.ms":"1000"}}
    /config/changes/config_change_<seq>          {"version":2,"entity_path":"topics/<t>"}
    /admin/delete_topics/<t>                     (no data)
    /admin/reassign_partitions                   {"version":1,"partitions":[{"topic":"t","partition":0,
                                                  "replicas":[1,2]}]}
    /admin/preferred_replica_election            {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /isr_change_notification/isr_change_<seq>    {"version":1,"partitions":[{"topic":"t","partition":0}]}
    /latest_producer_id_block                    {"version":1,"broker":1,"block_start":"1000","block_end":"1999"}
                                                 (empty until the first block; zkVersion compare-and-set)
    /kafka-acl/<Type>/<name>                     {"version":1,"acls":[{"principal":"User:alice",
                                                  "permissionType":"Allow","operation":"Read","host":"*"}]}
                                                 (LITERAL patterns; Type as Topic, TransactionalId, ...)
    /kafka-acl-extended/prefixed/<Type>/<name>   the same, for PREFIXED patterns
    /kafka-acl-changes/acl_changes_<seq>         TOPIC:<name>   (plain text: a LITERAL pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq>
                                                 {"version":1,"resourceType":"TOPIC","name":"<name>",
                                                  "patternType":"PREFIXED"}

Decoding checks every field Kafka reads and raises ``InvalidZNodeError`` naming
the znode (and the byte where the JSON broke) instead of a KeyError deep inside.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..common import TopicPartition
from ..errors import InvalidRequestError, InvalidZNodeError
from ..security import AccessControlEntry, AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourceType
from ..security import parse_principal as _parse_principal

# --- paths -----------------------------------------------------------------------

ADMIN = "/admin"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQUENCE_ID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CLUSTER = "/cluster"
CLUSTER_ID = "/cluster/id"
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
CONSUMERS = "/consumers"  # the old consumer's path: Kafka still creates it
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# ACLs (ZkData.scala's ZkAclStore and ZkAclChangeStore): a root and a change path per pattern type
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"

# Config entity types (``ConfigType.ALL``): each has /config/<type>.
CONFIG_TYPES = ("topics", "clients", "users", "brokers", "ips")

# What a broker makes sure exists when it starts (``ZkData.PersistentZkPaths``).
PERSISTENT_PATHS = (
    CONSUMERS,
    BROKER_IDS,
    TOPICS,
    CONFIG_CHANGES,
    DELETE_TOPICS,
    BROKER_SEQUENCE_ID,
    ISR_CHANGE_NOTIFICATION,
    LATEST_PRODUCER_ID_BLOCK,
    LOG_DIR_EVENT_NOTIFICATION,
    *(f"{CONFIG}/{t}" for t in CONFIG_TYPES),
)

# ``LeaderAndIsr``'s constants
INITIAL_LEADER_EPOCH = 0
NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_CONTROLLER_EPOCH = 0  # /controller_epoch as first created; the first controller makes it 1

# ``SocketServerConfigs.DEFAULT_NAME_TO_SECURITY_PROTO``: the map when a registration has none
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(entity_type: str, entity_name: str) -> str:
    return f"{CONFIG}/{entity_type}/{entity_name}"


def topic_config_path(topic: str) -> str:
    return config_path("topics", topic)


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def sequence_number(path: str, prefix: str) -> str:
    """The sequence part of a sequential znode's name (``isr_change_0000000004`` -> ``0000000004``)."""
    name = path.rsplit("/", 1)[-1]
    if not name.startswith(prefix):
        raise InvalidZNodeError(f"not a {prefix}<sequence> znode", file=path)
    return name[len(prefix) :]


# --- JSON helpers -------------------------------------------------------------------


def _dumps(value: Any) -> bytes:
    # Jackson's compact form, as Kafka's Json.encodeAsBytes writes it
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _loads(data: bytes | None, path: str) -> Any:
    if data is None or data == b"":
        raise InvalidZNodeError("znode has no data", file=path)
    try:
        text = data.decode("utf-8")  # Kafka writes UTF-8; json.loads would guess UTF-16 from a BOM
    except UnicodeDecodeError as e:
        raise InvalidZNodeError(f"znode data is not UTF-8: {e.reason}", file=path, position=e.start) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidZNodeError(f"znode data is not JSON: {e.msg}", file=path, position=e.pos) from None


def _object(value: Any, path: str, what: str = "znode data") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidZNodeError(f"{what} must be a JSON object, not {_kind(value)}", file=path)
    return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}.get(
        type(value), "an object"
    )


def _field(obj: Mapping[str, Any], name: str, path: str) -> Any:
    if name not in obj:
        raise InvalidZNodeError(f"field {name!r} is missing", file=path)
    return obj[name]


def _int(value: Any, name: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < (1 << 31):
        raise InvalidZNodeError(f"field {name!r} must be a 32-bit integer, not {value!r}", file=path)
    return value


def _str(value: Any, name: str, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidZNodeError(f"field {name!r} must be a string, not {_kind(value)}", file=path)
    return value


def _int_list(value: Any, name: str, path: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise InvalidZNodeError(f"field {name!r} must be an array of broker ids, not {_kind(value)}", file=path)
    return tuple(_int(v, name, path) for v in value)


def _timestamp(value: Any, name: str, path: str) -> int:
    # Kafka writes timestamps as strings of milliseconds ("1700000000000")
    text = _str(value, name, path)
    try:
        return int(text)
    except ValueError:
        raise InvalidZNodeError(f"field {name!r} must be a string of milliseconds, not {text!r}", file=path) from None


def _long_string(value: Any, name: str, path: str) -> int:
    # Kafka writes producer ids as strings of decimal longs ("1000")
    text = _str(value, name, path)
    if not re.fullmatch(r"-?[0-9]+", text):
        raise InvalidZNodeError(f"field {name!r} must be a string of a decimal integer, not {text!r}", file=path)
    return int(text)


def _version(obj: Mapping[str, Any], path: str, supported: Iterable[int]) -> int:
    version = _int(_field(obj, "version", path), "version", path)
    allowed = tuple(supported)
    if version not in allowed:
        raise InvalidZNodeError(f"unsupported version {version} (known: {', '.join(map(str, allowed))})", file=path)
    return version


# --- /cluster/id ---------------------------------------------------------------------


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})  # Kafka writes this version as a string


def decode_cluster_id(data: bytes | None, path: str = CLUSTER_ID) -> str:
    obj = _object(_loads(data, path), path)
    return _str(_field(obj, "id", path), "id", path)


# --- /controller and /controller_epoch ---------------------------------------------


@dataclass(frozen=True)
class ControllerRegistration:
    broker_id: int
    timestamp: int | None = None
    kraft_controller_epoch: int | None = None  # -1 from a ZooKeeper controller; absent before v2


def encode_controller(broker_id: int, timestamp: int, kraft_controller_epoch: int = -1) -> bytes:
    return _dumps(
        {
            "version": 2,
            "brokerid": broker_id,
            "timestamp": str(timestamp),
            "kraftControllerEpoch": kraft_controller_epoch,
        }
    )


def decode_controller(data: bytes | None, path: str = CONTROLLER) -> ControllerRegistration:
    obj = _object(_loads(data, path), path)
    broker_id = _int(_field(obj, "brokerid", path), "brokerid", path)
    timestamp = _timestamp(obj["timestamp"], "timestamp", path) if "timestamp" in obj else None
    kraft = obj.get("kraftControllerEpoch")
    return ControllerRegistration(
        broker_id, timestamp, None if kraft is None else _int(kraft, "kraftControllerEpoch", path)
    )


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes | None, path: str = CONTROLLER_EPOCH) -> int:
    text = (data or b"").decode("utf-8", "replace")
    if not re.fullmatch(r"-?[0-9]+", text):
        raise InvalidZNodeError(f"controller epoch must be an integer, not {text!r}", file=path)
    return _int(int(text), "controller epoch", path)


# --- /latest_producer_id_block ----------------------------------------------------


class ProducerIdBlock(NamedTuple):
    """A block of producer ids, both ends inclusive (Kafka's ``ProducerIdsBlock``)."""

    broker_id: int
    block_start: int
    block_end: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    # Kafka writes the ids as strings of the longs, the version and broker as numbers
    return _dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes | None, path: str = LATEST_PRODUCER_ID_BLOCK) -> ProducerIdBlock:
    obj = _object(_loads(data, path), path)
    _version(obj, path, (1,))
    broker_id = _int(_field(obj, "broker", path), "broker", path)
    start, end = (_long_string(_field(obj, name, path), name, path) for name in ("block_start", "block_end"))
    if not 0 <= start <= end < (1 << 63):
        raise InvalidZNodeError(f"producer id block {start}-{end} is not a block of longs", file=path)
    return ProducerIdBlock(broker_id, start, end)


# --- /brokers/ids/<id> ----------------------------------------------------------------

# Kafka's listener parse (``Utils.getHost/getPort`` through ``listenerListToEndPoints``):
# NAME://host:port, host possibly in brackets (IPv6) or empty (all interfaces)
_ENDPOINT = re.compile(r"^([A-Za-z0-9_]+)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


@dataclass(frozen=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    """What a broker writes at /brokers/ids/<id> (Kafka's ``BrokerInfo``)."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    timestamp: int
    rack: str | None = None
    jmx_port: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    version: int = 5


def encode_broker(broker: BrokerRegistration) -> bytes:
    # the top-level host and port are for old clients: the first PLAINTEXT endpoint, if any
    plaintext = next((e for e in broker.endpoints if e.security_protocol == "PLAINTEXT"), None)
    obj: dict[str, Any] = {
        "version": broker.version,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string for e in broker.endpoints],
        "jmx_port": broker.jmx_port,
        "timestamp": str(broker.timestamp),
    }
    if broker.rack is not None:
        obj["rack"] = broker.rack
    obj["listener_security_protocol_map"] = {e.listener: e.security_protocol for e in broker.endpoints}
    obj["features"] = {name: dict(r) for name, r in broker.features.items()}
    return _dumps(obj)


def decode_broker(broker_id: int, data: bytes | None, path: str | None = None) -> BrokerRegistration:
    path = path or broker_path(broker_id)
    obj = _object(_loads(data, path), path)
    version = _int(_field(obj, "version", path), "version", path)
    if version < 1:
        raise InvalidZNodeError(f"unsupported version {version} of a broker registration", file=path)
    jmx_port = _int(_field(obj, "jmx_port", path), "jmx_port", path)
    timestamp = _timestamp(obj["timestamp"], "timestamp", path) if "timestamp" in obj else 0
    if version == 1:
        host = _str(_field(obj, "host", path), "host", path)
        endpoints: tuple[EndPoint, ...] = (EndPoint("PLAINTEXT", host, _int(_field(obj, "port", path), "port", path)),)
    else:
        endpoints = _decode_endpoints(obj, path)
    rack = obj.get("rack")
    if rack is not None:
        rack = _str(rack, "rack", path)
    features = _decode_features(obj.get("features"), path)
    return BrokerRegistration(broker_id, endpoints, timestamp, rack, jmx_port, features, version)


def _decode_endpoints(obj: Mapping[str, Any], path: str) -> tuple[EndPoint, ...]:
    protocols_json = obj.get("listener_security_protocol_map")
    if protocols_json is None:
        protocols = {p: p for p in SECURITY_PROTOCOLS}
    else:
        protocols = {
            k: _str(v, "listener_security_protocol_map", path)
            for k, v in _object(protocols_json, path, "listener_security_protocol_map").items()
        }
    listeners = _field(obj, "endpoints", path)
    if not isinstance(listeners, list):
        raise InvalidZNodeError(f"field 'endpoints' must be an array of strings, not {_kind(listeners)}", file=path)
    endpoints = []
    for listener in listeners:
        match = _ENDPOINT.match(_str(listener, "endpoints", path))
        if match is None:
            raise InvalidZNodeError(f"endpoint {listener!r} is not NAME://host:port", file=path)
        name, host, port = match.group(1), match.group(2), int(match.group(3))
        if name not in protocols:
            raise InvalidZNodeError(f"listener {name!r} has no security protocol in the map", file=path)
        endpoints.append(EndPoint(name, host, port, protocols[name]))
    return tuple(endpoints)


def _decode_features(value: Any, path: str) -> dict[str, dict[str, int]]:
    if value is None:
        return {}
    features = {}
    for name, versions in _object(value, path, "features").items():
        ranges = _object(versions, path, f"feature {name!r}")
        features[name] = {label: _int(v, f"features.{name}.{label}", path) for label, v in ranges.items()}
    return features


# --- /brokers/topics/<t> -----------------------------------------------------------


@dataclass(frozen=True)
class ReplicaAssignment:
    """One partition's replicas, with those being added and removed by a reassignment."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """Where the partition ends up once its reassignment completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True)
class TopicAssignment:
    """/brokers/topics/<t>: the replicas of each partition and the topic's id."""

    partitions: Mapping[int, ReplicaAssignment]
    topic_id: str | None = None


def encode_topic(assignment: TopicAssignment) -> bytes:
    parts = sorted(assignment.partitions.items())
    obj: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in parts},
        "adding_replicas": {str(p): list(a.adding_replicas) for p, a in parts if a.adding_replicas},
        "removing_replicas": {str(p): list(a.removing_replicas) for p, a in parts if a.removing_replicas},
    }
    if assignment.topic_id is not None:
        obj["topic_id"] = assignment.topic_id
    return _dumps(obj)


def decode_topic(topic: str, data: bytes | None, path: str | None = None) -> TopicAssignment:
    path = path or topic_path(topic)
    obj = _object(_loads(data, path), path)
    topic_id = obj.get("topic_id")
    if topic_id is not None:
        topic_id = validate_topic_id(_str(topic_id, "topic_id", path), path)
    adding = _partition_lists(obj.get("adding_replicas"), "adding_replicas", path)
    removing = _partition_lists(obj.get("removing_replicas"), "removing_replicas", path)
    partitions = {
        p: ReplicaAssignment(replicas, adding.get(p, ()), removing.get(p, ()))
        for p, replicas in _partition_lists(obj.get("partitions"), "partitions", path).items()
    }
    return TopicAssignment(partitions, topic_id)


def _partition_lists(value: Any, name: str, path: str) -> dict[int, tuple[int, ...]]:
    if value is None:
        return {}
    out = {}
    for key, replicas in _object(value, path, f"field {name!r}").items():
        if not re.fullmatch(r"[0-9]+", key):
            raise InvalidZNodeError(f"field {name!r} has partition {key!r}, not a partition number", file=path)
        out[int(key)] = _int_list(replicas, f"{name}.{key}", path)
    return out


def topic_uuid(topic_id: str) -> uuid.UUID:
    """A topic id as the topic znode holds it (Kafka's base64 form, no padding) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


def topic_id_text(topic_id: uuid.UUID) -> str:
    """A topic id as the topic znode and ``partition.metadata`` hold it (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")


def validate_topic_id(topic_id: str, path: str = "topic_id") -> str:
    """Kafka's ``Uuid.fromString``: base64url of 16 bytes, without padding."""
    try:
        topic_uuid(topic_id)
        valid = len(topic_id) <= 24
    except ValueError:  # not base64, or not 16 bytes
        valid = False
    if not valid:
        raise InvalidZNodeError(f"topic id {topic_id!r} is not a base64 encoded 16-byte uuid", file=path)
    return topic_id


# --- /brokers/topics/<t>/partitions/<p>/state --------------------------------------


@dataclass(frozen=True)
class LeaderAndIsr:
    """A partition's leader and ISR; ``partition_epoch`` is the state znode's zkVersion."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = 0  # 0 RECOVERED, 1 RECOVERING (after an unclean election)
    partition_epoch: int = 0

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, self.isr, self.leader_recovery_state, self.partition_epoch)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.leader_recovery_state, self.partition_epoch)

    def new_recovering_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), 1, self.partition_epoch)


@dataclass(frozen=True)
class LeaderIsrAndControllerEpoch:
    leader_and_isr: LeaderAndIsr
    controller_epoch: int


def encode_partition_state(state: LeaderIsrAndControllerEpoch) -> bytes:
    lai = state.leader_and_isr
    obj: dict[str, Any] = {
        "version": 1,
        "leader": lai.leader,
        "leader_epoch": lai.leader_epoch,
        "controller_epoch": state.controller_epoch,
        "isr": list(lai.isr),
    }
    if lai.leader_recovery_state != 0:  # Kafka writes it only when not RECOVERED
        obj["leader_recovery_state"] = lai.leader_recovery_state
    return _dumps(obj)


def decode_partition_state(
    data: bytes | None, zk_version: int, path: str = "partition state"
) -> LeaderIsrAndControllerEpoch:
    obj = _object(_loads(data, path), path)
    recovery = obj.get("leader_recovery_state", 0)
    recovery = _int(recovery, "leader_recovery_state", path)
    if recovery not in (0, 1):
        raise InvalidZNodeError(f"leader_recovery_state must be 0 or 1, not {recovery}", file=path)
    lai = LeaderAndIsr(
        leader=_int(_field(obj, "leader", path), "leader", path),
        leader_epoch=_int(_field(obj, "leader_epoch", path), "leader_epoch", path),
        isr=_int_list(_field(obj, "isr", path), "isr", path),
        leader_recovery_state=recovery,
        partition_epoch=zk_version,
    )
    return LeaderIsrAndControllerEpoch(lai, _int(_field(obj, "controller_epoch", path), "controller_epoch", path))


# --- /config/<type>/<name> and /config/changes -------------------------------------


def _config_string(value: Any) -> str:
    # Kafka keeps configs as java.util.Properties: every value a string
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def encode_config(config: Mapping[str, Any]) -> bytes:
    return _dumps({"version": 1, "config": {k: _config_string(v) for k, v in config.items()}})


def decode_config(data: bytes | None, path: str = "config") -> dict[str, str]:
    """The overrides at /config/<type>/<name>; a znode without data holds none (as Kafka reads it)."""
    if data is None or data == b"":
        return {}
    obj = _object(_loads(data, path), path)
    config = obj.get("config")
    if config is None:
        return {}
    return {k: _str(v, k, path) for k, v in _object(config, path, "field 'config'").items()}


def encode_config_change(entity_path: str) -> bytes:
    """A /config/changes/config_change_<seq> notification: ``topics/<t>``, ``brokers/<id>``, ..."""
    return _dumps({"version": 2, "entity_path": entity_path})


def decode_config_change(data: bytes | None, path: str = CONFIG_CHANGES) -> str:
    """The changed entity's path; version 1 named it by type and name."""
    obj = _object(_loads(data, path), path)
    if _version(obj, path, (1, 2)) == 1:
        entity_type = _str(_field(obj, "entity_type", path), "entity_type", path)
        return f"{entity_type}/{_str(_field(obj, 'entity_name', path), 'entity_name', path)}"
    return _str(_field(obj, "entity_path", path), "entity_path", path)


# --- /admin/reassign_partitions, /admin/preferred_replica_election, isr changes ------


def encode_reassignment(reassignment: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in reassignment.items()
            ],
        }
    )


def decode_reassignment(data: bytes | None, path: str = REASSIGN_PARTITIONS) -> dict[TopicPartition, tuple[int, ...]]:
    out = {}
    for entry in _partition_entries(data, path, (1,)):
        out[_topic_partition(entry, path)] = _int_list(_field(entry, "replicas", path), "replicas", path)
    return out


def encode_partitions(partitions: Iterable[TopicPartition]) -> bytes:
    """/admin/preferred_replica_election and /isr_change_notification/isr_change_<seq> (both version 1)."""
    return _dumps({"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]})


def decode_partitions(data: bytes | None, path: str) -> set[TopicPartition]:
    return {_topic_partition(entry, path) for entry in _partition_entries(data, path, (1,))}


def _partition_entries(data: bytes | None, path: str, versions: Iterable[int]) -> list[dict[str, Any]]:
    obj = _object(_loads(data, path), path)
    if "version" in obj:  # Kafka always writes it but never reads it
        _version(obj, path, versions)
    entries = _field(obj, "partitions", path)
    if not isinstance(entries, list):
        raise InvalidZNodeError(f"field 'partitions' must be an array, not {_kind(entries)}", file=path)
    return [_object(e, path, "a partition entry") for e in entries]


def _topic_partition(entry: Mapping[str, Any], path: str) -> TopicPartition:
    topic = _str(_field(entry, "topic", path), "topic", path)
    return TopicPartition(topic, _int(_field(entry, "partition", path), "partition", path))


# --- ACLs ------------------------------------------------------------------------------


def acl_root(pattern_type: PatternType) -> str:
    """Where a pattern type's ACLs live: /kafka-acl for LITERAL, /kafka-acl-extended/prefixed."""
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACLS
    return f"{EXTENDED_ACLS}/{pattern_type.name.lower()}"


def acl_path(pattern: ResourcePattern) -> str:
    return f"{acl_root(pattern.pattern_type)}/{pattern.resource_type.title}/{pattern.name}"


def acl_change_path(pattern_type: PatternType) -> str:
    """The notifications' parent: a LITERAL change goes to /kafka-acl-changes, others to the extended one."""
    return LITERAL_ACL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_ACL_CHANGES


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    """A pattern's znode (``ResourceZNode.encode``); also the entries of the log dir's ACL file."""
    return _dumps({"version": 1, "acls": acl_entries_json(entries)})


def acl_entries_json(entries: Iterable[AccessControlEntry]) -> list[dict[str, str]]:
    return [
        {
            "principal": str(e.principal),
            "permissionType": e.permission_type.title,
            "operation": e.operation.title,
            "host": e.host,
        }
        for e in sorted(entries)
    ]


def decode_acls(data: bytes | None, path: str) -> frozenset[AccessControlEntry]:
    obj = _object(_loads(data, path), path)
    _version(obj, path, (1,))
    return acl_entries_from_json(_field(obj, "acls", path), path)


def acl_entries_from_json(value: Any, path: str) -> frozenset[AccessControlEntry]:
    if not isinstance(value, list):
        raise InvalidZNodeError(f"field 'acls' must be an array, not {_kind(value)}", file=path)
    entries = set()
    for item in value:
        obj = _object(item, path, "an ACL")
        try:
            entries.add(
                AccessControlEntry(
                    _parse_principal(_str(_field(obj, "principal", path), "principal", path)),
                    _str(_field(obj, "host", path), "host", path),
                    AclOperation.parse(_str(_field(obj, "operation", path), "operation", path)),
                    AclPermissionType.parse(_str(_field(obj, "permissionType", path), "permissionType", path)),
                )
            )
        except InvalidRequestError as e:
            raise InvalidZNodeError(e.message, file=path) from None
    return frozenset(entries)


def encode_acl_change(pattern: ResourcePattern) -> bytes:
    """A change notification: ``TOPIC:<name>`` for a LITERAL pattern (Java's ResourceType.toString),
    JSON for the others (``ExtendedAclChangeEvent``)."""
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    event = {
        "version": 1,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return _dumps(event)


def decode_acl_change(data: bytes | None, path: str) -> ResourcePattern:
    """The pattern a notification names (types in any case, as Kafka's ``fromString`` reads them)."""
    try:
        if path.startswith(LITERAL_ACL_CHANGES + "/"):
            type_name, sep, name = (data or b"").decode("utf-8").partition(":")
            if not sep:
                raise InvalidZNodeError("an ACL change must read ResourceType:ResourceName", file=path)
            return ResourcePattern(ResourceType.parse(type_name), name, PatternType.LITERAL)
        obj = _object(_loads(data, path), path)
        _version(obj, path, (1,))
        resource_type = ResourceType.parse(_str(_field(obj, "resourceType", path), "resourceType", path))
        pattern_type = PatternType.parse(_str(_field(obj, "patternType", path), "patternType", path))
        return ResourcePattern(resource_type, _str(_field(obj, "name", path), "name", path), pattern_type)
    except (InvalidRequestError, UnicodeDecodeError) as e:
        raise InvalidZNodeError(f"not an ACL change: {e}", file=path) from None
