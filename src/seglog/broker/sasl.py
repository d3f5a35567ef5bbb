"""SASL on the broker's listeners: Kafka's ``SaslServerAuthenticator``, its mechanisms' configs,
the SCRAM credentials and the APIs that administer them.

A SASL listener (SASL_PLAINTEXT, SASL_SSL) offers ``sasl.enabled.mechanisms`` (each of
PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; any other refuses the startup). PLAIN's users are the
``user_<name>="<password>"`` options of the listener's
``listener.name.<listener>.plain.sasl.jaas.config``; SCRAM's credentials are the users'
(``ScramCredentials``: salted, as Kafka keeps them in ``/config/users/<user>``; in the log dir
for a broker without ZooKeeper).

Each connection's ``SaslAuthenticator`` runs Kafka's states::

    state            request                       next             answer
    HANDSHAKE        ApiVersions                   HANDSHAKE        the versions (served as ever)
    HANDSHAKE        SaslHandshake, enabled mech.  AUTHENTICATE     NONE (v0: bare tokens follow)
    HANDSHAKE        SaslHandshake, another mech.  FAILED           UNSUPPORTED_SASL_MECHANISM, close
    AUTHENTICATE     SaslAuthenticate (a bare      AUTHENTICATE     the mechanism's token
                     token after v0)               or COMPLETE      (the last: the session's lifetime)
    AUTHENTICATE     credentials refused           FAILED           SASL_AUTHENTICATION_FAILED after
                                                                    connection.failed.authentication.delay.ms,
                                                                    close (v0: closed, no answer)
    HANDSHAKE or     any other request             FAILED           none: closed, as Kafka closes it
    AUTHENTICATE
    COMPLETE         SaslHandshake (re-authentication, KIP-368)   AUTHENTICATE, as the first time
    COMPLETE         any request past the session's end           closed
    COMPLETE         any other request             COMPLETE         served, as ``User:<name>``

Secrets (passwords, JAAS configs, credentials) appear in no log line, error or answer: a
refusal says Kafka's words, the mechanism's reason goes to the log only when it names no secret.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..cluster import znodes
from ..cluster.admin_zk_client import change_entity_config
from ..config import BrokerConfig
from ..errors import ErrorCode, IllegalSaslStateError, InvalidConfigurationError, SaslAuthenticationError
from ..protocol import ApiKey, Request
from ..protocol.message_data import (
    AlterUserScramCredentialsRequestData,
    AlterUserScramCredentialsResponseData,
    DescribeUserScramCredentialsRequestData,
    DescribeUserScramCredentialsResponseData,
    SaslAuthenticateResponseData,
    SaslHandshakeResponseData,
)
from ..security import AclOperation, KafkaPrincipal
from ..security.jaas import PLAIN_LOGIN_MODULE, parse_jaas_config
from ..security.plain import PLAIN, PlainServer, password_matches
from ..security.quotas import desanitize, sanitize
from ..security.sasl import SaslError, SaslServer
from ..security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MECHANISMS_BY_ID,
    ScramCredential,
    ScramServer,
    credential_from_salted,
)
from ..storage.fileio import write_atomically
from .acl_authorizer import NO_AUTHORIZER, BrokerAuthorizer
from .routes import Route, Routes

log = logging.getLogger(__name__)

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_MECHANISMS = (PLAIN, *MECHANISMS)
# the file of a broker without ZooKeeper that holds its users' SCRAM credentials, in its first log dir
CREDENTIALS_FILE = "scram-credentials.json"
REAUTH_KEY = "connections.max.reauth.ms"  # a SASL session's lifetime, set per listener and mechanism too
# what an unauthenticated connection may send besides the SASL requests
_BEFORE_AUTHENTICATION = frozenset({ApiKey.API_VERSIONS})


def _generic_failure(mechanism: str, reauthenticating: bool) -> str:
    """Kafka's answer to a refused exchange whose reason the client must not learn."""
    phase = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {phase} due to invalid credentials with SASL mechanism {mechanism}"


# --- the SCRAM credentials -----------------------------------------------------------------------


