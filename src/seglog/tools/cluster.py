"""``seglog cluster up``: a ZooKeeper and N brokers on this machine, the way to try a cluster in one command.

    seglog cluster up --brokers 3 --dir D [--zookeeper HOST:PORT | --zookeeper-port P] [--port 9092]
                      [--override KEY=VALUE ...] [--secure]
    seglog cluster down --dir D

Broker i (from 1) is ``broker.id=i`` on 127.0.0.i (Linux answers on all of 127/8 without setup),
its log dir ``D/broker-i``, its output in ``D/broker-i.log``. ZooKeeper (Debian's package, unless
``--zookeeper`` names a running one) keeps its data in ``D/zookeeper`` and listens on 127.0.0.1 at
``--zookeeper-port`` (default: a free port). The bootstrap servers are
printed once every broker serves; SIGINT or SIGTERM stops the brokers (each moves its leaders off
first: controlled shutdown) and then ZooKeeper; so does ``cluster down``, through the pid file
``D/cluster.pid``. ``LocalCluster`` is the same for programs and tests. With ``--secure`` the
brokers listen on SASL_SSL only, with TLS and SCRAM between them too (secure_cluster.py), and
the client properties to use are printed.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..client import PLAINTEXT, ClientSecurity, connect, metadata
from ..cluster.zookeeper_server import ZooKeeperServer, free_port
from ..errors import BrokerNotAvailableError, SeglogError
from ..protocol.message_data import MetadataResponseData
from . import CLIENT_ID
from .arguments import UsageError
from .secure_cluster import SecureSetup

DEFAULT_PORT = 9092
PID_FILE = "cluster.pid"  # in --dir, while `cluster up` runs: what `cluster down` signals
START_TIMEOUT_S = 60.0


class BrokerProcess:
    """One ``seglog broker`` child of a local cluster."""

    def __init__(
        self,
        broker_id: int,
        host: str,
        port: int,
        log_dir: Path,
        overrides: list[str],
        *,
        protocol: str = "PLAINTEXT",
        config: Path | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.protocol = protocol  # its one listener's
        self.config = config  # a server.properties, under the overrides
        self.host = host
        self.port = port
        self.log_dir = log_dir
        self.overrides = overrides
        self.proc: subprocess.Popen[str] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def output(self) -> Path:
        return self.log_dir.with_name(f"{self.log_dir.name}.log")

    def start(self, zookeeper: str) -> None:
        args = [sys.executable, "-m", "seglog.cli", "broker"]
        if self.config is not None:
            args += ["--config", str(self.config)]
        settings = [
            f"broker.id={self.broker_id}",
            f"log.dirs={self.log_dir}",
            f"listeners={self.protocol}://{self.host}:{self.port}",
            f"zookeeper.connect={zookeeper}",
            *self.overrides,
        ]
        for setting in settings:
            args += ["--override", setting]
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.output, "a") as out:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=out, text=True)
        line = self._first_line(START_TIMEOUT_S)
        if not line.startswith("serving on "):
            self.kill()
            tail = self.output.read_text(errors="replace")[-2000:]
            raise BrokerNotAvailableError(f"broker {self.broker_id} did not start: {line!r}\n{tail}")
        self.port = int(line.split()[-1].rpartition(":")[2])

    def _first_line(self, timeout: float) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        found: list[str] = []
        reader = threading.Thread(target=lambda: found.append(self.proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(timeout)
        return found[0] if found else ""

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill(self) -> None:
        if self.running:
            self.signal(signal.SIGKILL)
        self._reap(30)

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM (a controlled shutdown and a clean close), SIGKILL after ``timeout``."""
        if self.running:
            self.signal(signal.SIGCONT)  # a paused broker cannot stop
            self.signal(signal.SIGTERM)
            try:
                self._reap(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._reap(30)

    def _reap(self, timeout: float) -> None:
        if self.proc is not None:
            self.proc.wait(timeout)
            if self.proc.stdout is not None:
                self.proc.stdout.close()


class LocalCluster:
    """A ZooKeeper (ours, or one given) and N brokers, each on its own loopback address."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        brokers: int,
        *,
        zookeeper: str | None = None,
        zookeeper_port: int | None = None,
        port: int | None = DEFAULT_PORT,
        overrides: list[str] | None = None,
        zookeeper_tick_ms: int = 200,
        secure: bool = False,
    ) -> None:
        if not 1 <= brokers <= 254:
            raise UsageError(f"--brokers must be between 1 and 254, not {brokers}")
        if zookeeper_port is not None and not 0 < zookeeper_port < 65536:
            raise UsageError(f"--zookeeper-port must be a port number (1-65535), not {zookeeper_port}")
        if zookeeper_port is not None and zookeeper is not None:
            raise UsageError("--zookeeper-port is the port of the ZooKeeper this starts: not with --zookeeper")
        self.directory = Path(directory)
        self._zookeeper_given = zookeeper
        self.zookeeper: ZooKeeperServer | None = None
        if zookeeper is None:
            self.zookeeper = ZooKeeperServer(
                self.directory / "zookeeper", port=zookeeper_port, tick_time_ms=zookeeper_tick_ms
            )
        self.brokers: dict[int, BrokerProcess] = {}
        self.secure = SecureSetup(self.directory) if secure else None
        self.security: ClientSecurity = PLAINTEXT  # the clients' (SASL_SSL's, once --secure has made it)
        for i in range(1, brokers + 1):
            host = f"127.0.0.{i}"
            chosen = port if port is not None else free_port(host)
            extra = [] if self.secure is None else [f"ssl.keystore.location={self.secure.keystore(i)}"]
            self.brokers[i] = BrokerProcess(
                i,
                host,
                chosen,
                self.directory / f"broker-{i}",
                [*extra, *(overrides or [])],
                protocol="PLAINTEXT" if self.secure is None else "SASL_SSL",
                config=None if self.secure is None else self.secure.broker_properties,
            )

    @property
    def zookeeper_connect(self) -> str:
        if self._zookeeper_given is not None:
            return self._zookeeper_given
        assert self.zookeeper is not None
        return self.zookeeper.connect_string

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def prepare(self) -> None:
        """What the brokers need before they start: our ZooKeeper running, and with ``secure`` the
        certificates, properties and the admin user's credential. ``start`` does it first; a test
        that starts the brokers its own way (each in a cgroup of its own) calls it itself."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.zookeeper is not None:
            self.zookeeper.start()
        if self.secure is not None:
            self.security = self.secure.prepare({i: b.host for i, b in self.brokers.items()})
            self.secure.create_admin(self.zookeeper_connect)

    def start(self) -> LocalCluster:
        try:
            self.prepare()
            for broker in self.brokers.values():
                broker.start(self.zookeeper_connect)
            self.wait_until_formed()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_until_formed(self, timeout: float = START_TIMEOUT_S) -> None:
        """Until every running broker has been told of every other (the controller's UpdateMetadata)."""
        running = [b for b in self.brokers.values() if b.running]
        wanted = sorted(b.broker_id for b in running)
        deadline = time.monotonic() + timeout
        for broker in running:
            while _known_brokers(broker.address, self.security) != wanted:
                if time.monotonic() > deadline:
                    raise BrokerNotAvailableError(f"broker {broker.broker_id} was not told of brokers {wanted}")
                time.sleep(0.05)

    def start_broker(self, broker_id: int) -> None:
        self.brokers[broker_id].start(self.zookeeper_connect)
        self.wait_until_formed()

    def stop(self) -> None:
        """Every broker stopped, one after another and the controller's last, then ZooKeeper. One at
        a time, as Kafka's brokers are rolled: a controlled shutdown moves leaders to brokers not
        shutting down, so brokers stopped at once left each other nowhere to move them and each
        retried until controlled.shutdown.max.retries ran out."""
        running = [b for b in self.brokers.values() if b.running]
        controller = _controller_id(running[0].address, self.security) if running else None
        for broker in sorted(running, key=lambda b: b.broker_id == controller):
            broker.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _metadata(address: str, security: ClientSecurity) -> MetadataResponseData | None:
    """The broker's Metadata answer (no topics), None when it does not answer."""
    try:
        with connect(address, client_id=CLIENT_ID, timeout=5, security=security) as client:
            return metadata(client, [])
    except SeglogError:
        return None


def _known_brokers(address: str, security: ClientSecurity) -> list[int]:
    answer = _metadata(address, security)
    return [] if answer is None else sorted(b.node_id for b in answer.brokers)


def _controller_id(address: str, security: ClientSecurity) -> int | None:
    answer = _metadata(address, security)
    return None if answer is None or answer.controller_id < 0 else answer.controller_id


# --- the command -------------------------------------------------------------------------------------


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cluster", help="run a ZooKeeper and N brokers on this machine")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser("up", help="start them; SIGINT or SIGTERM stops them")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    up.add_argument("--dir", required=True, help="where their log dirs, ZooKeeper's data and their output go")
    up.add_argument("--zookeeper", metavar="HOST:PORT", help="a running ZooKeeper to use instead of starting one")
    up.add_argument(
        "--zookeeper-port", type=int, metavar="PORT", help="the port of the ZooKeeper it starts (default: a free one)"
    )
    up.add_argument("--port", type=int, default=DEFAULT_PORT, help="each broker's port on its address (0: any)")
    up.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="a broker config for every broker"
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL listeners only: TLS and SCRAM-SHA-512, between the brokers too; prints the client properties",
    )
    up.set_defaults(run=run_up)
    down = actions.add_parser("down", help="stop the cluster `cluster up --dir D` runs")
    down.add_argument("--dir", required=True, help="the --dir it was started with")
    down.add_argument("--timeout-ms", type=int, default=120_000, help="how long to wait for it to stop")
    down.set_defaults(run=run_down)


