"""The controller of a cluster, found from any broker: Kafka's AdminClient sends ElectLeaders and the
partition reassignment requests to the controller Metadata names, and so do the commands here."""

from __future__ import annotations

import uuid
from typing import Any

from ..client import BlockingConnection, connect
from ..errors import NotControllerError
from ..protocol import ApiKey
from . import CLIENT_ID


def cluster_metadata(client: BlockingConnection, topics: list[str] | None = None) -> dict[str, Any]:
    """Metadata of ``topics`` (None: all) and the brokers, with the controller's id."""
    body = {
        "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
        "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": False,
    }
    return client.request(ApiKey.METADATA, body)


def connect_to_controller(bootstrap: str, timeout: float) -> BlockingConnection:
    """A client of the controller broker (from the bootstrap broker's Metadata)."""
    with connect(bootstrap, client_id=CLIENT_ID, timeout=timeout) as client:
        metadata = cluster_metadata(client, [])
    brokers = {b["node_id"]: b for b in metadata["brokers"]}
    controller = brokers.get(metadata.get("controller_id", -1))
    if controller is None:
        raise NotControllerError(f"the broker at {bootstrap} knows of no controller (is it part of a cluster?)")
    return BlockingConnection(controller["host"], controller["port"], CLIENT_ID, timeout=timeout)
