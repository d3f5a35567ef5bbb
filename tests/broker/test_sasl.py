"""SASL listeners with real clients: confluent-kafka and kafka-python produce and consume in groups
over SASL_PLAINTEXT with PLAIN and over SASL_SSL with SCRAM-SHA-512 (certificates made per run
with trustme), kcat over SASL_SSL; SCRAM users made and described with confluent-kafka's admin
client (AlterUserScramCredentials, DescribeUserScramCredentials); the denials Kafka makes (a wrong
password, an unknown user, a client that skips the handshake, a client without SASL), each
leaving the broker serving the others, nothing written and no secret in its output; the v0
exchange of bare tokens; re-authentication (KIP-368); bad SASL configs refused at startup."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kazoo.client import KazooClient

import seglog.broker
from seglog.cli import main
from seglog.client import connect
from seglog.errors import BrokerNotAvailableError, InvalidConfigurationError, SeglogError
from seglog.properties import parse_properties
from seglog.protocol import ApiKey, ClientConnection
from seglog.protocol.message_data import (
    MetadataRequestData,
    SaslAuthenticateRequestData,
    SaslHandshakeRequestData,
)
from seglog.security import KafkaPrincipal
from seglog.security.plain import PlainClient
from seglog.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramCredential, credential
from seglog.tools.cluster import LocalCluster

from ..clients.conftest import kafkajs_command, kcat_path, results, round_trip, run_ops  # noqa: F401
from ..cluster.conftest import chroot, zookeeper  # noqa: F401  (the cluster tests' real ZooKeeper)
from .conftest import PRODUCER, wait_for
from .test_hostile import API_VERSIONS_V0, _read_exact, _read_frame
from .test_tls import Pki, pki  # noqa: F401  (the TLS tests' certificates, made per run)

PLAIN_PASSWORDS = {"alice": "alice-pw-7f3a", "bob": "bob-pw-91c2"}
SCRAM_PASSWORDS = {"carol": "carol-pw-5e88", "dave": "dave-pw-c410"}
SECRETS = [*PLAIN_PASSWORDS.values(), *SCRAM_PASSWORDS.values(), "wrong-pw-0d1e"]
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    f'user_{user}="{password}"' for user, password in PLAIN_PASSWORDS.items()
)


@pytest.fixture(scope="module")
def broker(pki, tmp_path_factory) -> Iterator[Any]:  # noqa: F811
    config = {
        "num.partitions": 1,
        "offsets.topic.num.partitions": 1,
        "group.initial.rebalance.delay.ms": 0,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS + ";",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        "connection.failed.authentication.delay.ms": 50,
    }
    with seglog.broker.start(str(tmp_path_factory.mktemp("sasl-broker")), config=config) as running:
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        upsertions = [
            UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
            for user, password in SCRAM_PASSWORDS.items()
            for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)
        ]
        for future in admin.alter_user_scram_credentials(upsertions).values():
            future.result(30)
        yield running


@pytest.fixture(autouse=True)
def no_secret_in_the_log(caplog) -> Iterator[None]:
    with caplog.at_level(logging.DEBUG, logger="seglog"):
        yield
    for secret in SECRETS:
        assert secret not in caplog.text


def _plain(broker: Any, user: str = "alice", password: str | None = None) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": user,
        "sasl.password": PLAIN_PASSWORDS[user] if password is None else password,
    }


def _scram(
    broker: Any,
    pki: Pki,  # noqa: F811
    user: str = "carol",
    password: str | None = None,
    mechanism: str = "SCRAM-SHA-512",
) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.server.port_of('SASL_SSL')}",
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": pki.ca_file,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": SCRAM_PASSWORDS.get(user, "") if password is None else password,
    }


def _create(broker: Any, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    except KafkaException as e:  # made by an earlier test
        assert e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS


def _produce(conf: dict[str, Any], topic: str, count: int) -> None:
    producer = Producer({**conf, **PRODUCER})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"v%d" % i)
    assert producer.flush(60) == 0


def _consume_in_group(conf: dict[str, Any], topic: str, group: str, count: int) -> set[bytes]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 100})
    try:
        consumer.subscribe([topic])
        got: set[bytes] = set()
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.add(msg.value())
        consumer.commit(asynchronous=False)
        return got
    finally:
        consumer.close()


def _principals(broker: Any, listener: str) -> set[Any]:
    server = next(s for s in broker.server.socket_servers if s.listener == listener)
    return {c.principal for c in list(server.connections)}


def _end_offsets(broker: Any, topic: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "offsets"})
    try:
        return [consumer.get_watermark_offsets(_tp(topic, p), timeout=30)[1] for p in range(2)]
    finally:
        consumer.close()


def _tp(topic: str, partition: int, offset: int = -1001) -> Any:  # -1001: librdkafka's OFFSET_INVALID
    return TopicPartition(topic, partition, offset)


# --- real clients ---------------------------------------------------------------------------------


def test_confluent_kafka_with_plain_over_sasl_plaintext(broker) -> None:
    _create(broker, "plain-ck")
    _produce(_plain(broker), "plain-ck", 300)
    assert _consume_in_group(_plain(broker, "bob"), "plain-ck", "plain-ck-group", 300) == {
        b"v%d" % i for i in range(300)
    }
    producer = Producer(_plain(broker))  # a connection held open: its principal is the user's
    producer.list_topics(timeout=30)
    assert KafkaPrincipal("User", "alice") in wait_for(lambda: _principals(broker, "SASL_PLAINTEXT"))
    producer.flush(0)


def test_kafka_python_with_plain_over_sasl_plaintext(broker) -> None:
    _create(broker, "plain-kp")
    common = {
        "bootstrap_servers": f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}",
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "bob",
        "sasl_plain_password": PLAIN_PASSWORDS["bob"],
    }
    _kafka_python_round_trip(common, "plain-kp")


def _kafka_python_round_trip(common: dict[str, Any], topic: str) -> None:
    """100 records produced, then consumed in a group whose offsets are committed."""
    producer = KafkaProducer(**common)
    for i in range(100):
        producer.send(topic, b"kp%d" % i)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(
        topic, group_id=f"{topic}-group", auto_offset_reset="earliest", consumer_timeout_ms=20_000, **common
    )
    got = set()
    for msg in consumer:
        got.add(msg.value)
        if len(got) == 100:
            break
    consumer.commit()
    consumer.close()
    assert got == {b"kp%d" % i for i in range(100)}


def test_confluent_kafka_with_scram_sha_512_over_sasl_ssl(broker, pki) -> None:  # noqa: F811
    _create(broker, "scram-ck")
    _produce(_scram(broker, pki), "scram-ck", 300)
    got = _consume_in_group(_scram(broker, pki, "dave"), "scram-ck", "scram-ck-group", 300)
    assert got == {b"v%d" % i for i in range(300)}
    # SCRAM-SHA-256 too, on the same listener
    assert len(_consume_in_group(_scram(broker, pki, mechanism="SCRAM-SHA-256"), "scram-ck", "g256", 300)) == 300


def test_kafka_python_with_scram_sha_512_over_sasl_ssl(broker, pki) -> None:  # noqa: F811
    _create(broker, "scram-kp")
    common = {
        "bootstrap_servers": f"127.0.0.1:{broker.server.port_of('SASL_SSL')}",
        "security_protocol": "SASL_SSL",
        "ssl_cafile": pki.ca_file,
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "carol",
        "sasl_plain_password": SCRAM_PASSWORDS["carol"],
    }
    _kafka_python_round_trip(common, "scram-kp")
    # and a transaction, committed, beside one aborted
    producer = KafkaProducer(transactional_id="scram-kp-txn", **common)
    producer.init_transactions()
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(5):
            producer.send("scram-kp", b"%s-%d" % (b"kept" if commit else b"aborted", i), partition=0)
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close()
    consumer = KafkaConsumer(
        isolation_level="read_committed", auto_offset_reset="earliest", consumer_timeout_ms=5_000, **common
    )
    consumer.assign([KpTopicPartition("scram-kp", 0)])
    values = [msg.value for msg in consumer]
    consumer.close()
    assert [v for v in values if v.startswith((b"kept", b"aborted"))] == [b"kept-%d" % i for i in range(5)]


def test_kcat_with_scram_over_sasl_ssl(broker, pki) -> None:  # noqa: F811
    kcat = kcat_path()
    _create(broker, "scram-kcat")
    args = [
        kcat,
        "-b",
        f"127.0.0.1:{broker.server.port_of('SASL_SSL')}",
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        f"ssl.ca.location={pki.ca_file}",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-256",
        "-X",
        "sasl.username=dave",
        "-X",
        f"sasl.password={SCRAM_PASSWORDS['dave']}",
    ]
    lines = "".join(f"line {i}\n" for i in range(20))
    done = subprocess.run([*args, "-P", "-t", "scram-kcat", "-p", "0"], input=lines, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*args, "-C", "-t", "scram-kcat", "-p", "0", "-e", "-J", "-q"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert [json.loads(x)["payload"] for x in done.stdout.splitlines()] == [f"line {i}" for i in range(20)]


def test_kafkajs_with_scram_over_sasl_ssl(broker, pki, kafkajs_command) -> None:  # noqa: F811
    ops, expected = round_trip("scram-kafkajs", "gzip", "fetch", 0)
    request = {
        "bootstrap": f"127.0.0.1:{broker.server.port_of('SASL_SSL')}",
        "ca": pki.ca_file,
        "sasl": {"mechanism": "scram-sha-512", "username": "dave", "password": SCRAM_PASSWORDS["dave"]},
        "ops": ops,
    }
    created, sent_1, sent_all, from_start, _ = results(run_ops(kafkajs_command, request))
    assert created is True and sent_1[0]["error_code"] == sent_all[0]["error_code"] == 0
    assert from_start == expected


def test_confluent_kafka_transactions_over_sasl_ssl(broker, pki) -> None:  # noqa: F811
    _create(broker, "scram-txn")
    producer = Producer({**_scram(broker, pki), "transactional.id": "scram-txn-1"})
    producer.init_transactions(30)
    for commit in (True, False):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("scram-txn", b"%s-%d" % (b"kept" if commit else b"aborted", i), partition=0)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    consumer = Consumer({**_scram(broker, pki, "dave"), "group.id": "txn-reader", "isolation.level": "read_committed"})
    try:
        consumer.assign([_tp("scram-txn", 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert consumer.poll(1.0) is None  # the aborted ones never come
    finally:
        consumer.close()
    assert got == [b"kept-%d" % i for i in range(10)]


# --- SCRAM credentials' administration -------------------------------------------------------------


def test_scram_credentials_are_described_altered_and_deleted(broker, pki) -> None:  # noqa: F811
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert sorted((i.mechanism, i.iterations) for i in described.scram_credential_infos) == [
        (ScramMechanism.SCRAM_SHA_256, 4096),
        (ScramMechanism.SCRAM_SHA_512, 4096),
    ]
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials(["nobody"])["nobody"].result(30)
    with pytest.raises(KafkaException, match="Too few iterations"):
        upsert = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"pw")
        admin.alter_user_scram_credentials([upsert])["erin"].result(30)
    erin = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"erin-pw")
    admin.alter_user_scram_credentials([erin])["erin"].result(30)
    conf = {**_scram(broker, pki, "erin", "erin-pw")}
    Producer(conf).list_topics(timeout=30)  # erin authenticates at once
    kept = Path(broker.server.config.log_dirs[0]) / "scram-credentials.json"  # salted, the owner's only
    assert oct(kept.stat().st_mode & 0o777) == "0o600" and b"erin-pw" not in kept.read_bytes()
    deletion = UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])["erin"].result(30)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.alter_user_scram_credentials([deletion])["erin"].result(30)
    # kept in the log dir, salted: no password there
    with open(broker.server.scram.path, encoding="utf-8") as f:
        stored = f.read()
    assert "carol" in stored and "erin" not in stored
    assert not any(p in stored for p in SCRAM_PASSWORDS.values())


# --- denials ---------------------------------------------------------------------------------------


def _auth_error(conf: dict[str, Any]) -> KafkaError:
    errors: list[KafkaError] = []
    producer = Producer({**conf, **PRODUCER, "error_cb": errors.append})
    producer.produce("denied", b"never")
    wait_for(lambda: (producer.poll(0.1), errors)[1], what="the client's error")
    producer.purge()
    producer.flush(0)
    return errors[0]


@pytest.mark.parametrize(
    ("who", "message"),
    [
        ("wrong PLAIN password", "Authentication failed: Invalid username or password"),
        ("unknown PLAIN user", "Authentication failed: Invalid username or password"),
        (
            "wrong SCRAM password",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
        (
            "unknown SCRAM user",
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
    ],
)
def test_refused_credentials_get_kafkas_error_and_write_nothing(broker, pki, caplog, who, message) -> None:  # noqa: F811
    _create(broker, "denied")
    conf = {
        "wrong PLAIN password": lambda: _plain(broker, "alice", "wrong-pw-0d1e"),
        "unknown PLAIN user": lambda: {**_plain(broker), "sasl.username": "mallory"},
        "wrong SCRAM password": lambda: _scram(broker, pki, "carol", "wrong-pw-0d1e"),
        "unknown SCRAM user": lambda: _scram(broker, pki, "mallory", "wrong-pw-0d1e"),
    }[who]()
    error = _auth_error(conf)
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert message in error.str()
    wait_for(lambda: "failed authentication with" in caplog.text, what="the broker's log line")
    assert _end_offsets(broker, "denied") == [0, 0]
    _produce(_plain(broker), "after-denial", 5)  # the others are served on


def _client(port: int) -> tuple[socket.socket, ClientConnection]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock, ClientConnection("test")


def _call(sock: socket.socket, conn: ClientConnection, key: ApiKey, body: Any, version: int) -> Any:
    _, parts = conn.send_request(key, body, version)
    sock.sendall(b"".join(bytes(p) for p in parts))
    frame = _read_frame(sock)
    conn.receive_data(struct.pack(">i", len(frame)) + frame)
    return conn.next_event().body


def test_a_client_that_skips_the_handshake_is_closed_unanswered(broker, caplog) -> None:
    sock, conn = _client(broker.server.port_of("SASL_PLAINTEXT"))
    with sock:
        sock.sendall(API_VERSIONS_V0)  # ApiVersions is answered before authentication
        assert _read_frame(sock)[:4] == struct.pack(">i", 7)
        _, parts = conn.send_request(ApiKey.METADATA, MetadataRequestData(topics=None), 1)
        sock.sendall(b"".join(bytes(p) for p in parts))
        with pytest.raises(ConnectionError):
            _read_exact(sock, 4)
    assert "Unexpected Kafka request of type METADATA during SASL handshake" in caplog.text


def test_a_client_without_sasl_on_a_sasl_port_is_closed_and_the_broker_serves_on(broker) -> None:
    errors: list[KafkaError] = []
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}", "error_cb": errors.append}
    producer = Producer({**conf, **PRODUCER})
    producer.produce("denied", b"never")
    wait_for(lambda: (producer.poll(0.1), errors)[1], what="the client's error")
    producer.purge()
    producer.flush(0)
    assert _end_offsets(broker, "denied") == [0, 0]
    _produce(_plain(broker), "after-plaintext-client", 5)


def test_an_unsupported_mechanism_is_answered_with_the_enabled_ones_then_closed(broker) -> None:
    sock, conn = _client(broker.server.port_of("SASL_PLAINTEXT"))
    with sock:
        body = _call(sock, conn, ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="GSSAPI"), 1)
        assert (body.error_code, body.mechanisms) == (33, ["PLAIN"])  # UNSUPPORTED_SASL_MECHANISM
        with pytest.raises(ConnectionError):
            _read_exact(sock, 4)


# --- the v0 exchange, SaslAuthenticate by hand, re-authentication ----------------------------------


def test_the_v0_exchange_of_bare_tokens(broker, pki) -> None:  # noqa: F811
    sock, conn = _client(broker.server.port_of("SASL_PLAINTEXT"))
    with sock:
        body = _call(sock, conn, ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="PLAIN"), 0)
        assert body.error_code == 0
        token = PlainClient("alice", PLAIN_PASSWORDS["alice"]).first_token()
        sock.sendall(struct.pack(">i", len(token)) + token)  # no request header
        assert _read_frame(sock) == b""  # PLAIN's empty answer, size-prefixed
        metadata = _call(sock, conn, ApiKey.METADATA, MetadataRequestData(topics=None), 1)
        assert metadata.brokers
    # a wrong password in v0: closed, no answer
    sock, conn = _client(broker.server.port_of("SASL_PLAINTEXT"))
    with sock:
        _call(sock, conn, ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="PLAIN"), 0)
        token = PlainClient("alice", "wrong-pw-0d1e").first_token()
        sock.sendall(struct.pack(">i", len(token)) + token)
        with pytest.raises(ConnectionError):
            _read_exact(sock, 4)


def _scram_authenticate(sock: socket.socket, conn: ClientConnection, password: str) -> Any:
    _call(sock, conn, ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="SCRAM-SHA-512"), 1)
    client = ScramClient(SCRAM_SHA_512, "carol", password)
    token: bytes | None = client.first_token()
    while token is not None:
        body = _call(sock, conn, ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequestData(auth_bytes=token), 2)
        if body.error_code:
            return body
        token = client.evaluate(body.auth_bytes)
    return body


def _add_carol(running: Any) -> None:
    """carol's SCRAM-SHA-512 credential, through the plaintext listener."""
    admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
    upsert = UserScramCredentialUpsertion(
        "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), SCRAM_PASSWORDS["carol"].encode()
    )
    admin.alter_user_scram_credentials([upsert])["carol"].result(30)