class ScramCredentials:
    """Users' SCRAM credentials by user and mechanism, as Kafka keeps them: each user's a map of
    mechanism name to the stored form (``ScramCredential.format``). ``save`` is where a change
    goes (the log dir's file, or ZooKeeper); the broker's reads come from memory."""

    def __init__(self, save: Callable[[str, dict[str, str]], None] | None = None) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self.save = save  # set by the store that keeps them (ZkCredentials joins once the broker has)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def mechanisms(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._users.get(user, {}))

    def users(self) -> list[str]:
        return sorted(u for u, found in self._users.items() if found)

    def load(self, user: str, stored: Mapping[str, str]) -> None:
        """A user's credentials as stored (a config map: keys other than mechanisms are left out)."""
        found = {}
        for mechanism, text in stored.items():
            if mechanism in MECHANISMS:
                try:
                    found[mechanism] = ScramCredential.parse(text)
                except ValueError as e:
                    log.warning("user %s: %s credential not loaded: %s", user, mechanism, e)
        if found:
            self._users[user] = found
        else:
            self._users.pop(user, None)

    def alter(self, user: str, changes: Mapping[str, ScramCredential | None]) -> None:
        """A user's credentials set (or, for None, deleted), saved, then served."""
        found = self.mechanisms(user)
        for mechanism, change in changes.items():
            if change is None:
                found.pop(mechanism, None)
            else:
                found[mechanism] = change
        stored = {m: c.format() for m, c in found.items()}
        if self.save is not None:
            self.save(user, stored)
        self.load(user, stored)


class LogDirCredentials:
    """A broker's SCRAM credentials without ZooKeeper: a JSON file of ``{user: {mechanism:
    stored form}}`` in its log dir, readable by its owner only, replaced whole by each change."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, CREDENTIALS_FILE)
        self.credentials = ScramCredentials(self._save)
        self._stored: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        try:
            with open(self.path, encoding="utf-8") as f:
                stored = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            raise InvalidConfigurationError(f"the SCRAM credentials do not load: {e}", file=self.path) from None
        if not isinstance(stored, dict):
            raise InvalidConfigurationError("the SCRAM credentials are not a JSON object", file=self.path)
        for user, mechanisms in stored.items():
            if isinstance(mechanisms, dict):
                self._stored[user] = {str(k): str(v) for k, v in mechanisms.items()}
                self.credentials.load(user, self._stored[user])

    def _save(self, user: str, stored: dict[str, str]) -> None:
        everyone = {**self._stored, user: stored}
        if not stored:
            del everyone[user]
        # a crash leaves the old file or the new one, whole; readable by the broker's user only
        write_atomically(self.path, json.dumps(everyone, indent=1, sort_keys=True).encode(), mode=0o600)
        self._stored = everyone


class ZkCredentials:
    """A cluster's SCRAM credentials, in ZooKeeper as Kafka keeps them: ``/config/users/<user>``
    holds ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,..."}}`` (beside the
    user's other configs, quotas, which a change keeps), and each change is announced by a
    ``/config/changes/config_change_<seq>`` notification of ``users/<user>`` that every broker
    watches (``reload``; the cluster member reads every user once as it joins)."""

    def __init__(self, zk: Any, credentials: ScramCredentials) -> None:
        self.zk = zk
        self.credentials = credentials
        credentials.save = self._save

    def config_changed(self, entity_path: str) -> None:
        """A /config/changes notification of a user (``users/<name>``; a user's client id,
        ``users/<name>/clients/<id>``, holds quotas only)."""
        kind, _, name = entity_path.partition("/")
        if kind == "users" and name and "/" not in name:
            self.reload(desanitize(name))

    def reload(self, user: str) -> None:
        """One user's credentials read again (its config change notification)."""
        path = _user_path(user)
        found = self.zk.get(path)
        self.credentials.load(user, znodes.decode_config(found[0] if found else None, path))

    def _save(self, user: str, stored: dict[str, str]) -> None:
        # at the version read, the user's other keys (quotas) kept: a concurrent quota change is not lost
        def changed(config: dict[str, str]) -> dict[str, str]:
            return {**{k: v for k, v in config.items() if k not in MECHANISMS}, **stored}

        change_entity_config(self.zk, f"users/{sanitize(user)}", changed)


def _user_path(user: str) -> str:
    return znodes.config_path("users", sanitize(user))


# --- a listener's SASL ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ListenerSasl:
    """What one SASL listener offers and checks against."""

    listener: str
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]  # PLAIN's, from the JAAS config: passwords
    credentials: ScramCredentials
    reauth_ms: Mapping[str, int]  # connections.max.reauth.ms by mechanism: 0, sessions never end
    failure_delay_s: float

    def __repr__(self) -> str:
        return f"ListenerSasl({self.listener}, {', '.join(self.mechanisms)})"

    def server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            users = self.plain_users
            return PlainServer(lambda user, password: password_matches(users.get(user), password))
        return ScramServer(MECHANISMS[mechanism], lambda user: self.credentials.get(user, mechanism))


