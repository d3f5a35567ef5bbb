"""A real ZooKeeper for the cluster tests: one server per test module, on a free port.

The tests skip only when ZooKeeper cannot be installed here (``make install``
installs Debian's package when it is missing and we are root).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Message
from kazoo.client import KazooClient

from seglog.cluster.zk_client import ZkClient
from seglog.cluster.zookeeper_server import ZooKeeperServer, zookeeper_unavailable
from seglog.tools.cluster import LocalCluster

from .security import SASL_SSL_BY_DEFAULT, SASL_SSL_FAULTS, SECURITIES


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    reason = zookeeper_unavailable()
    if reason is not None:
        pytest.skip(reason)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"), tick_time_ms=100, fsync=False)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module", params=SECURITIES)
def security(request: pytest.FixtureRequest) -> str:
    """What a fault test module's cluster listens on, the brokers' own traffic too: "plaintext",
    or "sasl_ssl" only (TLS, SCRAM and ACLs: ``LocalCluster(secure=True)``)."""
    return str(request.param)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Over SASL_SSL the suite runs two fault tests only (each module's secure cluster and the
    kills cost minutes); ``SEGLOG_SASL_SSL_FAULTS=all`` runs every one over it."""
    if os.environ.get(SASL_SSL_FAULTS) == "all":
        return
    skip = pytest.mark.skip(reason=f"over SASL_SSL two fault tests run unless {SASL_SSL_FAULTS}=all")
    for item in items:
        params = getattr(item, "callspec", None)
        name = getattr(item, "originalname", item.name)
        if params is not None and params.params.get("security") == "sasl_ssl" and name not in SASL_SSL_BY_DEFAULT:
            item.add_marker(skip)


@pytest.fixture
def chroot(zookeeper: ZooKeeperServer, request: pytest.FixtureRequest) -> str:
    """A connect string with a chroot of the test's own: tests in one module do not see each other's znodes."""
    root = "/" + request.node.name.replace("[", "_").replace("]", "_")
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    try:
        admin.ensure_path(root)
    finally:
        admin.stop()
        admin.close()
    return zookeeper.connect_string + root


@pytest.fixture
def clients(chroot: str) -> Iterator[Callable[..., ZkClient]]:
    """Make started ZkClients (short sessions); all are closed after the test."""
    made: list[ZkClient] = []

    def make(**kw: object) -> ZkClient:
        kw.setdefault("session_timeout_ms", 4000)
        client = ZkClient(chroot, **kw).start()  # type: ignore[arg-type]
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def expire_session(client: ZkClient, connect: str) -> None:
    """End ``client``'s session from a second client that takes it over (kazoo's own test trick)."""
    credentials = client.session_credentials
    assert credentials is not None
    other = KazooClient(hosts=connect, client_id=credentials)
    other.start()
    other.stop()
    other.close()


def delivered(m: Message) -> tuple[int, int, bytes | None]:
    """(partition, offset, value) of a message a confluent-kafka consumer returned without an
    error: the client's types allow no partition and offset, which only an error event lacks."""
    partition, offset = m.partition(), m.offset()
    assert partition is not None and offset is not None, m.error()
    return partition, offset, m.value()


def text(m: Message) -> str:
    """The value of a message read without error, as text (the tests write no null values)."""
    value = delivered(m)[2]
    assert value is not None
    return value.decode()


def wait_until(condition: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def chrooted_local_cluster(
    zookeeper: ZooKeeperServer, directory: Path, name: str, brokers: int, overrides: list[str]
) -> LocalCluster:
    """``brokers`` brokers of a cluster of their own: its znodes under ZooKeeper's ``/name``."""
    admin = KazooClient(hosts=zookeeper.connect_string)
    admin.start()
    admin.ensure_path(f"/{name}")
    admin.stop()
    admin.close()
    return LocalCluster(
        directory, brokers, zookeeper=f"{zookeeper.connect_string}/{name}", port=None, overrides=overrides
    )