def _produce_across_sessions(running: Any, topic: str, count: int) -> None:
    """carol's producer over SCRAM-SHA-512, a message every 0.6 s (sessions of 2 s end meanwhile)."""
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{running.server.port_of('SASL_PLAINTEXT')}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "carol",
            "sasl.password": SCRAM_PASSWORDS["carol"],
            **PRODUCER,
        }
    )
    for i in range(count):
        producer.produce(topic, b"%d" % i)
        assert producer.flush(30) == 0
        time.sleep(0.6)


def test_reauthentication_renews_a_session_and_a_session_past_its_end_closes(pki, tmp_path, caplog) -> None:  # noqa: F811
    lifetime = 2.0  # seconds: requests made right after an authentication come well within it
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "connections.max.reauth.ms": int(lifetime * 1000),
    }
    with seglog.broker.start(str(tmp_path / "data"), config=config) as running:
        _add_carol(running)
        sock, conn = _client(running.server.port_of("SASL_PLAINTEXT"))
        with sock:
            done = _scram_authenticate(sock, conn, SCRAM_PASSWORDS["carol"])
            assert (done.error_code, done.session_lifetime_ms) == (0, 2000)
            time.sleep(lifetime + 0.2)  # past the session's end: a re-authentication may still begin
            assert _scram_authenticate(sock, conn, SCRAM_PASSWORDS["carol"]).error_code == 0  # renewed
            assert _call(sock, conn, ApiKey.METADATA, MetadataRequestData(topics=None), 1).brokers
            time.sleep(lifetime + 0.2)  # past the second session's end
            _, parts = conn.send_request(ApiKey.METADATA, MetadataRequestData(topics=None), 1)
            sock.sendall(b"".join(bytes(p) for p in parts))
            with pytest.raises(ConnectionError):
                _read_exact(sock, 4)
        # librdkafka re-authenticates on its own (KIP-368) and keeps producing across sessions: the
        # broker never closes its connection for a session past its end
        caplog.clear()
        _produce_across_sessions(running, "reauth", 8)
        assert "expired: closing its connection" not in caplog.text


