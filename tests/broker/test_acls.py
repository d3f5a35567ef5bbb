"""ACLs end to end: a broker with authorizer.class.name set and a mutual-TLS listener, three
principals from client certificates (admin, a super user; alice, given ACLs; bob, given none),
real clients (confluent-kafka's admin, producer and consumer, kafka-python) allowed and refused
as Kafka's AclAuthorizer and KafkaApis decide, and the ACLs kept across a restart."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import trustme
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KpResourceType
from kafka.errors import KafkaError as KafkaPythonError

import seglog.broker
from seglog.client import BlockingConnection
from seglog.errors import ErrorCode, KafkaStorageError
from seglog.protocol import ApiKey
from seglog.protocol.message_data import (
    AlterUserScramCredentialsRequestData,
    CreateAclsRequestData,
    DescribeAclsRequestData,
    DescribeClusterRequestData,
    DescribeLogDirsRequestData,
    DescribeUserScramCredentialsRequestData,
    FetchRequestData,
    InitProducerIdRequestData,
    MetadataRequestData,
    WriteTxnMarkersRequestData,
)

from .conftest import CONSUMER, PRODUCER

# confluent-kafka's filters take None for "any" name, principal or host (its type stubs say str)
MATCH_ANY: Any = None
RULES = "RULE:^CN=([^,]*),OU=.*$/$1/L,DEFAULT"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
USERS = ("admin", "alice", "bob", "carol")


class Pki(NamedTuple):
    ca_file: str
    keystore: str
    certs: dict[str, tuple[str, str]]  # user -> (certificate, key) files


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("acl-pki")
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(d / "ca.pem"))
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(str(d / "broker.pem"))
    certs = {}
    for user in USERS:
        issued = ca.issue_cert(f"{user}.example", common_name=user.capitalize())
        issued.cert_chain_pems[0].write_to_path(str(d / f"{user}.pem"))
        issued.private_key_pem.write_to_path(str(d / f"{user}.key"))
        certs[user] = (str(d / f"{user}.pem"), str(d / f"{user}.key"))
    return Pki(str(d / "ca.pem"), str(d / "broker.pem"), certs)


def broker_config(pki: Pki) -> dict[str, Any]:
    return {
        "num.partitions": 1,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        # MTLS first (the clients' bootstrap); PLAINTEXT's requests come from User:ANONYMOUS
        "listeners": "MTLS://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "MTLS:SSL,PLAINTEXT:PLAINTEXT",
        "inter.broker.listener.name": "MTLS",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_file,
        "ssl.client.auth": "required",
        "ssl.principal.mapping.rules": RULES,
        "authorizer.class.name": ACL_AUTHORIZER,
        "super.users": "User:admin",
    }


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("acl-broker")


@pytest.fixture(scope="module")
def broker(pki: Pki, log_dir: Path) -> Iterator[Any]:
    with seglog.broker.start(str(log_dir), config=broker_config(pki)) as running:
        try:
            yield running
        finally:
            _admins.clear()  # (before the broker stops: a client left connected logs its refused reconnects)


def client(broker: Any, pki: Pki, user: str, **extra: Any) -> dict[str, Any]:
    cert, key = pki.certs[user]
    return {
        "bootstrap.servers": broker.bootstrap_servers,
        "security.protocol": "SSL",
        "ssl.ca.location": pki.ca_file,
        "ssl.certificate.location": cert,
        "ssl.key.location": key,
        **extra,
    }


_admins: dict[tuple[int, str], AdminClient] = {}


def admin(broker: Any, pki: Pki, user: str = "admin") -> AdminClient:
    """One admin client a user and broker, kept: a client dropped with requests in flight fails them."""
    key = (broker.port, user)
    if key not in _admins:
        _admins[key] = AdminClient(client(broker, pki, user))
    return _admins[key]


def add_acls(broker: Any, pki: Pki, *bindings: AclBinding) -> None:
    for future in admin(broker, pki).create_acls(list(bindings), request_timeout=30).values():
        future.result()


def allow(
    user: str, rtype: ResourceType, name: str, op: AclOperation, pattern=ResourcePatternType.LITERAL
) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)


def create_topic(broker: Any, pki: Pki, name: str) -> None:
    futures = admin(broker, pki).create_topics([NewTopic(name, 1, 1)], request_timeout=30)
    futures[name].result()


def produce(conf: dict[str, Any], topic: str, count: int) -> list[Any]:
    """Each delivery's error (None: written)."""
    errors: list[Any] = []
    producer = Producer({**conf, **PRODUCER, "message.timeout.ms": 10_000})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(30)
    return errors