def listener_sasl(config: BrokerConfig, listener: str, credentials: ScramCredentials) -> ListenerSasl:
    """A SASL listener's mechanisms and users from the broker's config, checked at startup."""
    key = config.listener_key(listener, "sasl.enabled.mechanisms")
    mechanisms = tuple(m.strip().upper() for m in config[key] if m.strip())
    if not mechanisms:
        raise InvalidConfigurationError(f"{key} is empty: SASL listener {listener} needs a mechanism")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise InvalidConfigurationError(
            f"{key}: {', '.join(unsupported)} is not a SASL mechanism seglog supports "
            f"(it supports {', '.join(SUPPORTED_MECHANISMS)}); listener {listener} cannot start"
        )
    plain_users: dict[str, str] = {}
    if PLAIN in mechanisms:
        plain_users = _plain_users(config, listener)
    return ListenerSasl(
        listener,
        mechanisms,
        plain_users,
        credentials,
        {mechanism: _reauth_ms(config, listener, mechanism) for mechanism in mechanisms},
        config["connection.failed.authentication.delay.ms"] / 1000,
    )


def _reauth_ms(config: BrokerConfig, listener: str, mechanism: str) -> int:
    """A mechanism's session lifetime on a listener, as Kafka's SaslChannelBuilder finds it:
    ``listener.name.<l>.<mechanism>.connections.max.reauth.ms``, else the listener's
    ``listener.name.<l>.connections.max.reauth.ms``, else the broker's."""
    own = config.listener_key(f"{listener}.{mechanism.lower()}", REAUTH_KEY)
    return int(config[own] if own != REAUTH_KEY else config.for_listener(listener, REAUTH_KEY))


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    """PLAIN's users: the ``user_<name>`` options of the listener's PLAIN JAAS config."""
    key = config.listener_key(f"{listener}.plain", "sasl.jaas.config")
    text = config[key]
    if text is None:
        raise InvalidConfigurationError(
            f"listener {listener} enables PLAIN without its users: set "
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config to a {PLAIN_LOGIN_MODULE} "
            'with user_<name>="<password>" options'
        )
    module = parse_jaas_config(text, key)
    if module.name != PLAIN_LOGIN_MODULE:
        raise InvalidConfigurationError(f"{key}: PLAIN's login module is {PLAIN_LOGIN_MODULE}, not {module.name}")
    return {name[len("user_") :]: value for name, value in module.options.items() if name.startswith("user_")}


# --- a connection's authentication ---------------------------------------------------------------