def _plain_authenticate(sock: socket.socket, conn: ClientConnection, user: str) -> Any:
    _call(sock, conn, ApiKey.SASL_HANDSHAKE, SaslHandshakeRequestData(mechanism="PLAIN"), 1)
    token = PlainClient(user, PLAIN_PASSWORDS[user]).first_token()
    return _call(sock, conn, ApiKey.SASL_AUTHENTICATE, SaslAuthenticateRequestData(auth_bytes=token), 2)


def test_session_lifetimes_are_set_per_listener_and_mechanism(tmp_path, caplog) -> None:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS + ";",
        # as Kafka's SaslChannelBuilder reads them: the mechanism's, else the listener's, else the broker's
        "connections.max.reauth.ms": 0,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": 5000,
        "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": 2000,
    }
    with seglog.broker.start(str(tmp_path / "data"), config=config) as running:
        _add_carol(running)
        lifetimes = {}
        for listener, mechanism in (("SASL_PLAINTEXT", "SCRAM"), ("SASL_PLAINTEXT", "PLAIN"), ("OTHER", "SCRAM")):
            sock, conn = _client(running.server.port_of(listener))
            with sock:
                if mechanism == "PLAIN":
                    done = _plain_authenticate(sock, conn, "alice")
                else:
                    done = _scram_authenticate(sock, conn, SCRAM_PASSWORDS["carol"])
                assert done.error_code == 0
                lifetimes[listener, mechanism] = done.session_lifetime_ms
        expected = {("SASL_PLAINTEXT", "SCRAM"): 2000, ("SASL_PLAINTEXT", "PLAIN"): 5000, ("OTHER", "SCRAM"): 0}
        assert lifetimes == expected
        # librdkafka re-authenticates within the mechanism's lifetime: its connection is never
        # closed for a session past its end
        caplog.clear()
        _produce_across_sessions(running, "per-mechanism", 6)
        assert "expired: closing its connection" not in caplog.text


