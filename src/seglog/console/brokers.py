"""What only seglog's brokers can tell, and how the console reaches it: the layout of a partition
on disk and the broker's request counters. Kafka's protocol carries neither, so a broker tells
them over HTTP, on its ``--http-port`` (``seglog broker --http-port``), where its own console
serves:

- ``GET /api/console``: ``{"brokerId": N, ...}``, which broker the address is;
- ``GET /api/topics/T/partitions/P/layout`` and ``.../segments/B``: the layout it reads of its own
  logs, in-process (``layout``);
- ``GET /metrics``: its counters in Prometheus' text format, beside the console.

A console reaches them through a ``BrokerAccess`` of each: ``Hosted``, the broker the console runs
in (read in-process), and ``Remote``, another broker's HTTP port (``seglog console --broker-http
URL``). Only ``seglog_bytes_in``, ``seglog_bytes_out`` and ``seglog_requests`` are read of
``/metrics``, so a broker started with ``--metrics-port`` alone gives its counters too."""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import BrokerNotAvailableError, SeglogError
from . import layout

if TYPE_CHECKING:  # (the broker the console runs in; ``seglog console`` alone loads none of it)
    from ..broker import KafkaServer

READ_TIMEOUT = 10.0  # seconds: what a page waits for another broker's HTTP port


@dataclass(frozen=True)
class Counters:
    """A broker's counters since it started, read at ``time_ms``."""

    time_ms: int
    bytes_in: int
    bytes_out: int
    requests: int


class BrokerAccess(Protocol):
    """What the console can ask of one seglog broker beyond Kafka's protocol."""

    label: str  # where it is read: "in-process", or its HTTP address

    def broker_id(self) -> int | None: ...

    def layout(self, topic: str, partition: int) -> tuple[int, Any]: ...

    def indexes(self, topic: str, partition: int, base_offset: int, limit: int) -> tuple[int, Any]: ...

    def counters(self) -> Counters: ...


class Hosted:
    """The broker the console runs in: its logs read in-process (read-only, see ``layout``)."""

    label = "in-process"

    def __init__(self, server: KafkaServer) -> None:
        self.server = server

    def broker_id(self) -> int:
        broker_id: int = self.server.config["broker.id"]
        return broker_id

    def _log(self, topic: str, partition: int) -> Any:
        if self.server.replicas is None:
            raise BrokerNotAvailableError("the broker has not started its logs yet")
        return self.server.replicas.partition(topic, partition).log

    def layout(self, topic: str, partition: int) -> tuple[int, Any]:
        return 200, {"broker": self.broker_id()} | layout.partition_layout(self._log(topic, partition))

    def indexes(self, topic: str, partition: int, base_offset: int, limit: int) -> tuple[int, Any]:
        found = layout.segment_indexes(self._log(topic, partition), base_offset, limit)
        return 200, {"broker": self.broker_id()} | found

    def counters(self) -> Counters:
        metrics = self.server.metrics
        total = sum(dict(metrics.requests).values())  # (a copy: the loop's thread adds APIs to it)
        return Counters(_now_ms(), metrics.bytes_received, metrics.bytes_sent, total)

    def prometheus(self) -> bytes:
        """``/metrics`` as ``--metrics-port`` serves it (prometheus-client, the broker extra)."""
        try:
            from prometheus_client import generate_latest
            from prometheus_client.registry import CollectorRegistry
        except ImportError:
            raise SeglogError("/metrics needs prometheus-client (pip install 'seglog[broker]')") from None
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self.server.metrics)
        return bytes(generate_latest(registry))


class Remote:
    """Another seglog broker, through its HTTP port (its ``--http-port``, or ``--metrics-port``
    for its counters alone)."""

    def __init__(self, url: str) -> None:
        self.label = self.url = http_url(url)
        self._id: int | None = None

    def broker_id(self) -> int | None:
        """Its broker id, asked once it answers; None while it does not (or serves /metrics only)."""
        if self._id is None:
            try:
                status, found = self._get("api/console")
            except BrokerNotAvailableError:
                return None
            if status == 200 and isinstance(found.get("brokerId"), int):
                self._id = found["brokerId"]
        return self._id

    def layout(self, topic: str, partition: int) -> tuple[int, Any]:
        return self._get(f"api/topics/{_quoted(topic)}/partitions/{partition}/layout")

    def indexes(self, topic: str, partition: int, base_offset: int, limit: int) -> tuple[int, Any]:
        return self._get(f"api/topics/{_quoted(topic)}/partitions/{partition}/segments/{base_offset}?limit={limit}")

    def counters(self) -> Counters:
        text = self._read("metrics").decode("utf-8", "replace")
        return Counters(
            _now_ms(),
            int(_sample(text, "seglog_bytes_in_total")),
            int(_sample(text, "seglog_bytes_out_total")),
            int(_sample(text, "seglog_requests_total", required=False)),  # none before the first request
        )

    def _get(self, path: str) -> tuple[int, Any]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=READ_TIMEOUT) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.loads(e.read())
            except ValueError:
                return e.code, {"error": f"{self.url}{path}: {e.code} {e.reason}"}
        except (OSError, ValueError) as e:
            raise BrokerNotAvailableError(f"cannot read {self.url}{path}: {e}") from None

    def _read(self, path: str) -> bytes:
        try:
            with urllib.request.urlopen(self.url + path, timeout=READ_TIMEOUT) as answer:
                return bytes(answer.read())
        except OSError as e:
            raise BrokerNotAvailableError(f"cannot read {self.url}{path}: {e}") from None


