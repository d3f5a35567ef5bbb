"""SCRAM (RFC 5802; SCRAM-SHA-256 by RFC 7677, SCRAM-SHA-512 as Kafka adds it), both sides as
state machines, and the credentials a broker keeps as Kafka keeps them.

    SaltedPassword = PBKDF2(HMAC-H, password, salt, iterations)
    ClientKey = HMAC(SaltedPassword, "Client Key")   StoredKey = H(ClientKey)
    ServerKey = HMAC(SaltedPassword, "Server Key")
    AuthMessage = client-first-bare "," server-first "," client-final-without-proof
    ClientProof = ClientKey XOR HMAC(StoredKey, AuthMessage)
    ServerSignature = HMAC(ServerKey, AuthMessage)

The broker stores only salt, StoredKey, ServerKey and iterations (``ScramCredential``), as
Kafka's ``ScramCredentialUtils`` writes them in ``/config/users/<user>``:
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``. It checks a proof by
recovering ClientKey from it and comparing H(ClientKey) with StoredKey in constant time.

The exchange, messages as RFC 5802 writes them (no channel binding: gs2 header ``n,,`` or
``n,a=<authzid>,``; ``biws`` is base64 of ``n,,``)::

    client-first   n,,n=<user>,r=<client nonce>
    server-first   r=<client nonce><server nonce>,s=<b64 salt>,i=<iterations>
    client-final   c=<b64 gs2 header>,r=<nonce>,p=<b64 ClientProof>
    server-final   v=<b64 ServerSignature>

The server's states (``ScramServer``)::

    state                  token          next                  answer
    RECEIVE_CLIENT_FIRST   client-first   RECEIVE_CLIENT_FINAL  server-first
    RECEIVE_CLIENT_FINAL   client-final   COMPLETE              server-final (proof verified)
    any                    anything else  FAILED                SaslError

The client's (``ScramClient``)::

    state                  token          next                  answer
    SEND_CLIENT_FIRST      (first_token)  RECEIVE_SERVER_FIRST  client-first
    RECEIVE_SERVER_FIRST   server-first   RECEIVE_SERVER_FINAL  client-final
    RECEIVE_SERVER_FINAL   server-final   COMPLETE              None (signature verified)
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import SaslAuthenticationError
from .sasl import SaslError

# Kafka's bounds on iterations (ScramMechanism's minimum; AlterUserScramCredentials' maximum)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramMechanism:
    name: str
    hash_name: str  # hashlib's
    mechanism_id: int  # its id in Describe/AlterUserScramCredentials (Kafka's ScramMechanism.type)
    min_iterations: int = MIN_ITERATIONS

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.digest(key, data, self.hash_name)

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        # RFC 5802 asks for SASLprep: Kafka's ScramFormatter normalizes nothing, and neither does this
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2)
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_ID = {m.mechanism_id: m for m in MECHANISMS.values()}


@dataclass(frozen=True)
class ScramCredential:
    """What a broker knows of a user's password for one mechanism."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # the keys are as good as the password to a server: never shown
        return f"ScramCredential(iterations={self.iterations})"

    def format(self) -> str:
        """Kafka's ``ScramCredentialUtils.credentialToString``."""
        b64 = _b64
        return (
            f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},"
            f"server_key={b64(self.server_key)},iterations={self.iterations}"
        )

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Kafka's stored form back; ValueError naming the field (never a value) when malformed."""
        fields = dict(item.partition("=")[::2] for item in text.split(","))
        try:
            return cls(
                _unb64(fields["salt"]),
                _unb64(fields["stored_key"]),
                _unb64(fields["server_key"]),
                int(fields["iterations"]),
            )
        except KeyError as e:
            raise ValueError(f"a SCRAM credential without {e.args[0]}") from None
        except (ValueError, binascii.Error):
            raise ValueError("a SCRAM credential with a field that does not decode") from None


def credential(mechanism: ScramMechanism, password: str, iterations: int, salt: bytes | None = None) -> ScramCredential:
    """A user's credential from the password (a fresh random salt unless given)."""
    salt = secrets.token_bytes(32) if salt is None else salt
    return credential_from_salted(mechanism, mechanism.salted_password(password, salt, iterations), salt, iterations)