# --- bad configs ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({}, r"sasl\.enabled\.mechanisms: GSSAPI is not a SASL mechanism seglog supports"),
        ({"sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER"}, "OAUTHBEARER is not a SASL mechanism seglog supports"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, r"enables PLAIN without its users: set listener\.name\.sasl_plaintext"),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'PlainLoginModule required user_a="secret-9"',
            },
            "must end with ';'",
        ),
        (
            {
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": 'ScramLoginModule required user_a="secret-9";',
            },
            "PLAIN's login module is org.apache.kafka.common.security.plain.PlainLoginModule",
        ),
    ],
)
def test_bad_sasl_configs_are_refused_at_startup_without_their_secrets(tmp_path, caplog, config, error) -> None:
    values = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", **config}
    with pytest.raises(InvalidConfigurationError, match=error) as e:
        seglog.broker.start(str(tmp_path / "data"), config=values)
    assert "secret-9" not in str(e.value) and "secret-9" not in caplog.text


def test_the_jaas_config_is_hidden_in_describe_configs(broker) -> None:
    from confluent_kafka.admin import ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    entries = admin.describe_configs([resource])[resource].result(30)
    shown = " ".join(f"{name}={entry.value}" for name, entry in entries.items())
    assert not any(p in shown for p in PLAIN_PASSWORDS.values())
    assert entries["sasl.enabled.mechanisms"].value == "SCRAM-SHA-256,SCRAM-SHA-512"


