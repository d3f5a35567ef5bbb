"""``seglog console``: a web console of a Kafka-protocol cluster.

    seglog console --bootstrap-server H:P [--command-config FILE] [--port 8080] [--host 127.0.0.1]
                   [--read-only] [--broker-http URL[,URL...]]

It prints the address it serves at and serves until Ctrl-C. The cluster is reached only through
Kafka's protocol, so it may be seglog's brokers or any other; what Kafka's protocol does not carry
(a partition's layout on disk, a broker's byte and request counters) is read from seglog brokers'
HTTP ports (``seglog broker --http-port``) given with ``--broker-http``. ``--command-config``
holds the client's properties, as Kafka's tools take them (TLS and SASL: ``client.security``)."""

from __future__ import annotations

import argparse
from typing import Any

from ..client import parse_address
from ..tools.arguments import UsageError, add_bootstrap_server, command_security, int_between
from .brokers import SeglogBrokers
from .server import ConsoleServer

DEFAULT_PORT = 8080


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("console", help="a web console of a cluster: brokers, topics, groups, messages")
    add_bootstrap_server(p, help="a broker of the cluster")
    p.add_argument("--port", type=int_between(0, 65535), default=DEFAULT_PORT, help="to serve on (0: a free one)")
    p.add_argument("--host", default="127.0.0.1", help="the address to serve on (default 127.0.0.1: this machine)")
    p.add_argument("--read-only", action="store_true", help="no actions: the console only shows")
    p.add_argument(
        "--broker-http",
        default="",
        metavar="URL[,URL...]",
        help="seglog brokers' HTTP ports (their --http-port): partition layouts and the throughput charts",
    )
    p.add_argument(
        "--timeout-ms", type=int_between(1, 2**31 - 1), default=10_000, help="how long a page waits for the cluster"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    parse_address(args.bootstrap_server.split(",")[0])  # a malformed address: said now, not at each page
    urls = [u for u in args.broker_http.split(",") if u.strip()]
    try:
        brokers = SeglogBrokers(None, urls)
    except ValueError as e:
        raise UsageError(f"--broker-http: {e}") from None
    server = ConsoleServer(
        (args.host, args.port),
        args.bootstrap_server,
        read_only=args.read_only,
        timeout=args.timeout_ms / 1000,
        brokers=brokers,
        security=command_security(args),
    )
    mode = " (read-only)" if args.read_only else ""
    print(f"seglog console of {args.bootstrap_server} at {server.url}{mode}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C ends the console: not an error
        pass
    finally:
        server.server_close()
    return 0
