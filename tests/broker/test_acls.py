"""ACLs end to end: a broker with authorizer.class.name set and a mutual-TLS listener, three
principals from client certificates (admin, a super user; alice, given ACLs; bob, given none),
real clients (confluent-kafka's admin, producer and consumer, kafka-python) allowed and refused
as Kafka's AclAuthorizer and KafkaApis decide, and the ACLs kept across a restart."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import trustme
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

import seglog.broker

from .conftest import PRODUCER

RULES = "RULE:^CN=([^,]*),OU=.*$/$1/L,DEFAULT"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
USERS = ("admin", "alice", "bob")


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
        "listeners": "MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "MTLS:SSL",
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
        yield running
    _admins.clear()


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
                None,
                ResourcePatternType.ANY,
                "User:carol",
                None,
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
                None,
                None,
                AclOperation.ANY,
                AclPermissionType.ANY,
            )
        ],
        request_timeout=30,
    )
    assert next(iter(deleted.values())).result() == [binding]
    everything = AclBindingFilter(
        ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
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
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # as for a topic that does not exist: nothing tells the two apart
    unknown = admin(broker, pki, "bob").list_topics("no-such-topic", timeout=30).topics["no-such-topic"]
    assert unknown.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    errors = produce(client(broker, pki, "bob"), "secret-topic", 1)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
