"""The console's pages in a real headless Firefox (Debian's firefox-esr, driven over Marionette by
marionette.py), as test_pages.py checks them in Chromium: the issue asks both browsers. Each page
of a broker's own console (``serve_in_broker``: the layout is read in-process) draws its figures,
checked against the records and group of conftest.py and the console's API; a malformed offset
typed in shows the clear message. Each check waits for what it looks for: no sleeps."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from seglog.console import ConsoleServer, serve_in_broker

from .conftest import COMMITTED, GROUP, PRODUCED, SCRIPT, TOPIC, Cluster, begin_transaction
from .test_api import get

LOADED = "return document.querySelector('#view')?.dataset.loaded === arguments[0]"
TEXT = "return document.querySelector(arguments[0])?.textContent.trim() ?? null"
COUNT = "return document.querySelectorAll(arguments[0]).length"
CELLS = (
    "return Array.from(document.querySelectorAll(`#${arguments[0]} tbody tr td:nth-child(${arguments[1]})`),"
    " (td) => td.textContent.trim())"
)
SHOTS = os.environ.get("SEGLOG_CONSOLE_SCREENSHOTS")  # a dir: each page's screenshot in Firefox saved there


@pytest.fixture(scope="module")
def broker_console(seglog_broker: Any, cluster: Cluster) -> Iterator[ConsoleServer]:
    with serve_in_broker(seglog_broker.server, "127.0.0.1", 0, read_only=False) as server:
        yield server


@pytest.fixture(autouse=True)
def no_script_error(firefox: Any) -> Iterator[None]:
    """Each test fails on a script error of its pages, as test_pages.py's do in Chromium."""
    firefox.script_errors()  # (a test before's, already failed)
    yield
    assert firefox.script_errors() == []  # no script error on any page


def open_page(firefox: Any, server: ConsoleServer, where: str, loaded: str) -> None:
    """Go to ``where`` (the hash of a page) and wait until its page has drawn, with no error."""
    firefox.navigate(server.url + where)
    firefox.until(LOADED, loaded, equals=True)
    assert firefox.run(TEXT, "#error") is None
    if SHOTS:
        firefox.screenshot(Path(SHOTS) / f"firefox-{loaded}.png")


def test_each_page_draws_its_figures_in_firefox(firefox, broker_console, cluster):
    assert firefox.capabilities["browserName"] == "firefox"
    open_page(firefox, broker_console, "#/cluster", "clusterPage")
    firefox.until(CELLS, "brokers", 1, equals=[str(cluster.broker_id)])
    firefox.until(CELLS, "brokers", 3, equals=[str(cluster.port)])
    firefox.until(TEXT, "#count-offline", equals="0")
    sources = "Counters of 1 of 1 live brokers (in-process), per second between the console's samples."
    firefox.until(TEXT, "#throughput-sources", equals=sources)
    firefox.until(COUNT, "#chart-requests polyline", equals=1)  # charted at a refresh, from two samples

    open_page(firefox, broker_console, "#/topics", "topicsPage")
    firefox.until(COUNT, f'#topics tr[data-topic="{TOPIC}"]', equals=1)
    firefox.click(f'#topics tr[data-topic="{TOPIC}"] a')  # a person's click, to the topic's page
    firefox.until(LOADED, "topicPage", equals=True)
    firefox.until(CELLS, "partitions", 6, equals=[str(n) for n in PRODUCED.values()])  # high watermarks

    layout = get(broker_console, f"api/topics/{TOPIC}/partitions/0/layout")[1]
    open_page(firefox, broker_console, f"#/topics/{TOPIC}/partitions/0/layout", "layoutPage")
    firefox.until(COUNT, "#segment-bar .segment", equals=len(layout["segments"]))
    firefox.until(TEXT, "#layout-log-start", equals=str(layout["logStartOffset"]))
    firefox.click('#segment-bar .segment[data-base="0"]')
    firefox.until(COUNT, "#offset-index", equals=1)  # its index entries shown below

    open_page(firefox, broker_console, f"#/topics/{TOPIC}/messages?partition=0&offset=2", "messagesPage")
    firefox.until(CELLS, "messages", 1, equals=[str(o) for o in range(2, PRODUCED[0])])
    assert firefox.run(CELLS, "messages", 4)[-1] == SCRIPT  # shown as text
    assert firefox.run("return window.pwned ?? null") is None  # never run

    open_page(firefox, broker_console, f"#/groups/{GROUP}", "groupPage")
    firefox.until(TEXT, "#total-lag", equals=str(sum(PRODUCED[p] - COMMITTED[p] for p in PRODUCED)))
    firefox.until(CELLS, "offsets", 5, equals=[str(PRODUCED[p] - COMMITTED[p]) for p in sorted(PRODUCED)])

    producer = begin_transaction(cluster.bootstrap, "firefox-txn", "in-firefox-transaction")
    try:
        open_page(firefox, broker_console, "#/transactions/firefox-txn", "transactionPage")
        firefox.until(TEXT, "#transaction-state", equals="Ongoing")
    finally:
        producer.abort_transaction(60)


def test_a_malformed_offset_is_said_so_in_firefox(firefox, broker_console):
    open_page(firefox, broker_console, f"#/topics/{TOPIC}/messages?partition=0", "messagesPage")
    firefox.fill("#browse input[name=offset]", "ten")
    firefox.click("#browse button")
    firefox.until(TEXT, "#error", equals="offset is a whole number from 0, not 'ten'")
    assert firefox.run(COUNT, "#browse input[name=offset]") == 1  # the form stays, to correct it


def test_a_script_error_of_a_page_is_seen_in_firefox(firefox, broker_console):
    """What makes each test fail on a script error: one thrown in a page's handler, and a rejection
    nobody handles, are both reported (a loaded machine reports them late: waited for, 60 s)."""
    open_page(firefox, broker_console, "#/cluster", "clusterPage")
    firefox.run("setTimeout(() => { throw new Error('thrown in a handler') }); Promise.reject(new Error('unhandled'))")
    errors: list[str] = []
    deadline = time.monotonic() + 60
    while not (any("thrown in a handler" in e for e in errors) and any("unhandled" in e for e in errors)):
        assert time.monotonic() < deadline, errors
        time.sleep(0.1)
        errors += firefox.script_errors()
