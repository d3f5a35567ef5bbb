"""The console's HTTP server: the pages (static files shipped in the package) and the JSON API
under them, on the standard library's threading HTTP server.

Each API request opens its own client of the cluster (``figures.open_client``), so requests run
side by side and a slow or unreachable broker holds up only the requests that need it. Every
error is answered as ``{"error": "..."}`` with a status that says whose it is (400 a malformed
request, 403 an action of a read-only console, 404 no such topic or group, 409 a topic that exists
or a group not empty, 501 what the cluster does not serve, 502 the cluster could not be reached or
refused); an unexpected one is logged and answered 500 without its traceback, and the server goes
on serving. A broker's own console (``serve_in_broker``) also serves the broker's ``/metrics``, and
the layouts of its partitions (``brokers``, ``layout``)."""

from __future__ import annotations

import json
import logging
import mimetypes
import threading
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..client import PLAINTEXT, ClientSecurity
from ..errors import (
    BrokerNotAvailableError,
    ErrorCode,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    SeglogError,
    UnsupportedVersionError,
)
from . import figures
from .brokers import Hosted, NoLayoutError, SeglogBrokers
from .figures import ConsoleInputError
from .layout import MAX_ENTRIES, LayoutInputError

log = logging.getLogger(__name__)

STATIC = resources.files(__package__).joinpath("static")
MAX_BODY = 1 << 20  # a POST's JSON: a topic to create is a few hundred bytes
NOT_FOUND_CODES = frozenset(
    {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND}
)
# the pages load only the package's own files: no inline script, nothing from elsewhere
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; object-src 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


