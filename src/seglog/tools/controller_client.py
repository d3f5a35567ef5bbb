"""The controller of a cluster, found from any broker: Kafka's AdminClient sends ElectLeaders and the
partition reassignment requests to the controller Metadata names, and so do the commands here."""

from __future__ import annotations

from ..client import PLAINTEXT, BlockingConnection, ClientSecurity, connect, metadata
from ..errors import NotControllerError
from . import CLIENT_ID


def connect_to_controller(bootstrap: str, timeout: float, security: ClientSecurity = PLAINTEXT) -> BlockingConnection:
    """A client of the controller broker (from the bootstrap broker's Metadata)."""
    with connect(bootstrap, client_id=CLIENT_ID, timeout=timeout, security=security) as client:
        answer = metadata(client, [])
    controller = next((b for b in answer.brokers if b.node_id == answer.controller_id), None)
    if controller is None:
        raise NotControllerError(f"the broker at {bootstrap} knows of no controller (is it part of a cluster?)")
    return BlockingConnection(controller.host, controller.port, CLIENT_ID, timeout=timeout, security=security)
