"""``seglog console --command-config FILE``: the console's client connects as a client's
properties say, here over TLS to a broker's SSL listener, and with a client certificate to a
listener that requires one (mutual TLS), with tests/broker/test_tls.py's certificates (made per
run); and with SASL PLAIN."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

import seglog.broker
from seglog.client import client_security
from seglog.console import serve_in_broker, start

from ..broker.test_tls import Pki, pki  # noqa: F401  (the TLS tests' certificates, made per run)
from .test_api import get


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:  # noqa: F811
    """A broker whose listeners are SSL (first: where its Metadata sends clients) and mutual TLS."""
    config = {
        "listeners": "SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": pki.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_file,
        "listener.name.mtls.ssl.client.auth": "required",
    }
    with seglog.broker.start(str(tmp_path_factory.mktemp("tls")), config=config) as running:
        admin = AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{running.server.port_of('SSL')}",
                "security.protocol": "SSL",
                "ssl.ca.location": pki.ca_file,
            }
        )  # held until it answers
        admin.create_topics([NewTopic("secured", 2, 1)])["secured"].result(60)
        yield running


def test_the_console_reaches_a_tls_listener_with_the_clients_properties(tls_broker, pki):  # noqa: F811
    bootstrap = f"127.0.0.1:{tls_broker.server.port_of('SSL')}"
    security = client_security({"security.protocol": "SSL", "ssl.ca.location": pki.ca_file})
    with start(bootstrap, security=security) as console:
        status, topic = get(console, "api/topics/secured")
        assert status == 200, topic
        assert [p["partition"] for p in topic["partitionList"]] == [0, 1]
    with start(bootstrap) as plain:  # a plaintext client on a TLS listener: said, not hung
        status, refused = get(plain, "api/cluster")
        assert status == 502
        assert bootstrap in refused["error"]


def test_a_listener_that_requires_a_client_certificate(tls_broker, pki):  # noqa: F811
    bootstrap = f"127.0.0.1:{tls_broker.server.port_of('MTLS')}"
    trusted = {"security.protocol": "SSL", "ssl.ca.location": pki.ca_file}
    certified = trusted | {"ssl.certificate.location": pki.client_cert, "ssl.key.location": pki.client_key}
    with start(bootstrap, security=client_security(certified)) as console:
        status, cluster = get(console, "api/cluster")
        assert status == 200, cluster
        assert cluster["topics"] == 1
    with start(bootstrap, security=client_security(trusted)) as console:  # no certificate: refused
        assert get(console, "api/cluster")[0] == 502


def test_seglog_console_takes_command_config(tls_broker, pki, tmp_path: Path):  # noqa: F811
    properties = tmp_path / "client.properties"
    properties.write_text(f"security.protocol=SSL\nssl.truststore.location={pki.ca_file}\n")
    bootstrap = f"127.0.0.1:{tls_broker.server.port_of('SSL')}"
    command = [sys.executable, "-m", "seglog", "console", "--bootstrap-server", bootstrap, "--port", "0"]
    process = subprocess.Popen([*command, "--command-config", str(properties)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "api/topics", timeout=60) as answer:
            assert [t["name"] for t in json.loads(answer.read())["topics"]] == ["secured"]
    finally:
        process.terminate()
        process.wait(30)
    properties.write_text("security.protocol=SSL\nssl.ca.location=/nonexistent/ca.pem\n")
    done = subprocess.run([*command, "--command-config", str(properties)], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "TLS files do not load" in done.stderr and "Traceback" not in done.stderr


def test_the_console_authenticates_with_sasl_plain(tmp_path: Path):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_ops="ops-pw-3b1d";'
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
        "connection.failed.authentication.delay.ms": 50,
    }
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "ops"}
    with seglog.broker.start(str(tmp_path), config=config) as broker:
        with start(
            broker.bootstrap_servers, security=client_security(sasl | {"sasl.password": "ops-pw-3b1d"})
        ) as console:
            status, cluster = get(console, "api/cluster")
            assert status == 200, cluster
        with start(
            broker.bootstrap_servers, security=client_security(sasl | {"sasl.password": "wrong-pw-9"})
        ) as console:
            status, refused = get(console, "api/cluster")
            assert status >= 400 and "wrong-pw-9" not in refused["error"], refused
            assert "uthentication" in refused["error"], refused


def test_a_brokers_console_reaches_an_ssl_only_broker_as_its_brokers_do(tls_broker):
    # no PLAINTEXT listener: the broker's console connects over the inter-broker listener (SSL),
    # trusting the broker's own truststore
    with serve_in_broker(tls_broker.server, "127.0.0.1", 0, read_only=True) as console:
        status, topic = get(console, "api/topics/secured")
        assert status == 200, topic
        assert [p["partition"] for p in topic["partitionList"]] == [0, 1]
        status, layout = get(console, "api/topics/secured/partitions/0/layout")
        assert (status, layout["broker"]) == (200, tls_broker.server.config["broker.id"])


def test_a_brokers_console_authenticates_as_the_broker_over_sasl(tmp_path: Path):
    # the broker's own user of the inter-broker listener's JAAS config (username, password)
    jaas = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="broker" password="broker-pw-7c" user_broker="broker-pw-7c";'
    )
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
    }
    with (
        seglog.broker.start(str(tmp_path), config=config) as broker,
        serve_in_broker(broker.server, "127.0.0.1", 0, read_only=True) as console,
    ):
        status, cluster = get(console, "api/cluster")
        assert status == 200, cluster
        assert [b["id"] for b in cluster["brokers"]] == [broker.server.config["broker.id"]]
