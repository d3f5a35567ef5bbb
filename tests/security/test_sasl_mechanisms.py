"""The SASL mechanisms against the RFCs' published exchanges (RFC 5802's SCRAM-SHA-1, RFC 7677's
SCRAM-SHA-256), both sides, and Kafka's stored credential form."""

from __future__ import annotations

import base64

import pytest

from seglog.errors import InvalidConfigurationError, SaslAuthenticationError
from seglog.security.jaas import parse_jaas_config
from seglog.security.plain import INVALID_CREDENTIALS, PlainClient, PlainServer, password_matches
from seglog.security.sasl import SaslError
from seglog.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    ServerState,
    credential,
)

SHA_1 = ScramMechanism("SCRAM-SHA-1", "sha1", 0)  # RFC 5802's example mechanism, for its vector only

# (mechanism, client nonce, server nonce part, salt, client-first, server-first, client-final, server-final)
VECTORS = {
    "rfc5802": (
        SHA_1,
        "fyko+d2lbbFgONRv9qkxdawL",
        "3rfcNHYJY1ZVvWVs7j",
        "QSXCR+Q6sek8bf92",
        "n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
        "r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
        "c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
        "v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
    ),
    "rfc7677": (
        SCRAM_SHA_256,
        "rOprNGfwEbeRWgbNEkqO",
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        "W22ZaJ0SNY7soEsUEjb6gQ==",
        "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
        "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
    ),
}


@pytest.mark.parametrize("name", VECTORS)
def test_the_client_sends_the_rfcs_messages(name: str) -> None:
    mechanism, nonce, _, _, first, server_first, final, server_final = VECTORS[name]
    client = ScramClient(mechanism, "user", "pencil", nonce=nonce)
    assert client.first_token().decode() == first
    assert client.evaluate(server_first.encode()) == final.encode()
    assert client.evaluate(server_final.encode()) is None


@pytest.mark.parametrize("name", VECTORS)
def test_the_server_answers_the_rfcs_messages_from_a_stored_credential(name: str) -> None:
    mechanism, _, server_nonce, salt, first, server_first, final, server_final = VECTORS[name]
    stored = credential(mechanism, "pencil", 4096, base64.b64decode(salt))
    server = ScramServer(mechanism, {"user": stored}.get, nonce=lambda: server_nonce)
    assert server.evaluate(first.encode()).decode() == server_first
    assert not server.complete
    assert server.evaluate(final.encode()).decode() == server_final
    assert server.complete and server.authorization_id == "user"


def test_a_wrong_proof_and_an_unknown_user_fail() -> None:
    _, _, server_nonce, salt, first, _, final, _ = VECTORS["rfc7677"]
    stored = credential(SCRAM_SHA_256, "not pencil", 4096, base64.b64decode(salt))
    server = ScramServer(SCRAM_SHA_256, {"user": stored}.get, nonce=lambda: server_nonce)
    server.evaluate(first.encode())
    with pytest.raises(SaslError, match="Invalid client credentials"):
        server.evaluate(final.encode())
    assert server.state is ServerState.FAILED
    with pytest.raises(SaslError):  # a failed exchange takes nothing more
        server.evaluate(final.encode())
    with pytest.raises(SaslError, match="Invalid user credentials"):
        ScramServer(SCRAM_SHA_256, {}.get).evaluate(first.encode())


def test_a_nonce_or_channel_binding_not_the_servers_fails() -> None:
    stored = credential(SCRAM_SHA_512, "secret", 4096)
    for final in ("c=biws,r=other,p=AAAA", "c=eSws,r={nonce},p=AAAA"):
        server = ScramServer(SCRAM_SHA_512, {"bob": stored}.get)
        nonce = server.evaluate(b"n,,n=bob,r=abc").decode().split(",")[0][2:]
        with pytest.raises(SaslError, match=r"nonce|channel binding"):
            server.evaluate(final.format(nonce=nonce).encode())


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_client_and_server_agree_on_random_nonces_and_salts(mechanism: ScramMechanism) -> None:
    stored = credential(mechanism, "p,a=s s", 4096)
    server = ScramServer(mechanism, {"a,b=c": stored}.get)
    client = ScramClient(mechanism, "a,b=c", "p,a=s s")
    first = client.first_token()
    assert first.startswith(b"n,,n=a=2Cb=3Dc,r=")
    final = client.evaluate(server.evaluate(first))
    assert final is not None
    assert client.evaluate(server.evaluate(final)) is None
    assert server.authorization_id == "a,b=c"


