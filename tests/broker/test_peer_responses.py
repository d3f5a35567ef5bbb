"""A peer's bad response is the peer's fault: both connections a broker opens to another (the
controller's sender threads' BlockingConnection, the event loop's AsyncConnection of the replica
fetchers, AlterPartition and the transaction markers) raise InvalidResponseError for a size prefix
out of range, another request's correlation id or a body cut short in the answer to a request after
ApiVersions, never InvalidRequestError (which blames a request) nor BrokerNotAvailableError."""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Callable

import pytest

from seglog.client import AsyncConnection, BlockingConnection
from seglog.errors import ErrorCode, InvalidRequestError, InvalidResponseError
from seglog.protocol import ApiKey, encode_response, supported_versions
from seglog.protocol.connection import API_VERSIONS_VERSION
from seglog.protocol.message_data import ApiVersionsResponseData, MetadataRequestData, MetadataResponseData

Answer = Callable[[int], bytes]  # a request's correlation id -> the bytes the peer sends back


def _frame(
    api_key: ApiKey, version: int, correlation_id: int, body: ApiVersionsResponseData | MetadataResponseData
) -> bytes:
    return b"".join(bytes(p) for p in encode_response(api_key, version, correlation_id, body))


def _api_versions(correlation_id: int) -> bytes:
    keys = [ApiKey.API_VERSIONS, ApiKey.METADATA]
    ranges = [
        ApiVersionsResponseData.ApiVersion(api_key=k, min_version=0, max_version=supported_versions(k)[1]) for k in keys
    ]
    body = ApiVersionsResponseData(error_code=ErrorCode.NONE, api_keys=ranges)
    return _frame(ApiKey.API_VERSIONS, API_VERSIONS_VERSION, correlation_id, body)


def _cut_short(correlation_id: int) -> bytes:
    body = _frame(ApiKey.METADATA, 1, correlation_id, MetadataResponseData())[4:-3]  # the topics' count cut
    return struct.pack(">i", len(body)) + body


BAD_ANSWERS: dict[str, tuple[Answer, str]] = {
    "size": (lambda _: struct.pack(">i", -5), "invalid frame size"),
    "correlation": (
        lambda c: _frame(ApiKey.METADATA, 1, c + 1, MetadataResponseData()),
        "response to METADATA .* came with",
    ),
    "cut short": (_cut_short, "METADATA v1 response"),
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
    peer = _Peer([_api_versions, answer])
    conn = BlockingConnection("127.0.0.1", peer.port, "test", timeout=5)
    try:
        with pytest.raises(InvalidResponseError, match=message) as info:
            conn.call(ApiKey.METADATA, MetadataRequestData(topics=[]), 1)
        assert not isinstance(info.value, InvalidRequestError)
    finally:
        conn.close()
        peer.close()


@pytest.mark.parametrize("fault", sorted(BAD_ANSWERS))
def test_async_connection(fault: str) -> None:
    """The event loop's connection closes on any failure and names the peer in the error."""
    answer, message = BAD_ANSWERS[fault]
    peer = _Peer([_api_versions, answer])

    async def ask() -> None:
        conn = AsyncConnection("127.0.0.1", peer.port, "test", timeout_s=5)
        try:
            await conn.request(ApiKey.METADATA, MetadataRequestData(topics=[]), highest=1)
        finally:
            conn.close()

    try:
        with pytest.raises(InvalidResponseError, match=message) as info:
            asyncio.run(ask())
        assert f"127.0.0.1:{peer.port}" in str(info.value)
    finally:
        peer.close()