class ConsoleServer(ThreadingHTTPServer):
    """The console of the cluster at ``bootstrap``, listening on ``address``."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        bootstrap: str,
        *,
        read_only: bool,
        timeout: float,
        brokers: SeglogBrokers | None = None,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        super().__init__(address, ConsoleHandler)
        self.bootstrap = bootstrap
        self.security = security
        self.read_only = read_only
        self.request_timeout = timeout
        self.brokers = brokers or SeglogBrokers(None, [])
        self.listed = figures.ListedMetadata()  # the topics lists' Metadata, for their details
        self._thread: threading.Thread | None = None

    def client(self) -> Any:
        """A client of the cluster for one request (``figures.open_client``)."""
        return figures.open_client(self.bootstrap, self.request_timeout, self.security)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host if isinstance(host, str) else host.decode()}:{port}/"

    def start(self) -> ConsoleServer:
        """Serve on a thread of its own (tests, an embedding program); ``stop`` ends it."""
        self._thread = threading.Thread(target=self.serve_forever, name="seglog-console", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> ConsoleServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start(
    bootstrap: str,
    port: int = 0,
    *,
    host: str = "127.0.0.1",
    read_only: bool = False,
    broker_http: list[str] | None = None,
    security: ClientSecurity = PLAINTEXT,
) -> ConsoleServer:
    """A console of ``bootstrap`` serving on its own thread at ``host:port`` (0: a free port);
    ``broker_http``: the HTTP ports of seglog brokers (their layouts and counters); ``security``:
    how its client connects (``client.client_security`` of a client's properties)."""
    brokers = SeglogBrokers(None, broker_http or [])
    server = ConsoleServer(
        (host, port), bootstrap, read_only=read_only, timeout=10.0, brokers=brokers, security=security
    )
    return server.start()


def serve_in_broker(server: Any, host: str, port: int, *, read_only: bool) -> ConsoleServer:
    """The console of the broker ``server`` (a started ``KafkaServer``) runs in, on its thread at
    ``host:port``, beside the broker's ``/metrics``: the broker's partitions' layouts read
    in-process. It reaches the cluster as the broker reaches the other brokers: through the
    inter-broker listener, with its security (TLS, SASL) and the broker's credentials."""
    # (imported here: the broker is loaded already, and ``seglog console`` alone needs none of it)
    from ..broker.inter_broker import listener_security

    listener = server.listeners.named(server.listeners.inter_broker)
    bound = listener.bound.host if listener.bound.host not in ("", "0.0.0.0") else "127.0.0.1"
    bootstrap = f"{bound}:{server.port_of(listener.name)}"
    security = listener_security(server.config, listener.name)
    brokers = SeglogBrokers(Hosted(server), [])
    console = ConsoleServer(
        (host, port), bootstrap, read_only=read_only, timeout=10.0, brokers=brokers, security=security
    )
    return console.start()


class ConsoleHandler(BaseHTTPRequestHandler):
    server: ConsoleServer
    protocol_version = "HTTP/1.1"  # keep-alive: a page asks a few requests at once

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    # --- routing -----------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path in ("/", "/index.html"):
            self._static("index.html")
        elif url.path.startswith("/static/"):
            self._static(url.path.removeprefix("/static/"))
        elif url.path.startswith("/api/"):
            self._api(lambda: self._get(url.path.removeprefix("/api/"), parse_qs(url.query)))
        elif url.path == "/metrics" and self.server.brokers.hosted is not None:
            self._metrics(self.server.brokers.hosted)
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no page {url.path}")

    def do_POST(self) -> None:
        path = urlsplit(self.path).path.removeprefix("/api/")
        parts = [unquote(p) for p in path.split("/")]
        match parts:
            case ["topics"]:
                action, status = figures.create_topic, HTTPStatus.CREATED
            case ["topics", name, "partitions"] if name:
                action, status = partial(figures.add_partitions, name=name), HTTPStatus.OK
            case ["topics", name, "configs"] if name:
                action, status = partial(figures.alter_configs, name=name), HTTPStatus.OK
            case ["topics", name, "delete-records"] if name:
                action, status = partial(figures.delete_records, name=name), HTTPStatus.OK
            case ["groups", *_, "reset-offsets"] if len(parts) > 2:
                # a group id may hold a slash (sent as %2F): all between groups/ and the action is the id
                group_id = unquote(path.removeprefix("groups/").removesuffix("/reset-offsets"))
                action, status = partial(figures.reset_offsets, group_id=group_id), HTTPStatus.OK
            case _:
                self._error(HTTPStatus.NOT_FOUND, f"nothing to POST to at {self.path}")
                return
        if self.server.read_only:
            self._error(HTTPStatus.FORBIDDEN, "this console is read-only (started with --read-only)")
        else:
            self._api(lambda: self._act(action), status)

    def _get(self, path: str, query: dict[str, list[str]]) -> Any:
        parts = [unquote(p) for p in path.split("/")]
        brokers = self.server.brokers
        match parts:
            case ["console"]:
                return {
                    "bootstrap": self.server.bootstrap,
                    "readOnly": self.server.read_only,
                    "brokerId": None if brokers.hosted is None else brokers.hosted.broker_id(),
                    "brokerHttp": [a.label for a in brokers.remotes],
                }
            case ["throughput"]:
                return brokers.history.sample(brokers.accesses) | {"seglogBrokers": len(brokers.accesses)}
            case ["topics", name, "partitions", partition, "layout"] if name:
                return self._on_disk(name, _whole(partition, "partition"), None, query)
            case ["topics", name, "partitions", partition, "segments", base] if name:
                return self._on_disk(name, _whole(partition, "partition"), _whole(base, "base offset"), query)
        with self.server.client() as client:
            match parts:
                case ["cluster"]:
                    return figures.cluster(client)
                case ["topics"]:
                    details = query.get("details", [""])[-1] == "true"
                    return figures.topics(client, details, self.server.listed, _number(query, "after", None))
                case ["topics", name] if name:
                    return figures.topic(client, name)
                case ["topics", name, "messages"] if name:
                    partition, limit = _number(query, "partition", 0), _number(query, "limit", 50)
                    offset, timestamp = _number(query, "offset", None), _number(query, "timestamp", None)
                    contains = query.get("filter", [""])[-1].strip() or None
                    return figures.messages(client, name, partition, offset, limit, timestamp, contains)
                case ["groups"]:
                    return figures.groups(client)
                case ["groups", *_] if len(parts) > 1:
                    # a group id may hold a slash (sent as %2F): all that follows groups/ is the id
                    return figures.group(client, unquote(path.removeprefix("groups/")))
                case ["transactions"]:
                    return figures.transactions(client)
                case ["transactions", *_] if len(parts) > 1:
                    return figures.transaction(client, unquote(path.removeprefix("transactions/")))
        raise _NotFound(f"no API at /api/{path}")

    def _on_disk(self, topic: str, partition: int, base_offset: int | None, query: dict[str, list[str]]) -> _Answer:
        """A partition's layout (``base_offset`` None) or a segment's index entries, read by a
        broker holding a replica: this console's own broker when it does, else the first replica
        whose HTTP port this console knows and answers (the leader first)."""
        limit = _number(query, "limit", MAX_ENTRIES)

        def read(access: Any) -> _Answer:
            if base_offset is None:
                return _Answer(*access.layout(topic, partition))
            return _Answer(*access.indexes(topic, partition, base_offset, limit))

        hosted = self.server.brokers.hosted
        if hosted is not None:
            try:
                return read(hosted)
            except NotLeaderOrFollowerError:
                pass  # a partition of the cluster this broker holds no replica of: another may
        with self.server.client() as client:
            replicas = figures.replicas(client, topic, partition)
        *others, last = self.server.brokers.replica_accesses(replicas, topic, partition)
        for access in others:
            try:
                return read(access)
            except BrokerNotAvailableError:  # its HTTP port does not answer (a broker down): the next replica's
                continue
        return read(last)

    def _act(self, action: Any) -> Any:
        """``action(client, body, timeout_ms)`` with the request's JSON body."""
        if self.headers.get_content_type() != "application/json":
            # a page of another site can POST a form, but not JSON, without the browser asking first
            raise ConsoleInputError("an action is sent as application/json")
        size = int(self.headers.get("Content-Length") or 0)
        if not 0 < size <= MAX_BODY:
            raise ConsoleInputError(f"the request's body is from 1 to {MAX_BODY} bytes, not {size}")
        try:
            body = json.loads(self.rfile.read(size))
        except (ValueError, UnicodeDecodeError) as e:
            raise ConsoleInputError(f"the request's body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise ConsoleInputError("the request's body is a JSON object")
        timeout_ms = int(self.server.request_timeout * 1000)
        with self.server.client() as client:
            return action(client, body, timeout_ms)

    # --- answers -------------------------------------------------------------------------------------------

    def _api(self, answer: Any, status: HTTPStatus = HTTPStatus.OK) -> None:
        try:
            found = answer()
            if isinstance(found, _Answer):  # another broker's answer, passed on as it came
                status, found = HTTPStatus(found.status), found.body
        except _NotFound as e:
            self._error(HTTPStatus.NOT_FOUND, str(e))
        except SeglogError as e:
            self._error(_status(e), str(e))
        except Exception as e:  # a bug of ours: said in the log, and the server goes on
            log.exception("console: %s %s failed", self.command, self.path)
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"internal error: {type(e).__name__}: {e}")
        else:
            self._send(status, "application/json", json.dumps(found).encode(), {"Cache-Control": "no-store"})

    def _metrics(self, hosted: Hosted) -> None:
        try:
            body = hosted.prometheus()
        except SeglogError as e:
            self._error(HTTPStatus.NOT_IMPLEMENTED, str(e))
            return
        self._send(HTTPStatus.OK, "text/plain; version=0.0.4; charset=utf-8", body, {"Cache-Control": "no-store"})

    def _static(self, name: str) -> None:
        file = STATIC.joinpath(name)
        if "/" in name or name.startswith(".") or not file.is_file():
            self._error(HTTPStatus.NOT_FOUND, f"no file {name}")
            return
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        self._send(HTTPStatus.OK, f"{kind}; charset=utf-8", file.read_bytes(), {})

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, "application/json", json.dumps({"error": message}).encode(), {"Cache-Control": "no-store"})

    def _send(self, status: HTTPStatus, kind: str, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        for key, value in {**SECURITY_HEADERS, **headers, "Content-Type": kind}.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _NotFound(Exception):
    """No page or API at a path."""


@dataclass(frozen=True)
class _Answer:
    """An answer with its own status: another broker's, passed on."""

    status: int
    body: Any


def _whole(text: str, name: str) -> int:
    """A whole number from a path's segment."""
    if not text.isdigit() or len(text) > 19:
        raise ConsoleInputError(f"{name} is a whole number from 0, not {text!r}")
    return int(text)


def _number(query: dict[str, list[str]], key: str, default: Any) -> Any:
    """The whole number ``key`` of a query string, ``default`` when absent or empty."""
    text = query.get(key, [""])[-1].strip()
    return default if not text else _whole(text, key)


def _status(error: SeglogError) -> HTTPStatus:
    """The HTTP status of an error: whose mistake it is."""
    if isinstance(error, ConsoleInputError | LayoutInputError | OffsetOutOfRangeError):
        return HTTPStatus.BAD_REQUEST
    if isinstance(error, NoLayoutError):
        return HTTPStatus.NOT_IMPLEMENTED
    if error.error_code in NOT_FOUND_CODES:
        return HTTPStatus.NOT_FOUND
    if error.error_code in (ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.NON_EMPTY_GROUP):
        return HTTPStatus.CONFLICT
    if isinstance(error, BrokerNotAvailableError):
        return HTTPStatus.BAD_GATEWAY
    if isinstance(error, UnsupportedVersionError):  # an API the cluster does not serve (Tansu's transactions)
        return HTTPStatus.NOT_IMPLEMENTED
    # the broker refused what was asked (an invalid config or replication factor ...): said as it said it
    return HTTPStatus.BAD_REQUEST if error.error_code != ErrorCode.UNKNOWN_SERVER_ERROR else HTTPStatus.BAD_GATEWAY
