"""What the broker counts: requests and their latency per API, bytes in and out, connections.

Counting is always on and cheap (a dict update per request, latencies kept in a ring
of the last ``_WINDOW`` samples per API for percentiles). ``serve_prometheus`` exposes
them on an HTTP ``/metrics`` endpoint with prometheus-client, when it is installed
(the ``broker`` extra) and asked for.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator
from typing import Any

_WINDOW = 4096
QUANTILES = (0.5, 0.99, 0.999)


class BrokerMetrics:
    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self._latencies: dict[str, deque[float]] = {}
        self.bytes_received = 0
        self.bytes_sent = 0
        self.connections = 0
        self.connections_total = 0
        self._lock = threading.Lock()  # the scrape runs in prometheus-client's thread

    def request(self, api: str, seconds: float, failed: bool = False) -> None:
        self.requests[api] = self.requests.get(api, 0) + 1
        if failed:
            self.errors[api] = self.errors.get(api, 0) + 1
        ring = self._latencies.get(api)
        if ring is None:
            with self._lock:
                ring = self._latencies[api] = deque(maxlen=_WINDOW)
        ring.append(seconds)

    def bytes_in(self, n: int) -> None:
        self.bytes_received += n

    def bytes_out(self, n: int) -> None:
        self.bytes_sent += n

    def connection_opened(self) -> None:
        self.connections += 1
        self.connections_total += 1

    def connection_closed(self) -> None:
        self.connections -= 1

    def latency_quantiles(self, api: str) -> dict[float, float]:
        """Latency in seconds at each of ``QUANTILES`` over the last requests of ``api``."""
        with self._lock:
            samples = sorted(self._latencies.get(api, ()))
        if not samples:
            return {}
        return {q: samples[min(len(samples) - 1, int(q * len(samples)))] for q in QUANTILES}

    def collect(self) -> Iterator[Any]:
        """prometheus-client's collector protocol."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        requests = CounterMetricFamily("seglog_requests", "Requests handled, by API.", labels=["api"])
        errors = CounterMetricFamily("seglog_request_errors", "Requests that failed, by API.", labels=["api"])
        latency = GaugeMetricFamily(
            "seglog_request_latency_seconds", "Request latency over recent requests.", labels=["api", "quantile"]
        )
        for api, count in sorted(self.requests.items()):
            requests.add_metric([api], count)
            errors.add_metric([api], self.errors.get(api, 0))
            for q, value in self.latency_quantiles(api).items():
                latency.add_metric([api, str(q)], value)
        yield requests
        yield errors
        yield latency
        yield CounterMetricFamily("seglog_bytes_in", "Bytes received from clients.", value=self.bytes_received)
        yield CounterMetricFamily("seglog_bytes_out", "Bytes sent to clients.", value=self.bytes_sent)
        yield GaugeMetricFamily("seglog_connections", "Open client connections.", value=self.connections)
        yield CounterMetricFamily(
            "seglog_connections_accepted", "Connections accepted since start.", value=self.connections_total
        )


def serve_prometheus(metrics: BrokerMetrics, host: str, port: int) -> tuple[Any, int]:
    """Serve ``/metrics`` on ``host:port`` (0: any free port); returns (server, port)."""
    from prometheus_client import start_http_server
    from prometheus_client.registry import CollectorRegistry

    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server, int(server.server_port)
