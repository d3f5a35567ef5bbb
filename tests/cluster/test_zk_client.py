"""Registration, the cluster id, controller election and fencing, against a real ZooKeeper."""

from __future__ import annotations

import functools
import threading

import pytest

from seglog.cluster import znodes
from seglog.cluster.controller_election import ControllerElection
from seglog.cluster.zk_client import CreateOp, DeleteOp, SetDataOp, ZkClient, generate_cluster_id
from seglog.cluster.zookeeper_server import ZooKeeperServer, free_port
from seglog.errors import ControllerMovedError, ZooKeeperError

from .conftest import expire_session, wait_until


def registration(broker_id: int, port: int = 9092, rack: str | None = None) -> znodes.BrokerRegistration:
    endpoint = znodes.EndPoint("PLAINTEXT", f"127.0.0.{broker_id}", port)
    return znodes.BrokerRegistration(broker_id, (endpoint,), timestamp=1700000000000 + broker_id, rack=rack)


def owner(client: ZkClient, path: str) -> int | None:
    found = client.get(path)
    return None if found is None else int(found[1].ephemeralOwner)


# --- /cluster/id ------------------------------------------------------------------


def test_cluster_id_is_created_once(clients) -> None:
    first, second = clients(), clients()
    assert first.get_cluster_id() is None
    proposed = generate_cluster_id()
    assert znodes.validate_topic_id(proposed) == proposed  # Kafka's Uuid form
    assert first.create_or_get_cluster_id(proposed) == proposed
    assert second.create_or_get_cluster_id(generate_cluster_id()) == proposed
    assert second.get_cluster_id() == proposed
    found = second.get(znodes.CLUSTER_ID)
    assert found is not None and znodes.decode_cluster_id(found[0]) == proposed


# --- /brokers/ids/<id> --------------------------------------------------------------


def test_broker_registration_is_ephemeral(clients) -> None:
    broker, observer = clients(), clients()
    broker.ensure_persistent_paths()
    epoch = broker.register_broker(registration(1, rack="r1"))
    found = observer.get(znodes.broker_path(1))
    assert found is not None
    assert znodes.decode_broker(1, found[0]) == registration(1, rack="r1")
    assert epoch == found[1].czxid and owner(observer, znodes.broker_path(1)) == broker.session_id
    assert observer.get_broker_ids() == [1] and observer.get_broker(1) == registration(1, rack="r1")
    broker.close()
    assert observer.get(znodes.broker_path(1)) is None


def test_registration_is_made_again_after_session_expiry(clients, chroot) -> None:
    broker, observer = clients(), clients()
    broker.register_broker(registration(2))
    old_session = broker.session_id
    sessions = []
    broker.on_new_session(lambda: sessions.append(broker.session_id))
    expire_session(broker, chroot)
    # the old session's node goes; the broker's new session puts it back
    wait_until(lambda: sessions, what="a new session")
    wait_until(lambda: owner(observer, znodes.broker_path(2)) == broker.session_id, what="the registration again")
    assert broker.session_id != old_session
    assert observer.get_broker(2) == registration(2)


def test_a_broker_id_owned_by_another_session_is_refused(clients) -> None:
    first, second = clients(), clients()
    first.register_broker(registration(3))
    with pytest.raises(ZooKeeperError, match="broker id 3 is registered by another ZooKeeper session") as info:
        second.register_broker(registration(3))
    assert info.value.file == "/brokers/ids/3"
    assert owner(second, znodes.broker_path(3)) == first.session_id


def test_registrations_survive_a_zookeeper_restart(clients, zookeeper: ZooKeeperServer) -> None:
    broker, observer = clients(session_timeout_ms=6000), clients()
    broker.register_broker(registration(4))
    assert observer.create_or_get_cluster_id("Qb6wK3UvRDeNsMu3mwq0Rg") == "Qb6wK3UvRDeNsMu3mwq0Rg"
    zookeeper.restart()
    # the session outlives a short restart (sessions are in ZooKeeper's snapshot) or, if it expired while
    # ZooKeeper was away, the broker registers again with its new one: either way it is registered
    wait_until(lambda: broker.connected and observer.connected, what="reconnection")
    wait_until(lambda: owner(observer, znodes.broker_path(4)) == broker.session_id, what="the registration")
    assert observer.get_broker(4) == registration(4)
    assert observer.get_cluster_id() == "Qb6wK3UvRDeNsMu3mwq0Rg"  # persistent znodes are on disk