def test_the_client_refuses_a_forged_server_signature_and_few_iterations() -> None:
    stored = credential(SCRAM_SHA_256, "pw", 4096)
    server = ScramServer(SCRAM_SHA_256, {"u": stored}.get)
    client = ScramClient(SCRAM_SHA_256, "u", "pw")
    final = client.evaluate(server.evaluate(client.first_token()))
    assert final is not None
    server.evaluate(final)
    with pytest.raises(SaslError, match="server signature"):
        client.evaluate(b"v=" + base64.b64encode(b"x" * 32))
    weak = ScramClient(SCRAM_SHA_256, "u", "pw", nonce="abc")
    weak.first_token()
    with pytest.raises(SaslError, match="less than the minimum 4096"):
        weak.evaluate(b"r=abcdef,s=QSXCR+Q6sek8bf92,i=1000")


def test_a_credential_in_kafkas_stored_form_round_trips_and_hides_its_keys() -> None:
    stored = credential(SCRAM_SHA_512, "secret", 8192)
    text = stored.format()
    assert text.startswith("salt=") and ",stored_key=" in text and text.endswith(",iterations=8192")
    assert ScramCredential.parse(text) == stored
    assert "stored_key" not in repr(stored) and base64.b64encode(stored.stored_key).decode() not in repr(stored)
    with pytest.raises(ValueError, match="without server_key"):
        ScramCredential.parse("salt=AAAA,stored_key=AAAA,iterations=4096")


def test_plain_checks_the_password_and_says_what_kafka_says() -> None:
    users = {"alice": "alice-secret"}

    def check(user: str, password: str) -> bool:
        return password_matches(users.get(user), password)

    server = PlainServer(check)
    assert server.evaluate(PlainClient("alice", "alice-secret").first_token()) == b""
    assert server.complete and server.authorization_id == "alice"
    for token in (b"\0alice\0wrong", b"\0mallory\0alice-secret"):
        with pytest.raises(SaslAuthenticationError) as e:
            PlainServer(check).evaluate(token)
        assert str(e.value) == INVALID_CREDENTIALS
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        PlainServer(check).evaluate(b"bob\0alice\0alice-secret")
    with pytest.raises(SaslError, match="expected 3 tokens, got 2"):
        PlainServer(check).evaluate(b"alice\0alice-secret")


def test_jaas_config_as_kafka_reads_it() -> None:
    module = parse_jaas_config(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n  username="admin" '
        'password="a \\"quoted\\" secret" user_admin="admin-secret" user_alice=alice-secret;'
    )
    assert module.name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.flag == "required"
    assert module.options == {
        "username": "admin",
        "password": 'a "quoted" secret',
        "user_admin": "admin-secret",
        "user_alice": "alice-secret",
    }
    assert "secret" not in repr(module)


@pytest.mark.parametrize(
    "text",
    [
        'PlainLoginModule required user_a="secret-1"',  # no ';'
        'PlainLoginModule mandatory user_a="secret-1";',
        'PlainLoginModule required user_a "secret-1";',
        'A required; B required user_a="secret-1";',
        'PlainLoginModule required user_a="secret-1;',
    ],
)
def test_bad_jaas_configs_are_refused_without_their_secrets(text: str) -> None:
    with pytest.raises(InvalidConfigurationError) as e:
        parse_jaas_config(text)
    assert "secret-1" not in str(e.value)
