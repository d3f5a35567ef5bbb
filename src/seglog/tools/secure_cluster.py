"""``seglog cluster up --secure``: a local cluster whose only listeners are SASL_SSL, brokers and
clients authenticating with SCRAM-SHA-512 over TLS.

In ``D/secure`` (readable by its owner only): a CA and each broker's certificate for its loopback
address (made with the ``openssl`` command; ``ca.pem`` is what clients trust), the brokers'
``broker.properties`` (the TLS and SASL keys, and the JAAS config of the ``admin`` user they
authenticate to each other as: a file, so that no password shows in ``ps``), and
``client.properties`` for clients (librdkafka's names, which ``--command-config`` reads too). The
``admin`` user's SCRAM credential goes into ZooKeeper before any broker starts, as with Kafka.
ACLs are on (Kafka's AclAuthorizer), ``admin`` their super user: the brokers' own requests pass,
and another user gets what ``seglog acls`` grants it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

from ..client import ClientSecurity, client_security
from ..cluster import znodes
from ..cluster.zk_client import ZkClient
from ..config import ACL_AUTHORIZER
from ..errors import SeglogError
from ..security.scram import SCRAM_SHA_512, credential

ADMIN = "admin"
MECHANISM = SCRAM_SHA_512.name
DAYS = "825"


class SecureSetup:
    """The certificates, properties and admin credential of a secure local cluster in ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory / "secure"
        self.ca = self.directory / "ca.pem"
        self.client_properties = self.directory / "client.properties"
        self.broker_properties = self.directory / "broker.properties"
        self._password = secrets.token_urlsafe(24)

    def prepare(self, hosts: dict[int, str]) -> ClientSecurity:
        """Certificates for each broker's host, the properties files; the clients' security."""
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        ca_key = self.directory / "ca.key"
        _openssl("req", "-x509", *_new_key(ca_key), "-out", str(self.ca), "-days", DAYS, "-subj", "/CN=seglog local CA")
        for broker_id, host in hosts.items():
            self._broker_certificate(broker_id, host, ca_key)
        jaas = (
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{ADMIN}" '
            f'password="{self._password}";'
        )
        _write_private(
            self.broker_properties,
            {
                "inter.broker.listener.name": "SASL_SSL",
                "authorizer.class.name": ACL_AUTHORIZER,
                "super.users": f"User:{ADMIN}",
                "sasl.enabled.mechanisms": MECHANISM,
                "sasl.mechanism.inter.broker.protocol": MECHANISM,
                f"listener.name.sasl_ssl.{MECHANISM.lower()}.sasl.jaas.config": jaas,
                "ssl.keystore.type": "PEM",
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.ca),
            },
        )
        client = {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": ADMIN,
            "sasl.password": self._password,
            "ssl.ca.location": str(self.ca),
        }
        _write_private(self.client_properties, client)
        return client_security(client)

    def keystore(self, broker_id: int) -> Path:
        return self.directory / f"broker-{broker_id}.pem"

    def _broker_certificate(self, broker_id: int, host: str, ca_key: Path) -> None:
        key, request = self.directory / f"broker-{broker_id}.key", self.directory / f"broker-{broker_id}.csr"
        certificate, extensions = self.directory / f"broker-{broker_id}.crt", self.directory / "san.cnf"
        extensions.write_text(f"subjectAltName=IP:{host}\n")
        _openssl("req", *_new_key(key), "-out", str(request), "-subj", f"/CN={host}")
        _openssl(
            "x509", "-req", "-in", str(request), "-CA", str(self.ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(certificate), "-days", DAYS, "-extfile", str(extensions),
        )  # fmt: skip
        keystore = self.keystore(broker_id)
        keystore.write_bytes(key.read_bytes() + certificate.read_bytes())
        os.chmod(keystore, 0o600)
        for made in (request, extensions):
            made.unlink()

    def create_admin(self, zookeeper: str) -> None:
        """The admin user's SCRAM credential in ZooKeeper, as ``kafka-configs.sh --zookeeper`` makes it."""
        stored = {MECHANISM: credential(SCRAM_SHA_512, self._password, 4096).format()}
        zk = ZkClient(zookeeper).start()
        try:
            zk.set_or_create(znodes.config_path("users", ADMIN), znodes.encode_config(stored))
        finally:
            zk.close()


def _new_key(path: Path) -> list[str]:
    return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(path)]


def _openssl(*args: str) -> None:
    try:
        done = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60, check=False)
    except FileNotFoundError:
        raise SeglogError("cluster up --secure makes its certificates with the openssl command: install it") from None
    if done.returncode != 0:
        raise SeglogError(f"openssl {args[0]} failed: {done.stderr.strip()[-500:]}")


def _write_private(path: Path, properties: dict[str, str]) -> None:
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w", encoding="utf-8") as f:
        f.writelines(f"{key}={value}\n" for key, value in properties.items())
