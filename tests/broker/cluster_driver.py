"""A test's stand-in for the controller: it sends LeaderAndIsr, UpdateMetadata and StopReplica
to real brokers over the wire, and answers the AlterPartition requests of their leaders as
Kafka's controller does (the leader epoch and partition epoch checked, the ISR written with
the next partition epoch), recording each. It decides nothing by itself: the test says who
leads. The brokers are ``seglog broker`` child processes, so that a test can SIGSTOP,
SIGCONT and SIGKILL them."""

from __future__ import annotations

import os
import signal
import socketserver
import struct
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from seglog.protocol import ApiKey, decode_request, encode_response
from seglog.tools.broker_client import BrokerClient

from .subprocess_broker import BrokerProcess

CONTROLLER_ID = 100
FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION = 74, 95


@dataclass
class PartitionState:
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]
    partition_epoch: int = 0


@dataclass
class StandInController:
    """Partition states, the AlterPartition requests received (in order), and the server."""

    topic: str
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)
    epoch: int = 1
    states: dict[int, PartitionState] = field(default_factory=dict)
    alter_partitions: list[tuple[int, int, list[int]]] = field(default_factory=list)  # (broker, partition, isr)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        controller = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                while True:
                    head = _read(self.request, 4)
                    if head is None:
                        return
                    frame = _read(self.request, struct.unpack(">i", head)[0])
                    if frame is None:
                        return
                    request = decode_request(frame)
                    body = controller._answer(request.header.api_key, request.header.api_version, request.body)
                    parts = encode_response(
                        request.header.api_key, request.header.api_version, request.header.correlation_id, body
                    )
                    self.request.sendall(b"".join(bytes(p) for p in parts))

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.port = self.server.server_address[1]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _answer(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        if api_key == ApiKey.API_VERSIONS:
            return {
                "error_code": 0,
                "api_keys": [{"api_key": int(ApiKey.ALTER_PARTITION), "min_version": 0, "max_version": 3}],
            }
        assert api_key == ApiKey.ALTER_PARTITION, api_key
        topics = []
        for topic in body["topics"]:
            parts = []
            for p in topic["partitions"]:
                isr = [b["broker_id"] for b in p["new_isr_with_epochs"]] if version >= 3 else p["new_isr"]
                parts.append(
                    self._alter(body["broker_id"], p["partition_index"], p["leader_epoch"], p["partition_epoch"], isr)
                )
            topics.append(
                {"topic_name": topic.get("topic_name"), "topic_id": topic.get("topic_id"), "partitions": parts}
            )
        return {"throttle_time_ms": 0, "error_code": 0, "topics": topics}

    def _alter(
        self, broker: int, index: int, leader_epoch: int, partition_epoch: int, isr: list[int]
    ) -> dict[str, Any]:
        with self.lock:
            state = self.states[index]
            error = 0
            if broker != state.leader or leader_epoch != state.leader_epoch:
                error = FENCED_LEADER_EPOCH
            elif partition_epoch != state.partition_epoch:
                error = INVALID_UPDATE_VERSION
            else:
                state.isr = list(isr)
                state.partition_epoch += 1
                self.alter_partitions.append((broker, index, list(isr)))
            return {
                "partition_index": index,
                "error_code": error,
                "leader_id": state.leader,
                "leader_epoch": state.leader_epoch,
                "isr": state.isr,
                "leader_recovery_state": 0,
                "partition_epoch": state.partition_epoch,
            }

    # --- requests to brokers ----------------------------------------------------------------------

    def elect(self, index: int, leader: int, isr: list[int], replicas: list[int]) -> None:
        """A new leader epoch for partition ``index``, as an election would write it."""
        with self.lock:
            old = self.states.get(index)
            epoch = old.leader_epoch + 1 if old else 0
            self.states[index] = PartitionState(
                leader, epoch, list(isr), list(replicas), (old.partition_epoch + 1) if old else 0
            )

    def _states(self, partition_epoch_field: str) -> list[dict[str, Any]]:
        """Each partition's state as both requests carry it (the partition epoch under either name)."""
        with self.lock:
            return [
                {
                    "partition_index": i,
                    "controller_epoch": self.epoch,
                    "leader": s.leader,
                    "leader_epoch": s.leader_epoch,
                    "isr": list(s.isr),
                    partition_epoch_field: s.partition_epoch,
                    "replicas": list(s.replicas),
                }
                for i, s in sorted(self.states.items())
            ]

    def leader_and_isr(self, broker: BrokerProcess, broker_id: int, is_new: bool = False) -> dict[int, int]:
        extra = {"adding_replicas": [], "removing_replicas": [], "is_new": is_new}
        states = [{**s, **extra} for s in self._states("partition_epoch") if broker_id in s["replicas"]]
        body = {
            "controller_id": CONTROLLER_ID,
            "controller_epoch": self.epoch,
            "broker_epoch": -1,
            "type": 0,
            "topic_states": [{"topic_name": self.topic, "topic_id": self.topic_id, "partition_states": states}],
            "live_leaders": [],
        }
        with BrokerClient(broker.bootstrap_servers) as client:
            answer = client.request(ApiKey.LEADER_AND_ISR, body)
        return {p["partition_index"]: p["error_code"] for t in answer["topics"] for p in t["partition_errors"]}

    def update_metadata(self, broker: BrokerProcess, brokers: dict[int, BrokerProcess]) -> None:
        live = [(CONTROLLER_ID, "127.0.0.1", self.port)]
        live += [(i, *b.bootstrap_servers.rsplit(":", 1)) for i, b in brokers.items() if b.proc.poll() is None]
        states = [{**s, "offline_replicas": []} for s in self._states("zk_version")]
        body = {
            "controller_id": CONTROLLER_ID,
            "controller_epoch": self.epoch,
            "broker_epoch": -1,
            "topic_states": [{"topic_name": self.topic, "topic_id": self.topic_id, "partition_states": states}],
            "live_brokers": [
                {
                    "id": i,
                    "endpoints": [{"port": int(port), "host": host, "listener": "PLAINTEXT", "security_protocol": 0}],
                    "rack": None,
                }
                for i, host, port in live
            ],
        }
        with BrokerClient(broker.bootstrap_servers) as client:
            assert client.request(ApiKey.UPDATE_METADATA, body)["error_code"] == 0

    def tell(self, brokers: dict[int, BrokerProcess], is_new: bool = False, to: list[int] | None = None) -> None:
        """UpdateMetadata to every live broker, then LeaderAndIsr to those of ``to`` (default:
        all), as a state change sends them: a broker that comes back is told alone."""
        for b in brokers.values():
            if b.proc.poll() is None:
                self.update_metadata(b, brokers)
        for i, b in brokers.items():
            if b.proc.poll() is None and (to is None or i in to):
                assert set(self.leader_and_isr(b, i, is_new).values()) <= {0}, f"broker {i} refused LeaderAndIsr"

    def isr_changes(self) -> list[tuple[int, int, list[int]]]:
        with self.lock:
            return list(self.alter_partitions)


def _read(sock: Any, n: int) -> bytes | None:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def start_broker(root: Path, broker_id: int, *overrides: str) -> BrokerProcess:
    """A cluster broker (``zookeeper.connect`` set: it serves what LeaderAndIsr says, nothing
    at start) on ``root/broker-<id>``; nothing connects to that ZooKeeper on this branch."""
    broker = BrokerProcess(
        root / f"broker-{broker_id}",
        f"broker.id={broker_id}",
        "zookeeper.connect=127.0.0.1:1",
        "replica.fetch.wait.max.ms=200",
        "replica.fetch.backoff.ms=100",
        "replica.high.watermark.checkpoint.interval.ms=100",
        *overrides,
    )
    log = root / f"broker-{broker_id}.stderr"

    def drain() -> None:  # a full stderr pipe would stop the broker
        assert broker.proc.stderr is not None
        with open(log, "a") as out:
            for line in broker.proc.stderr:
                out.write(line)
                out.flush()

    threading.Thread(target=drain, daemon=True).start()
    return broker


def segment_bytes(root: Path, broker_id: int, topic: str, index: int) -> bytes:
    """The partition's records on one broker: its .log files in offset order."""
    d = root / f"broker-{broker_id}" / f"{topic}-{index}"
    return b"".join((d / name).read_bytes() for name in sorted(os.listdir(d)) if name.endswith(".log"))


def produce(
    broker: BrokerProcess, topic: str, index: int, values: list[bytes], acks: int = -1, timeout_ms: int = 30_000
) -> dict[str, Any]:
    """One Produce request of one batch: the partition's answer (error_code, base_offset)."""
    from seglog.records import Record
    from seglog.records.batch import build_batch

    batch = build_batch([Record(key=None, value=v) for v in values])
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [{"name": topic, "partition_data": [{"index": index, "records": batch}]}],
    }
    with BrokerClient(broker.bootstrap_servers, timeout=timeout_ms / 1000 + 30) as client:
        answer = client.request(ApiKey.PRODUCE, body)
    return answer["responses"][0]["partition_responses"][0]


def pause(broker: BrokerProcess) -> None:
    os.kill(broker.pid, signal.SIGSTOP)


def resume(broker: BrokerProcess) -> None:
    os.kill(broker.pid, signal.SIGCONT)
