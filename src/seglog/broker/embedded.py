"""A broker in this process: ``seglog.broker.start`` runs one on its own event-loop thread.

For tests and tools that want a real Kafka broker without Docker or a JVM:

    with seglog.broker.start("/tmp/data") as broker:
        Producer({"bootstrap.servers": broker.bootstrap_servers}) ...

It listens on 127.0.0.1 (port 0: a free one) and is serving when ``start`` returns; in a
cluster (``zookeeper.connect``), once the controller's first UpdateMetadata has named it, as
Kafka's KRaft broker starts once it has caught up with the cluster's metadata. Before that its
Metadata names no controller, and a client told so waits for its next metadata refresh
(librdkafka's admin requests: until they time out).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from typing import Any

from .properties import broker_config
from .server import KafkaServer

log = logging.getLogger(__name__)


class EmbeddedBroker:
    """A running broker; ``stop()`` (or leaving the ``with`` block) shuts it down cleanly."""

    def __init__(self, server: KafkaServer, loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
        self.server = server
        self._loop = loop
        self._thread = thread
        self._stopped = False

    @property
    def host(self) -> str:
        return "127.0.0.1" if self.server.listener.host in ("", "0.0.0.0") else self.server.listener.host

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port``, for a client's ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def metrics_port(self) -> int | None:
        return self.server.metrics_port

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            asyncio.run_coroutine_threadsafe(self.server.shutdown(), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    def __enter__(self) -> EmbeddedBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"EmbeddedBroker({self.bootstrap_servers})"


def start(
    log_dir: str,
    port: int = 0,
    config: Mapping[str, Any] | None = None,
    *,
    host: str = "127.0.0.1",
    metrics_port: int | None = None,
) -> EmbeddedBroker:
    """Start a broker on ``log_dir`` listening on ``host:port`` (0: any free port).

    ``config`` holds broker keys with Kafka's names (``num.partitions``,
    ``log.segment.bytes``, ``flush.messages`` as ``log.flush.interval.messages`` ...);
    ``metrics_port`` serves Prometheus ``/metrics`` there (0: any free port)."""
    values = dict(config or {})
    values.setdefault("log.dirs", log_dir)
    values.setdefault("listeners", f"PLAINTEXT://{host}:{port}")
    server = KafkaServer(broker_config(values, "start()"), metrics_port=metrics_port)
    loop = asyncio.new_event_loop()
    started = threading.Event()
    failure: list[BaseException] = []

    async def boot() -> None:
        try:
            await server.startup()
            if server.controller_apis is not None:
                await _until_joined(server.controller_apis.joined, server.config["controller.socket.timeout.ms"])
        except BaseException as e:
            failure.append(e)
            loop.stop()
        finally:
            started.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        booting = loop.create_task(boot())  # (held: the loop keeps only a weak reference to tasks)
        try:
            loop.run_forever()
        finally:
            booting.cancel()
            loop.close()

    thread = threading.Thread(target=run, name=f"seglog-broker-{log_dir}", daemon=True)
    thread.start()
    started.wait()
    if failure:
        thread.join()
        raise failure[0]
    return EmbeddedBroker(server, loop, thread)


async def _until_joined(joined: asyncio.Event, timeout_ms: int) -> None:
    """Until the controller's first UpdateMetadata, for at most controller.socket.timeout.ms (the
    controller's own bound on reaching a broker): a controller that cannot reach this broker
    leaves it serving without cluster metadata, said in the log, rather than not started."""
    try:
        await asyncio.wait_for(joined.wait(), timeout_ms / 1000)
    except TimeoutError:
        log.warning("no UpdateMetadata from the controller within %d ms: serving without cluster metadata", timeout_ms)
