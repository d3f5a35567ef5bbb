"""read_committed consumers against a ``seglog broker`` process (confluent-kafka clients).

A one-partition topic of small segments (SEGMENT_BYTES) holds TXNS transactions of
TXN_RECORDS records of 100 bytes from one transactional producer, one in ABORT_EVERY
aborted, a plain record between transactions; then:

1. catch-up: a consumer assigned at offset 0 reads the whole topic, read_committed and
   read_uncommitted (the reference), ROUNDS rounds in turn, medians: records/s and the
   broker's CPU per record (user + system of its threads, ``/proc/PID/task/*/schedstat``);
2. raw fetches: the whole topic read by Fetch requests of FETCH_BYTES (the bench's own
   client, ``seglog.client``), one at a time, each from where the last one
   ended, at both isolation levels, ROUNDS rounds: the broker's CPU per fetch (the
   client's decoding does not count), medians;
3. tail: a read_committed consumer at the log end while the producer commits TAIL_TXNS
   transactions of TAIL_RECORDS records one after another: the broker's CPU per
   transaction, and the time from ``commit_transaction`` returning to the consumer's
   having the transaction's last record (p50, p99). The log changes between fetches
   here, and the topic has many segments: what a read_committed fetch costs at the tail.

Run: ``.venv/bin/python bench/read_committed.py`` (about a minute). Figures on a shared
machine are not final.
"""

from __future__ import annotations

import glob
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.client import connect
from seglog.protocol import ApiKey
from seglog.protocol.message_data import FetchRequestData
from seglog.records import BatchIterator

TOPIC = "txn"
SEGMENT_BYTES = 256 * 1024
TXNS = 2_000
TXN_RECORDS = 50
ABORT_EVERY = 4
TAIL_TXNS = 500
TAIL_RECORDS = 10
ROUNDS = 3
FETCH_BYTES = 64 * 1024
VALUE = b"v" * 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User + system time of a process's threads so far (``schedstat``, nanoseconds)."""
    total = 0
    for path in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):
            continue
    return total / 1e9


def start_broker(data: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    args = [sys.executable, "-m", "seglog.cli", "broker", "--override", f"log.dirs={data}"]
    for override in (
        f"listeners=PLAINTEXT://127.0.0.1:{port}",
        "transaction.state.log.num.partitions=1",
        "offsets.topic.num.partitions=1",
    ):
        args += ["--override", override]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    request = struct.pack(">hhih", 18, 0, 1, 1) + b"b"  # ApiVersions v0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                s.sendall(struct.pack(">i", len(request)) + request)
                if s.recv(4):
                    return proc, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the broker did not answer")


def transactional(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "bench", "linger.ms": 5})
    producer.init_transactions(30)
    return producer


def populate(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(TOPIC, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})]).values():
        f.result(30)
    producer = transactional(bootstrap)
    plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    kept = 0
    for t in range(TXNS):
        producer.begin_transaction()
        for _ in range(TXN_RECORDS):
            producer.produce(TOPIC, VALUE)
        if t % ABORT_EVERY == ABORT_EVERY - 1:
            producer.flush(30)  # (abort_transaction drops what is still queued: these reach the log)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            kept += TXN_RECORDS
        plain.produce(TOPIC, b"plain")
        plain.flush(30)
        kept += 1
    return kept


def consume_all(bootstrap: str, isolation: str, expected: int) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.queue.backoff.ms": 10,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got = 0
    deadline = time.monotonic() + 120
    while got < expected and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(10_000, 0.5) if m.error() is None)
    consumer.close()
    if got < expected:
        raise RuntimeError(f"consumed {got} of {expected}")


def catch_up(pid: int, bootstrap: str, kept: int, total: int) -> dict[str, tuple[float, float]]:
    runs: dict[str, list[tuple[float, float]]] = {"read_committed": [], "read_uncommitted": []}
    for _ in range(ROUNDS):
        for isolation in runs:
            expected = kept if isolation == "read_committed" else total
            cpu, started = cpu_seconds(pid), time.perf_counter()
            consume_all(bootstrap, isolation, expected)
            elapsed, used = time.perf_counter() - started, cpu_seconds(pid) - cpu
            runs[isolation].append((expected / elapsed, used / expected * 1e6))
    return {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v)) for k, v in runs.items()}


