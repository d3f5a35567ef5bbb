"""The cluster fault tests over either listener a local cluster has: PLAINTEXT, or SASL_SSL only
(``LocalCluster(secure=True)``: TLS, SCRAM-SHA-512 and ACLs, the brokers' own traffic too).

Clients are configured from the properties the secure cluster writes, as a user of
``seglog cluster up --secure`` is told to; ``assert_only_over_listeners`` reads the brokers'
sockets from /proc to show that nothing else is open and that the brokers reach each other
(replica fetchers, the controller channel, AlterPartition) on those listeners only.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

from kafka.errors import KafkaConnectionError

from seglog.broker.properties import parse_properties
from seglog.tools.cluster import LocalCluster

SECURITIES = ("plaintext", "sasl_ssl")  # the fault tests' clusters: LocalCluster(secure=False / True)
SASL_SSL_FAULTS = "SEGLOG_SASL_SSL_FAULTS"  # "all": every fault test over SASL_SSL too
# over SASL_SSL in every run, one cluster for both: a leader cut off by iptables (replaced,
# truncated, the ISR shrunk and grown) and ZooKeeper restarted under load (the cluster re-formed).
# Not the kills: minutes more (their kafka-python clients stalled in some runs before
# kafka_python_settings' ssl_context: see the README)
SASL_SSL_BY_DEFAULT = {
    "test_a_cut_off_leader_is_replaced_and_truncates_its_tail",
    "test_zookeeper_restarted_under_load_loses_nothing",
}
LISTEN = "0A"  # /proc/net/tcp's state of a listening socket
ESTABLISHED = "01"

# librdkafka's client properties -> kafka-python's arguments, for those `cluster up --secure` writes
KAFKA_PYTHON_NAMES = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
}


def client_properties(cluster: LocalCluster) -> dict[str, str]:
    """The security properties a client of ``cluster`` needs (librdkafka's names): those the secure
    cluster wrote to its client.properties, none for a plaintext one."""
    if cluster.secure is None:
        return {}
    return parse_properties(cluster.secure.client_properties.read_text())


def kafka_python_settings(properties: dict[str, str]) -> dict[str, Any]:
    """``properties`` (librdkafka's names) as kafka-python's keyword arguments."""
    unknown = set(properties) - set(KAFKA_PYTHON_NAMES)
    assert not unknown, f"no kafka-python name for {sorted(unknown)}"
    settings: dict[str, Any] = {KAFKA_PYTHON_NAMES[key]: value for key, value in properties.items()}
    if "ssl_cafile" in settings:
        settings["ssl_context"] = reset_safe_context(settings["ssl_cafile"])
    return settings


class _ResetSafeContext(ssl.SSLContext):
    """kafka-python 3.0.12 wraps its socket in TLS outside the ``try`` that turns a handshake's
    OSError into KafkaConnectionError (KafkaConnectionManager._build_transport), and its metadata
    refresh loop (ClusterMetadata._refresh_loop) survives KafkaError only: a connection reset
    between connect and TLS (a broker SIGKILLed as it accepts: ``wrap_socket``'s ``recv(1)`` meets
    ECONNRESET) ends that loop for good, and the client keeps its leaders of that moment, sending
    to former ones answering NOT_LEADER_OR_FOLLOWER. This context raises the reset as the
    KafkaConnectionError kafka-python expects, so the loop retries (as over PLAINTEXT)."""

    def wrap_socket(self, sock: socket.socket, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        try:
            return super().wrap_socket(sock, *args, **kwargs)
        except OSError as e:
            raise KafkaConnectionError(f"connection lost before TLS: {e}") from e


def reset_safe_context(cafile: str) -> ssl.SSLContext:
    """The context kafka-python builds from ``ssl_cafile`` (TLS 1.2+, the peer's certificate and
    name checked), its resets raised as KafkaConnectionError."""
    context = _ResetSafeContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_verify_locations(cafile)
    return context


def assert_only_over_listeners(cluster: LocalCluster, protocol: str) -> None:
    """Each running broker listens on its one ``protocol`` listener and on nothing else, and every
    connection it opened goes to ZooKeeper or to a broker's listener; some go to another broker's
    (the followers fetch, the controller sends): the brokers speak to each other over ``protocol``."""
    listeners = {(b.host, b.port) for b in cluster.brokers.values()}
    zookeeper = _address(cluster.zookeeper_connect.split(",")[0].split("/")[0])
    to_others = 0
    for broker in (b for b in cluster.brokers.values() if b.running):
        assert broker.protocol == protocol, f"broker {broker.broker_id} listens on {broker.protocol}"
        listening, opened = _sockets(broker.pid, (broker.host, broker.port))
        assert listening == [(broker.host, broker.port)], f"broker {broker.broker_id} listens on {listening}"
        strays = [r for r in opened if r not in listeners and r != zookeeper]
        assert not strays, f"broker {broker.broker_id} connected to {strays}, neither a listener nor ZooKeeper"
        to_others += sum(r in listeners and r != (broker.host, broker.port) for r in opened)
    assert to_others > 0, "no broker connected to another's listener"


def _address(host_port: str) -> tuple[str, int]:
    host, _, port = host_port.rpartition(":")
    return socket.gethostbyname(host), int(port)


def _sockets(pid: int, listener: tuple[str, int]) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """The TCP sockets of process ``pid``: the addresses it listens on, and the remote ends of the
    connections it opened (those not accepted on ``listener``). IPv6 ones count as listening."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening: list[tuple[str, int]] = []
    opened: list[tuple[str, int]] = []
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
        if inode not in inodes:
            continue
        if state == LISTEN:
            listening.append(_decode(local))
        elif state == ESTABLISHED and _decode(local) != listener:
            opened.append(_decode(remote))
    for line in Path(f"/proc/{pid}/net/tcp6").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            listening.append(("tcp6 " + fields[1], 0))
    return listening, opened


def _decode(address: str) -> tuple[str, int]:
    """/proc/net/tcp's ``0100007F:1F90`` (the address in the host's byte order) as ("127.0.0.1", 8080)."""
    host, port = address.split(":")
    return socket.inet_ntoa(struct.pack("=I", int(host, 16))), int(port, 16)
