"""Hostile input: each bad frame closes its own connection; the broker stays up, answers
others, and its memory stays bounded."""

from __future__ import annotations

import random
import resource
import socket
import struct

import pytest


def _request(api_key: int, version: int, correlation_id: int, body: bytes = b"", client_id: bytes = b"t") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


API_VERSIONS_V0 = _request(18, 0, 7)


def _connect(broker) -> socket.socket:
    return socket.create_connection((broker.host, broker.port), timeout=10)


def _read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", _read_exact(sock, 4))[0]
    return _read_exact(sock, size)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def _closed(sock: socket.socket) -> bool:
    """True when the broker closes the connection (EOF or reset) within the socket timeout."""
    try:
        while True:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _alive(broker) -> None:
    with _connect(broker) as sock:
        sock.sendall(API_VERSIONS_V0)
        frame = _read_frame(sock)
        assert struct.unpack_from(">ih", frame) == (7, 0)  # correlation id, no error


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">I", 0x7FFFFFFF) + b"x" * 100, id="2GiB-size-prefix"),
        pytest.param(struct.pack(">i", -1) + b"x" * 10, id="negative-size"),
        pytest.param(struct.pack(">i", 2) + b"\x00\x03", id="header-cut-short"),
        pytest.param(_request(999, 0, 1), id="unknown-api-key"),
        pytest.param(_request(0, 99, 1), id="produce-v99"),
        pytest.param(_request(3, 1, 1, struct.pack(">i", 0x7FFFFFFF)), id="huge-array-count"),
        pytest.param(_request(3, 1, 1, struct.pack(">i", -7)), id="negative-array-count"),
        pytest.param(_request(3, 1, 1, struct.pack(">ih", 1, 500) + b"abc"), id="string-past-frame"),
        pytest.param(_request(3, 9, 1, b"\xff\xff\xff\xff\xff\xff\xff"), id="varint-never-ends"),
    ],
)
def test_bad_frames_close_their_connection_only(seglog_broker, payload: bytes) -> None:
    with _connect(seglog_broker) as bystander:
        with _connect(seglog_broker) as sock:
            sock.sendall(payload)
            assert _closed(sock)
        bystander.sendall(API_VERSIONS_V0)  # a connection opened before is still served
        assert struct.unpack_from(">ih", _read_frame(bystander)) == (7, 0)
    _alive(seglog_broker)


def test_unsupported_api_versions_version_gets_a_v0_answer(seglog_broker) -> None:
    with _connect(seglog_broker) as sock:
        sock.sendall(_request(18, 99, 5))
        frame = _read_frame(sock)
        correlation_id, error, count = struct.unpack_from(">ihi", frame)
        assert (correlation_id, error) == (5, 35)  # UNSUPPORTED_VERSION, in a v0 body
        entries = [struct.unpack_from(">hhh", frame, 10 + 6 * i) for i in range(count)]
        assert (18, 0, 4) in entries and any(k == 0 and high == 11 for k, _, high in entries)
        sock.sendall(API_VERSIONS_V0)  # and the connection stays usable
        assert struct.unpack_from(">ih", _read_frame(sock)) == (7, 0)


def test_mutated_requests_and_promised_sizes_keep_memory_bounded(seglog_broker) -> None:
    rng = random.Random(13)
    metadata = _request(3, 1, 1, struct.pack(">i", 1) + struct.pack(">h", 5) + b"topic")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(150):
        frame = bytearray(metadata)
        for _ in range(rng.randint(1, 4)):
            frame[rng.randrange(4, len(frame))] = rng.randrange(256)
        cut = rng.choice([len(frame), rng.randrange(4, len(frame))])
        with _connect(seglog_broker) as sock:
            sock.settimeout(2)
            sock.sendall(bytes(frame[:cut]))
            sock.shutdown(socket.SHUT_WR)  # at the end of the stream the broker answers what it read, then closes
            assert _closed(sock)
    # 40 connections each promising a 100 MiB request and sending 1 KiB: nothing is allocated up front
    socks = []
    try:
        for _ in range(40):
            s = _connect(seglog_broker)
            s.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 1024)
            socks.append(s)
        _alive(seglog_broker)
    finally:
        for s in socks:
            s.close()
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 200
    _alive(seglog_broker)
