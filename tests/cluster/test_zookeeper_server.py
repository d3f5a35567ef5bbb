"""The ZooKeeper server the cluster tests and `seglog cluster` run: start, restart, kill, errors."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from seglog.cluster import zookeeper_server
from seglog.cluster.zookeeper_server import ZooKeeperServer, four_letter_word, zookeeper_unavailable
from seglog.errors import ZooKeeperError

pytestmark = pytest.mark.skipif(zookeeper_unavailable() is not None, reason=str(zookeeper_unavailable()))


def read_znode(connect: str, path: str) -> bytes | None:
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        found = client.exists(path)
        return None if found is None else client.get(path)[0]
    finally:
        client.stop()
        client.close()


def write_znode(connect: str, path: str, data: bytes) -> None:
    client = KazooClient(hosts=connect)
    client.start(timeout=30)
    try:
        client.create(path, data, makepath=True)
    finally:
        client.stop()
        client.close()


def test_lifecycle_keeps_port_and_data(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path / "zk", tick_time_ms=100)
    server.start()
    try:
        port = server.port
        assert port is not None
        assert "Mode: standalone" in four_letter_word("127.0.0.1", port, "srvr")
        assert four_letter_word("127.0.0.1", port, "ruok") == "imok"
        assert "clientPortAddress=127.0.0.1" in (tmp_path / "zk" / "zoo.cfg").read_text()
        write_znode(server.connect_string, "/a/b", b"before restart")

        server.restart()  # SIGTERM, then the same port and data dir
        assert server.port == port and server.running
        assert read_znode(server.connect_string, "/a/b") == b"before restart"

        pid = server.pid
        server.kill()  # SIGKILL: what a crash leaves must load
        assert not server.running and pid is not None
        server.start()
        assert server.port == port
        assert read_znode(server.connect_string, "/a/b") == b"before restart"
    finally:
        server.stop()
    assert not server.running
    server.stop()  # twice is fine
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        pass


def test_a_port_in_use_fails_clearly(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = ZooKeeperServer(tmp_path / "zk", port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperError, match=r"ZooKeeper exited with status .* while starting") as info:
            server.start()
    assert "Address already in use" in str(info.value)
    assert info.value.file == str(tmp_path / "zk" / "zookeeper.log")
    assert not server.running


def test_missing_installation_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zookeeper_server, "ZOOKEEPER_JAR", tmp_path / "nowhere" / "zookeeper.jar")
    assert "apt-get install zookeeper" in str(zookeeper_unavailable())
    with pytest.raises(ZooKeeperError, match="ZooKeeper is not installed"):
        ZooKeeperServer(tmp_path / "zk").start()


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperError, match="invalid ZooKeeper client port 70000"):
        ZooKeeperServer(tmp_path, port=70000)
    with pytest.raises(ZooKeeperError, match="tickTime 0"):
        ZooKeeperServer(tmp_path, tick_time_ms=0)
    with pytest.raises(ZooKeeperError, match="has not been started"):
        _ = ZooKeeperServer(tmp_path).connect_string