# --- a cluster: the credentials in ZooKeeper, as Kafka keeps them --------------------------------


def test_a_clusters_scram_credentials_live_in_zookeeper_and_reach_every_broker(chroot, tmp_path) -> None:  # noqa: F811
    config = {
        "zookeeper.connect": chroot,
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "offsets.topic.replication.factor": 1,
    }
    with (
        seglog.broker.start(str(tmp_path / "b1"), config={**config, "broker.id": 1}) as one,
        seglog.broker.start(str(tmp_path / "b2"), config={**config, "broker.id": 2}) as two,
    ):
        zk = KazooClient(hosts=chroot)
        zk.start()
        try:
            # frank has a quota already: his credential goes beside it
            zk.create("/config/users/frank", b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True)
            admin = AdminClient({"bootstrap.servers": one.bootstrap_servers})
            upsert = UserScramCredentialUpsertion(
                "frank", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"fr-pw"
            )
            admin.alter_user_scram_credentials([upsert])["frank"].result(30)
            stored = json.loads(zk.get("/config/users/frank")[0])
            notified = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
            # a second user as kafka-configs.sh --zookeeper writes one
            written = credential(SCRAM_SHA_256, "gina-pw", 4096)
            gina = {"version": 1, "config": {"SCRAM-SHA-256": written.format()}}
            zk.create("/config/users/gina", json.dumps(gina).encode())
            zk.create("/config/changes/config_change_", b'{"version":2,"entity_path":"users/gina"}', sequence=True)
        finally:
            zk.stop()
            zk.close()
        assert stored["version"] == 1 and sorted(stored["config"]) == ["SCRAM-SHA-256", "producer_byte_rate"]
        assert ScramCredential.parse(stored["config"]["SCRAM-SHA-256"]).iterations == 4096
        assert {"version": 2, "entity_path": "users/frank"} in notified
        for broker in (one, two):
            for user, password in (("frank", "fr-pw"), ("gina", "gina-pw")):
                conf = {
                    "bootstrap.servers": f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}",
                    "security.protocol": "SASL_PLAINTEXT",
                    "sasl.mechanism": "SCRAM-SHA-256",
                    "sasl.username": user,
                    "sasl.password": password,
                }
                wait_for(
                    lambda b=broker, u=user: b.server.credentials.get(u, "SCRAM-SHA-256"), what=f"{user}'s credential"
                )
                assert AdminClient(conf).list_topics(timeout=30).brokers


