"""What every SASL mechanism is, sans-IO: a server and a client that take the peer's tokens and
give their own, as ``javax.security.sasl.SaslServer`` / ``SaslClient`` are in Kafka.

Tokens come in whole (the broker's framing cut them out): a server's ``evaluate`` takes the
client's next token and gives its answer, until ``complete``; then ``authorization_id`` names
who authenticated. A mechanism fails with ``SaslError`` (Kafka's ``SaslException``: its reason
is logged by the broker, and the client is told only that its credentials were refused, with the
mechanism's name) or with ``errors.SaslAuthenticationError`` (whose message the client is told
as it is: PLAIN's "Invalid username or password").
"""

from __future__ import annotations

from typing import Protocol


class SaslError(Exception):
    """A SASL exchange that failed for a reason the client is not told (it could say which users
    exist, or how a token was malformed): the broker logs it, the client gets the generic
    "invalid credentials" message."""


class SaslServer(Protocol):
    mechanism: str

    def evaluate(self, token: bytes) -> bytes:
        """The answer to the client's next token."""
        ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The user who authenticated (once ``complete``)."""
        ...


class SaslClient(Protocol):
    mechanism: str

    def first_token(self) -> bytes: ...

    def evaluate(self, token: bytes) -> bytes | None:
        """The answer to the server's token; None when the exchange is over (and the server was
        verified where the mechanism can)."""
        ...
