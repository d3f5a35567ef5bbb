"""The web console's answers (``seglog console``'s JSON API, what each page asks) on a cluster of
many topics, each figure beside a baseline measured in the same run: one Metadata request of
every topic on an already open connection, the least any page of the cluster must ask.

An embedded broker holds TOPICS topics of PARTITIONS partitions (created with CreateTopics, a
hundred topics a request), one of which holds 100 records of 1 KiB in partition 0 (in segments of
16 KiB: seven of them) and is read by a consumer group that committed half of them. The broker
runs as ``seglog broker --http-port`` in a process of its own, and its console (in its process)
serves the pages: the partition layout and the throughput are read in-process; a second console
of the cluster, in this process (``seglog console --broker-http``), reads the layout through the
broker's HTTP port, which is timed too. Last, the broker's CPU is measured (/proc) over windows
idle and windows with a cluster page open on the second console (cluster and throughput asked
every 5 s, as the page asks them), in turn: the median difference is what an open console costs
the broker, beside the issue's target (1 % of a core). Each
endpoint is asked ROUNDS times from this process over HTTP (a fresh client of the cluster each
time, as the console serves a page), each time just after the baseline; the median and the
slowest are printed in ms, beside the issue's target (300 ms), and the median of the rounds'
ratios to the baseline. The cluster page asks ``cluster`` and ``throughput`` at once.

With ``--before SRC`` (another checkout's ``src``, the code before a change), a broker of that code
holding as many topics serves the topics' size and retention beside this checkout's, paired.

Run: ``.venv/bin/python bench/console.py [--topics 1000] [--partitions 10] [--rounds 9] [--before SRC]``
(with the defaults, the issue's cluster: some six minutes to create the topics). A broker keeps one
file open a partition (its active segment's log; the indexes' maps hold none, storage/_map.c): 10,000
partitions in one process fit this machine's limit of 20,000 open files (``ulimit -n``), as two such
brokers do with ``--before``. Figures on a shared machine are not final.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition

from seglog.client import connect
from seglog.console import start
from seglog.protocol import ApiKey
from seglog.protocol.enums import AlterConfigOpType, ConfigResourceType
from seglog.protocol.message_data import (
    CreateTopicsRequestData,
    IncrementalAlterConfigsRequestData,
    MetadataRequestData,
)

TARGET_MS = 300.0
COST_TARGET = 1.0  # % of a core: what an open console may cost a broker (the issue's)
REFRESH_S = 5.0  # as the pages ask again (console.js's REFRESH_MS)
COST_PAIRS = 4  # pairs of windows (idle, page open) for the broker CPU an open console costs
BROWSED = "browsed"
GROUP = "bench-group"
RECORDS = 100
VALUE = b"v" * 1024
SEGMENT_BYTES = 16 * 1024
# a broker's clean shutdown closes every log (flushed, indexes trimmed): 10,000 of them took more than
# a minute with the machine at load 37
SHUTDOWN_S = 600


def _create_topics(bootstrap: str, topics: int, partitions: int) -> None:
    with connect(bootstrap, timeout=600) as connection:
        names = [BROWSED] + [f"topic-{i:05d}" for i in range(topics - 1)]
        for at in range(0, len(names), 100):
            wanted = [
                CreateTopicsRequestData.CreatableTopic(
                    name=n, num_partitions=partitions, replication_factor=1, assignments=[], configs=[]
                )
                for n in names[at : at + 100]
            ]
            request = CreateTopicsRequestData(topics=wanted, timeout_ms=600_000, validate_only=False)
            answer = connection.request(ApiKey.CREATE_TOPICS, request)
            failed = [(t.name, t.error_code) for t in answer.topics if t.error_code]
            assert not failed, failed


def _fill(bootstrap: str) -> None:
    with connect(bootstrap) as connection:  # small segments: a layout of several, each with index entries
        Op = IncrementalAlterConfigsRequestData.AlterableConfig
        resource = IncrementalAlterConfigsRequestData.AlterConfigsResource(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=BROWSED,
            configs=[Op(name="segment.bytes", config_operation=AlterConfigOpType.SET, value=str(SEGMENT_BYTES))],
        )
        request = IncrementalAlterConfigsRequestData(resources=[resource], validate_only=False)
        assert not connection.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, request).responses[0].error_code
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(BROWSED, key=f"key-{i}", value=VALUE, partition=0)
        assert producer.flush(60) == 0  # a batch each: a segment holds SEGMENT_BYTES of them
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    consumer.commit(offsets=[KafkaPartition(BROWSED, 0, RECORDS // 2)], asynchronous=False)
    consumer.close()


def _ms(ask: Callable[[], object]) -> float:
    began = time.perf_counter()
    ask()
    return (time.perf_counter() - began) * 1000


Asking = Callable[[], Callable[[], object]]  # prepares a request (untimed) and gives the timed ask


def _paired(ask: Asking, baseline: Asking, rounds: int) -> tuple[list[float], list[float]]:
    """``ask``'s times and each round's ratio to ``baseline``'s, timed just before it in the same
    round (a shared machine's load changes between rounds, less within one)."""
    ask()(), baseline()()  # a first time: connections, the broker's caches
    times, ratios = [], []
    for _ in range(rounds):
        base = _ms(baseline())
        times.append(_ms(ask()))
        ratios.append(times[-1] / base)
    return times, ratios


def _get(url: str) -> Callable[[], object]:
    def ask() -> object:
        with urllib.request.urlopen(url, timeout=600) as answer:
            return answer.read()

    return ask


def _page(url: str) -> Asking:
    return lambda: _get(url)


def _details_after_list(console_url: str) -> Asking:
    """The topics' size and retention as the page asks them: after the list (untimed), naming it
    (its ``metadata``, whose Metadata the details reuse; a console without it ignores ``after``)."""

    def prepare() -> Callable[[], object]:
        listed = json.loads(_get(console_url + "api/topics")())
        return _get(console_url + f"api/topics?details=true&after={listed.get('metadata', '')}")

    return prepare


PAGES = [
    ("cluster", "api/cluster"),
    ("cluster: throughput (beside it)", "api/throughput"),
    ("topics", "api/topics"),
    ("topics' size and retention (asked alone)", "api/topics?details=true"),
    (f"topic {BROWSED}", f"api/topics/{BROWSED}"),
    (f"messages: {RECORDS} of 1 KiB", f"api/topics/{BROWSED}/messages?partition=0&limit={RECORDS}"),
    (f"messages: a filter over {RECORDS}", f"api/topics/{BROWSED}/messages?partition=0&filter=key-99"),
    (f"layout of {BROWSED}-0 (in-process)", f"api/topics/{BROWSED}/partitions/0/layout"),
    ("a segment's index entries", f"api/topics/{BROWSED}/partitions/0/segments/0"),
    ("groups", "api/groups"),
    (f"group {GROUP}", f"api/groups/{GROUP}"),
]


@contextlib.contextmanager
def _broker_process(log_dir: str, source: str | None = None) -> Iterator[tuple[str, str, int]]:
    """``seglog broker --http-port 0`` on ``log_dir``: its bootstrap address, its console's URL and
    its process id (a process of its own, so that its CPU is its own); seglog imported from
    ``source`` (a checkout's ``src``) when given, else as this process imports it."""
    command = [sys.executable, "-m", "seglog", "broker", "--override", f"log.dirs={log_dir}"]
    command += ["--override", "listeners=PLAINTEXT://127.0.0.1:0", "--http-port", "0"]
    env = os.environ | ({"PYTHONPATH": source} if source else {})
    # its log (a line a topic created) is not the bench's
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert process.stdout is not None
        bootstrap = process.stdout.readline().split()[-1]
        console = process.stdout.readline().split()[-1]
        yield bootstrap, console, process.pid
    finally:
        process.terminate()
        process.wait(SHUTDOWN_S)


def _cpu_seconds(pid: int) -> float:
    """A process's user and system CPU time so far (/proc/PID/stat's utime and stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _share_of_a_core(pid: int, seconds: float, while_: Callable[[float], None]) -> float:
    """The broker's CPU over ``seconds`` while ``while_(deadline)`` runs, in % of a core."""
    before, began = _cpu_seconds(pid), time.monotonic()
    while_(began + seconds)
    return 100 * (_cpu_seconds(pid) - before) / (time.monotonic() - began)


def _cost_windows(pid: int, seconds: float, open_page: Callable[[float], None]) -> tuple[list[float], list[float]]:
    """The broker's CPU in COST_PAIRS pairs of windows idle and with a page open, in turn and
    each first in every other pair (ABBA), so that the broker's own periodic work (the recovery
    point checkpoints every minute, retention checks every five over 10,000 partitions) falls on
    both sides alike rather than on whichever single window it happens to hit."""
    idle, opened = [], []
    for pair in range(COST_PAIRS):
        sides = [(idle, _idle), (opened, open_page)]
        for into, while_ in sides if pair % 2 == 0 else sides[::-1]:
            into.append(_share_of_a_core(pid, seconds, while_))
    return idle, opened


def _idle(deadline: float) -> None:
    time.sleep(max(0.0, deadline - time.monotonic()))


def _cluster_page_open(console_url: str) -> Callable[[float], None]:
    """What an open cluster page asks: cluster and throughput at once, every REFRESH_S."""

    def open_page(deadline: float) -> None:
        while time.monotonic() < deadline:
            asked = [threading.Thread(target=_get(console_url + p)) for p in ("api/cluster", "api/throughput")]
            for t in asked:
                t.start()
            for t in asked:
                t.join()
            time.sleep(max(0.0, min(REFRESH_S, deadline - time.monotonic())))

    return open_page


def _compare_details(before: str, topics: int, partitions: int, console_url: str, rounds: int) -> None:
    """The topics' size and retention as served by this checkout's broker and console beside those of
    ``before`` (another checkout's ``src``: the code before a change), a broker of its own holding
    as many topics (created as this one's were: a copy of the log dir would write out the indexes'
    preallocated sparse files whole), paired in each round."""
    with tempfile.TemporaryDirectory() as d, _broker_process(d, before) as (bootstrap, before_console, _pid):
        _create_topics(bootstrap, topics, partitions)
        alone = "api/topics?details=true"
        for how, this, that in [
            ("after the list", _details_after_list(console_url), _details_after_list(before_console)),
            ("asked alone", _page(console_url + alone), _page(before_console + alone)),
        ]:
            times, ratios = _paired(this, that, rounds)
            base = [t / r for t, r in zip(times, ratios, strict=True)]
            print(
                f"topics' size and retention ({how}), this checkout {statistics.median(times):.1f} ms beside "
                f"{before}'s {statistics.median(base):.1f} ms (medians of {rounds}): {statistics.median(ratios):.2f}x"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cost-seconds", type=float, default=30.0, help="each window of the broker's CPU")
    parser.add_argument("--before", metavar="SRC", help="another checkout's src: its topics' details beside this one's")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d, _broker_process(d) as (bootstrap, broker_console, pid):
        began = time.monotonic()
        _create_topics(bootstrap, args.topics, args.partitions)
        print(f"{args.topics} topics x {args.partitions} partitions created in {time.monotonic() - began:.0f} s")
        _fill(bootstrap)
        with connect(bootstrap) as connection, start(bootstrap, broker_http=[broker_console]) as remote:
            every = MetadataRequestData(topics=None, allow_auto_topic_creation=False)

            def baseline() -> Callable[[], object]:
                return lambda: connection.request(ApiKey.METADATA, every)

            print("baseline: Metadata of every topic on an open connection, timed before each page in each round")
            print(f"{'page (API)':44} {'median ms':>10} {'max ms':>8} {'target':>7} {'/ baseline':>11}")
            asked = [(label, _page(broker_console + path)) for label, path in PAGES]
            asked.insert(3, ("topics' size and retention (after the list)", _details_after_list(broker_console)))
            hop = _page(remote.url + f"api/topics/{BROWSED}/partitions/0/layout")
            asked.append(("layout through --broker-http", hop))
            for label, ask in asked:
                try:
                    times, ratios = _paired(ask, baseline, args.rounds)
                except urllib.error.HTTPError as e:
                    print(f"{label:44} failed: {e.code} {e.read().decode(errors='replace')}")
                    continue
                median = statistics.median(times)
                verdict = "met" if median <= TARGET_MS else "MISSED"
                print(f"{label:44} {median:10.1f} {max(times):8.1f} {verdict:>7} {statistics.median(ratios):10.2f}x")
            if args.before:
                _compare_details(args.before, args.topics, args.partitions, broker_console, args.rounds)
            idle, opened = _cost_windows(pid, args.cost_seconds, _cluster_page_open(remote.url))
            cost = statistics.median(o - i for i, o in zip(idle, opened, strict=True))
            verdict = "met" if cost <= COST_TARGET else "MISSED"
            print(
                f"the broker's CPU: idle {statistics.median(idle):.2f} % of a core, with a cluster page open "
                f"(a console of it, asking every {REFRESH_S:.0f} s) {statistics.median(opened):.2f} %: the page "
                f"costs {cost:.2f} % (median of {len(idle)} pairs of windows of {args.cost_seconds:.0f} s, "
                f"differences {', '.join(f'{o - i:.2f}' for i, o in zip(idle, opened, strict=True))}; "
                f"target {COST_TARGET:.0f} %: {verdict})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
