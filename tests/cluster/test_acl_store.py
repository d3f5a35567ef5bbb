"""ACLs in a real ZooKeeper, as Kafka 3.x keeps them: the znodes and notifications Kafka writes
and reads, and every broker's authorizer following the changes another one makes."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

import seglog.broker
from seglog import security
from seglog.broker.acl_authorizer import BrokerAuthorizer
from seglog.broker.properties import broker_config
from seglog.cluster.acl_store import ZkAclStore
from seglog.cluster.zk_client import ZkClient

from ..broker.conftest import wait_for
from ..broker.test_acls import broker_config as acl_broker_config
from ..broker.test_acls import client, pki  # noqa: F401  (pki: a fixture)
from .conftest import expire_session

Op, Perm, T, P = security.AclOperation, security.AclPermissionType, security.ResourceType, security.PatternType
ALICE = security.KafkaPrincipal("User", "alice")
DESCRIBE, ALLOW = AclOperation.DESCRIBE, AclPermissionType.ALLOW  # confluent-kafka's
READ = security.AccessControlEntry(ALICE, "*", Op.READ, Perm.ALLOW)
DENY_WRITE = security.AccessControlEntry(security.KafkaPrincipal("User", "*"), "10.0.0.1", Op.WRITE, Perm.DENY)
TOPIC = security.ResourcePattern(T.TOPIC, "orders", P.LITERAL)
PREFIX = security.ResourcePattern(T.TRANSACTIONAL_ID, "app-", P.PREFIXED)


def test_znodes_and_notifications_are_kafkas(clients: Callable[..., ZkClient]) -> None:
    zk = clients()
    store = ZkAclStore(zk)
    store.update(TOPIC, lambda current: current | {READ, DENY_WRITE})
    store.update(PREFIX, lambda current: current | {READ})
    data = json.loads(zk.get("/kafka-acl/Topic/orders")[0])  # type: ignore[index]
    assert data["version"] == 1
    assert sorted(data["acls"], key=lambda a: a["operation"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"},
        {"principal": "User:*", "permissionType": "Deny", "operation": "Write", "host": "10.0.0.1"},
    ]
    assert json.loads(zk.get("/kafka-acl-extended/prefixed/TransactionalId/app-")[0])["acls"] == [  # type: ignore[index]
        {"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}
    ]
    (literal,) = zk.get_children("/kafka-acl-changes")
    assert literal.startswith("acl_changes_") and zk.get(f"/kafka-acl-changes/{literal}")[0] == b"TOPIC:orders"  # type: ignore[index]
    (extended,) = zk.get_children("/kafka-acl-extended-changes")
    assert json.loads(zk.get(f"/kafka-acl-extended-changes/{extended}")[0]) == {  # type: ignore[index]
        "version": 1,
        "resourceType": "TRANSACTIONAL_ID",
        "name": "app-",
        "patternType": "PREFIXED",
    }
    # the last entry gone: the znode goes, as Kafka deletes it
    store.update(PREFIX, lambda current: frozenset())
    assert zk.get("/kafka-acl-extended/prefixed/TransactionalId/app-") is None
    assert ZkAclStore(zk).load() == {TOPIC: frozenset({READ, DENY_WRITE})}


def test_acls_kafka_wrote_are_read(clients: Callable[..., ZkClient]) -> None:
    zk = clients()
    # as kafka-acls.sh against Kafka 3.x leaves them (its JSON's key order, a Cluster ACL)
    zk.create(
        "/kafka-acl/Cluster/kafka-cluster",
        b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Allow","operation":"IdempotentWrite","host":"*"}]}',
        makepath=True,
    )
    zk.create(
        "/kafka-acl-extended/prefixed/Group/g-",
        b'{"version":1,"acls":[{"host":"*","permissionType":"Deny","operation":"All","principal":"User:bob"}]}',
        makepath=True,
    )
    bob = security.KafkaPrincipal("User", "bob")
    assert ZkAclStore(zk).load() == {
        security.ResourcePattern(T.CLUSTER, "kafka-cluster", P.LITERAL): frozenset(
            {security.AccessControlEntry(bob, "*", Op.IDEMPOTENT_WRITE, Perm.ALLOW)}
        ),
        security.ResourcePattern(T.GROUP, "g-", P.PREFIXED): frozenset(
            {security.AccessControlEntry(bob, "*", Op.ALL, Perm.DENY)}
        ),
    }


def _authorizer(chroot: str, log_dir: str) -> BrokerAuthorizer:
    config = broker_config(
        {
            "log.dirs": log_dir,
            "zookeeper.connect": chroot,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "zookeeper.session.timeout.ms": 4000,
        }
    )
    return BrokerAuthorizer(config)


def test_every_broker_enforces_the_acls_another_added(chroot: str, tmp_path) -> None:
    async def run() -> None:
        one, two = _authorizer(chroot, str(tmp_path / "1")), _authorizer(chroot, str(tmp_path / "2"))
        await one.startup()
        await two.startup()
        try:

            def allowed() -> bool:
                return two.acls.authorize(ALICE, "10.0.0.1", Op.READ, T.TOPIC, "orders")

            assert not allowed()
            await one.create([security.AclBinding(TOPIC, READ)])
            await _until(allowed)
            await one.delete([security.AclBindingFilter(T.TOPIC, "orders", P.LITERAL)])
            await _until(lambda: not allowed())
            assert two.describe(security.AclBindingFilter()) == []
        finally:
            one.shutdown()
            two.shutdown()

    asyncio.run(run())


def test_a_new_session_reads_the_acls_again(chroot: str, tmp_path) -> None:
    """An ACL removed and another added while a broker's session was lost: its new session's
    reading replaces what it held."""

    async def run() -> None:
        one, two = _authorizer(chroot, str(tmp_path / "1")), _authorizer(chroot, str(tmp_path / "2"))
        await one.startup()
        await two.startup()
        try:
            await one.create([security.AclBinding(TOPIC, READ)])
            await _until(lambda: bool(two.describe(security.AclBindingFilter())))
            assert two._zk is not None
            expire_session(two._zk, chroot)
            await one.delete([security.AclBindingFilter(T.TOPIC, "orders", P.LITERAL)])
            await one.create([security.AclBinding(PREFIX, READ)])
            await _until(lambda: two.describe(security.AclBindingFilter()) == [security.AclBinding(PREFIX, READ)])
        finally:
            one.shutdown()
            two.shutdown()

    asyncio.run(run())


async def _until(check: Callable[[], bool]) -> None:
    for _ in range(500):  # the watch fires on another thread; the index changes on this loop
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the other broker never saw the change")


def test_an_acl_added_on_one_broker_is_enforced_by_the_other(chroot: str, pki, tmp_path) -> None:  # noqa: F811
    """Two brokers of a cluster (their own PLAINTEXT between them, User:ANONYMOUS a super user;
    clients on mutual TLS): alice, refused on the second, is let through there once the first
    took her ACL."""
    config = {
        **acl_broker_config(pki),
        "zookeeper.connect": chroot,
        "listeners": "PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,MTLS:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "super.users": "User:admin;User:ANONYMOUS",
        "offsets.topic.replication.factor": 1,
    }
    with contextlib.ExitStack() as stack:
        one, two = (
            stack.enter_context(seglog.broker.start(str(tmp_path / str(i)), config={**config, "broker.id": i}))
            for i in (1, 2)
        )
        admin = AdminClient({**client(one, pki, "admin"), "bootstrap.servers": mtls(one)})
        admin.create_topics([NewTopic("orders", 1, 2)])["orders"].result(30)
        alice_on_two = AdminClient({**client(two, pki, "alice"), "bootstrap.servers": mtls(two)})

        def alice_sees_orders() -> bool:
            return alice_on_two.list_topics("orders", timeout=30).topics["orders"].error is None

        assert not alice_sees_orders()
        alice_may_describe = AclBinding(
            ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:alice", "*", DESCRIBE, ALLOW
        )
        for future in admin.create_acls([alice_may_describe]).values():
            future.result(30)
        wait_for(alice_sees_orders, timeout=10, what="the second broker to enforce the first's ACL")


def mtls(broker: object) -> str:
    return f"127.0.0.1:{broker.server.port_of('MTLS')}"  # type: ignore[attr-defined]
