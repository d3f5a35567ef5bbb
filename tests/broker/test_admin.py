"""confluent-kafka's AdminClient against an embedded broker: topics, partitions, configs,
records, offsets, the cluster and log dirs, with Kafka's errors."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
)
from kafka.admin import ConfigResource as KpResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewPartitions as KpNewPartitions
from kafka.admin import NewTopic as KpNewTopic

from seglog.client import connect
from seglog.protocol import ApiKey
from seglog.protocol.enums import ConfigResourceType as ResourceType
from seglog.protocol.message_data import (
    DescribeClusterRequestData,
    DescribeConfigsRequestData,
    DescribeLogDirsRequestData,
    OffsetForLeaderEpochRequestData,
)

from .conftest import PRODUCER


@pytest.fixture(scope="module")
def admin(seglog_broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": seglog_broker.bootstrap_servers})


def _result(futures: dict, key: object) -> object:
    return futures[key].result(30)


def _error(futures: dict, key: object) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        futures[key].result(30)
    return e.value.args[0]


def test_create_and_delete_topics(admin: AdminClient) -> None:
    created = admin.create_topics([NewTopic("a1", 3, 1, config={"cleanup.policy": "compact"})])
    _result(created, "a1")
    topics = admin.list_topics(timeout=10).topics
    assert len(topics["a1"].partitions) == 3

    again = admin.create_topics([NewTopic("a1", 1, 1)])
    assert _error(again, "a1").code() == KafkaError.TOPIC_ALREADY_EXISTS
    bad_rf = admin.create_topics([NewTopic("a2", 1, 3)])
    assert _error(bad_rf, "a2").code() == KafkaError.INVALID_REPLICATION_FACTOR
    bad_name = admin.create_topics([NewTopic("bad/name", 1, 1)])
    assert _error(bad_name, "bad/name").code() == KafkaError.TOPIC_EXCEPTION
    bad_config = admin.create_topics([NewTopic("a3", 1, 1, config={"cleanup.policy": "shred"})])
    assert _error(bad_config, "a3").code() == KafkaError.INVALID_CONFIG
    dry = admin.create_topics([NewTopic("a4", 1, 1)], validate_only=True)
    _result(dry, "a4")
    assert "a4" not in admin.list_topics(timeout=10).topics

    _result(admin.delete_topics(["a1"]), "a1")
    assert "a1" not in admin.list_topics(timeout=10).topics
    assert _error(admin.delete_topics(["a1"]), "a1").code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_create_partitions(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("p1", 1, 1)]), "p1")
    _result(admin.create_partitions([NewPartitions("p1", 4)]), "p1")
    assert len(admin.list_topics(timeout=10).topics["p1"].partitions) == 4
    fewer = admin.create_partitions([NewPartitions("p1", 2)])
    assert _error(fewer, "p1").code() == KafkaError.INVALID_PARTITIONS


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_describe_and_alter_configs(admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("c1", 1, 1, config={"retention.ms": "12345"})]), "c1")
    resource = ConfigResource("topic", "c1")
    configs = _result(admin.describe_configs([resource]), resource)
    assert configs["retention.ms"].value == "12345"
    assert configs["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].value == str(1 << 30) and configs["segment.bytes"].is_default

    _result(admin.alter_configs([ConfigResource("topic", "c1", set_config={"segment.bytes": "1048576"})]), resource)
    configs = _result(admin.describe_configs([resource]), resource)
    assert configs["segment.bytes"].value == "1048576"
    assert configs["retention.ms"].value != "12345"  # AlterConfigs replaces the whole set

    incremental = ConfigResource(
        "topic",
        "c1",
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("segment.bytes", None, incremental_operation=AlterConfigOpType.DELETE),
        ],
    )
    _result(admin.incremental_alter_configs([incremental]), incremental)
    configs = _result(admin.describe_configs([resource]), resource)
    assert configs["cleanup.policy"].value == "delete,compact"
    assert configs["segment.bytes"].value == str(1 << 30)

    wrong = ConfigResource("topic", "c1", set_config={"retention.ms": "soon"})
    assert _error(admin.alter_configs([wrong]), wrong).code() == KafkaError.INVALID_CONFIG
    missing = ConfigResource("topic", "nope")
    assert _error(admin.describe_configs([missing]), missing).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    broker = ConfigResource("broker", "0")
    assert _result(admin.describe_configs([broker]), broker)["num.partitions"].value == "1"


_OVERRIDES = {"retention.ms": "54321", "max.message.bytes": "2000000"}
_SOME_KEYS = ["retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes"]


def test_describe_configs_of_some_keys(seglog_broker, admin: AdminClient) -> None:
    """A resource naming keys (kafka-python sends its configs' names; librdkafka sends none) is
    answered those keys alone, each entry as in the answer of every key."""
    _result(admin.create_topics([NewTopic("k1", 1, 1, config=_OVERRIDES)]), "k1")
    kp = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        for synonyms in (False, True):
            every = KpResource(ConfigResourceType.TOPIC, "k1")
            some = KpResource(ConfigResourceType.TOPIC, "k1", configs=dict.fromkeys(_SOME_KEYS))
            whole, asked = (
                next(iter(kp.describe_configs([r], include_synonyms=synonyms, config_filter="all").values()))["k1"]
                for r in (every, some)
            )
            assert asked == {k: whole[k] for k in _SOME_KEYS}
            assert "54321" in str(whole["retention.ms"])
    finally:
        kp.close()


@pytest.mark.parametrize("synonyms", [False, True])
def test_describe_configs_of_some_keys_on_the_wire(seglog_broker, admin: AdminClient, synonyms: bool) -> None:
    """The same, compared whole on the wire (seglog's client, as the console asks), with and
    without synonyms: an asked key's entry is the very entry of the answer of every key."""
    name = f"k2-{synonyms:d}"
    _result(admin.create_topics([NewTopic(name, 1, 1, config=_OVERRIDES)]), name)
    Resource = DescribeConfigsRequestData.DescribeConfigsResource

    def ask(keys: list[str] | None) -> list:
        resource = Resource(resource_type=ResourceType.TOPIC, resource_name=name, configuration_keys=keys)
        request = DescribeConfigsRequestData(
            resources=[resource], include_synonyms=synonyms, include_documentation=True
        )
        with connect(seglog_broker.bootstrap_servers) as connection:
            return connection.request(ApiKey.DESCRIBE_CONFIGS, request).results[0].configs

    whole = {c.name: c for c in ask(None)}
    assert {c.name: c for c in ask(_SOME_KEYS)} == {k: whole[k] for k in _SOME_KEYS}
    assert {c.name: c for c in ask([])} == whole  # an empty list asks every key, as Kafka's ConfigHelper
    assert bool(whole["retention.ms"].synonyms) is synonyms


def test_delete_records_and_list_offsets(seglog_broker, admin: AdminClient) -> None:
    _result(admin.create_topics([NewTopic("r1", 1, 1)]), "r1")
    producer = Producer({"bootstrap.servers": seglog_broker.bootstrap_servers, **PRODUCER})
    for i in range(50):
        producer.produce("r1", b"v%d" % i, partition=0, timestamp=1_700_000_000_000 + i)
    assert producer.flush(30) == 0
    tp = TopicPartition("r1", 0)
    offsets = admin.list_offsets({tp: OffsetSpec.latest()})
    assert offsets[tp].result(30).offset == 50
    by_time = admin.list_offsets({tp: OffsetSpec.for_timestamp(1_700_000_000_020)})
    assert by_time[tp].result(30).offset == 20
    max_ts = admin.list_offsets({tp: OffsetSpec.max_timestamp()})
    assert max_ts[tp].result(30).offset == 49

    deleted = admin.delete_records([TopicPartition("r1", 0, 30)])
    assert deleted[TopicPartition("r1", 0, 30)].result(30).low_watermark == 30
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})
    assert earliest[tp].result(30).offset == 30
    too_far = admin.delete_records([TopicPartition("r1", 0, 99)])
    with pytest.raises(KafkaException) as e:
        too_far[TopicPartition("r1", 0, 99)].result(30)
    assert e.value.args[0].code() == KafkaError.OFFSET_OUT_OF_RANGE


