"""TLS listeners: real clients (confluent-kafka, kafka-python, Python's ssl) against a broker with
PLAINTEXT, SSL and mutual-TLS listeners, certificates made per run with trustme; bad TLS configs
refused at startup without their secrets; principal mapping rules as a unit."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import os
import socket
import ssl
import struct
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
import trustme
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kazoo.client import KazooClient

import seglog.broker
from seglog.broker.tls import PrincipalMapper, TlsTransport, distinguished_name, server_context
from seglog.config import BrokerConfig
from seglog.errors import InvalidConfigurationError
from seglog.security import ANONYMOUS, KafkaPrincipal

from ..cluster.conftest import chroot, zookeeper  # noqa: F401  (the cluster tests' real ZooKeeper)
from .conftest import CONSUMER, PRODUCER, wait_for
from .test_hostile import API_VERSIONS_V0, _read_exact, _read_frame

RULES = "RULE:^CN=([^,]*),OU=.*$/$1/L,DEFAULT"


class Pki(NamedTuple):
    ca: trustme.CA
    ca_file: str
    keystore: str  # the broker's key and chain, one PEM file
    client_cert: str
    client_key: str


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("client.example", common_name="Alice")
    paths = {name: str(d / f"{name}.pem") for name in ("ca", "keystore", "client_cert", "client_key")}
    ca.cert_pem.write_to_path(paths["ca"])
    server.private_key_and_cert_chain_pem.write_to_path(paths["keystore"])
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    client.private_key_pem.write_to_path(paths["client_key"])
    return Pki(ca, paths["ca"], paths["keystore"], paths["client_cert"], paths["client_key"])


@pytest.fixture(scope="module")
def broker(pki, tmp_path_factory) -> Any:
    config = {
        "num.partitions": 1,
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,REQ://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,REQ:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        # the broker-wide truststore as text (REQ's), the MTLS listener's own as a file
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": pki.ca.cert_pem.bytes().decode(),
        "listener.name.req.ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.truststore.type": "PEM",
        "listener.name.mtls.ssl.truststore.location": pki.ca_file,
        "listener.name.mtls.ssl.principal.mapping.rules": RULES,
    }
    with seglog.broker.start(str(tmp_path_factory.mktemp("tls-broker")), config=config) as running:
        yield running


def _ssl(broker: Any, pki: Pki, listener: str = "SSL", **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": f"127.0.0.1:{broker.server.port_of(listener)}",
        "security.protocol": "SSL",
        "ssl.ca.location": pki.ca_file,
        **extra,
    }


def _mtls(broker: Any, pki: Pki) -> dict[str, Any]:
    certificate = {"ssl.certificate.location": pki.client_cert, "ssl.key.location": pki.client_key}
    return _ssl(broker, pki, "MTLS", **certificate)


def _value(i: int) -> bytes:
    # sizes from a few bytes to 40 KiB: fetch responses span several of the transport's buffers
    return (b"%d:" % i) * (1 + (i * 7919) % 4000)


def _produce(conf: dict[str, Any], topic: str, count: int) -> None:
    producer = Producer({**conf, **PRODUCER})
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=_value(i), partition=0)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def _consume(conf: dict[str, Any], topic: str, count: int) -> list[Any]:
    consumer = Consumer({**conf, **CONSUMER, "fetch.max.bytes": 4 << 20, "max.partition.fetch.bytes": 4 << 20})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg)
        return got
    finally:
        consumer.close()


def _check_records(got: list[Any], count: int) -> None:
    assert len(got) == count
    for i, msg in enumerate(got):
        assert (msg.offset(), msg.key(), msg.value()) == (i, b"k%d" % i, _value(i))


def test_confluent_kafka_produces_and_consumes_over_ssl(broker, pki) -> None:
    conf = _ssl(broker, pki)
    _produce(conf, "over-ssl", 3000)
    _check_records(_consume(conf, "over-ssl", 3000), 3000)
    # the same records read over plaintext (sendfile) are the same bytes
    _check_records(_consume({"bootstrap.servers": broker.bootstrap_servers}, "over-ssl", 3000), 3000)


def test_kafka_python_produces_and_consumes_over_ssl(broker, pki) -> None:
    common = {
        "bootstrap_servers": f"127.0.0.1:{broker.server.port_of('SSL')}",
        "security_protocol": "SSL",
        "ssl_cafile": pki.ca_file,
    }
    producer = KafkaProducer(**common, linger_ms=5, enable_idempotence=False)
    futures = [producer.send("kp-ssl", key=b"k%d" % i, value=_value(i), partition=0) for i in range(500)]
    producer.flush(30)
    assert [f.get(10).offset for f in futures] == list(range(500))
    producer.close()
    consumer = KafkaConsumer(**common, enable_auto_commit=False, consumer_timeout_ms=20_000)
    tp = KpTopicPartition("kp-ssl", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got = []
    for msg in consumer:
        got.append((msg.offset, msg.key, msg.value))
        if len(got) == 500:
            break
    consumer.close()
    assert got == [(i, b"k%d" % i, _value(i)) for i in range(500)]


def test_consumer_group_over_ssl_finds_its_coordinator_on_the_ssl_listener(broker, pki) -> None:
    conf = _ssl(broker, pki)
    _produce(conf, "group-ssl", 100)
    consumer = Consumer({**conf, "group.id": "g-ssl", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["group-ssl"])
        got: list[Any] = []
        deadline = time.monotonic() + 60
        while len(got) < 100 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg)
        _check_records(got, 100)
        consumer.commit(asynchronous=False)  # through the coordinator, reached over SSL
        assert consumer.committed([TopicPartition("group-ssl", 0)], 30)[0].offset == 100
    finally:
        consumer.close()


def test_metadata_answers_with_the_endpoints_of_the_listener_asked(broker, pki) -> None:
    ports = {name: broker.server.port_of(name) for name in ("PLAINTEXT", "SSL", "MTLS")}
    assert len(set(ports.values())) == 3
    for name, conf in (
        ("PLAINTEXT", {"bootstrap.servers": broker.bootstrap_servers}),
        ("SSL", _ssl(broker, pki)),
        ("MTLS", _mtls(broker, pki)),
    ):
        brokers = AdminClient(conf).list_topics(timeout=30).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", ports[name])], name


def test_requested_client_auth_serves_either_and_names_a_certificate_by_its_dn(broker, pki) -> None:
    port = broker.server.port_of("REQ")
    subject = x509.load_pem_x509_certificate(Path(pki.client_cert).read_bytes()).subject
    dn = subject.rfc4514_string()  # cryptography's RFC 4514 (2253's successor): the same string
    for certificate, principal in ((False, ANONYMOUS), (True, KafkaPrincipal("User", dn))):
        with _tls_client(pki, port, certificate) as sock:
            assert _api_versions(sock)[:4] == struct.pack(">i", 7)
            assert _principals(broker, "REQ") == {(principal, principal)}
        wait_for(lambda: not _principals(broker, "REQ"), what="the connection's end")


def _principals(broker: Any, listener: str) -> set[Any]:
    """The principals of the listener's open connections, as their request contexts hold them."""
    server = next(s for s in broker.server.socket_servers if s.listener == listener)
    return {(c.principal, c.request_context.principal) for c in list(server.connections) if c.request_context}