class AuthState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslAuthenticator:
    """One connection's SASL: the network's ``Authenticator`` and the server's gate."""

    def __init__(self, sasl: ListenerSasl, peer: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.sasl = sasl
        self.peer = peer
        self.state = AuthState.HANDSHAKE
        self.raw_tokens = False  # after SaslHandshake v0: bare tokens, no headers
        self._clock = clock
        self._server: SaslServer | None = None
        self._principal: KafkaPrincipal | None = None  # once authenticated
        self._expires: float | None = None  # the session's end (monotonic), when it has one

    def takes(self, request: Request) -> bool:
        """Whether ``request`` is the authenticator's (``handle``) rather than the broker's. An
        unauthenticated connection's requests are all its but ApiVersions."""
        key = request.header.api_key
        if self.state is AuthState.COMPLETE:
            if key == ApiKey.SASL_HANDSHAKE and self._reauth_ms() > 0:
                return True  # re-authentication (KIP-368): a session may be renewed even past its end
            return self._expires is not None and self._clock() >= self._expires
        return not (self.state is AuthState.HANDSHAKE and key in _BEFORE_AUTHENTICATION)

    async def handle(self, request: Request, conn: Any) -> Any:
        """The answer to a request ``takes`` claimed; IllegalSaslStateError closes the connection."""
        key = request.header.api_key
        if self.state is AuthState.COMPLETE and key != ApiKey.SASL_HANDSHAKE:
            raise IllegalSaslStateError(f"the SASL session of {self._principal} expired: closing its connection")
        if key == ApiKey.SASL_HANDSHAKE and self.state in (AuthState.HANDSHAKE, AuthState.COMPLETE):
            return self._handshake(request, conn)
        if key == ApiKey.SASL_AUTHENTICATE and self.state is AuthState.AUTHENTICATE and not self.raw_tokens:
            answer, refusal = await self._evaluate(request.body.auth_bytes)
            if refusal is not None:
                conn.close_after_response = True
                failed = ErrorCode.SASL_AUTHENTICATION_FAILED
                return SaslAuthenticateResponseData(error_code=failed, error_message=refusal)
            lifetime = self._lifetime(conn) if self.state is AuthState.COMPLETE else 0
            return SaslAuthenticateResponseData(auth_bytes=answer, session_lifetime_ms=lifetime)
        self.state = AuthState.FAILED
        raise IllegalSaslStateError(f"Unexpected Kafka request of type {key.name} during SASL handshake.")

    def _handshake(self, request: Request, conn: Any) -> SaslHandshakeResponseData:
        mechanism = request.body.mechanism
        enabled = list(self.sasl.mechanisms)
        previous = self._server.mechanism if self._server is not None else None
        if mechanism not in self.sasl.mechanisms or (previous is not None and mechanism != previous):
            # as Kafka: the mechanisms offered, then the connection closed (a re-authentication
            # keeps its mechanism)
            self.state = AuthState.FAILED
            conn.close_after_response = True
            log.info("failed authentication with %s (unsupported SASL mechanism %s)", self.peer, mechanism[:64])
            return SaslHandshakeResponseData(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
        self._server = self.sasl.server(mechanism)
        self.raw_tokens = request.header.api_version == 0
        self.state = AuthState.AUTHENTICATE
        return SaslHandshakeResponseData(mechanisms=enabled)

    async def token(self, token: bytes, conn: Any) -> bytes | None:
        """A bare token of the v0 exchange: the mechanism's answer, or None (refused: close)."""
        answer, refusal = await self._evaluate(token)
        if refusal is not None:
            return None
        if self.state is AuthState.COMPLETE:
            self.raw_tokens = False  # Kafka requests from here on
            self._lifetime(conn)
        return answer

    async def _evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        """The mechanism's answer, the exchange completed when it says so; or the refusal the
        client is told, after the failed-authentication delay."""
        server = self._server
        assert server is not None
        reauthenticating = self._principal is not None
        try:
            answer = server.evaluate(token)
            if server.complete:
                self._authenticated(KafkaPrincipal("User", server.authorization_id))
            return answer, None
        except SaslAuthenticationError as e:
            refusal, reason = e.message, e.message
        except SaslError as e:
            refusal, reason = _generic_failure(server.mechanism, reauthenticating), str(e)
        self.state = AuthState.FAILED
        log.info("failed authentication with %s (%s)", self.peer, reason)
        await asyncio.sleep(self.sasl.failure_delay_s)
        return b"", refusal

    def _authenticated(self, principal: KafkaPrincipal) -> None:
        if self._principal is not None and principal != self._principal:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {self._principal}: {principal}"
            )
        self._principal = principal
        self.state = AuthState.COMPLETE

    def _lifetime(self, conn: Any) -> int:
        """The session just authenticated: the connection's principal set, its end reckoned; the
        lifetime the client is told (0: none)."""
        conn.principal = self._principal
        conn.request_context = None  # made again, with the principal, for the next request
        lifetime = self._reauth_ms()
        if lifetime <= 0:
            return 0
        self._expires = self._clock() + lifetime / 1000
        return lifetime

    def _reauth_ms(self) -> int:
        """The session lifetime of the mechanism in use (0: none yet, or sessions never end)."""
        return self.sasl.reauth_ms[self._server.mechanism] if self._server is not None else 0


# --- the APIs ------------------------------------------------------------------------------------


class SaslApis:
    """SaslHandshake and SaslAuthenticate where no authenticator takes them (a listener without
    SASL, or a connection already authenticated without re-authentication), answered
    ILLEGAL_SASL_STATE as Kafka's KafkaApis answers them; and SCRAM credentials' administration
    (KIP-554)."""

    def __init__(
        self,
        credentials: ScramCredentials,
        run: Callable[[Callable[[], None]], Any],
        authorizer: BrokerAuthorizer = NO_AUTHORIZER,
    ) -> None:
        self.credentials = credentials
        self._run = run  # a change saved off the event loop (a file, ZooKeeper): awaited
        self.authorizer = authorizer

    def routes(self) -> Routes:
        return {
            ApiKey.SASL_HANDSHAKE: Route(self.sasl_handshake, (0, 1)),
            ApiKey.SASL_AUTHENTICATE: Route(self.sasl_authenticate, (0, 2)),
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: Route(self.describe_user_scram_credentials, (0, 0)),
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: Route(self.alter_user_scram_credentials, (0, 0)),
        }

    async def sasl_handshake(self, version: int, request: Any) -> SaslHandshakeResponseData:
        return SaslHandshakeResponseData(error_code=ErrorCode.ILLEGAL_SASL_STATE)

    async def sasl_authenticate(self, version: int, request: Any) -> SaslAuthenticateResponseData:
        return SaslAuthenticateResponseData(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication",
        )

    async def describe_user_scram_credentials(
        self, version: int, request: DescribeUserScramCredentialsRequestData
    ) -> DescribeUserScramCredentialsResponseData:
        Result = DescribeUserScramCredentialsResponseData.DescribeUserScramCredentialsResult
        Info = DescribeUserScramCredentialsResponseData.CredentialInfo
        asked = [u.name for u in request.users or ()]
        if not self.authorizer.authorize_cluster(AclOperation.DESCRIBE):  # as Kafka: every user refused
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Describe on the cluster is not authorized"
            refused = [Result(user=u, error_code=denied[0], error_message=denied[1]) for u in dict.fromkeys(asked)]
            return DescribeUserScramCredentialsResponseData(
                error_code=denied[0], error_message=denied[1], results=refused
            )
        results: list[Any] = []
        for user in asked or self.credentials.users():
            found = self.credentials.mechanisms(user)
            if asked.count(user) > 1:
                code, message = (
                    ErrorCode.DUPLICATE_RESOURCE,
                    f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}",
                )
            elif not found:
                code, message = (
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {user}",
                )
            else:
                code, message = ErrorCode.NONE, None
            infos = [
                Info(mechanism=MECHANISMS[m].mechanism_id, iterations=c.iterations)
                for m, c in sorted(found.items())
                if code == ErrorCode.NONE
            ]
            if not any(r.user == user for r in results):
                results.append(Result(user=user, error_code=code, error_message=message, credential_infos=infos))
        return DescribeUserScramCredentialsResponseData(error_message=None, results=results)

    async def alter_user_scram_credentials(
        self, version: int, request: AlterUserScramCredentialsRequestData
    ) -> AlterUserScramCredentialsResponseData:
        Result = AlterUserScramCredentialsResponseData.AlterUserScramCredentialsResult
        if not self.authorizer.authorize_cluster(AclOperation.ALTER):  # as Kafka: every user refused
            denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Alter on the cluster is not authorized"
            users = dict.fromkeys(u for u, _, _ in _alterations(request))
            return AlterUserScramCredentialsResponseData(
                results=[Result(user=u, error_code=denied[0], error_message=denied[1]) for u in users]
            )
        refused: dict[str, tuple[ErrorCode, str]] = {}
        changes: dict[str, dict[str, ScramCredential | None]] = {}
        for user, mechanism_id, change in _alterations(request):
            problem = self._check(user, mechanism_id, change, changes, deletion=change is None)
            if problem is not None:
                refused.setdefault(user, problem)
                continue
            mechanism = MECHANISMS_BY_ID[mechanism_id]
            changes.setdefault(user, {})[mechanism.name] = (
                None
                if change is None
                else credential_from_salted(mechanism, change.salted_password, change.salt, change.iterations)
            )
        results: list[Any] = []
        for user in dict.fromkeys(u for u, _, _ in _alterations(request)):
            if user in refused:
                code, message = refused[user]
                results.append(Result(user=user, error_code=code, error_message=message))
                continue
            try:
                await self._run(functools.partial(self.credentials.alter, user, changes[user]))
            except Exception as e:  # ZooKeeper or the disk: this user's change did not happen
                log.warning("SCRAM credentials of %s not altered: %s", user, e)
                results.append(Result(user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(e)))
                continue
            log.info("SCRAM credentials of %s altered: %s", user, ", ".join(sorted(changes[user])))
            results.append(Result(user=user, error_code=ErrorCode.NONE, error_message=None))
        return AlterUserScramCredentialsResponseData(results=results)

    def _check(
        self,
        user: str,
        mechanism_id: int,
        change: Any,
        changes: Mapping[str, Mapping[str, Any]],
        *,
        deletion: bool,
    ) -> tuple[ErrorCode, str] | None:
        """Kafka's checks of one alteration (ZkAdminManager.alterUserScramCredentials)."""
        if not user:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        mechanism = MECHANISMS_BY_ID.get(mechanism_id)
        if mechanism is None:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        if mechanism.name in changes.get(user, {}):
            return ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
        if deletion:
            if self.credentials.get(user, mechanism.name) is None:
                return ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
            return None
        if change.iterations < mechanism.min_iterations:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
        if change.iterations > MAX_ITERATIONS:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
        if not change.salt or not change.salted_password:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "A SCRAM credential needs a salt and a salted password"
        return None


def _alterations(request: AlterUserScramCredentialsRequestData) -> Iterable[tuple[str, int, Any]]:
    """(user, mechanism id, the upsertion or None for a deletion), deletions first as Kafka takes them."""
    for d in request.deletions:
        yield d.name, d.mechanism, None
    for u in request.upsertions:
        yield u.name, u.mechanism, u