def test_connecting_to_nothing_fails_clearly() -> None:
    client = ZkClient(f"127.0.0.1:{free_port()}", session_timeout_ms=2000, connection_timeout_ms=300)
    with pytest.raises(ZooKeeperError, match=r"could not connect to ZooKeeper at 127.0.0.1:.* within 300 ms"):
        client.start()
    with pytest.raises(ZooKeeperError, match=r"zookeeper\.connect is not set"):
        ZkClient("")


# --- /controller and /controller_epoch ------------------------------------------------------


def test_controller_registration_increments_the_epoch(clients) -> None:
    a, b = clients(), clients()
    assert a.get_controller_epoch() is None
    epoch, version = a.register_controller_and_increment_epoch(1)
    assert (epoch, version) == (1, 1)  # /controller_epoch created at 0 (zkVersion 0), then set to 1
    assert a.get_controller_id() == 1 and b.get_controller_epoch() == (1, 1)
    with pytest.raises(ControllerMovedError) as info:
        b.register_controller_and_increment_epoch(2)
    assert info.value.error_code == 11  # STALE_CONTROLLER_EPOCH
    assert b.get_controller_epoch() == (1, 1)  # the losing multi-op changed nothing
    found = b.get(znodes.CONTROLLER)
    assert found is not None and found[1].ephemeralOwner == a.session_id
    registration = znodes.decode_controller(found[0])
    assert (registration.broker_id, registration.kraft_controller_epoch) == (1, -1)
    a.close()
    assert b.register_controller_and_increment_epoch(2) == (2, 2)


def test_fenced_writes(clients) -> None:
    a, b = clients(), clients()
    _, version = a.register_controller_and_increment_epoch(1)
    path = znodes.partition_state_path("t", 0)
    b.ensure_path(znodes.partition_path("t", 0))
    state = znodes.LeaderIsrAndControllerEpoch(znodes.LeaderAndIsr(1, 0, (1, 2)), 1)
    a.fenced_write(version, [CreateOp(path, znodes.encode_partition_state(state))])
    found = b.get(path)
    assert found is not None and znodes.decode_partition_state(found[0], found[1].version) == state
    # a failed operation fails the whole write, naming the znode
    with pytest.raises(ZooKeeperError, match="CreateOp failed: NodeExistsError") as info:
        a.fenced_write(version, [SetDataOp(path, b"{}", 0), CreateOp(path, b"")])
    assert info.value.file == path
    assert b.get(path)[0] == found[0]
    # a partition state is updated by its zkVersion (the partition epoch): a stale one fails
    newer = znodes.LeaderIsrAndControllerEpoch(znodes.LeaderAndIsr(2, 1, (2,), partition_epoch=1), 1)
    a.fenced_write(version, [SetDataOp(path, znodes.encode_partition_state(newer), found[1].version)])
    with pytest.raises(ZooKeeperError, match="SetDataOp failed: BadVersionError"):
        a.fenced_write(version, [SetDataOp(path, znodes.encode_partition_state(state), found[1].version)])
    a.fenced_write(version, [DeleteOp(path)])
    assert b.get(path) is None