# --- seglog's own client and tools: --command-config ----------------------------------------------


def _cli(capsys, monkeypatch, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _properties(path: Any, **values: str) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return str(path)


def test_the_tools_authenticate_with_command_config(broker, pki, tmp_path, capsys, monkeypatch) -> None:  # noqa: F811
    scram = _properties(
        tmp_path / "scram.properties",
        **{
            "security.protocol": "SASL_SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": pki.ca_file,
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="carol" password="{SCRAM_PASSWORDS["carol"]}";',
        },
    )
    over_ssl = ("--bootstrap-server", f"127.0.0.1:{broker.server.port_of('SASL_SSL')}", "--command-config", scram)
    assert _cli(capsys, monkeypatch, "topics", *over_ssl, "--create", "--topic", "cli-sasl")[0] == 0
    lines = "".join(f"v{i}\n" for i in range(20))
    assert _cli(capsys, monkeypatch, "produce", *over_ssl, "--topic", "cli-sasl", stdin=lines)[0] == 0
    code, out, _ = _cli(capsys, monkeypatch, "consume", *over_ssl, "--topic", "cli-sasl", "--from-beginning")
    assert code == 0 and sorted(out.split()) == sorted(f"v{i}" for i in range(20))
    code, out, _ = _cli(capsys, monkeypatch, "consumer-groups", *over_ssl, "--list")
    assert code == 0
    # a SCRAM user made with the tool (kafka-configs.sh's syntax), then used by confluent-kafka
    plain = _properties(
        tmp_path / "plain.properties",
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": PLAIN_PASSWORDS["alice"],
        },
    )
    over_plain = (
        "--bootstrap-server",
        f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}",
        "--command-config",
        plain,
    )
    users = ("configs", *over_plain, "--entity-type", "users", "--entity-name", "henry")
    added = "SCRAM-SHA-256=[iterations=8192,password=henry-pw-77],SCRAM-SHA-512=[password=henry-pw-77]"
    assert _cli(capsys, monkeypatch, *users, "--alter", "--add-config", added)[1] == (
        "Completed updating config for user henry.\n"
    )
    assert _cli(capsys, monkeypatch, *users, "--describe")[1] == (
        "SCRAM credential configs for user-principal 'henry' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096\n"
    )
    Producer(_scram(broker, pki, "henry", "henry-pw-77", "SCRAM-SHA-256")).list_topics(timeout=30)
    assert _cli(capsys, monkeypatch, *users, "--alter", "--delete-config", "SCRAM-SHA-256")[0] == 0
    assert "SCRAM-SHA-256" not in _cli(capsys, monkeypatch, *users, "--describe")[1]
    # seglog acls authenticates too: this broker has no authorizer, which it is told over SASL
    code, _, err = _cli(capsys, monkeypatch, "acls", *over_plain, "--list")
    assert code == 1 and "No Authorizer is configured on the broker" in err


