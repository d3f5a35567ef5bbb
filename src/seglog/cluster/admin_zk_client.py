"""What Kafka's tools write into ZooKeeper for the controller to act on (Kafka's ``AdminZkClient``).

Topic creation writes /config/topics/<t> and then /brokers/topics/<t> (the
assignment from ``assignment.py`` over the registered brokers, and a new topic
id); adding partitions rewrites /brokers/topics/<t> with the new partitions'
replicas; a preferred-leader election is asked for by creating
/admin/preferred_replica_election. The controller's watches do the rest.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from ..common import TopicPartition
from ..config import validate_topic_config
from ..errors import InvalidReplicaAssignmentError, TopicExistsError, UnknownTopicOrPartitionError, ZooKeeperError
from ..storage.naming import validate_topic
from . import znodes
from .assignment import BrokerMetadata, assign_replicas_to_brokers, new_partitions_assignment
from .zk_client import ZkClient, generate_cluster_id


def broker_metadata(zk: ZkClient) -> list[BrokerMetadata]:
    """The registered brokers with their racks."""
    out = []
    for broker_id in zk.get_broker_ids():
        broker = zk.get_broker(broker_id)
        if broker is not None:
            out.append(BrokerMetadata(broker_id, broker.rack))
    return out


def create_topic(
    zk: ZkClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, Any] | None = None,
    *,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """Create ``topic`` with replicas spread over the registered brokers; returns the assignment."""
    validate_topic(topic)
    overrides = validate_topic_config(config or {})
    assignment = assign_replicas_to_brokers(broker_metadata(zk), partitions, replication_factor, rng=rng)
    create_topic_with_assignment(zk, topic, assignment, overrides)
    return assignment


def create_topic_with_assignment(
    zk: ZkClient, topic: str, assignment: Mapping[int, Iterable[int]], config: Mapping[str, Any] | None = None
) -> None:
    validate_topic(topic)
    replicas = {p: tuple(r) for p, r in assignment.items()}
    _validate_assignment(topic, replicas)
    if zk.get(znodes.topic_path(topic)) is not None:
        raise TopicExistsError(f"Topic '{topic}' already exists.", file=znodes.topic_path(topic))
    zk.ensure_path(znodes.CONFIG + "/topics")
    zk.ensure_path(znodes.TOPICS)
    # the config first: a controller that sees the topic must find its config
    zk.set_or_create(znodes.topic_config_path(topic), znodes.encode_config(validate_topic_config(config or {})))
    data = znodes.encode_topic(
        znodes.TopicAssignment({p: znodes.ReplicaAssignment(r) for p, r in replicas.items()}, generate_cluster_id())
    )
    try:
        zk.create(znodes.topic_path(topic), data)
    except NodeExistsError:
        raise TopicExistsError(f"Topic '{topic}' already exists.", file=znodes.topic_path(topic)) from None


def add_partitions(zk: ZkClient, topic: str, partitions: int) -> dict[int, tuple[int, ...]]:
    """Grow ``topic`` to ``partitions`` partitions; returns the new partitions' replicas."""
    path = znodes.topic_path(topic)
    found = zk.get(path)
    if found is None:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.", file=path)
    current = znodes.decode_topic(topic, found[0], path)
    existing = {p: a.replicas for p, a in current.partitions.items()}
    added = new_partitions_assignment(existing, broker_metadata(zk), partitions, topic=topic)
    merged = dict(current.partitions)
    merged.update({p: znodes.ReplicaAssignment(r) for p, r in added.items()})
    zk.set(path, znodes.encode_topic(znodes.TopicAssignment(merged, current.topic_id)), int(found[1].version))
    return added


def delete_topic(zk: ZkClient, topic: str) -> None:
    """Ask the controller to delete ``topic`` (``kafka-topics --delete`` with ZooKeeper)."""
    if zk.get(znodes.topic_path(topic)) is None:
        raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist.", file=znodes.topic_path(topic))
    # already marked for deletion (Kafka's TopicAlreadyMarkedForDeletion): nothing more to do
    with contextlib.suppress(NodeExistsError):
        zk.create(znodes.delete_topic_path(topic), b"", makepath=True)


def request_preferred_replica_election(zk: ZkClient, partitions: Iterable[TopicPartition]) -> None:
    """Ask the controller to give leadership back to preferred replicas (``kafka-leader-election``)."""
    try:
        zk.create(znodes.PREFERRED_REPLICA_ELECTION, znodes.encode_partitions(partitions), makepath=True)
    except NodeExistsError:
        raise ZooKeeperError(
            "a preferred replica election is already in progress", file=znodes.PREFERRED_REPLICA_ELECTION
        ) from None


def fetch_entity_config(zk: ZkClient, entity_path: str) -> dict[str, str]:
    """The config at /config/<entity_path> (``users/alice``, ``users/alice/clients/c1``, ...)."""
    path = f"{znodes.CONFIG}/{entity_path}"
    found = zk.get(path)
    return {} if found is None else znodes.decode_config(found[0], path)


def change_entity_config(zk: ZkClient, entity_path: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
    """Kafka's ``changeConfigs``: /config/<entity_path> read, changed and written back at the
    version read (a concurrent writer's change, another key of the same znode, is read again and
    kept), then a /config/changes notification every broker acts on."""
    path = f"{znodes.CONFIG}/{entity_path}"
    while True:
        found = zk.get(path)
        config = change({} if found is None else znodes.decode_config(found[0], path))
        try:
            if found is None:
                zk.create(path, znodes.encode_config(config), makepath=True)
            else:
                zk.set(path, znodes.encode_config(config), int(found[1].version))
            break
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue
    zk.create_sequential(
        f"{znodes.CONFIG_CHANGES}/{znodes.CONFIG_CHANGE_PREFIX}", znodes.encode_config_change(entity_path)
    )


def fetch_entity_paths(zk: ZkClient) -> list[str]:
    """Every quota entity with a znode: ``users/<u>``, ``users/<u>/clients/<c>``, ``clients/<c>``, ``ips/<ip>``."""
    paths = []
    for user in zk.get_children(f"{znodes.CONFIG}/users"):
        paths.append(f"users/{user}")
        paths += [f"users/{user}/clients/{c}" for c in zk.get_children(f"{znodes.CONFIG}/users/{user}/clients")]
    paths += [f"clients/{c}" for c in zk.get_children(f"{znodes.CONFIG}/clients")]
    paths += [f"ips/{ip}" for ip in zk.get_children(f"{znodes.CONFIG}/ips")]
    return paths


def _validate_assignment(topic: str, replicas: Mapping[int, tuple[int, ...]]) -> None:
    if not replicas:
        raise InvalidReplicaAssignmentError(f"the assignment of topic '{topic}' has no partitions")
    if sorted(replicas) != list(range(len(replicas))):
        raise InvalidReplicaAssignmentError(
            f"the partitions of topic '{topic}' must be numbered 0 to {len(replicas) - 1}, not {sorted(replicas)}"
        )
    sizes = {len(r) for r in replicas.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise InvalidReplicaAssignmentError(f"the partitions of topic '{topic}' have replica lists of sizes {sizes}")
    for p, r in replicas.items():
        if len(set(r)) != len(r):
            raise InvalidReplicaAssignmentError(f"partition {p} of topic '{topic}' lists a broker twice: {list(r)}")
