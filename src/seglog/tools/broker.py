"""``seglog broker``: run a Kafka broker over a log dir (kafka-server-start's form).

    seglog broker --config server.properties [--override key=value ...] [--metrics-port P]
                  [--http-port P [--http-host H] [--http-read-only]]

``--http-port`` serves the web console of the broker's cluster there, beside ``/metrics``, with
the Partition layout of the broker's own partitions read in-process (``seglog.console``).

SIGTERM and SIGINT stop it cleanly: connections closed, logs flushed, checkpoints
and the clean-shutdown marker written, the dir's lock released.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

import uvloop

from ..broker import KafkaServer, load_config
from ..broker.heap import freeze_long_lived


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("broker", help="run a Kafka broker over log dirs")
    p.add_argument("--config", metavar="FILE", help="server.properties (Kafka's keys); Kafka's defaults without")
    p.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a config that wins over the file"
    )
    p.add_argument("--metrics-port", type=int, help="serve Prometheus /metrics on this port")
    p.add_argument(
        "--http-port", type=int, help="serve the web console (and /metrics) on this port: seglog console's pages"
    )
    p.add_argument("--http-host", default="127.0.0.1", help="the address of --http-port (default 127.0.0.1)")
    p.add_argument("--http-read-only", action="store_true", help="a console that only shows: no actions")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.override)
    if logging.getLogger().level > logging.INFO:
        logging.getLogger("seglog.broker").setLevel(logging.INFO)  # start, stop and errors are always said
        logging.getLogger("seglog.cluster").setLevel(logging.INFO)  # so are elections and broker changes
    # uvloop: the fetch loop of bench/broker.py ran 12-23 % faster at 20-43 % less broker CPU a MiB
    # than on asyncio's own loop, the two brokers side by side (produce unchanged)
    server = KafkaServer(config, metrics_port=args.metrics_port, metrics_host="0.0.0.0")
    freeze_long_lived()  # a process of its own: full collections walk only what is new (broker/heap.py)
    http = (args.http_host, args.http_port, args.http_read_only) if args.http_port is not None else None
    return uvloop.run(serve(server, http))


async def serve(server: KafkaServer, http: tuple[str, int, bool] | None = None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.startup()
    # the first listener's line is the one scripts read (its last word: where clients go)
    for i, listener in enumerate(server.listeners.listeners):
        name, host = listener.name, listener.bound.host or "0.0.0.0"
        prefix = "serving on" if i == 0 else f"also serving {name} on"
        print(f"{prefix} {host}:{server.port_of(name)}", flush=True)
    console = None
    if http is not None:
        from ..console import serve_in_broker  # (the console, above the broker, only when asked)

        console = serve_in_broker(server, http[0], http[1], read_only=http[2])
        print(f"also serving the console and /metrics on {console.url}", flush=True)
    await stop.wait()
    if console is not None:
        console.stop()
    await server.shutdown()
    return 0