def test_a_tool_with_a_wrong_password_says_kafkas_refusal(broker, tmp_path, capsys, monkeypatch) -> None:
    wrong = _properties(
        tmp_path / "wrong.properties",
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "wrong-pw-0d1e",
        },
    )
    server = ("--bootstrap-server", f"127.0.0.1:{broker.server.port_of('SASL_PLAINTEXT')}", "--command-config", wrong)
    code, out, err = _cli(capsys, monkeypatch, "topics", *server, "--list")
    assert code == 1 and "Authentication failed: Invalid username or password" in err
    assert "wrong-pw-0d1e" not in out + err
    # no SASL at all on the SASL port: the broker closes the connection at the first request past ApiVersions
    code, _, err = _cli(capsys, monkeypatch, "topics", "--bootstrap-server", server[1], "--list")
    assert code == 1 and "closed the connection" in err


# --- a cluster whose brokers speak SASL_SSL to each other ------------------------------------------


def test_a_cluster_with_only_sasl_ssl_listeners_replicates_and_fails_over(chroot, tmp_path, pki) -> None:  # noqa: F811
    zk = KazooClient(hosts=chroot)
    zk.start()
    try:  # the users first, as kafka-configs.sh --zookeeper makes them before a SCRAM cluster starts
        for user, password in (("broker", "broker-pw-3c1d"), ("carol", SCRAM_PASSWORDS["carol"])):
            stored = {"SCRAM-SHA-512": credential(SCRAM_SHA_512, password, 4096).format()}
            zk.create(f"/config/users/{user}", json.dumps({"version": 1, "config": stored}).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    config = {
        "zookeeper.connect": chroot,
        "listeners": "SASL_SSL://127.0.0.1:0",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
            'password="broker-pw-3c1d";'
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_file,
        "offsets.topic.replication.factor": 2,
        "default.replication.factor": 2,
        "replica.lag.time.max.ms": 5000,
    }
    with contextlib.ExitStack() as stack:
        brokers = {}
        for i in (1, 2):
            brokers[i] = seglog.broker.start(str(tmp_path / f"b{i}"), config={**config, "broker.id": i})
            stack.callback(brokers[i].stop)
        conf = _scram(brokers[1], pki)
        admin = AdminClient(conf)
        wait_for(lambda: len(admin.list_topics(timeout=30).brokers) == 2, what="both brokers registered")
        admin.create_topics([NewTopic("secure", 1, 2)])["secure"].result(30)

        def partition(client: AdminClient) -> Any:
            return client.list_topics("secure", timeout=30).topics["secure"].partitions[0]

        wait_for(lambda: sorted(partition(admin).isrs) == [1, 2], what="both replicas in sync over SASL_SSL")
        _produce({**conf, "acks": "all"}, "secure", 200)
        leader = partition(admin).leader
        brokers[leader].stop()  # the leader goes: the other takes over, over SASL_SSL
        survivor = 3 - leader
        survivor_admin = AdminClient(_scram(brokers[survivor], pki))
        wait_for(lambda: partition(survivor_admin).leader == survivor, what="the survivor elected")
        consumer = Consumer({**_scram(brokers[survivor], pki), "group.id": "unused", "enable.auto.commit": False})
        try:
            consumer.assign([_tp("secure", 0, 0)])
            got: set[bytes] = set()
            deadline = time.monotonic() + 60
            while len(got) < 200 and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.add(msg.value())
        finally:
            consumer.close()
        assert got == {b"v%d" % i for i in range(200)}  # every acknowledged record, from the new leader


# --- seglog cluster up --secure ---------------------------------------------------------------------


def test_a_secure_local_cluster_serves_sasl_ssl_only_with_the_properties_it_writes(chroot, tmp_path) -> None:  # noqa: F811
    overrides = ["offsets.topic.replication.factor=2"]
    local = LocalCluster(tmp_path, 2, zookeeper=chroot, port=None, overrides=overrides, secure=True)
    local.start()
    try:
        assert local.secure is not None
        client = parse_properties(local.secure.client_properties.read_text())
        assert oct(local.secure.client_properties.stat().st_mode & 0o777) == "0o600"
        conf = {**client, "bootstrap.servers": local.bootstrap_servers}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("secure-local", 1, 2)])["secure-local"].result(60)
        _produce({**conf, "acks": "all"}, "secure-local", 50)
        assert len(_consume_in_group(conf, "secure-local", "secure-local-group", 50)) == 50
        for broker in local.brokers.values():  # the password is in a file, not in the command line
            assert broker.proc is not None
            command_line = Path(f"/proc/{broker.proc.pid}/cmdline").read_bytes()
            assert client["sasl.password"].encode() not in command_line
        errors: list[KafkaError] = []  # no SASL: refused
        producer = Producer({"bootstrap.servers": local.bootstrap_servers, "error_cb": errors.append})
        wait_for(lambda: (producer.poll(0.1), errors)[1], what="the client's error")
        producer.flush(0)
        _acls_guard_another_user(local.bootstrap_servers, str(local.secure.client_properties), conf)
    finally:
        local.stop()