def test_describe_cluster_and_log_dirs(seglog_broker, admin: AdminClient) -> None:
    cluster = admin.describe_cluster().result(30)
    assert [n.id for n in cluster.nodes] == [0] and cluster.controller.id == 0
    assert cluster.cluster_id
    _result(admin.create_topics([NewTopic("d1", 2, 1)]), "d1")
    # confluent-kafka has no DescribeLogDirs; kafka-python's admin asks it
    kp = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        response = kp.describe_log_dirs()
    finally:
        kp.close()
    text = str(response)
    assert "d1" in text and str(seglog_broker.server.config.log_dirs[0]) in text


def test_describe_log_dirs_of_the_partitions_asked(seglog_broker, admin: AdminClient) -> None:
    """Only the partitions asked that the broker holds, by topic; a topic none of whose asked
    partitions it holds is left out."""
    _result(admin.create_topics([NewTopic("d2", 3, 1)]), "d2")
    Asked = DescribeLogDirsRequestData.DescribableLogDirTopic
    asked = [Asked(topic="d2", partitions=[2, 0, 7]), Asked(topic="no-such-topic", partitions=[0])]
    with connect(seglog_broker.bootstrap_servers) as connection:
        answer = connection.request(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequestData(topics=asked))
        every = connection.request(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequestData(topics=None))
    [result] = answer.results
    assert result.log_dir == str(seglog_broker.server.config.log_dirs[0])
    assert [(t.name, sorted(p.partition_index for p in t.partitions)) for t in result.topics] == [("d2", [0, 2])]
    assert all(p.partition_size == 0 and p.offset_lag == 0 for p in result.topics[0].partitions)
    names = [t.name for t in every.results[0].topics]
    assert names == sorted(names) and "d2" in names