def test_mutual_tls_accepts_a_client_certificate_and_maps_its_principal(broker, pki) -> None:
    _produce(_mtls(broker, pki), "over-mtls", 200)
    _check_records(_consume(_mtls(broker, pki), "over-mtls", 200), 200)
    for listener, conf, principal in (
        ("MTLS", _mtls(broker, pki), KafkaPrincipal("User", "alice")),  # RULE ... /L: the CN, lower case
        ("SSL", _ssl(broker, pki), ANONYMOUS),  # no certificate asked for
    ):
        producer = Producer({**conf, **PRODUCER})  # open while its connections are looked at
        producer.produce("principals", b"x")
        assert producer.flush(30) == 0
        assert _principals(broker, listener) == {(principal, principal)}


def _tls_client(pki: Pki, port: int, certificate: bool) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=pki.ca_file)
    if certificate:
        context.load_cert_chain(pki.client_cert, pki.client_key)
    return context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")


def _api_versions(sock: socket.socket) -> bytes:
    sock.sendall(API_VERSIONS_V0)
    return _read_frame(sock)


def test_mutual_tls_refuses_a_client_without_a_certificate_and_serves_on(broker, pki, caplog) -> None:
    port = broker.server.port_of("MTLS")
    with caplog.at_level(logging.INFO, logger="seglog.broker.tls"):
        # Python's ssl: TLS 1.3 finishes the client's side first, the broker's refusal comes on the first
        # read (its alert, or an EOF where the reset of the closed socket drops the alert)
        with pytest.raises((ssl.SSLError, ConnectionError)), _tls_client(pki, port, False) as sock:
            _api_versions(sock)
        # librdkafka: an SSL handshake error
        errors: list[KafkaError] = []
        producer = Producer({**_ssl(broker, pki, "MTLS"), "error_cb": errors.append})
        wait_for(lambda: (producer.poll(0.1), errors)[1], what="librdkafka's error")
        assert errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), errors
        producer.flush(0)
        wait_for(lambda: "SSL handshake failed" in caplog.text, what="the broker's log line")
    with _tls_client(pki, port, certificate=True) as sock:  # the others are served on
        assert _api_versions(sock)[:4] == struct.pack(">i", 7)  # the correlation id
    _check_records(_consume(_mtls(broker, pki), "over-mtls", 200), 200)