def http_url(text: str) -> str:
    """A broker's HTTP address as given (``host:port`` or ``http://host:port/``) as a URL ending in
    a slash; ValueError for another scheme."""
    url = text.strip() if "://" in text else f"http://{text.strip()}"
    if not url.startswith("http://"):
        raise ValueError(f"{text!r} is not an http:// address (host:port or http://host:port)")
    return url.rstrip("/") + "/"


def _sample(text: str, name: str, *, required: bool = True) -> float:
    """The sum of the samples of metric ``name`` in Prometheus' text format (every label's)."""
    found = re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)", text, re.MULTILINE)
    if not found and required:
        raise BrokerNotAvailableError(f"no {name} in the broker's /metrics: not a seglog broker's")
    return sum(float(v) for v in found)


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SeglogBrokers:
    """The seglog brokers a console can read beyond Kafka's protocol: the one it runs in (if any)
    and those whose HTTP port it was given; and their counters' history, for the cluster's charts."""

    def __init__(self, hosted: Hosted | None, urls: list[str]) -> None:
        self.hosted = hosted
        self.remotes = [Remote(u) for u in urls]
        self.history = Throughput()

    @property
    def accesses(self) -> list[BrokerAccess]:
        return ([self.hosted] if self.hosted is not None else []) + list(self.remotes)

    def by_id(self) -> dict[int, BrokerAccess]:
        """The accesses whose broker id is known (a remote one's, once it answered)."""
        found: dict[int, BrokerAccess] = {}
        for access in self.accesses:
            broker_id = access.broker_id()
            if broker_id is not None:
                found.setdefault(broker_id, access)
        return found

    def replica_accesses(self, replicas: list[int], topic: str, partition: int) -> list[BrokerAccess]:
        """The accesses of ``replicas`` (the leader first) this console can read; NoLayoutError
        when it can read none."""
        known = self.by_id()
        found = [known[b] for b in replicas if b in known]
        if found:
            return found
        if not self.accesses:
            raise NoLayoutError(
                "the partition layout is read from a seglog broker's own HTTP port (seglog broker --http-port), "
                "which this console does not know: start it with --broker-http URL of the brokers "
                "(a broker that is not seglog's has no such port)"
            )
        raise NoLayoutError(
            f"{topic}-{partition} is on brokers {replicas}; this console reads the disks of brokers "
            f"{sorted(known) or 'none yet'} ({', '.join(a.label for a in self.accesses)}): "
            "open the console of one of its replicas (its --http-port), or give a console its HTTP port (--broker-http)"
        )


class NoLayoutError(SeglogError):
    """No seglog broker this console can read holds the partition: answered 501."""


class Throughput:
    """The brokers' counters sampled as the cluster page asks (each page's refresh, at most one
    sample a ``STEP_MS``), kept ``KEPT_MS``, and given as rates per second between samples. The
    samples are the console's, not a page's: a page opened later draws the minutes before it."""

    STEP_MS = 1000
    KEPT_MS = 10 * 60 * 1000

    def __init__(self) -> None:
        self._rounds: list[tuple[int, dict[str, Counters]]] = []
        self._lock = threading.Lock()

    def sample(self, accesses: list[BrokerAccess]) -> dict[str, Any]:
        now, read, errors = _now_ms(), {}, {}
        with self._lock:
            if not self._rounds or now - self._rounds[-1][0] >= self.STEP_MS:
                for access in accesses:
                    try:
                        read[access.label] = access.counters()
                    except SeglogError as e:
                        errors[access.label] = str(e)
                self._rounds.append((now, read))
                self._rounds = [r for r in self._rounds if now - r[0] <= self.KEPT_MS]
            rounds = list(self._rounds)
        labels = [a.label for a in accesses]
        return {
            "sources": [{"source": label, "error": errors.get(label)} for label in labels],
            "points": _rates(rounds),
        }


def _rates(rounds: list[tuple[int, dict[str, Counters]]]) -> list[dict[str, Any]]:
    """Each pair of consecutive samples as one point: the rates over it summed over the brokers
    read in both (a broker that restarted meanwhile, its counters lower, is left out of it)."""
    points = []
    for (_, before), (at, after) in itertools.pairwise(rounds):
        rate = {"bytesIn": 0.0, "bytesOut": 0.0, "requests": 0.0}
        brokers = 0
        for label, now in after.items():
            then = before.get(label)
            if then is None or now.requests < then.requests or now.time_ms <= then.time_ms:
                continue
            seconds = (now.time_ms - then.time_ms) / 1000
            rate["bytesIn"] += (now.bytes_in - then.bytes_in) / seconds
            rate["bytesOut"] += (now.bytes_out - then.bytes_out) / seconds
            rate["requests"] += (now.requests - then.requests) / seconds
            brokers += 1
        if brokers:
            points.append({"timeMs": at, "brokers": brokers} | {k: round(v, 1) for k, v in rate.items()})
    return points
