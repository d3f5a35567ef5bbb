"""SASL/PLAIN (RFC 4616): one token from the client, ``[authzid] NUL authcid NUL passwd`` in
UTF-8, and an empty answer. The broker checks the password against its JAAS users (Kafka's
``PlainServerCallbackHandler``); the messages are Kafka's ``PlainSaslServer``'s.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from ..errors import SaslAuthenticationError
from .sasl import SaslError

PLAIN = "PLAIN"
# Kafka's answer to a wrong password and to an unknown user alike: the client learns nothing more
INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"


class PlainServer:
    """The broker's side: ``authenticate(username, password)`` says whether the pair is good."""

    mechanism = PLAIN

    def __init__(self, authenticate: Callable[[str, str], bool]) -> None:
        self._authenticate = authenticate
        self._user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self._user is not None:
            raise SaslError("PLAIN takes one token: the exchange is already complete")
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if not self._authenticate(username, password):
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self._user = username
        return b""

    @property
    def complete(self) -> bool:
        return self._user is not None

    @property
    def authorization_id(self) -> str:
        if self._user is None:
            raise SaslError("PLAIN authentication is not complete")
        return self._user


def password_matches(expected: str | None, given: str) -> bool:
    """``given`` against the password on record, in time that does not depend on where they differ
    (and as long for a user with none, who is refused)."""
    ok = hmac.compare_digest((expected or "").encode(), given.encode())
    return ok and expected is not None


class PlainClient:
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()

    def first_token(self) -> bytes:
        return self._token

    def evaluate(self, token: bytes) -> bytes | None:
        return None  # the server's empty answer ends PLAIN