def run_up(args: argparse.Namespace) -> int:
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port must be a port number, not {args.port}")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    cluster = LocalCluster(
        args.dir,
        args.brokers,
        zookeeper=args.zookeeper,
        zookeeper_port=args.zookeeper_port,
        port=args.port or None,
        overrides=args.override,
        secure=args.secure,
    )
    cluster.start()
    pid_file = Path(args.dir) / PID_FILE
    try:
        pid_file.write_text(f"{os.getpid()}\n")
        print(f"zookeeper.connect={cluster.zookeeper_connect}", flush=True)
        print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
        if cluster.secure is not None:  # the password stays in the file (its owner's only)
            print(f"client properties: {cluster.secure.client_properties}", flush=True)
            for line in cluster.secure.client_properties.read_text().splitlines():
                print(f"  {line}" if not line.startswith("sasl.password=") else "  sasl.password=(in the file)")
        while not stop.wait(1.0):
            for broker in cluster.brokers.values():
                if broker.proc is not None and not broker.running and broker.proc.returncode is not None:
                    print(
                        f"broker {broker.broker_id} exited ({broker.proc.returncode}): see {broker.output}", flush=True
                    )
                    broker.proc = None
    finally:
        cluster.stop()
        pid_file.unlink(missing_ok=True)
    print("stopped", flush=True)
    return 0


def run_down(args: argparse.Namespace) -> int:
    """SIGTERM to the ``cluster up`` of ``--dir`` (its pid file), then wait for it to be gone."""
    pid_file = Path(args.dir) / PID_FILE
    try:
        pid = int(pid_file.read_text())
    except FileNotFoundError:
        raise SeglogError(f"no cluster is running from {args.dir}", file=str(pid_file)) from None
    except ValueError:
        raise SeglogError("the pid file does not hold a process id", file=str(pid_file)) from None
    if not _is_cluster_up(pid):
        pid_file.unlink(missing_ok=True)
        raise SeglogError(f"the cluster of {args.dir} is not running (process {pid} is gone)", file=str(pid_file))
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout_ms / 1000
    while _is_cluster_up(pid):
        if time.monotonic() > deadline:
            raise SeglogError(f"the cluster (process {pid}) did not stop within {args.timeout_ms} ms")
        time.sleep(0.1)
    print("stopped", flush=True)
    return 0


def _is_cluster_up(pid: int) -> bool:
    """Whether ``pid`` is still a ``seglog cluster up`` (not a process that took the number since)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    zombie = stat.rpartition(")")[2].split()[0] == "Z"
    return not zombie and b"cluster" in command and b"up" in command