@pytest.mark.parametrize("kind", ["expired", "of another CA"])
def test_mutual_tls_refuses_an_expired_or_untrusted_certificate(broker, pki, tmp_path, caplog, kind) -> None:
    now = datetime.datetime.now(datetime.UTC)
    if kind == "expired":
        bad = pki.ca.issue_cert(
            "client.example",
            common_name="Mallory",
            not_before=now - datetime.timedelta(days=30),
            not_after=now - datetime.timedelta(days=1),
        )
    else:
        bad = trustme.CA().issue_cert("client.example", common_name="Mallory")
    certificate, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    bad.cert_chain_pems[0].write_to_path(str(certificate))
    bad.private_key_pem.write_to_path(str(key))
    context = ssl.create_default_context(cafile=pki.ca_file)
    context.load_cert_chain(certificate, key)
    port = broker.server.port_of("MTLS")
    reason = "certificate has expired" if kind == "expired" else "unable to get local issuer certificate"
    # the broker logs after its alert has left: the client may have its error first
    with caplog.at_level(logging.INFO, logger="seglog.broker.tls"):
        with (
            pytest.raises((ssl.SSLError, ConnectionError)),
            context.wrap_socket(
                socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1"
            ) as sock,
        ):
            _api_versions(sock)
        wait_for(lambda: reason in caplog.text, what="the broker's log line")
    mtls = next(s for s in broker.server.socket_servers if s.listener == "MTLS")
    assert not any(c.principal == KafkaPrincipal("User", "mallory") for c in list(mtls.connections))
    with _tls_client(pki, port, certificate=True) as sock:  # a good certificate is served on
        assert _api_versions(sock)[:4] == struct.pack(">i", 7)


def test_a_clients_close_notify_ends_its_connection_and_the_broker_serves_on(broker, pki) -> None:
    ssl_server = next(s for s in broker.server.socket_servers if s.listener == "SSL")
    sock = _tls_client(pki, broker.server.port_of("SSL"), False)
    assert _api_versions(sock)[:4] == struct.pack(">i", 7)
    ours = wait_for(lambda: {c for c in list(ssl_server.connections) if c.request_context is not None})
    with contextlib.suppress(OSError):  # the broker closes without a close_notify of its own
        sock.unwrap()  # TLS's close_notify: the end of the stream
    sock.close()
    wait_for(lambda: not ours & set(ssl_server.connections), what="the connection's end")
    with _tls_client(pki, broker.server.port_of("SSL"), False) as other:
        assert _api_versions(other)[:4] == struct.pack(">i", 7)


def test_a_plaintext_client_on_the_ssl_port_is_closed_and_the_broker_serves_on(broker, pki) -> None:
    with socket.create_connection(("127.0.0.1", broker.server.port_of("SSL")), timeout=10) as sock:
        sock.sendall(API_VERSIONS_V0)  # not a TLS record: the handshake fails
        with pytest.raises(ConnectionError):
            _read_exact(sock, 4)
    errors: list[KafkaError] = []
    plain = Producer({"bootstrap.servers": f"127.0.0.1:{broker.server.port_of('SSL')}", "error_cb": errors.append})
    wait_for(lambda: (plain.poll(0.1), errors)[1], what="librdkafka's error")
    plain.flush(0)
    _produce(_ssl(broker, pki), "after-plaintext", 10)
    _check_records(_consume(_ssl(broker, pki), "after-plaintext", 10), 10)
    with socket.create_connection(("127.0.0.1", broker.server.port), timeout=10) as sock:
        assert _api_versions(sock)[:4] == struct.pack(">i", 7)