def test_describe_cluster_for_another_endpoint_type(seglog_broker) -> None:
    """As Kafka's AuthHelper.computeDescribeClusterResponse: a broker asked for a controller's view
    (endpoint type 2) answers MISMATCHED_ENDPOINT_TYPE, for a type it does not know
    UNSUPPORTED_ENDPOINT_TYPE."""
    from seglog.client import connect
    from seglog.errors import ErrorCode
    from seglog.protocol import ApiKey

    with connect(seglog_broker.bootstrap_servers) as client:
        codes = [
            client.request(ApiKey.DESCRIBE_CLUSTER, DescribeClusterRequestData(endpoint_type=t), version=1).error_code
            for t in (1, 2, 7)
        ]
    assert codes == [ErrorCode.NONE, ErrorCode.MISMATCHED_ENDPOINT_TYPE, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE]


def test_kafka_python_admin(seglog_broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=seglog_broker.bootstrap_servers)
    try:
        admin.create_topics([KpNewTopic("kp-admin", 2, 1, topic_configs={"retention.ms": "1000000"})])
        assert "kp-admin" in admin.list_topics()
        described = admin.describe_topics(["kp-admin"])
        assert len(described[0]["partitions"]) == 2
        admin.create_partitions({"kp-admin": KpNewPartitions(4)})
        assert len(admin.describe_topics(["kp-admin"])[0]["partitions"]) == 4
        resource = KpResource(ConfigResourceType.TOPIC, "kp-admin")
        configs = admin.describe_configs([resource])
        text = str(configs)
        assert "retention.ms" in text and "1000000" in text
        admin.alter_configs([KpResource(ConfigResourceType.TOPIC, "kp-admin", configs={"retention.ms": "2000"})])
        assert "2000" in str(admin.describe_configs([resource]))
        admin.delete_topics(["kp-admin"])
        assert "kp-admin" not in admin.list_topics()
    finally:
        admin.close()


def test_offset_for_leader_epoch(seglog_broker, admin: AdminClient) -> None:
    """No client here asks it on one broker; the command line's client does, raw."""
    from seglog.client import connect
    from seglog.protocol import ApiKey

    _result(admin.create_topics([NewTopic("e1", 1, 1)]), "e1")
    producer = Producer({"bootstrap.servers": seglog_broker.bootstrap_servers, **PRODUCER})
    for _i in range(5):
        producer.produce("e1", b"x", partition=0)
    assert producer.flush(30) == 0
    with connect(seglog_broker.bootstrap_servers) as client:
        body = OffsetForLeaderEpochRequestData(
            replica_id=-1,
            topics=[
                OffsetForLeaderEpochRequestData.OffsetForLeaderTopic(
                    topic="e1",
                    partitions=[
                        OffsetForLeaderEpochRequestData.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=-1, leader_epoch=0
                        ),
                        OffsetForLeaderEpochRequestData.OffsetForLeaderPartition(
                            partition=7, current_leader_epoch=-1, leader_epoch=0
                        ),
                    ],
                )
            ],
        )
        parts = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body).topics[0].partitions
        assert [(p.error_code, p.leader_epoch, p.end_offset) for p in parts] == [(0, 0, 5), (3, -1, -1)]
        body.topics[0].partitions = [
            OffsetForLeaderEpochRequestData.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=9, leader_epoch=0
            )
        ]
        parts = client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body).topics[0].partitions
        assert parts[0].error_code == 75  # UNKNOWN_LEADER_EPOCH: the client is ahead of this broker


def test_deletion_disabled(seglog_broker_factory) -> None:
    broker = seglog_broker_factory(config={"delete.topic.enable": "false"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    _result(admin.create_topics([NewTopic("kept", 1, 1)]), "kept")
    assert _error(admin.delete_topics(["kept"]), "kept").code() == KafkaError.TOPIC_DELETION_DISABLED
    assert "kept" in admin.list_topics(timeout=10).topics
