"""A peer's bad response is the peer's fault: each of seglog's connections to another broker (the
controller's BlockingConnection, the event loop's BrokerConnection; seglog.client's connections are
tested in tests/client) raises
InvalidResponseError for a size prefix out of range, another request's correlation id or a body cut
short, never InvalidRequestError (which blames a request)."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable

import pytest

from seglog.broker.broker_connection import BrokerConnection
from seglog.broker.controller_channel_manager import BlockingConnection
from seglog.errors import BrokerNotAvailableError, InvalidRequestError, InvalidResponseError
from seglog.protocol import ApiKey, encode_response, supported_versions

Answer = Callable[[int], bytes]  # a request's correlation id -> the bytes the peer sends back


def _frame(api_key: ApiKey, version: int, correlation_id: int, body: dict) -> bytes:
    return b"".join(bytes(p) for p in encode_response(api_key, version, correlation_id, body))


def _api_versions(correlation_id: int) -> bytes:
    keys = [ApiKey.API_VERSIONS, ApiKey.METADATA]
    ranges = [{"api_key": k, "min_version": 0, "max_version": supported_versions(k)[1]} for k in keys]
    return _frame(ApiKey.API_VERSIONS, 0, correlation_id, {"error_code": 0, "api_keys": ranges})


def _cut_short(correlation_id: int) -> bytes:
    body = _frame(ApiKey.METADATA, 1, correlation_id, {})[4:-3]  # the topics' count cut
    return struct.pack(">i", len(body)) + body


BAD_ANSWERS: dict[str, tuple[Answer, str]] = {
    "size": (lambda _: struct.pack(">i", 2), "response size 2"),
    "correlation": (lambda c: _frame(ApiKey.METADATA, 1, c + 1, {}), "answered another request than METADATA"),
    "cut short": (_cut_short, "malformed METADATA v1 response"),
}


class _Peer:
    """A listening socket whose one connection answers its requests, in turn, with ``answers``."""

    def __init__(self, answers: list[Answer]) -> None:
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._answers = answers
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        conn, _ = self._server.accept()
        with conn:
            for answer in self._answers:
                size = struct.unpack(">i", _read(conn, 4))[0]
                correlation_id = struct.unpack_from(">i", _read(conn, size), 4)[0]
                conn.sendall(answer(correlation_id))
            _read(conn, 1 << 20)  # until the client closes

    def close(self) -> None:
        self._server.close()
        self._thread.join(5)


def _read(conn: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n and (chunk := conn.recv(n - len(out))):
        out += chunk
    return out


@pytest.mark.parametrize("fault", sorted(BAD_ANSWERS))
def test_blocking_connection(fault: str) -> None:
    answer, message = BAD_ANSWERS[fault]
    peer = _Peer([answer])
    conn = BlockingConnection("127.0.0.1", peer.port, "test", timeout=5)
    try:
        with pytest.raises(InvalidResponseError, match=message) as info:
            conn.call(ApiKey.METADATA, 1, {"topics": []})
        assert not isinstance(info.value, InvalidRequestError)
    finally:
        conn.close()
        peer.close()


@pytest.mark.parametrize("fault", sorted(BAD_ANSWERS))
def test_broker_connection(fault: str) -> None:
    """The event loop's connection closes on any failure and says why in a BrokerNotAvailableError."""
    answer, message = BAD_ANSWERS[fault]
    peer = _Peer([_api_versions, answer])

    async def ask() -> None:
        conn = BrokerConnection("127.0.0.1", peer.port, "test", timeout_s=5)
        try:
            await conn.request(ApiKey.METADATA, {"topics": []}, max_version=1)
        finally:
            conn.close()

    try:
        with pytest.raises(BrokerNotAvailableError, match=message):
            asyncio.run(ask())
    finally:
        peer.close()
