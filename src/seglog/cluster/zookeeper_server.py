"""A standalone ZooKeeper server in a child process, for tests and `seglog cluster`.

It is Debian's ``zookeeper`` package (3.8) started directly with java, not through
its init scripts: ``ZooKeeperServerMain`` reads a ``zoo.cfg`` this module writes
into the server's directory::

    <dir>/zoo.cfg          clientPortAddress=127.0.0.1, admin server off, small tickTime
    <dir>/data/            snapshots and transaction logs (kept across restarts)
    <dir>/zookeeper.log    the server's output

The server is ready when the ``srvr`` four-letter word answers with a ``Mode:``
line: ``ruok`` answers ``imok`` as soon as the socket is open, before the
database is loaded. A restart keeps the port and the data dir, so clients whose
session has not expired carry on with it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from ..errors import ZooKeeperError

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")  # Debian's; its manifest lists its dependencies
SLF4J_BINDING_JAR = Path("/usr/share/java/slf4j-simple.jar")  # the server logs to stderr
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

# A short JIT and a small heap: the server starts in a fraction of the time on a small machine.
_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto")


def zookeeper_unavailable() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None when it can."""
    if not ZOOKEEPER_JAR.is_file():
        return f"ZooKeeper is not installed ({ZOOKEEPER_JAR} is missing: apt-get install zookeeper, or make install)"
    if shutil.which("java") is None:
        return "java is not on the PATH (ZooKeeper runs on Java 17)"
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on now (another process may take it before we do)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send one of ZooKeeper's four-letter words and return the whole answer ('' if none)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode("ascii"))
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone server on 127.0.0.1. ``start``, ``stop`` (SIGTERM), ``kill`` (SIGKILL), ``restart``."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        tick_time_ms: int = 200,
        max_session_timeout_ms: int = 60_000,
        fsync: bool = True,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise ZooKeeperError(f"invalid ZooKeeper client port {port}")
        if tick_time_ms < 1:
            raise ZooKeeperError(f"invalid ZooKeeper tickTime {tick_time_ms} ms")
        self.directory = Path(directory)
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.fsync = fsync
        self._process: subprocess.Popen[bytes] | None = None
        self._log_start = 0  # where this run's output begins in the log

    @property
    def connect_string(self) -> str:
        """``host:port`` for ``zookeeper.connect`` and kazoo."""
        if self.port is None:
            raise ZooKeeperError("the ZooKeeper server has not been started")
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def log_file(self) -> Path:
        return self.directory / "zookeeper.log"

    def start(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Start the server and wait until it serves; the port is chosen once, on the first start."""
        if self.running:
            return self
        reason = zookeeper_unavailable()
        if reason is not None:
            raise ZooKeeperError(reason)
        chosen = self.port is None
        for _attempt in range(3 if chosen else 1):
            if chosen:
                self.port = free_port(self.host)
            self._spawn()
            try:
                self._wait_ready(timeout)
                return self
            except ZooKeeperError:
                exited = self._process is not None and self._process.poll() is not None
                self._terminate(signal.SIGKILL)
                # another process took the free port between our probe and the server's bind: try another
                if not (chosen and exited and self._port_in_use()):
                    raise
        raise ZooKeeperError(f"ZooKeeper found no free port (log: {self.log_file})")

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the server down (SIGTERM, SIGKILL after ``timeout``); its data dir stays."""
        self._terminate(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: the server dies as in a crash."""
        self._terminate(signal.SIGKILL)

    def restart(self, timeout: float = 60.0) -> ZooKeeperServer:
        """Stop and start again on the same port and data dir."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- internals -----------------------------------------------------------------

    def _write_config(self) -> Path:
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            f"tickTime={self.tick_time_ms}",
            f"dataDir={data.resolve()}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok,stat",
            f"maxSessionTimeout={self.max_session_timeout_ms}",
            "maxClientCnxns=0",
            f"forceSync={'yes' if self.fsync else 'no'}",
            "preAllocSize=4096",  # KiB of transaction log preallocated (64 MiB by default)
        ]
        config = self.directory / "zoo.cfg"
        config.write_text("\n".join(lines) + "\n")
        return config

    def _spawn(self) -> None:
        try:
            config = self._write_config()
            classpath = f"{ZOOKEEPER_JAR}:{SLF4J_BINDING_JAR}"
            java = shutil.which("java") or "java"
            with open(self.log_file, "ab") as log:
                self._log_start = log.tell()
                self._process = subprocess.Popen(
                    [java, *_JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, str(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a Ctrl-C at the terminal is for us, not the server
                )
        except OSError as e:
            raise ZooKeeperError(f"cannot start ZooKeeper: {e}", file=str(self.directory)) from None

    def _wait_ready(self, timeout: float) -> None:
        assert self._process is not None and self.port is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ZooKeeperError(
                    f"ZooKeeper exited with status {self._process.returncode} while starting: {self._failure_reason()}",
                    file=str(self.log_file),
                )
            with contextlib.suppress(OSError):
                if "Mode:" in four_letter_word(self.host, self.port, "srvr"):
                    return
            time.sleep(0.02)
        raise ZooKeeperError(
            f"ZooKeeper did not serve on {self.connect_string} within {timeout} s: {self._failure_reason()}",
            file=str(self.log_file),
        )

    def _port_in_use(self) -> bool:
        return "Address already in use" in self._run_log()

    def _run_log(self) -> str:
        """What the server wrote since it was last spawned."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(self._log_start)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def _failure_reason(self) -> str:
        # the exception line under the first ERROR says why (BindException: Address already in use, ...)
        lines = self._run_log().splitlines()
        for i, line in enumerate(lines):
            if " ERROR " in line:
                following = lines[i + 1] if i + 1 < len(lines) else ""
                return following.strip() if "Exception" in following else line.strip()
        return lines[-1].strip() if lines else "(no output)"

    def _terminate(self, sig: signal.Signals, timeout: float = 30.0) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
