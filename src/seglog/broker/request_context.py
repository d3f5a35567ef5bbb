"""Who sent the request being handled: Kafka's ``RequestContext``, as a context variable.

Handlers take the request's version and body; the few that need the client's id or
address (JoinGroup records them for DescribeGroups), its listener (Metadata answers with
that listener's endpoints) or its principal read them here. The server sets it
for each request in the task that runs the handler, so concurrent requests on other
connections each see their own.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from ..security import ANONYMOUS, KafkaPrincipal


@dataclass(frozen=True)
class RequestContext:
    client_id: str
    client_host: str  # as Kafka prints it: "/127.0.0.1"
    listener_name: str = "PLAINTEXT"  # the listener the request came in on
    principal: KafkaPrincipal = ANONYMOUS


NO_CONTEXT = RequestContext("", "")
_current: ContextVar[RequestContext | None] = ContextVar("current_request", default=None)


def set_current_request(context: RequestContext) -> None:
    _current.set(context)


def current_request() -> RequestContext:
    """The context of the request this task handles (empty outside a request)."""
    return _current.get() or NO_CONTEXT


def client_host(peer: str) -> str:
    """A connection's ``host:port`` as Kafka's ``InetAddress.toString`` shows the host."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host.strip("[]")