# --- bad configs, refused at startup without their secrets ---------------------------------------


def _encrypted_key(pki: Pki, password: bytes) -> tuple[str, str]:
    """A server certificate's chain and its key encrypted with ``password``, as PEM text."""
    cert = pki.ca.issue_cert("127.0.0.1")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(password)
    )
    return b"".join(p.bytes() for p in cert.cert_chain_pems).decode(), encrypted.decode()


def _start(tmp_path, config: dict[str, Any]) -> Any:
    values = {"listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", **config}
    return seglog.broker.start(str(tmp_path / "data"), config=values)


def test_an_encrypted_key_given_as_text_with_its_password(tmp_path, pki) -> None:
    chain, key = _encrypted_key(pki, b"s3cret-pw")
    config = {"ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key, "ssl.key.password": "s3cret-pw"}
    with _start(tmp_path, config) as running:
        with _tls_client(pki, running.server.port_of("SSL"), False) as sock:
            assert _api_versions(sock)[:4] == struct.pack(">i", 7)
        # DescribeConfigs tells the secrets' names, not their values (Kafka's is_sensitive)
        resource = ConfigResource("broker", "0")
        admin = AdminClient({"bootstrap.servers": running.bootstrap_servers})
        entries = admin.describe_configs([resource])[resource].result(30)
    for name in ("ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain"):
        assert entries[name].value is None and entries[name].is_sensitive, name
    assert entries["ssl.keystore.type"].value == "PEM" and not entries["ssl.keystore.type"].is_sensitive
    assert not any("s3cret-pw" in (e.value or "") or "PRIVATE KEY" in (e.value or "") for e in entries.values())


def test_enabled_protocols_per_listener(tmp_path, pki) -> None:
    config = {"ssl.keystore.location": pki.keystore, "listener.name.ssl.ssl.enabled.protocols": "TLSv1.3"}
    with _start(tmp_path, config) as running:
        port = running.server.port_of("SSL")
        old = ssl.create_default_context(cafile=pki.ca_file)
        old.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(ssl.SSLError, match=r"PROTOCOL_VERSION|protocol version"):
            old.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10), server_hostname="127.0.0.1")
        with _tls_client(pki, port, False) as sock:
            assert sock.version() == "TLSv1.3"
            assert _api_versions(sock)[:4] == struct.pack(">i", 7)


def test_cipher_suites_by_kafkas_names_or_openssls() -> None:
    suites = "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,ECDHE-ECDSA-CHACHA20-POLY1305,TLS_AES_128_GCM_SHA256"
    context = _context_with_keystore({"ssl.cipher.suites": suites})
    tls12 = {c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-ECDSA-CHACHA20-POLY1305"}
    with pytest.raises(InvalidConfigurationError, match=r"ssl\.cipher\.suites: none of TLS_FAKE_SUITE"):
        _context_with_keystore({"ssl.cipher.suites": "TLS_FAKE_SUITE"})


def _context_with_keystore(config: dict[str, Any]) -> ssl.SSLContext:
    """The SSL listener's context of a broker with ``config`` and a keystore given as text."""
    cert = trustme.CA().issue_cert("127.0.0.1")
    keystore = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": cert.cert_chain_pems[0].bytes().decode(),
        "ssl.keystore.key": cert.private_key_pem.bytes().decode(),
    }
    return server_context(BrokerConfig({**keystore, **config}), "SSL")


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("missing keystore file", r"ssl\.keystore\.location: cannot read .*nope\.pem: No such file"),
        ("wrong key password", r"private key of ssl\.keystore\.key does not decrypt with ssl\.key\.password"),
        ("no key password", r"private key of ssl\.keystore\.key is encrypted: set ssl\.key\.password"),
        ("listener's own wrong password", r"does not decrypt with listener\.name\.ssl\.ssl\.key\.password"),
        ("no keystore", r"listener SSL is an SSL listener without a keystore: set ssl\.keystore\.location"),
        ("JKS keystore", r"ssl\.keystore\.type is JKS: seglog reads PEM keystores only"),
        ("unknown listener name", r"listener MTLS has no security protocol in listener\.security\.protocol\.map"),
        ("duplicate port", r"listeners: each listener must have a different port, not \d+ twice"),
        ("bad mapping rule", r"ssl\.principal\.mapping\.rules: invalid rule at 'RULE:oops'"),
    ],
)
def test_bad_tls_configs_are_refused_at_startup_naming_the_key_not_the_secret(tmp_path, pki, caplog, case, error):
    chain, key = _encrypted_key(pki, b"right-pw")
    secret_password = "wr0ng-pw-do-not-print"
    text = {"ssl.keystore.certificate.chain": chain, "ssl.keystore.key": key}
    config: dict[str, Any] = {
        "missing keystore file": {"ssl.keystore.location": str(tmp_path / "nope.pem")},
        "wrong key password": {**text, "ssl.key.password": secret_password},
        "no key password": text,
        "listener's own wrong password": {
            **text,
            "ssl.key.password": "right-pw",
            "listener.name.ssl.ssl.key.password": secret_password,
        },
        "no keystore": {},
        "JKS keystore": {"ssl.keystore.type": "JKS", "ssl.keystore.location": pki.keystore},
        "unknown listener name": {
            "ssl.keystore.location": pki.keystore,
            "listeners": "PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0",
        },
        "duplicate port": {"ssl.keystore.location": pki.keystore, "listeners": "PLAINTEXT://:9092,SSL://:9092"},
        "bad mapping rule": {"ssl.keystore.location": pki.keystore, "ssl.principal.mapping.rules": "DEFAULT,RULE:oops"},
    }[case]
    with caplog.at_level(logging.DEBUG), pytest.raises(InvalidConfigurationError, match=error) as refused:
        _start(tmp_path, config)
    for secret in (secret_password, "right-pw", key.splitlines()[1], chain.splitlines()[1]):
        assert secret not in str(refused.value) and secret not in caplog.text
    assert not (tmp_path / "data").exists() or not os.listdir(tmp_path / "data")  # refused before the logs load