def test_a_restarting_cluster_broker_refuses_no_login_it_would_accept(chroot, tmp_path) -> None:  # noqa: F811
    """A cluster's broker reads its users' SCRAM credentials from ZooKeeper before its listener
    serves: a client logging in the moment the port accepts is never refused. (A broker restarted
    under the fault tests' load answered "Invalid user credentials" until it had read them.)"""
    overrides = ["controlled.shutdown.enable=false"]  # the cluster's one broker has nowhere to move leaders
    local = LocalCluster(tmp_path, 1, zookeeper=chroot, port=None, overrides=overrides, secure=True)
    local.start()
    broker = local.brokers[1]
    refused: list[str] = []
    logged_in = threading.Event()
    stop = threading.Event()

    def log_in() -> None:
        while not stop.is_set():
            try:
                with connect(broker.address, timeout=10, security=local.security):
                    logged_in.set()
            except BrokerNotAvailableError:  # not listening yet, or closed before the login
                time.sleep(0.001)
            except SeglogError as e:
                refused.append(str(e))

    try:
        broker.stop()
        client = threading.Thread(target=log_in, daemon=True)
        client.start()
        try:
            broker.start(local.zookeeper_connect)  # on the port it had
            wait_for(logged_in.is_set, what="a login to the restarted broker")
        finally:
            stop.set()
            client.join(30)
    finally:
        local.stop()
    assert refused == []


def _acls_guard_another_user(bootstrap: str, admin_properties: str, admin_conf: dict[str, Any]) -> None:
    """ACLs are on: a user the admin made writes nothing until ``seglog acls`` lets it."""
    tool = ("--bootstrap-server", bootstrap, "--command-config", admin_properties)
    guest = "SCRAM-SHA-512=[password=guest-pw-5e1]"
    assert (
        main(["configs", *tool, "--entity-type", "users", "--entity-name", "guest", "--alter", "--add-config", guest])
        == 0
    )
    conf = {**admin_conf, "sasl.username": "guest", "sasl.password": "guest-pw-5e1"}
    refused: list[Any] = []
    producer = Producer({**conf, **PRODUCER, "message.timeout.ms": 10_000})
    producer.produce("secure-local", b"denied", on_delivery=lambda err, msg: refused.append(err))
    producer.flush(30)
    assert refused and refused[0] is not None and refused[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    write = ["--allow-principal", "User:guest", "--operation", "Write", "--operation", "Describe"]
    assert main(["acls", *tool, "--add", *write, "--topic", "secure-local"]) == 0
    wait_for(lambda: _written(conf), what="guest's write once allowed")


def _written(conf: dict[str, Any]) -> bool:
    delivered: list[Any] = []
    producer = Producer({**conf, **PRODUCER, "message.timeout.ms": 5_000})
    producer.produce("secure-local", b"allowed", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(15)
    return bool(delivered) and delivered[0] is None
