"""Kafka's znode JSON: round trips, data exactly as Kafka writes it, and clear errors on bad data."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.cluster import znodes as z
from seglog.cluster.znodes import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicAssignment,
    TopicPartition,
)
from seglog.errors import InvalidZNodeError, SeglogError

TOPIC_ID = "3E4tGIWFTQ6vEBgSPqaB6Q"  # a Kafka Uuid: base64url of 16 bytes, no padding


def test_paths() -> None:
    assert z.broker_path(3) == "/brokers/ids/3"
    assert z.topic_path("orders") == "/brokers/topics/orders"
    assert z.partition_state_path("orders", 2) == "/brokers/topics/orders/partitions/2/state"
    assert z.topic_config_path("orders") == "/config/topics/orders"
    assert z.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert (z.CONTROLLER, z.CONTROLLER_EPOCH, z.CLUSTER_ID) == ("/controller", "/controller_epoch", "/cluster/id")
    assert z.REASSIGN_PARTITIONS == "/admin/reassign_partitions"
    assert z.PREFERRED_REPLICA_ELECTION == "/admin/preferred_replica_election"
    assert f"{z.ISR_CHANGE_NOTIFICATION}/{z.ISR_CHANGE_PREFIX}" == "/isr_change_notification/isr_change_"
    assert f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}" == "/config/changes/config_change_"
    assert z.sequence_number("/isr_change_notification/isr_change_0000000042", z.ISR_CHANGE_PREFIX) == "0000000042"
    with pytest.raises(InvalidZNodeError, match="isr_change_"):
        z.sequence_number("/isr_change_notification/other", z.ISR_CHANGE_PREFIX)
    assert "/config/topics" in z.PERSISTENT_PATHS and "/brokers/ids" in z.PERSISTENT_PATHS


# --- /brokers/ids/<id> ----------------------------------------------------------------


def test_broker_encoding_is_kafkas_v5() -> None:
    broker = BrokerRegistration(
        1,
        (EndPoint("PLAINTEXT", "10.0.0.1", 9092), EndPoint("SSL", "10.0.0.1", 9093, "SSL")),
        timestamp=1700000000123,
        rack="r1",
    )
    assert json.loads(z.encode_broker(broker)) == {
        "version": 5,
        "host": "10.0.0.1",
        "port": 9092,
        "endpoints": ["PLAINTEXT://10.0.0.1:9092", "SSL://10.0.0.1:9093"],
        "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"},
        "jmx_port": -1,
        "timestamp": "1700000000123",
        "features": {},
        "rack": "r1",
    }
    assert z.decode_broker(1, z.encode_broker(broker)) == broker


def test_broker_without_plaintext_and_rack() -> None:
    broker = BrokerRegistration(2, (EndPoint("INTERNAL", "h", 19092, "SSL"),), timestamp=5)
    obj = json.loads(z.encode_broker(broker))
    assert obj["host"] is None and obj["port"] == -1 and "rack" not in obj
    assert z.decode_broker(2, z.encode_broker(broker)) == broker


def test_broker_as_kafka_3_writes_it() -> None:
    # key order of a Scala map, as ZooKeeper shows it for a Kafka 3.x broker
    data = (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://kafka1:9092"],"jmx_port":-1,"port":9092,"host":"kafka1",'
        b'"version":5,"timestamp":"1700000000000"}'
    )
    broker = z.decode_broker(1, data)
    assert broker.endpoints == (EndPoint("PLAINTEXT", "kafka1", 9092, "PLAINTEXT"),)
    assert (broker.timestamp, broker.rack, broker.jmx_port, broker.version) == (1700000000000, None, -1, 5)


def test_broker_older_versions() -> None:
    v1 = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    assert z.decode_broker(0, v1).endpoints == (EndPoint("PLAINTEXT", "localhost", 9092),)
    v2 = (
        b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"]}'
    )
    assert [e.security_protocol for e in z.decode_broker(0, v2).endpoints] == ["PLAINTEXT", "SSL"]
    v4 = (
        b'{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
        b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},"rack":"dc1"}'
    )
    broker = z.decode_broker(0, v4)
    assert broker.endpoints == (EndPoint("CLIENT", "host1", 9092, "SSL"), EndPoint("REPLICATION", "host1", 9093))
    assert broker.rack == "dc1"
    v5 = (
        b'{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["PLAINTEXT://host1:9092"],"rack":"dc1",'
        b'"features": {"feature": {"min_version":1, "first_active_version":2, "max_version":3}}}'
    )
    assert z.decode_broker(0, v5).features == {
        "feature": {"min_version": 1, "first_active_version": 2, "max_version": 3}
    }


def test_broker_ipv6_endpoint() -> None:
    broker = BrokerRegistration(1, (EndPoint("PLAINTEXT", "::1", 9092),), timestamp=1)
    assert json.loads(z.encode_broker(broker))["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert z.decode_broker(1, z.encode_broker(broker)) == broker


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "no data"),
        (b"{not json", "not JSON"),
        (b"[1,2]", "must be a JSON object, not an array"),
        (b'{"version":0,"jmx_port":-1}', "unsupported version 0"),
        (b'{"version":5,"endpoints":["PLAINTEXT://h:1"]}', "'jmx_port' is missing"),
        (b'{"version":5,"jmx_port":"x","endpoints":[]}', "'jmx_port' must be a 32-bit integer"),
        (b'{"version":5,"jmx_port":-1,"endpoints":["h:9092"]}', "not NAME://host:port"),
        (b'{"version":5,"jmx_port":-1,"endpoints":["CLIENT://h:1"]}', "'CLIENT' has no security protocol"),
        (b'{"version":5,"jmx_port":-1,"endpoints":"PLAINTEXT://h:1"}', "'endpoints' must be an array"),
        (b'{"version":5,"jmx_port":-1,"endpoints":[],"timestamp":"soon"}', "string of milliseconds"),
        (b'{"version":5,"jmx_port":-1,"endpoints":[],"rack":7}', "'rack' must be a string"),
        (b'{"version":true,"jmx_port":-1,"endpoints":[]}', "'version' must be a 32-bit integer"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_broker_bad_data(data: bytes, message: str) -> None:
    with pytest.raises(InvalidZNodeError, match=message) as info:
        z.decode_broker(4, data)
    assert info.value.file == "/brokers/ids/4"
    assert isinstance(info.value, SeglogError)


def test_bad_json_names_the_byte() -> None:
    with pytest.raises(InvalidZNodeError) as info:
        z.decode_controller(b'{"version":2,"brokerid":}')
    assert info.value.position == 24
    assert "file /controller, position 24" in str(info.value)


# --- /controller, /controller_epoch, /cluster/id -----------------------------------------


def test_controller() -> None:
    data = z.encode_controller(3, 1700000000000)
    assert json.loads(data) == {"version": 2, "brokerid": 3, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    assert z.decode_controller(data) == z.ControllerRegistration(3, 1700000000000, -1)
    # version 1, before KRaft migration existed
    assert z.decode_controller(b'{"version":1,"brokerid":0,"timestamp":"1492131298000"}').broker_id == 0
    with pytest.raises(InvalidZNodeError, match="'brokerid' is missing"):
        z.decode_controller(b'{"version":2,"timestamp":"1"}')


def test_controller_epoch() -> None:
    assert z.encode_controller_epoch(17) == b"17"
    assert z.decode_controller_epoch(b"17") == 17
    for bad in (b"", b"x", b"1.5", None):
        with pytest.raises(InvalidZNodeError, match="controller epoch must be an integer"):
            z.decode_controller_epoch(bad)


def test_cluster_id() -> None:
    assert json.loads(z.encode_cluster_id("Qb6wK3UvRDeNsMu3mwq0Rg")) == {"version": "1", "id": "Qb6wK3UvRDeNsMu3mwq0Rg"}
    assert z.decode_cluster_id(b'{"version":"1","id":"Qb6wK3UvRDeNsMu3mwq0Rg"}') == "Qb6wK3UvRDeNsMu3mwq0Rg"
    with pytest.raises(InvalidZNodeError, match="'id' is missing"):
        z.decode_cluster_id(b'{"version":"1"}')


# --- /brokers/topics/<t> and partition state ------------------------------------------


def test_topic_as_kafka_writes_it() -> None:
    data = (
        b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"' + TOPIC_ID.encode() + b'",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}'
    )
    topic = z.decode_topic("orders", data)
    assert topic == TopicAssignment({0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}, TOPIC_ID)
    # written by Kafka before topic ids and reassignment fields (version 1)
    old = z.decode_topic("orders", b'{"version":1,"partitions":{"0":[0,1]}}')
    assert old == TopicAssignment({0: ReplicaAssignment((0, 1))}, None)


def test_topic_being_reassigned() -> None:
    topic = TopicAssignment({0: ReplicaAssignment((4, 2, 3, 1), (4,), (1,)), 1: ReplicaAssignment((2, 3))}, TOPIC_ID)
    data = z.encode_topic(topic)
    assert json.loads(data) == {
        "version": 3,
        "partitions": {"0": [4, 2, 3, 1], "1": [2, 3]},
        "adding_replicas": {"0": [4]},
        "removing_replicas": {"0": [1]},
        "topic_id": TOPIC_ID,
    }
    decoded = z.decode_topic("t", data)
    assert decoded == topic
    assert decoded.partitions[0].target_replicas == (4, 2, 3)
    assert decoded.partitions[0].is_being_reassigned and not decoded.partitions[1].is_being_reassigned


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"version":3,"partitions":{"x":[1]}}', "partition 'x', not a partition number"),
        (b'{"version":3,"partitions":{"0":[1,"2"]}}', "must be a 32-bit integer"),
        (b'{"version":3,"partitions":{"0":3}}', "must be an array of broker ids"),
        (b'{"version":3,"partitions":[]}', "'partitions' must be a JSON object"),
        (b'{"version":3,"partitions":{},"topic_id":"not-an-id"}', "not a base64 encoded 16-byte uuid"),
        (b'{"version":3,"partitions":{},"topic_id":"' + b"A" * 30 + b'"}', "16-byte uuid"),
    ],
)
def test_topic_bad_data(data: bytes, message: str) -> None:
    with pytest.raises(InvalidZNodeError, match=message) as info:
        z.decode_topic("orders", data)
    assert info.value.file == "/brokers/topics/orders"


def test_partition_state() -> None:
    kafka = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'
    state = z.decode_partition_state(kafka, zk_version=4)
    assert state == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3), 0, 4), 1)
    assert json.loads(z.encode_partition_state(state)) == json.loads(kafka)
    recovering = LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 8, (3,), 1), 2)
    assert json.loads(z.encode_partition_state(recovering))["leader_recovery_state"] == 1
    assert z.decode_partition_state(z.encode_partition_state(recovering), 0) == recovering
    with pytest.raises(InvalidZNodeError, match="'isr' is missing"):
        z.decode_partition_state(b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1}', 0)
    with pytest.raises(InvalidZNodeError, match="leader_recovery_state must be 0 or 1"):
        z.decode_partition_state(
            b'{"version":1,"leader":1,"leader_epoch":0,"controller_epoch":1,"isr":[1],"leader_recovery_state":5}', 0
        )


# --- configs and notifications -----------------------------------------------------------


def test_topic_config() -> None:
    kafka = b'{"version":1,"config":{"retention.ms":"86400000","cleanup.policy":"compact"}}'
    assert z.decode_config(kafka) == {"retention.ms": "86400000", "cleanup.policy": "compact"}
    data = z.encode_config({"retention.ms": 86400000, "cleanup.policy": ("compact", "delete"), "x.enable": True})
    assert json.loads(data) == {
        "version": 1,
        "config": {"retention.ms": "86400000", "cleanup.policy": "compact,delete", "x.enable": "true"},
    }
    assert z.decode_config(b"") == {} and z.decode_config(b'{"version":1}') == {}
    with pytest.raises(InvalidZNodeError, match=r"'retention\.ms' must be a string"):
        z.decode_config(b'{"version":1,"config":{"retention.ms":5}}', "/config/topics/t")


def test_config_change_notification() -> None:
    assert json.loads(z.encode_config_change("topics/orders")) == {"version": 2, "entity_path": "topics/orders"}
    assert z.decode_config_change(b'{"version":2,"entity_path":"topics/orders"}') == "topics/orders"
    assert z.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"orders"}') == "topics/orders"
    with pytest.raises(InvalidZNodeError, match="unsupported version 3"):
        z.decode_config_change(b'{"version":3,"entity_path":"topics/orders"}')


def test_reassignment() -> None:
    kafka = b'{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,3,4]}]}'
    assert z.decode_reassignment(kafka) == {TopicPartition("orders", 0): (2, 3, 4)}
    # the reassignment tool's files also carry log_dirs, which the znode ignores
    with_dirs = b'{"version":1,"partitions":[{"topic":"o","partition":1,"replicas":[1],"log_dirs":["any"]}]}'
    assert z.decode_reassignment(with_dirs) == {TopicPartition("o", 1): (1,)}
    moves = {TopicPartition("a", 0): [1, 2], TopicPartition("b", 3): [3]}
    assert z.decode_reassignment(z.encode_reassignment(moves)) == {k: tuple(v) for k, v in moves.items()}
    with pytest.raises(InvalidZNodeError, match="'replicas' is missing"):
        z.decode_reassignment(b'{"version":1,"partitions":[{"topic":"o","partition":1}]}')


def test_preferred_replica_election_and_isr_change() -> None:
    kafka = b'{"version":1,"partitions":[{"topic":"orders","partition":0},{"topic":"orders","partition":1}]}'
    expected = {TopicPartition("orders", 0), TopicPartition("orders", 1)}
    assert z.decode_partitions(kafka, z.PREFERRED_REPLICA_ELECTION) == expected
    assert json.loads(z.encode_partitions(sorted(expected))) == json.loads(kafka)
    with pytest.raises(InvalidZNodeError, match="'partitions' must be an array") as info:
        z.decode_partitions(b'{"version":1,"partitions":{}}', "/isr_change_notification/isr_change_0000000001")
    assert info.value.file == "/isr_change_notification/isr_change_0000000001"
    with pytest.raises(InvalidZNodeError, match="'topic' is missing"):
        z.decode_partitions(b'{"version":1,"partitions":[{"partition":0}]}', z.PREFERRED_REPLICA_ELECTION)


# --- round trips --------------------------------------------------------------------

_ids = st.integers(0, 2**31 - 1)
_names = st.text(st.sampled_from("abcXYZ019._-"), min_size=1, max_size=20)


@given(
    partitions=st.dictionaries(st.integers(0, 500), st.lists(_ids, max_size=5), max_size=8),
    adding=st.lists(_ids, max_size=2),
    removing=st.lists(_ids, max_size=2),
    with_id=st.booleans(),
)
def test_topic_round_trip(partitions, adding, removing, with_id) -> None:
    assignment = {p: ReplicaAssignment(tuple(r), tuple(adding), tuple(removing)) for p, r in partitions.items()}
    topic = TopicAssignment(assignment, TOPIC_ID if with_id else None)
    assert z.decode_topic("t", z.encode_topic(topic)) == topic


@given(
    broker_id=_ids,
    endpoints=st.lists(
        st.builds(
            EndPoint, _names.map(lambda s: "L" + s.replace(".", "_").replace("-", "_")), _names, st.integers(0, 65535)
        ),
        max_size=3,
        unique_by=lambda e: e.listener,
    ),
    timestamp=st.integers(0, 2**62),
    rack=st.none() | _names,
)
def test_broker_round_trip(broker_id, endpoints, timestamp, rack) -> None:
    broker = BrokerRegistration(broker_id, tuple(endpoints), timestamp, rack)
    assert z.decode_broker(broker_id, z.encode_broker(broker)) == broker


@given(
    leader=st.integers(-2, 2**31 - 1),
    epoch=_ids,
    isr=st.lists(_ids, max_size=6),
    controller_epoch=_ids,
    recovery=st.sampled_from([0, 1]),
    zk_version=_ids,
)
def test_partition_state_round_trip(leader, epoch, isr, controller_epoch, recovery, zk_version) -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, epoch, tuple(isr), recovery, zk_version), controller_epoch)
    assert z.decode_partition_state(z.encode_partition_state(state), zk_version) == state
