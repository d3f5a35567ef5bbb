"""Observability: Prometheus /metrics counts requests per API with latency quantiles,
bytes and connections; start and stop are logged."""

from __future__ import annotations

import logging
import socket
import urllib.request

import pytest
from confluent_kafka import Producer

import seglog.broker

from .conftest import PRODUCER, consume_assigned


def _sample(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}}" if labels else f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} {labels} not in /metrics")


def test_metrics_endpoint_and_log_lines(seglog_broker_factory, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="seglog.broker"):
        broker = seglog_broker_factory(metrics_port=0)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, **PRODUCER})
        for _i in range(100):
            producer.produce("m", b"x" * 100, partition=0)
        assert producer.flush(30) == 0
        assert len(consume_assigned(broker.bootstrap_servers, "m", 0, 0, 100)) == 100
        text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
        assert _sample(text, "seglog_requests_total", api="PRODUCE") >= 1
        assert _sample(text, "seglog_requests_total", api="FETCH") >= 1
        assert _sample(text, "seglog_requests_total", api="API_VERSIONS") >= 2
        assert _sample(text, "seglog_request_latency_seconds", api="PRODUCE", quantile="0.99") > 0
        assert _sample(text, "seglog_bytes_in_total") > 100 * 100
        assert _sample(text, "seglog_bytes_out_total") > 100 * 100
        assert _sample(text, "seglog_connections_accepted_total") >= 2
        broker.stop()
    messages = [r.getMessage() for r in caplog.records if r.name == "seglog.broker"]
    assert any("started" in m and broker.bootstrap_servers.split(":")[1] in m for m in messages)
    assert any("stopped" in m for m in messages)


def test_a_taken_metrics_port_fails_the_start_and_undoes_it(tmp_path, caplog) -> None:
    """The start fails saying why, after the logs loaded and the listener bound: the listener is
    closed again and the logs closed cleanly, so that the same port and dir serve the next start."""
    with socket.socket() as taken, socket.socket() as probe:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        with caplog.at_level(logging.INFO, "seglog.broker"), pytest.raises(OSError, match="in use"):
            seglog.broker.start(str(tmp_path), port, metrics_port=taken.getsockname()[1])
    assert "broker stopped: logs closed cleanly" in caplog.text
    with seglog.broker.start(str(tmp_path), port) as broker:
        assert broker.bootstrap_servers.endswith(f":{port}")
