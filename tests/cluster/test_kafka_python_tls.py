"""kafka-python as the cluster fault tests configure it over SASL_SSL (``kafka_python_settings``):
a connection its broker resets before TLS begins (a broker SIGKILLed as it accepts) must fail as a
KafkaConnectionError, the error its metadata refresh loop survives; kafka-python 3.0.12's own
context lets the raw ConnectionResetError out and the loop ends (see ``_ResetSafeContext``)."""

from __future__ import annotations

import select
import socket
import struct
from pathlib import Path

import pytest
import trustme
from kafka.errors import KafkaConnectionError
from kafka.net.selector import NetworkSelector
from kafka.net.transport import KafkaSSLTransport

from .security import kafka_python_settings


def reset_connection() -> socket.socket:
    """A client socket connected, then reset by its peer (SO_LINGER 0: RST, as a killed process's)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        accepted.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        accepted.close()
    # readable once the RST has arrived (not reading SO_ERROR: that would consume the ECONNRESET)
    readable, _, _ = select.select([client], [], [], 60)
    assert readable, "the reset never arrived"
    return client


def test_a_connection_reset_before_tls_is_a_kafka_connection_error(tmp_path: Path) -> None:
    cafile = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(cafile))
    settings = kafka_python_settings({"security.protocol": "SASL_SSL", "ssl.ca.location": str(cafile)})
    sock = reset_connection()
    try:
        with pytest.raises(KafkaConnectionError):
            KafkaSSLTransport(NetworkSelector(), sock, host="localhost", **settings)
    finally:
        sock.close()