def raw_fetches(pid: int, bootstrap: str, isolation: int) -> tuple[int, float]:
    """(fetches, the broker's CPU µs per fetch) of reading the topic from 0 to its end."""
    with connect(bootstrap) as client:
        offset, fetches, used = 0, 0, 0.0
        while True:
            partition = FetchRequestData.FetchPartition(
                partition=0, fetch_offset=offset, log_start_offset=-1, partition_max_bytes=FETCH_BYTES
            )
            body = FetchRequestData(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=0,
                max_bytes=FETCH_BYTES,
                isolation_level=isolation,
                topics=[FetchRequestData.FetchTopic(topic=TOPIC, partitions=[partition])],
            )
            cpu = cpu_seconds(pid)
            answer = client.request(ApiKey.FETCH, body, version=11).responses[0].partitions[0]
            used += cpu_seconds(pid) - cpu
            fetches += 1
            batches = list(BatchIterator(answer.records or b""))
            if not batches:
                return fetches, used / fetches * 1e6
            offset = batches[-1].last_offset + 1


def tail(pid: int, bootstrap: str) -> tuple[float, float, float]:
    """(broker CPU µs per transaction, p50 ms, p99 ms of commit-to-consumed)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-tail",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 500,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, -1)])  # the end
    seen: dict[bytes, float] = {}
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            for m in consumer.consume(1000, 0.1):
                if m.error() is None and m.value() is not None:
                    seen[m.value()] = time.perf_counter()

    reader = threading.Thread(target=read)
    reader.start()
    time.sleep(1)  # the consumer's first fetches
    producer = transactional(bootstrap)
    committed: dict[bytes, float] = {}
    cpu = cpu_seconds(pid)
    for t in range(TAIL_TXNS):
        producer.begin_transaction()
        for i in range(TAIL_RECORDS):
            producer.produce(TOPIC, b"%d-%d" % (t, i))
        producer.commit_transaction(30)
        committed[b"%d-%d" % (t, TAIL_RECORDS - 1)] = time.perf_counter()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(k in seen for k in committed):
        time.sleep(0.01)
    used = cpu_seconds(pid) - cpu
    stop.set()
    reader.join()
    consumer.close()
    latencies = sorted(seen[k] - when for k, when in committed.items() if k in seen)
    if len(latencies) < len(committed):
        raise RuntimeError(f"{len(committed) - len(latencies)} transactions never reached the consumer")
    ms = [x * 1000 for x in latencies]
    return used / TAIL_TXNS * 1e6, ms[len(ms) // 2], ms[int(len(ms) * 0.99)]


def main() -> int:
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    proc, bootstrap = start_broker(data)
    try:
        kept = populate(bootstrap)
        total = TXNS * (TXN_RECORDS + 1)
        segments = len(glob.glob(f"{data}/{TOPIC}-0/*.log"))
        print(f"{TXNS} transactions of {TXN_RECORDS} records (1 in {ABORT_EVERY} aborted), {segments} segments")
        for isolation, (rate, cpu) in catch_up(proc.pid, bootstrap, kept, total).items():
            print(f"catch-up {isolation:>16}: {rate:>9,.0f} records/s, broker CPU {cpu:.2f} us/record")
        for isolation, name in ((1, "read_committed"), (0, "read_uncommitted")):
            runs = [raw_fetches(proc.pid, bootstrap, isolation) for _ in range(ROUNDS)]
            cpu = statistics.median(c for _, c in runs)
            kib = FETCH_BYTES >> 10
            print(f"raw fetches {name:>16}: {runs[0][0]} fetches of {kib} KiB, broker CPU {cpu:.0f} us/fetch")
        per_txn, p50, p99 = tail(proc.pid, bootstrap)
        print(
            f"tail read_committed, {TAIL_TXNS} transactions of {TAIL_RECORDS}: "
            f"broker CPU {per_txn:,.0f} us/transaction, commit to consumed p50 {p50:.1f} ms, p99 {p99:.1f} ms"
        )
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
