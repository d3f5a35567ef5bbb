"""The broker's SaslAuthenticator as a state machine, request by request, on a fake clock: what
it takes before and after authentication, session ends, and re-authentication as Kafka allows it
(the same mechanism, the same principal). The real clients' side is test_sasl.py's."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from seglog.broker.sasl import AuthState, ListenerSasl, SaslAuthenticator, ScramCredentials
from seglog.errors import ErrorCode, IllegalSaslStateError
from seglog.protocol import ApiKey, Request
from seglog.protocol.header import RequestHeader
from seglog.protocol.message_data import (
    ApiVersionsRequestData,
    MetadataRequestData,
    SaslAuthenticateRequestData,
    SaslHandshakeRequestData,
)
from seglog.security import KafkaPrincipal
from seglog.security.plain import PlainClient

USERS = {"alice": "alice-pw", "bob": "bob-pw"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _authenticator(clock: Clock, reauth_ms: int = 10_000) -> SaslAuthenticator:
    sasl = ListenerSasl("SASL_PLAINTEXT", ("PLAIN",), USERS, ScramCredentials(), {"PLAIN": reauth_ms}, 0.0)
    return SaslAuthenticator(sasl, "127.0.0.1:5000", clock)


def _request(key: ApiKey, body: Any, version: int) -> Request:
    return Request(RequestHeader(key, version, 1, "test"), body, 0)


def _connection() -> Any:
    return SimpleNamespace(principal=None, request_context=object(), close_after_response=False)


def _authenticate(auth: SaslAuthenticator, conn: Any, user: str, password: str) -> Any:
    handshake = _request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="PLAIN"), 1)
    assert auth.takes(handshake)
    assert asyncio.run(auth.handle(handshake, conn)).error_code == ErrorCode.NONE
    token = PlainClient(user, password).first_token()
    authenticate = _request(ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequestData(auth_bytes=token), 2)
    assert auth.takes(authenticate)
    return asyncio.run(auth.handle(authenticate, conn))


METADATA = _request(ApiKey.METADATA, MetadataRequestData(topics=None), 1)


def test_before_authentication_only_api_versions_passes() -> None:
    auth, conn = _authenticator(Clock()), _connection()
    assert not auth.takes(_request(ApiKey.API_VERSIONS, ApiVersionsRequestData(), 3))
    assert auth.takes(METADATA)
    with pytest.raises(IllegalSaslStateError, match="Unexpected Kafka request of type METADATA during SASL"):
        asyncio.run(auth.handle(METADATA, conn))
    assert auth.state is AuthState.FAILED


def test_a_session_its_lifetime_and_its_end() -> None:
    clock = Clock()
    auth, conn = _authenticator(clock), _connection()
    answer = _authenticate(auth, conn, "alice", "alice-pw")
    assert (answer.error_code, answer.session_lifetime_ms) == (ErrorCode.NONE, 10_000)
    assert conn.principal == KafkaPrincipal("User", "alice") and conn.request_context is None
    assert not auth.takes(METADATA)  # served as User:alice
    clock.now += 9.9
    assert not auth.takes(METADATA)
    clock.now += 0.2  # past the session's end: the next request closes the connection
    assert auth.takes(METADATA)
    with pytest.raises(IllegalSaslStateError, match="expired"):
        asyncio.run(auth.handle(METADATA, conn))


def test_reauthentication_renews_the_session_of_the_same_principal_only() -> None:
    clock = Clock()
    auth, conn = _authenticator(clock), _connection()
    _authenticate(auth, conn, "alice", "alice-pw")
    clock.now += 10.5  # a re-authentication may begin past the end
    assert _authenticate(auth, conn, "alice", "alice-pw").error_code == ErrorCode.NONE
    clock.now += 5
    assert not auth.takes(METADATA)  # within the new session
    refused = _authenticate(auth, conn, "bob", "bob-pw")  # another user's credentials on the same connection
    assert refused.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert refused.error_message == "Cannot change principals during re-authentication from User:alice: User:bob"
    assert conn.close_after_response and conn.principal == KafkaPrincipal("User", "alice")


def test_without_reauthentication_a_session_never_ends_and_a_second_handshake_is_the_brokers() -> None:
    clock = Clock()
    auth, conn = _authenticator(clock, reauth_ms=0), _connection()
    assert _authenticate(auth, conn, "alice", "alice-pw").session_lifetime_ms == 0
    clock.now += 1e6
    assert not auth.takes(METADATA)
    # KafkaApis answers it ILLEGAL_SASL_STATE (broker/sasl.py's SaslApis)
    assert not auth.takes(_request(ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="PLAIN"), 1))


def test_a_refused_password_answers_kafkas_message_and_closes() -> None:
    auth, conn = _authenticator(Clock()), _connection()
    refused = _authenticate(auth, conn, "alice", "wrong")
    assert (refused.error_code, refused.error_message) == (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        "Authentication failed: Invalid username or password",
    )
    assert conn.close_after_response and conn.principal is None and auth.state is AuthState.FAILED