def credential_from_salted(
    mechanism: ScramMechanism, salted_password: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential from a salted password (as AlterUserScramCredentials carries it)."""
    client_key = mechanism.hmac(salted_password, b"Client Key")
    server_key = mechanism.hmac(salted_password, b"Server Key")
    return ScramCredential(salt, mechanism.hash(client_key), server_key, iterations)


# --- messages ------------------------------------------------------------------------------------

_CLIENT_FIRST = re.compile(
    r"(?P<gs2>n,(?:a=(?P<authzid>[^,]*))?,)"
    r"(?P<bare>(?:m=[^,]*,)?n=(?P<name>[^,]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?P<extensions>(?:,[a-z]=[^,]*)*))"
)
_SERVER_FIRST = re.compile(
    r"(?:m=[^,]*,)?r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>[^,]+),i=(?P<iterations>\d+)(?:,.*)?"
)
_CLIENT_FINAL = re.compile(
    r"(?P<without_proof>c=(?P<binding>[^,]*),r=(?P<nonce>[^,]+)(?:,[a-z]=[^,]*)*?),p=(?P<proof>[^,]+)"
)
_SERVER_FINAL = re.compile(r"(?:e=(?P<error>[^,]*)|v=(?P<signature>[^,]+))(?:,.*)?")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _sasl_name(username: str) -> str:
    """RFC 5802's saslname: ``,`` and ``=`` escaped."""
    return username.replace("=", "=3D").replace(",", "=2C")


def _username(sasl_name: str) -> str:
    if re.search(r"=(?!2C|3D)", sasl_name):
        raise SaslError("Invalid username: '=' not followed by 2C or 3D")
    return sasl_name.replace("=2C", ",").replace("=3D", "=")


def _decode(token: bytes, what: str) -> str:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError(f"the {what} is not UTF-8") from None


def _nonce() -> str:
    # printable, no ',': RFC 5802's c-nonce / s-nonce
    return secrets.token_urlsafe(24)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


# --- the server ----------------------------------------------------------------------------------


class ServerState(enum.Enum):
    RECEIVE_CLIENT_FIRST = "receive client-first"
    RECEIVE_CLIENT_FINAL = "receive client-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramServer:
    """The broker's side: ``credentials(user)`` gives the user's credential for this mechanism
    (None: no such user)."""

    def __init__(
        self,
        mechanism: ScramMechanism,
        credentials: Callable[[str], ScramCredential | None],
        nonce: Callable[[], str] = _nonce,
    ) -> None:
        self.mechanism = mechanism.name
        self._scram = mechanism
        self._credentials = credentials
        self._make_nonce = nonce
        self.state = ServerState.RECEIVE_CLIENT_FIRST
        self._user = ""
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._auth_prefix = ""  # client-first-bare "," server-first
        self._gs2 = ""
        self._handlers = {
            ServerState.RECEIVE_CLIENT_FIRST: self._client_first,
            ServerState.RECEIVE_CLIENT_FINAL: self._client_final,
        }

    def evaluate(self, token: bytes) -> bytes:
        handler = self._handlers.get(self.state)
        if handler is None:
            raise SaslError(f"a SCRAM token in state {self.state.value}")
        try:
            return handler(_decode(token, "SCRAM message"))
        except BaseException:
            self.state = ServerState.FAILED
            raise

    def _client_first(self, text: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(text)
        if m is None:
            raise SaslError("Invalid SCRAM client first message")
        if m["extensions"] and "tokenauth=true" in m["extensions"]:
            raise SaslError("delegation tokens are not supported")
        user = _username(m["name"])
        authzid = m["authzid"]
        if authzid and _username(authzid) != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        found = self._credentials(user)
        if found is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        if found.iterations < self._scram.min_iterations:
            raise SaslError(f"Iterations {found.iterations} is less than the minimum {self._scram.min_iterations}")
        self._user, self._credential, self._gs2 = user, found, m["gs2"]
        self._nonce = m["nonce"] + self._make_nonce()
        server_first = f"r={self._nonce},s={_b64(found.salt)},i={found.iterations}"
        self._auth_prefix = f"{m['bare']},{server_first}"
        self.state = ServerState.RECEIVE_CLIENT_FINAL
        return server_first.encode()

    def _client_final(self, text: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(text)
        if m is None:
            raise SaslError("Invalid SCRAM client final message")
        # Kafka's check (ScramSaslServer): the nonce ends with the server-first's. librdkafka before
        # 2.1 sends its own nonce before the whole of that one, and Kafka's brokers accept it
        if not m["nonce"].endswith(self._nonce):
            raise SaslError("Invalid client nonce in the final client message.")
        if m["binding"] != _b64(self._gs2.encode()):
            raise SaslError("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._auth_prefix},{m['without_proof']}".encode()
        try:
            proof = _unb64(m["proof"])
        except (ValueError, binascii.Error):
            raise SaslError("Invalid client proof: not base64") from None
        signature = self._scram.hmac(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        if not hmac.compare_digest(self._scram.hash(_xor(proof, signature)), credential.stored_key):
            raise SaslError("Invalid client credentials")
        self.state = ServerState.COMPLETE
        return f"v={_b64(self._scram.hmac(credential.server_key, auth_message))}".encode()

    @property
    def complete(self) -> bool:
        return self.state is ServerState.COMPLETE

    @property
    def authorization_id(self) -> str:
        if not self.complete:
            raise SaslError("SCRAM authentication is not complete")
        return self._user


# --- the client ----------------------------------------------------------------------------------


class ClientState(enum.Enum):
    SEND_CLIENT_FIRST = "send client-first"
    RECEIVE_SERVER_FIRST = "receive server-first"
    RECEIVE_SERVER_FINAL = "receive server-final"
    COMPLETE = "complete"
    FAILED = "failed"


class ScramClient:
    def __init__(self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None) -> None:
        self.mechanism = mechanism.name
        self._scram = mechanism
        self._password = password
        self._nonce = nonce or _nonce()
        self._bare = f"n={_sasl_name(username)},r={self._nonce}"
        self._auth_message = b""
        self._server_key = b""
        self.state = ClientState.SEND_CLIENT_FIRST

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism}, {self.state.value})"

    def first_token(self) -> bytes:
        if self.state is not ClientState.SEND_CLIENT_FIRST:
            raise SaslError(f"the client-first message in state {self.state.value}")
        self.state = ClientState.RECEIVE_SERVER_FIRST
        return f"n,,{self._bare}".encode()

    def evaluate(self, token: bytes) -> bytes | None:
        try:
            if self.state is ClientState.RECEIVE_SERVER_FIRST:
                return self._server_first(_decode(token, "server-first message"))
            if self.state is ClientState.RECEIVE_SERVER_FINAL:
                self._server_final(_decode(token, "server-final message"))
                return None
        except BaseException:
            self.state = ClientState.FAILED
            raise
        raise SaslError(f"a SCRAM token in state {self.state.value}")

    def _server_first(self, text: str) -> bytes:
        m = _SERVER_FIRST.fullmatch(text)
        if m is None:
            raise SaslError("Invalid SCRAM server first message")
        nonce, iterations = m["nonce"], int(m["iterations"])
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslError("Invalid server nonce: does not start with the client nonce")
        if iterations < self._scram.min_iterations:
            raise SaslError(f"Requested iterations {iterations} is less than the minimum {self._scram.min_iterations}")
        try:
            salt = _unb64(m["salt"])
        except (ValueError, binascii.Error):
            raise SaslError("Invalid salt: not base64") from None
        salted = self._scram.salted_password(self._password, salt, iterations)
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = self._scram.hmac(salted, b"Client Key")
        proof = _xor(client_key, self._scram.hmac(self._scram.hash(client_key), self._auth_message))
        self._server_key = self._scram.hmac(salted, b"Server Key")
        self.state = ClientState.RECEIVE_SERVER_FINAL
        return f"{without_proof},p={_b64(proof)}".encode()

    def _server_final(self, text: str) -> None:
        m = _SERVER_FINAL.fullmatch(text)
        if m is None:
            raise SaslError("Invalid SCRAM server final message")
        if m["error"] is not None:
            raise SaslAuthenticationError(f"Sasl authentication using {self.mechanism} failed with error: {m['error']}")
        expected = self._scram.hmac(self._server_key, self._auth_message)
        if not hmac.compare_digest(_unb64(m["signature"]), expected):
            raise SaslError("Invalid server signature in server final message")
        self.state = ClientState.COMPLETE
