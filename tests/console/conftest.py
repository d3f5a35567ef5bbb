"""Fixtures of the console's tests: a real broker holding records produced by confluent-kafka and
a real consumer group (a member that stays, with committed offsets), consoles of it, and pages of
a real headless Chromium (Debian's, driven by Playwright; no browser is downloaded). Without
chromium or Playwright the browser tests skip, saying what to install; under CI (``CI`` set),
where ``make install`` installs both, they fail.

The figures the tests expect are the ones produced here (``PRODUCED``, ``COMMITTED``), and each
count is also asked of confluent-kafka's own clients where one answers it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.console import ConsoleServer, start

from ..broker.conftest import wait_for

TOPIC = "orders"
GROUP = "billing"
PRODUCED = {0: 5, 1: 3, 2: 7}  # records produced to each partition of TOPIC
COMMITTED = {0: 2, 1: 3, 2: 4}  # the group's committed offsets: lag 3, 0 and 3
SCRIPT = "<script>window.pwned = 1</script>"  # partition 0's offset 4: shown as text, never run
BINARY = b"\xff\x00\xfe"  # partition 1's offset 0: shown as hex
STEP_MS = 1000  # between the timestamps of a partition's records


@dataclass
class Cluster:
    bootstrap: str
    broker_id: int
    port: int
    first_timestamp: int  # of each partition's offset 0; offset i's is STEP_MS * i later


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return {"num.partitions": 1, "offsets.topic.num.partitions": 3}


def value_of(partition: int, i: int) -> bytes:
    if (partition, i) == (0, 4):
        return SCRIPT.encode()
    if (partition, i) == (1, 0):
        return BINARY
    return f"order {partition}-{i} é".encode()


def _produce(bootstrap: str, first_timestamp: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics([NewTopic(TOPIC, 3, 1, config={"retention.ms": "3600000"})])
    created[TOPIC].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False, "linger.ms": 5})
    for p, count in PRODUCED.items():
        for i in range(count):
            producer.produce(
                TOPIC,
                key=f"key-{p}-{i}",
                value=value_of(p, i),
                partition=p,
                headers=[("source", b"test")],
                timestamp=first_timestamp + STEP_MS * i,
            )
    assert producer.flush(60) == 0


@pytest.fixture(scope="module")
def cluster(seglog_broker: Any) -> Iterator[Cluster]:
    """The broker with TOPIC's records and GROUP's member, whose offsets are COMMITTED."""
    bootstrap = seglog_broker.bootstrap_servers
    first_timestamp = int(time.time() * 1000) - 600_000  # recent: within the topic's retention.ms
    _produce(bootstrap, first_timestamp)
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "max.poll.interval.ms": 86_400_000,  # a member for the whole module, polled only at first
        }
    )
    member.subscribe([TOPIC])

    def assigned() -> bool:
        member.poll(0.2)  # joins the group; the records it returns are not needed
        return len(member.assignment()) == 3

    wait_for(assigned, 60, "the member's assignment")
    offsets = [KafkaPartition(TOPIC, p, o) for p, o in COMMITTED.items()]
    member.commit(offsets=offsets, asynchronous=False)
    broker_id = seglog_broker.server.config["broker.id"]
    try:
        yield Cluster(bootstrap, broker_id, seglog_broker.port, first_timestamp)
    finally:
        member.close()


def filled_topic(bootstrap: str, topic: str, count: int) -> None:
    """A topic of one partition holding ``count`` records, valued b"0", b"1" ..."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until it answers
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=0)
    assert producer.flush(60) == 0


def begin_transaction(bootstrap: str, txn_id: str, topic: str) -> Producer:
    """A transactional producer whose transaction is open, having written to ``topic``'s
    partition 0 (a topic of its own: records in a transaction move the high watermark)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until it answers
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(topic, value=b"in a transaction", partition=0)
    assert producer.flush(60) == 0
    return producer


@pytest.fixture(scope="module")
def console(cluster: Cluster) -> Iterator[ConsoleServer]:
    with start(cluster.bootstrap) as server:
        yield server


@pytest.fixture(scope="module")
def read_only_console(cluster: Cluster) -> Iterator[ConsoleServer]:
    with start(cluster.bootstrap, read_only=True) as server:
        yield server


# --- the browser ---------------------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")
# no sandbox (tests run as root), and nothing that reaches out of the machine
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 60_000  # what a check waits at most for its element: a loaded machine is slow


def _missing(what: str) -> None:
    message = f"{what} (`make chromium` installs it as root)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: CI must have it")
    pytest.skip(message)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _missing("Playwright is not installed (pip install playwright, in the test extra)")
    expect.set_options(timeout=WAIT_MS)
    if not CHROMIUM.exists():
        _missing(f"chromium is not installed at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context()
    context.set_default_timeout(WAIT_MS)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda e: errors.append(str(e)))
    yield opened
    context.close()
    assert errors == [], errors  # no script error on any page


def open_page(page: Any, server: Any, where: str, loaded: str) -> None:
    """Go to ``where`` (the hash of a page) and wait until its page has drawn."""
    from playwright.sync_api import expect

    page.goto(server.url + where)
    expect(page.locator("#view")).to_have_attribute("data-loaded", loaded)
    expect(page.locator("#error")).to_have_count(0)


@pytest.fixture(scope="module")
def firefox() -> Iterator[Any]:
    """Debian's firefox-esr, headless, driven over Marionette (marionette.py): the pages' second
    browser. Without it the Firefox tests skip, saying what to install (under CI they fail)."""
    from .marionette import FIREFOX, Firefox

    if not FIREFOX.exists():
        _missing(f"firefox-esr is not installed at {FIREFOX} (apt-get install firefox-esr)")
    with Firefox() as started:
        yield started