def test_acl_apis_add_list_and_remove(broker: Any, pki: Pki) -> None:
    binding = allow("carol", ResourceType.TOPIC, "carol-", AclOperation.READ, ResourcePatternType.PREFIXED)
    add_acls(broker, pki, binding)
    found = (
        admin(broker, pki)
        .describe_acls(
            AclBindingFilter(
                ResourceType.ANY,
                MATCH_ANY,
                ResourcePatternType.ANY,
                "User:carol",
                MATCH_ANY,
                AclOperation.ANY,
                AclPermissionType.ANY,
            ),
            request_timeout=30,
        )
        .result()
    )
    assert found == [binding]
    deleted = admin(broker, pki).delete_acls(
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                "carol-",
                ResourcePatternType.PREFIXED,
                MATCH_ANY,
                MATCH_ANY,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ],
        request_timeout=30,
    )
    assert next(iter(deleted.values())).result() == [binding]
    everything = AclBindingFilter(
        ResourceType.ANY,
        MATCH_ANY,
        ResourcePatternType.ANY,
        MATCH_ANY,
        MATCH_ANY,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    assert binding not in admin(broker, pki).describe_acls(everything, request_timeout=30).result()


def test_only_the_cluster_s_alterers_change_acls(broker: Any, pki: Pki) -> None:
    binding = allow("bob", ResourceType.TOPIC, "*", AclOperation.ALL)
    for future in admin(broker, pki, "bob").create_acls([binding], request_timeout=30).values():
        with pytest.raises(KafkaException) as refused:
            future.result()
        assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_a_principal_without_acls_learns_no_topic_names_and_gets_no_data(broker: Any, pki: Pki) -> None:
    create_topic(broker, pki, "secret-topic")
    assert produce(client(broker, pki, "admin"), "secret-topic", 3) == [None] * 3
    assert "secret-topic" in admin(broker, pki).list_topics(timeout=30).topics
    listed = admin(broker, pki, "bob").list_topics(timeout=30).topics
    assert listed == {}
    named = admin(broker, pki, "bob").list_topics("secret-topic", timeout=30).topics["secret-topic"]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # as for a topic that does not exist: nothing tells the two apart
    unknown = admin(broker, pki, "bob").list_topics("no-such-topic", timeout=30).topics["no-such-topic"]
    assert unknown.error is not None and unknown.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    errors = produce(client(broker, pki, "bob"), "secret-topic", 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


# --- every API and resource type: alice (ALL on the alice- prefix of topics, groups and
# transactional ids) is let through, bob (no ACL) refused with Kafka's error, carol (Describe on
# alice-topic alone) only where Describe is enough ---------------------------------------------------

NONE = KafkaError.NO_ERROR
TOPIC_DENIED = KafkaError.TOPIC_AUTHORIZATION_FAILED
GROUP_DENIED = KafkaError.GROUP_AUTHORIZATION_FAILED
TXN_DENIED = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
CLUSTER_DENIED = KafkaError.CLUSTER_AUTHORIZATION_FAILED
TOPIC = "alice-topic"
ANY_PERMISSION = AclPermissionType.ANY
GROUP = "alice-group"


@pytest.fixture(scope="module")
def alice_acls(broker: Any, pki: Pki) -> None:
    add_acls(
        broker,
        pki,
        *(
            allow("alice", rtype, "alice-", AclOperation.ALL, ResourcePatternType.PREFIXED)
            for rtype in (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID)
        ),
        allow("carol", ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE),
    )
    create_topic(broker, pki, TOPIC)
    assert produce(client(broker, pki, "admin"), TOPIC, 5) == [None] * 5


def code_of(call: Any) -> int:
    """The Kafka error a client call ends with (NO_ERROR: none)."""
    try:
        call()
    except KafkaException as e:
        return int(e.args[0].code())
    return NONE


def result_code(future: Any) -> int:
    return code_of(future.result)


def group_consumer_error(conf: dict[str, Any]) -> int:
    """A consumer's first error in GROUP: joining, fetching, or committing what it got."""
    consumer = Consumer({**conf, **CONSUMER, "group.id": GROUP, "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if (error := msg.error()) is not None:
                return int(error.code())
            return code_of(lambda: consumer.commit(asynchronous=False))
        raise AssertionError("the consumer got neither a record nor an error")
    finally:
        consumer.close()


def kafka_python(broker: Any, pki: Pki, user: str) -> dict[str, Any]:
    """``client``'s settings, in its order, by kafka-python's names."""
    names = ("bootstrap_servers", "security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile")
    return dict(zip(names, client(broker, pki, user).values(), strict=True))


NO_DATA = "no data"  # a consumer refused the topic's metadata: it never learns a leader to fetch from


def fetch_error(broker: Any, pki: Pki, user: str) -> int | str:
    """kafka-python's fetch from offset 0 without a group (librdkafka's consumer always has one)."""
    consumer = KafkaConsumer(**kafka_python(broker, pki, user), group_id=None, enable_auto_commit=False)
    tp = KpTopicPartition(TOPIC, 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if consumer.poll(timeout_ms=500):
                return NONE
        return NO_DATA
    except KafkaPythonError as e:
        return int(e.errno)
    finally:
        consumer.close()


def init_transactions(conf: dict[str, Any]) -> int:
    producer = Producer({**conf, "transactional.id": "alice-txn"})
    return code_of(lambda: producer.init_transactions(30))


def one_config(adm: AdminClient, resource: ConfigResource) -> int:
    return result_code(adm.describe_configs([resource], request_timeout=30)[resource])


def alter_config(adm: AdminClient, name: str) -> int:
    entry = ConfigEntry("retention.ms", "86400000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[entry])
    return result_code(adm.incremental_alter_configs([resource], request_timeout=30)[resource])


def made_topic(broker: Any, pki: Pki, user: str) -> str:
    """A topic alice may act on (made by admin), named for the user who is to act on it."""
    name = f"alice-{user}-{time.monotonic_ns()}"
    create_topic(broker, pki, name)
    return name


def _actions(broker: Any, pki: Pki, user: str) -> dict[str, int | str]:
    """Each API, as ``user``: the error its client ends with."""
    conf = client(broker, pki, user)
    adm = admin(broker, pki, user)
    tp = TopicPartition(TOPIC, 0)
    new_topic = f"alice-new-{user}"
    doomed = made_topic(broker, pki, user)
    broker_id = str(broker.server.config["broker.id"])
    grown = made_topic(broker, pki, user)
    return {
        "Metadata": code_of(lambda: _raise(adm.list_topics(TOPIC, timeout=30).topics[TOPIC].error)),
        "CreateTopics": result_code(adm.create_topics([NewTopic(new_topic, 1, 1)], request_timeout=30)[new_topic]),
        "Produce": next(int(e.code()) if e else NONE for e in produce(conf, TOPIC, 1)),
        "Fetch": fetch_error(broker, pki, user),
        "ListOffsets": result_code(adm.list_offsets({tp: OffsetSpec.latest()}, request_timeout=30)[tp]),
        "JoinGroup+OffsetCommit": group_consumer_error(conf),
        "OffsetFetch": result_code(
            adm.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)], request_timeout=30)[GROUP]
        ),
        "DescribeGroups": result_code(adm.describe_consumer_groups([GROUP], request_timeout=30)[GROUP]),
        "InitProducerId (transactional)": init_transactions(conf),
        "DescribeConfigs": one_config(adm, ConfigResource(ConfigResource.Type.TOPIC, TOPIC)),
        "DescribeConfigs (broker)": one_config(adm, ConfigResource(ConfigResource.Type.BROKER, broker_id)),
        "IncrementalAlterConfigs": alter_config(adm, TOPIC),
        "CreatePartitions": result_code(adm.create_partitions([NewPartitions(grown, 2)], request_timeout=30)[grown]),
        "DeleteRecords": result_code(
            adm.delete_records([TopicPartition(TOPIC, 0, 1)], request_timeout=30)[TopicPartition(TOPIC, 0, 1)]
        ),
        "DeleteTopics": result_code(adm.delete_topics([doomed], request_timeout=30)[doomed]),
        "DescribeAcls": describe_acls(broker, pki, user),
    }


def describe_acls(broker: Any, pki: Pki, user: str) -> int:
    """kafka-python's DescribeAcls (librdkafka's leaves out the response's error)."""
    kp = KafkaAdminClient(**kafka_python(broker, pki, user))
    everything = ACLFilter(
        principal=None,
        host=None,
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    try:
        kp.describe_acls(everything)
    except KafkaPythonError as e:
        return int(e.errno)
    finally:
        kp.close()
    return NONE


def _raise(error: Any) -> None:
    if error is not None:
        raise KafkaException(error)


# bob's ListOffsets and DeleteRecords end in librdkafka (_NOENT): refused the topic's metadata, it
# has no leader to ask
LOCAL = KafkaError._NOENT
EXPECTED = {  # API: (alice's, bob's, carol's)
    "Metadata": (NONE, TOPIC_DENIED, NONE),
    "CreateTopics": (NONE, TOPIC_DENIED, TOPIC_DENIED),
    "Produce": (NONE, TOPIC_DENIED, TOPIC_DENIED),
    "Fetch": (NONE, NO_DATA, TOPIC_DENIED),
    "ListOffsets": (NONE, LOCAL, NONE),
    "JoinGroup+OffsetCommit": (NONE, GROUP_DENIED, GROUP_DENIED),
    "OffsetFetch": (NONE, GROUP_DENIED, GROUP_DENIED),
    "DescribeGroups": (NONE, GROUP_DENIED, GROUP_DENIED),
    "InitProducerId (transactional)": (NONE, TXN_DENIED, TXN_DENIED),
    "DescribeConfigs": (NONE, TOPIC_DENIED, TOPIC_DENIED),
    "DescribeConfigs (broker)": (CLUSTER_DENIED,) * 3,
    "IncrementalAlterConfigs": (NONE, TOPIC_DENIED, TOPIC_DENIED),
    "CreatePartitions": (NONE, TOPIC_DENIED, TOPIC_DENIED),
    "DeleteRecords": (NONE, LOCAL, TOPIC_DENIED),
    "DeleteTopics": (NONE, TOPIC_DENIED, TOPIC_DENIED),
    "DescribeAcls": (CLUSTER_DENIED,) * 3,
}


def test_every_api_as_kafka_authorizes_it(broker: Any, pki: Pki, alice_acls: None) -> None:
    users = ("alice", "bob", "carol")
    found = {user: _actions(broker, pki, user) for user in users}
    table = {api: tuple(found[user][api] for user in users) for api in EXPECTED}
    assert table == EXPECTED


def test_bob_lists_neither_alices_topics_nor_her_groups(broker: Any, pki: Pki, alice_acls: None) -> None:
    assert group_consumer_error(client(broker, pki, "alice")) == NONE  # the group exists
    assert TOPIC in admin(broker, pki, "alice").list_topics(timeout=30).topics
    assert admin(broker, pki, "bob").list_topics(timeout=30).topics == {}
    listed = admin(broker, pki, "bob").list_consumer_groups(request_timeout=30).result()
    assert GROUP not in {g.group_id for g in listed.valid}
    listed = admin(broker, pki, "alice").list_consumer_groups(request_timeout=30).result()
    assert GROUP in {g.group_id for g in listed.valid}


# --- KIP-430's authorized operations: the operations the principal may do, among those the
# resource's type supports (Kafka's AuthHelper.authorizedOperations) ---------------------------------

TOPIC_OPS = {
    AclOperation.READ,
    AclOperation.WRITE,
    AclOperation.CREATE,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
}
CLUSTER_OPS = {
    AclOperation.CREATE,
    AclOperation.CLUSTER_ACTION,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE,
    AclOperation.ALTER,
    AclOperation.DESCRIBE,
}


def described_topic(broker: Any, pki: Pki, user: str, include: bool = True) -> Any:
    topics = TopicCollection([TOPIC])
    futures = admin(broker, pki, user).describe_topics(
        topics, include_authorized_operations=include, request_timeout=30
    )
    return futures[TOPIC].result()


def test_describe_topics_reports_the_operations_each_principal_may_do(broker: Any, pki: Pki, alice_acls: None) -> None:
    assert set(described_topic(broker, pki, "alice").authorized_operations) == TOPIC_OPS  # ALL on alice-
    assert set(described_topic(broker, pki, "admin").authorized_operations) == TOPIC_OPS  # a super user
    assert described_topic(broker, pki, "carol").authorized_operations == [AclOperation.DESCRIBE]
    assert described_topic(broker, pki, "alice", include=False).authorized_operations is None
    with pytest.raises(KafkaException) as refused:
        described_topic(broker, pki, "bob")
    assert refused.value.args[0].code() == TOPIC_DENIED


def test_describe_cluster_reports_the_cluster_operations_to_its_describers_alone(
    broker: Any, pki: Pki, alice_acls: None
) -> None:
    described = admin(broker, pki).describe_cluster(include_authorized_operations=True, request_timeout=30).result()
    assert set(described.authorized_operations) == CLUSTER_OPS
    unasked = admin(broker, pki).describe_cluster(request_timeout=30).result()
    assert unasked.authorized_operations is None
    # one that may not describe the cluster gets an empty set, not "not asked for" (which
    # confluent-kafka shows alike, as None)
    request = DescribeClusterRequestData(include_cluster_authorized_operations=True)
    with raw(broker) as conn:
        assert conn.request(ApiKey.DESCRIBE_CLUSTER, request).cluster_authorized_operations == 0


def test_describe_consumer_groups_reports_the_group_operations(broker: Any, pki: Pki, alice_acls: None) -> None:
    assert group_consumer_error(client(broker, pki, "alice")) == NONE  # the group exists
    futures = admin(broker, pki, "alice").describe_consumer_groups(
        [GROUP], include_authorized_operations=True, request_timeout=30
    )
    described = futures[GROUP].result()
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE}
    unasked = admin(broker, pki, "alice").describe_consumer_groups([GROUP], request_timeout=30)[GROUP].result()
    assert unasked.authorized_operations is None


def test_metadata_v8_to_v10_carries_the_cluster_operations_and_v11_does_not(
    broker: Any, pki: Pki, alice_acls: None
) -> None:
    request = MetadataRequestData(
        topics=[MetadataRequestData.MetadataRequestTopic(name=TOPIC)],
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    bit = 1 << AclOperation.DESCRIBE.value
    with raw(broker) as conn:  # User:ANONYMOUS: no ACLs yet
        before = conn.request(ApiKey.METADATA, request, 10)
    assert before.cluster_authorized_operations == 0  # it may not describe the cluster
    assert before.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert before.topics[0].topic_authorized_operations == -(2**31)  # a refused topic's: "not asked for"
    add_acls(
        broker,
        pki,
        allow("ANONYMOUS", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
        allow("ANONYMOUS", ResourceType.TOPIC, TOPIC, AclOperation.READ),
    )
    try:
        with raw(broker) as conn:
            v10, v11 = (conn.request(ApiKey.METADATA, request, version) for version in (10, 11))
    finally:
        _remove_anonymous_acls(broker, pki, ResourceType.ANY)
    assert v10.cluster_authorized_operations == bit
    assert v10.topics[0].topic_authorized_operations == bit | 1 << AclOperation.READ.value  # Read implies Describe
    assert v11.cluster_authorized_operations == -(2**31)  # DescribeCluster's from v11
    assert v11.topics[0].topic_authorized_operations == bit | 1 << AclOperation.READ.value


# --- the brokers' own requests, from User:ANONYMOUS on the plaintext listener ------------------------


def raw(broker: Any) -> BlockingConnection:
    return BlockingConnection("127.0.0.1", broker.server.port_of("PLAINTEXT"), "acl-test")


def _cluster_requests(conn: BlockingConnection) -> dict[str, int]:
    marker = WriteTxnMarkersRequestData.WritableTxnMarker(
        producer_id=1000,
        producer_epoch=0,
        transaction_result=False,
        topics=[WriteTxnMarkersRequestData.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])],
        coordinator_epoch=0,
    )
    markers = conn.request(ApiKey.WRITE_TXN_MARKERS, WriteTxnMarkersRequestData(markers=[marker]))
    idempotent = InitProducerIdRequestData(transactional_id=None, transaction_timeout_ms=60_000)
    fetch = FetchRequestData(
        replica_id=7,
        max_wait_ms=0,
        topics=[
            FetchRequestData.FetchTopic(
                topic=TOPIC, partitions=[FetchRequestData.FetchPartition(partition=0, fetch_offset=0)]
            )
        ],
    )
    return {
        "WriteTxnMarkers": markers.markers[0].topics[0].partitions[0].error_code,
        "InitProducerId (idempotent)": conn.request(ApiKey.INIT_PRODUCER_ID, idempotent).error_code,
        "DescribeLogDirs": conn.request(ApiKey.DESCRIBE_LOG_DIRS, DescribeLogDirsRequestData(topics=None)).error_code,
        "Fetch (follower)": conn.request(ApiKey.FETCH, fetch, 12).responses[0].partitions[0].error_code,
    }


def test_the_brokers_requests_need_cluster_action(broker: Any, pki: Pki, alice_acls: None) -> None:
    with raw(broker) as conn:
        refused = _cluster_requests(conn)
    assert refused == {
        "WriteTxnMarkers": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "InitProducerId (idempotent)": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "DescribeLogDirs": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        "Fetch (follower)": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    }
    add_acls(broker, pki, allow("ANONYMOUS", ResourceType.BROKER, "kafka-cluster", AclOperation.ALL))
    try:
        with raw(broker) as conn:
            allowed = _cluster_requests(conn)
        assert not any(
            code in (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            for code in allowed.values()
        ), allowed
    finally:
        _remove_anonymous_acls(broker, pki)


def _scram_administration(conn: BlockingConnection) -> tuple[int, int, int]:
    """(DescribeUserScramCredentials' error, its answer for eve, AlterUserScramCredentials' for eve)."""
    described = conn.request(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        DescribeUserScramCredentialsRequestData(users=[DescribeUserScramCredentialsRequestData.UserName(name="eve")]),
    )
    upsertion = AlterUserScramCredentialsRequestData.ScramCredentialUpsertion(
        name="eve", mechanism=1, iterations=4096, salt=b"s" * 16, salted_password=b"p" * 32
    )
    altered = conn.request(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, AlterUserScramCredentialsRequestData(upsertions=[upsertion])
    )
    return described.error_code, described.results[0].error_code, altered.results[0].error_code


def test_scram_credentials_are_administered_with_the_cluster_s_describe_and_alter(broker: Any, pki: Pki) -> None:
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with raw(broker) as conn:
        assert _scram_administration(conn) == (denied, denied, denied)
    add_acls(broker, pki, allow("ANONYMOUS", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE))
    try:
        with raw(broker) as conn:  # eve was not stored by the refused alteration
            assert _scram_administration(conn) == (ErrorCode.NONE, ErrorCode.RESOURCE_NOT_FOUND, denied)
    finally:
        _remove_anonymous_acls(broker, pki)


def _remove_anonymous_acls(broker: Any, pki: Pki, resource_type: ResourceType = ResourceType.BROKER) -> None:
    filters = AclBindingFilter(
        resource_type,
        MATCH_ANY,
        ResourcePatternType.ANY,
        "User:ANONYMOUS",
        MATCH_ANY,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    for future in admin(broker, pki).delete_acls([filters], request_timeout=30).values():
        future.result()


# --- a broker without ZooKeeper keeps them in its log dir ---------------------------------------------


def test_acls_outlive_a_restart_in_the_log_dir(pki: Pki, tmp_path: Path) -> None:
    binding = allow("alice", ResourceType.GROUP, "g-", AclOperation.READ, ResourcePatternType.PREFIXED)
    everything = AclBindingFilter(
        ResourceType.ANY, MATCH_ANY, ResourcePatternType.ANY, MATCH_ANY, MATCH_ANY, AclOperation.ANY, ANY_PERMISSION
    )
    with seglog.broker.start(str(tmp_path), config=broker_config(pki)) as first:
        add_acls(first, pki, binding)
    stored = json.loads((tmp_path / "kafka-acl.json").read_text())
    assert stored["resources"] == [
        {
            "resourceType": "Group",
            "patternType": "PREFIXED",
            "name": "g-",
            "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}],
        }
    ]
    with seglog.broker.start(str(tmp_path), config=broker_config(pki)) as second:
        assert admin(second, pki).describe_acls(everything, request_timeout=30).result() == [binding]


def test_a_damaged_acl_file_stops_the_broker_with_its_name(pki: Pki, tmp_path: Path) -> None:
    (tmp_path / "kafka-acl.json").write_text('{"version":1,"resources":[{"resourceType":"Topic"')
    with pytest.raises(KafkaStorageError, match=r"not an ACL file.*kafka-acl\.json"):
        seglog.broker.start(str(tmp_path), config=broker_config(pki))


# --- the ACL APIs' bad input: refused one binding or filter at a time -------------------------------


def test_bindings_and_filters_the_broker_cannot_take_fail_alone(tmp_path: Path) -> None:
    config = {"authorizer.class.name": ACL_AUTHORIZER, "super.users": "User:ANONYMOUS"}
    creation = CreateAclsRequestData.AclCreation
    good = creation(2, "t", 3, "User:alice", "*", 3, 3)  # Topic t LITERAL, Read, ALLOW
    bad = [
        creation(2, "t", 2, "User:alice", "*", 3, 3),  # a MATCH pattern: a filter's
        creation(99, "t", 3, "User:alice", "*", 3, 3),  # no such resource type
        creation(2, "", 3, "User:alice", "*", 3, 3),  # no name
        creation(4, "other", 3, "User:alice", "*", 3, 3),  # a cluster not named kafka-cluster
        creation(2, "t", 3, "alice", "*", 3, 3),  # no principal type
        creation(2, "t", 3, "User:alice", "*", 1, 3),  # operation ANY
    ]
    with seglog.broker.start(str(tmp_path), config=config) as running, raw(running) as conn:
        answer = conn.request(ApiKey.CREATE_ACLS, CreateAclsRequestData(creations=[good, *bad]))
        codes = [r.error_code for r in answer.results]
        assert codes == [ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * len(bad)
        unknown = DescribeAclsRequestData(resource_type_filter=0, pattern_type_filter=1, operation=1, permission_type=1)
        assert conn.request(ApiKey.DESCRIBE_ACLS, unknown).error_code == ErrorCode.INVALID_REQUEST
        every = DescribeAclsRequestData(resource_type_filter=1, pattern_type_filter=1, operation=1, permission_type=1)
        described = conn.request(ApiKey.DESCRIBE_ACLS, every)
        assert [(r.resource_name, len(r.acls)) for r in described.resources] == [("t", 1)]
        # version 0 knows LITERAL patterns alone: its filter is LITERAL
        assert len(conn.request(ApiKey.DESCRIBE_ACLS, every, 0).resources) == 1
