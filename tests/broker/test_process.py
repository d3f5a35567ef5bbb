"""``seglog broker`` as a process: clients against it, a clean stop on SIGTERM, a second
broker on the same dir refused, and acks=1 records surviving SIGKILL with flush.messages=1."""

from __future__ import annotations

import os

from confluent_kafka import Producer

import seglog

from .conftest import PRODUCER, consume_assigned
from .subprocess_broker import BrokerProcess, run_broker


def test_clients_sigterm_and_a_second_broker(tmp_path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("broker.id=0\nnum.partitions=2\n")
    with BrokerProcess(tmp_path / "data", config=props) as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **PRODUCER, "acks": "all"})
        for i in range(20):
            producer.produce("events", b"e%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        got = consume_assigned(broker.bootstrap_servers, "events", 1, 0, 10)
        assert [m.value() for m in got] == [b"e%d" % i for i in range(1, 20, 2)]

        second = run_broker(tmp_path / "data")
        assert second.returncode == 1
        assert "in use by another process" in second.stderr and "Traceback" not in second.stderr
        port = broker.bootstrap_servers.rsplit(":", 1)[1]
        same_port = run_broker(tmp_path / "other", f"listeners=PLAINTEXT://127.0.0.1:{port}")
        assert same_port.returncode == 1 and "Traceback" not in same_port.stderr
        assert f"error: cannot listen on 127.0.0.1:{port}" in same_port.stderr

        code, err = broker.terminate()
    assert code == 0, err
    assert "broker stopped" in err
    assert os.path.exists(tmp_path / "data" / ".kafka_cleanshutdown")
    with seglog.open(str(tmp_path / "data"), background=False) as logs:
        assert logs.partitions("events") == [0, 1]
        assert logs.partition("events", 0).log_end_offset == 10


def test_acknowledged_records_survive_sigkill(tmp_path) -> None:
    acked: list[bytes] = []
    with BrokerProcess(tmp_path / "data", "log.flush.interval.messages=1") as broker:
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                **PRODUCER,
                "acks": "1",
                "linger.ms": 0,
                "message.timeout.ms": 5000,
            }
        )

        def report(err: object, msg: object) -> None:
            if err is None:
                acked.append(msg.value())  # type: ignore[attr-defined]

        killed = False
        for i in range(20_000):
            producer.produce("durable", b"r%d" % i, partition=0, on_delivery=report)
            producer.poll(0)
            if len(acked) >= 500:
                broker.kill()  # mid-stream: records acknowledged, others in flight
                killed = True
                break
            if i % 100 == 99:
                producer.poll(0.05)
        assert killed
        producer.flush(10)
    assert len(acked) > 0
    with seglog.open(str(tmp_path / "data"), background=False) as logs:
        stored = {r.value for r in logs.partition("durable", 0).records()}
    missing = [v for v in acked if v not in stored]
    assert missing == []


def test_every_listener_is_printed_and_serves(tmp_path) -> None:
    """The first line is where clients go (scripts read its last word); each further listener
    has its own line, and a client bootstrapped there is told that listener's address."""
    listeners = "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.2:0"
    protocols = "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT"
    with BrokerProcess(tmp_path / "data", listeners, protocols) as broker:
        assert broker.proc.stdout is not None
        line = broker.proc.stdout.readline()
        assert line.startswith("also serving INTERNAL on 127.0.0.2:"), line
        internal = line.split()[-1]
        for bootstrap in (broker.bootstrap_servers, internal):
            producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
            producer.produce("listed", b"v")
            assert producer.flush(30) == 0
            metadata = producer.list_topics("listed", timeout=10)
            (only,) = metadata.brokers.values()
            assert f"{only.host}:{only.port}" == bootstrap