# --- the transport, as a unit over a real TLS connection ---------------------------------------------


def test_the_transport_sends_bytes_and_file_regions_through_a_full_socket(tmp_path, pki) -> None:
    """Writes that meet a full socket (SSLWantWrite) go on later with the same bytes, as OpenSSL
    asks, and the client reads every byte in order."""
    payload = os.urandom(4 << 20)
    path = tmp_path / "segment"
    path.write_bytes(payload)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.keystore)
    a, b = socket.socketpair()
    a.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    transport = TlsTransport(
        a, context, PrincipalMapper("DEFAULT"), memoryview(bytearray(64 * 1024)), memoryview(bytearray(32 * 1024))
    )
    client = ssl.create_default_context(cafile=pki.ca_file).wrap_socket(
        b, server_hostname="127.0.0.1", do_handshake_on_connect=False
    )
    handshake = threading.Thread(target=client.do_handshake)
    handshake.start()
    assert asyncio.run(transport.handshake("the client")) == ANONYMOUS
    handshake.join()
    client.setblocking(False)
    fd = os.open(path, os.O_RDONLY)
    try:
        handle = SimpleNamespace(fd=fd)
        parts: list[Any] = [b"head", _Region(handle, 10, 1 << 20), bytearray(b"mid" * 50_000), _Region(handle, 0, 7)]
        parts += [memoryview(payload)[: 2 << 20], _Region(handle, (1 << 20) + 5, 2 << 20), b"tail"]
        expected = b"".join(
            payload[p.position : p.position + p.size] if isinstance(p, _Region) else bytes(p) for p in parts
        )
        received = bytearray()
        left, stalls = parts, 0
        while left or len(received) < len(expected):
            if left:
                before = left
                left = transport.write(left)
                stalls += left == before  # the socket took nothing: the same parts come again
            received += _drain(client)
        assert stalls > 0  # the full socket was met
        assert bytes(received) == expected
    finally:
        os.close(fd)
        client.close()
        transport.sock.close()


class _Region(NamedTuple):
    handle: Any
    position: int
    size: int


def _drain(client: ssl.SSLSocket) -> bytes:
    out = bytearray()
    while True:
        try:
            chunk = client.recv(1 << 16)
        except (ssl.SSLWantReadError, BlockingIOError):
            return bytes(out)
        out += chunk


# --- principals from certificates ----------------------------------------------------------------------