def test_controller_election_among_three(clients, chroot) -> None:
    participants: dict[int, tuple[ZkClient, ControllerElection]] = {}
    events: list[tuple[int, str, int]] = []
    lock = threading.Lock()

    def record(broker: int, what: str, epoch: int = -1) -> None:
        with lock:
            events.append((broker, what, epoch))

    for broker_id in (1, 2, 3):
        client = clients(session_timeout_ms=3000)
        election = ControllerElection(
            client,
            broker_id,
            on_elected=functools.partial(lambda b, epoch, _v: record(b, "elected", epoch), broker_id),
            on_resigned=functools.partial(record, broker_id, "resigned"),
        )
        participants[broker_id] = (client, election.start())

    def controllers() -> list[int]:
        return [b for b, (_, e) in participants.items() if e.is_controller]

    wait_until(lambda: len(controllers()) == 1, what="a controller")
    first = controllers()[0]
    first_client, first_election = participants[first]
    assert first_election.epoch is not None
    epoch, epoch_version = first_election.epoch
    for _, election in participants.values():
        assert election.wait_for_controller(10) == first
    assert [e for e in events if e[1] == "elected"] == [(first, "elected", epoch)]

    # its session ends: another participant wins with the next epoch
    expire_session(first_client, chroot)
    # (the old controller may still believe it is one until it hears of its expiry: that is what fencing is for)
    wait_until(lambda: [b for b in controllers() if b != first], what="a new controller")
    second = next(b for b in controllers() if b != first)
    assert participants[second][1].epoch[0] == epoch + 1  # type: ignore[index]
    wait_until(lambda: (first, "resigned", -1) in events, what="the old controller's resignation")
    wait_until(lambda: first_election.active_controller == second, what="the old controller to see the new one")
    assert controllers() == [second]
    assert first_client.get_controller_epoch()[0] == epoch + 1  # type: ignore[index]

    # the stale controller's writes are fenced off; the new controller's go through
    with pytest.raises(ControllerMovedError, match="another controller was elected"):
        first_client.fenced_write(epoch_version, [CreateOp("/stale", b"x")])
    assert first_client.get("/stale") is None
    _, new_version = participants[second][1].epoch  # type: ignore[misc]
    participants[second][0].fenced_write(new_version, [CreateOp("/fresh", b"y")])
    assert first_client.get("/fresh") is not None


def test_every_session_expiring_at_once_elects_a_registered_controller(clients, chroot) -> None:
    # Kafka's Expire, then RegisterBrokerAndReelect: each broker resigns when it finds its session
    # expired, registers again, and only then stands; the one elected stays the controller
    observer = clients()
    observer.ensure_persistent_paths()
    participants: dict[int, tuple[ZkClient, ControllerElection]] = {}
    registered_when_elected: dict[int, bool] = {}  # per broker, at its latest election
    new_sessions: list[int] = []

    def elected(client: ZkClient, broker_id: int) -> None:
        registered_when_elected[broker_id] = broker_id in client.get_broker_ids()

    for broker_id in (1, 2, 3):
        client = clients(session_timeout_ms=3000)
        client.register_broker(registration(broker_id))
        election = ControllerElection(
            client,
            broker_id,
            on_elected=functools.partial(lambda c, b, _e, _v: elected(c, b), client, broker_id),
        ).start()
        client.on_new_session(lambda b=broker_id: new_sessions.append(b))  # after the election's own handler
        participants[broker_id] = (client, election)

    def controllers() -> list[int]:
        return [b for b, (_, e) in participants.items() if e.is_controller]

    wait_until(lambda: len(controllers()) == 1, what="a controller")
    epoch = observer.get_controller_epoch()
    assert epoch is not None
    for client, _ in participants.values():
        expire_session(client, chroot)
    wait_until(lambda: sorted(new_sessions) == [1, 2, 3], what="every broker in a new session")
    wait_until(lambda: len(controllers()) == 1, what="a controller in the new sessions")
    (controller,) = controllers()
    wait_until(
        lambda: all(e.active_controller == controller for _, e in participants.values()), what="everyone to know it"
    )
    assert observer.get_controller_epoch()[0] > epoch[0]
    assert observer.get_broker_ids() == [1, 2, 3]
    assert registered_when_elected[controller]


def test_an_old_session_controller_node_is_waited_out(clients, chroot) -> None:
    # /controller naming this broker but held by another session: the broker waits, as Kafka's elect does
    squatter = clients()
    squatter.register_controller_and_increment_epoch(7)
    client = clients()
    election = ControllerElection(client, 7).start()
    assert election.wait_for_controller(10) == 7
    assert not election.is_controller
    squatter.close()
    wait_until(lambda: election.is_controller, what="the election after the node went")
    assert election.epoch is not None and election.epoch[0] == 2


def test_a_stopped_controller_resigns(clients) -> None:
    resigned = threading.Event()
    election = ControllerElection(clients(), 1, on_resigned=resigned.set).start()
    wait_until(lambda: election.is_controller, what="a controller")
    election.stop()
    assert resigned.wait(10)
    assert not election.is_controller and election.epoch is None