def test_principal_mapping_rules() -> None:
    dn = "CN=Duke,OU=ServiceUsers,O=Org,L=Santa Clara,ST=CA,C=US"
    assert PrincipalMapper("DEFAULT").name(dn) == dn
    assert PrincipalMapper("").name(dn) == dn  # no rules: DEFAULT, as Kafka's
    assert PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT").name(dn) == "Duke"
    assert (
        PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L").name(dn)
        == "duke@serviceusers"
    )
    assert PrincipalMapper("RULE:^CN=(.*?),OU=([^,]*).*$/$1 $2/U").name(dn) == "DUKE SERVICEUSERS"
    # the first rule that applies wins; a rule that does not match passes on
    rules = PrincipalMapper("RULE:^CN=(.*?),OU=Admins.*$/admin-$1/L, RULE:^CN=([^,]*),.*$/$1/ ,DEFAULT")
    assert rules.name(dn) == "Duke"
    assert rules.name("CN=Root,OU=Admins,O=Org") == "admin-root"
    assert rules.name("O=Org") == "O=Org"
    # an escaped slash in the pattern, an escaped dollar in the replacement
    assert PrincipalMapper(r"RULE:^CN=(.*)\/ops$/\$$1/").name("CN=eve/ops") == "$eve"
    with pytest.raises(ValueError, match=r"no rule of ssl\.principal\.mapping\.rules applies"):
        PrincipalMapper("RULE:^CN=(.*?),OU=Admins.*$/$1/").name(dn)


@pytest.mark.parametrize("rules", ["RULE:oops", "RULE:^CN=(.*)$/$1/X", "INVALID", "DEFAULT DEFAULT", "RULE:([/x/"])
def test_bad_principal_mapping_rules_are_refused(rules) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"listener\.name\.mtls\.ssl\.principal\.mapping\.rules"):
        PrincipalMapper(rules, "listener.name.mtls.ssl.principal.mapping.rules")


def test_distinguished_names_as_rfc_2253_writes_them() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc."),),
        (("organizationalUnitName", "eng"), ("organizationalUnitName", "ops")),
        (("commonName", " #Alice+Bob "),),
    )
    assert distinguished_name(subject) == r"CN=\ #Alice\+Bob\ ,OU=eng+OU=ops,O=Example\, Inc.,C=US"


# --- a cluster: every listener registered, each client told its own listener's addresses ------------


def test_a_cluster_registers_every_listener_and_clients_use_their_own(chroot, tmp_path, pki) -> None:  # noqa: F811
    config = {
        "zookeeper.connect": chroot,
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        "offsets.topic.replication.factor": 1,
    }
    with (
        seglog.broker.start(str(tmp_path / "b1"), config={**config, "broker.id": 1}) as one,
        seglog.broker.start(str(tmp_path / "b2"), config={**config, "broker.id": 2}) as two,
    ):
        ssl_ports = {1: one.server.port_of("SSL"), 2: two.server.port_of("SSL")}
        plain_ports = {1: one.port, 2: two.port}
        zk = KazooClient(hosts=chroot)
        zk.start()
        try:
            registered = json.loads(zk.get("/brokers/ids/2")[0])
        finally:
            zk.stop()
            zk.close()
        assert registered["endpoints"] == [f"PLAINTEXT://127.0.0.1:{plain_ports[2]}", f"SSL://127.0.0.1:{ssl_ports[2]}"]
        assert registered["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
        conf = {**_ssl(one, pki), "bootstrap.servers": f"127.0.0.1:{ssl_ports[1]}"}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic("replicated", 2, 2)])["replicated"].result(30)
        for ports, client in ((ssl_ports, conf), (plain_ports, {"bootstrap.servers": one.bootstrap_servers})):
            brokers = wait_for(lambda c=client: len(AdminClient(c).list_topics(timeout=30).brokers) == 2 and c)
            found = AdminClient(brokers).list_topics(timeout=30).brokers
            assert {b.id: (b.host, b.port) for b in found.values()} == {i: ("127.0.0.1", p) for i, p in ports.items()}
        producer = Producer({**conf, **PRODUCER, "acks": "all"})
        for i in range(200):
            producer.produce("replicated", key=b"k%d" % i, value=_value(i), partition=0)
        assert producer.flush(60) == 0
        # from broker 2's SSL listener: whichever leads, the client reaches it over SSL
        _check_records(_consume({**conf, "bootstrap.servers": f"127.0.0.1:{ssl_ports[2]}"}, "replicated", 200), 200)
