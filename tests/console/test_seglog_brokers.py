"""What only seglog's brokers tell, beyond Kafka's protocol: the Partition layout page and its API,
and the cluster page's throughput charts. A broker's console (``seglog broker --http-port``, here
``serve_in_broker`` on an embedded broker) reads its partitions' segments in-process; a console of
the cluster (``seglog console --broker-http``) reaches them through the broker's HTTP port, and
reads the broker's counters from its ``/metrics``.

Each figure is checked against the broker's files on disk, read here byte by byte: the segment
files' names and sizes, the sealed index files' sizes, the batch each index entry points at."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

import seglog.broker
from seglog.console import ConsoleServer, serve_in_broker, start

from ..broker.conftest import wait_for
from .conftest import open_page
from .test_api import get

LAID = "laid"  # single-record batches, several segments
COMPACTED = "compacted"
RECORDS = 40
STEP_MS = 1000
SEGMENT_BYTES = 1024  # about eight of LAID's batches a segment


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    config = {"log.cleaner.backoff.ms": 100, "log.index.interval.bytes": 150}
    with seglog.broker.start(str(tmp_path_factory.mktemp("layout")), config=config) as started:
        admin = AdminClient({"bootstrap.servers": started.bootstrap_servers})  # held until it answers
        small = {"segment.bytes": str(SEGMENT_BYTES)}
        compacted = small | {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        topics = [NewTopic(LAID, 1, 1, config=small), NewTopic(COMPACTED, 1, 1, config=compacted)]
        for created in admin.create_topics(topics).values():
            created.result(60)
        yield started


@pytest.fixture(scope="module")
def first_timestamp(broker: Any) -> int:
    """LAID's offset i holds one batch of one record, timestamped first + i * STEP_MS."""
    first = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    for i in range(RECORDS):
        producer.produce(LAID, key=b"k%d" % i, value=b"v" * 100, partition=0, timestamp=first + STEP_MS * i)
        assert producer.flush(30) == 0  # one batch each
    for i in range(RECORDS):  # the same four keys again and again: compaction has much to remove
        producer.produce(COMPACTED, key=b"key-%d" % (i % 4), value=b"c" * 100, partition=0)
        assert producer.flush(30) == 0
    return first


@pytest.fixture(scope="module")
def broker_console(broker: Any, first_timestamp: int) -> Iterator[ConsoleServer]:
    with serve_in_broker(broker.server, "127.0.0.1", 0, read_only=False) as server:
        yield server


def _dir(broker: Any, topic: str) -> Path:
    return Path(broker.server.config["log.dirs"][0]) / f"{topic}-0"


def _segment_files(directory: Path) -> dict[int, int]:
    return {int(f.stem): f.stat().st_size for f in directory.iterdir() if f.suffix == ".log"}


def test_the_layout_is_the_segments_on_disk(broker, broker_console, first_timestamp):
    status, layout = get(broker_console, f"api/topics/{LAID}/partitions/0/layout")
    assert status == 200, layout
    on_disk = _segment_files(_dir(broker, LAID))
    segments = layout["segments"]
    assert len(segments) > 3
    assert {s["baseOffset"]: s["size"] for s in segments} == on_disk
    assert [s["active"] for s in segments] == [False] * (len(segments) - 1) + [True]
    assert (layout["logStartOffset"], layout["highWatermark"], layout["logEndOffset"]) == (0, RECORDS, RECORDS)
    assert layout["broker"] == broker.server.config["broker.id"]
    assert layout["size"] == sum(on_disk.values())
    ends = [s["baseOffset"] for s in segments[1:]] + [RECORDS]
    for s, end in zip(segments, ends, strict=True):
        assert s["firstTimestamp"] == first_timestamp + STEP_MS * s["baseOffset"]
        assert s["lastTimestamp"] == first_timestamp + STEP_MS * (end - 1)
    for s in segments[:-1]:  # a sealed segment's index files are cut to their entries
        name = _dir(broker, LAID) / f"{s['baseOffset']:020d}"
        assert s["offsetIndexEntries"] == os.path.getsize(f"{name}.index") // 8
        assert s["timeIndexEntries"] == os.path.getsize(f"{name}.timeindex") // 12
    assert sum(s["offsetIndexEntries"] for s in segments) > 0


def test_a_segments_index_entries_point_at_their_batches(broker, broker_console, first_timestamp):
    layout = get(broker_console, f"api/topics/{LAID}/partitions/0/layout")[1]
    indexed = next(s for s in layout["segments"] if s["offsetIndexEntries"] > 1)
    base = indexed["baseOffset"]
    status, found = get(broker_console, f"api/topics/{LAID}/partitions/0/segments/{base}")
    assert status == 200, found
    assert len(found["offsetIndex"]) == found["offsetIndexEntries"] == indexed["offsetIndexEntries"]
    log = (_dir(broker, LAID) / f"{base:020d}.log").read_bytes()
    for entry in found["offsetIndex"]:
        (batch_offset,) = struct.unpack_from(">q", log, entry["position"])  # a batch starts with its base offset
        assert batch_offset == entry["offset"]  # one record a batch: its last offset too
    for entry in found["timeIndex"]:
        assert entry["timestamp"] == first_timestamp + STEP_MS * entry["offset"]
    assert get(broker_console, f"api/topics/{LAID}/partitions/0/segments/{base}?limit=1")[1]["offsetIndex"] == [
        found["offsetIndex"][0]
    ]


def test_bad_layout_requests_say_why(broker_console):
    for path, status, why in [
        (f"topics/{LAID}/partitions/0/segments/3", 400, "no segment at base offset 3"),
        (f"topics/{LAID}/partitions/x/layout", 400, "partition is a whole number"),
        (f"topics/{LAID}/partitions/0/segments/0?limit=0", 400, "limit is from 1"),
        ("topics/no-such-topic/partitions/0/layout", 404, "no-such-topic-0"),
        (f"topics/{LAID}/partitions/7/layout", 404, f"{LAID}-7"),
    ]:
        found = get(broker_console, "api/" + path)
        assert found[0] == status, (path, found)
        assert why in found[1]["error"], (path, found)


def test_log_start_and_the_cleaner_checkpoint_are_given(broker, broker_console):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    (deleted,) = admin.delete_records([KafkaPartition(LAID, 0, 10)]).values()
    assert deleted.result(60).low_watermark == 10
    layout = get(broker_console, f"api/topics/{LAID}/partitions/0/layout")[1]
    assert layout["logStartOffset"] == 10
    assert layout["segments"][0]["baseOffset"] <= 10  # retention deletes the segments wholly below it later

    def cleaned() -> Any:
        found = get(broker_console, f"api/topics/{COMPACTED}/partitions/0/layout")[1]
        return found if found["cleanerCheckpoint"] is not None else None

    compacted = wait_for(cleaned, 60, "the cleaner's checkpoint")
    assert 0 < compacted["cleanerCheckpoint"] <= compacted["segments"][-1]["baseOffset"]
    checkpoint = (_dir(broker, COMPACTED).parent / "cleaner-offset-checkpoint").read_text().split("\n")
    assert f"{COMPACTED} 0 {compacted['cleanerCheckpoint']}" in checkpoint


def test_the_layout_page_marks_the_cleaner_checkpoint(page, broker, broker_console):
    from playwright.sync_api import expect

    def cleaned() -> Any:
        found = get(broker_console, f"api/topics/{COMPACTED}/partitions/0/layout")[1]
        return found["cleanerCheckpoint"]

    checkpoint = wait_for(cleaned, 60, "the cleaner's checkpoint")
    open_page(page, broker_console, f"#/topics/{COMPACTED}/partitions/0/layout", "layoutPage")
    expect(page.locator("#layout-cleaner")).to_have_text(str(checkpoint))
    expect(page.locator("#mark-cleaner")).to_contain_text(f"cleaner checkpoint {checkpoint}")


def test_a_console_of_the_cluster_reaches_the_layout_through_the_brokers_http_port(broker, broker_console):
    with start(broker.bootstrap_servers, broker_http=[broker_console.url]) as console:
        assert get(console, f"api/topics/{LAID}/partitions/0/layout") == get(
            broker_console, f"api/topics/{LAID}/partitions/0/layout"
        )
        status, found = get(console, f"api/topics/{LAID}/partitions/0/segments/1")
        assert (status, found["error"]) == (400, f"{LAID}-0 has no segment at base offset 1")  # the broker's answer
    with start(broker.bootstrap_servers) as console:  # no broker's HTTP port: said so
        status, found = get(console, f"api/topics/{LAID}/partitions/0/layout")
        assert status == 501
        assert "--broker-http" in found["error"]


def test_the_layout_page_draws_the_segments_and_shows_a_segments_entries(page, broker, broker_console):
    from playwright.sync_api import expect

    layout = get(broker_console, f"api/topics/{LAID}/partitions/0/layout")[1]
    open_page(page, broker_console, f"#/topics/{LAID}", "topicPage")
    page.locator("#partitions").get_by_role("link", name="layout").click()
    expect(page.locator("#view")).to_have_attribute("data-loaded", "layoutPage")
    bars = page.locator("#segment-bar .segment")
    expect(bars).to_have_count(len(layout["segments"]))
    expect(page.locator("#layout-log-start")).to_have_text(str(layout["logStartOffset"]))
    expect(page.locator("#mark-log-start")).to_contain_text(f"log start {layout['logStartOffset']}")
    assert cells_text(page, "segments", 1) == [str(s["baseOffset"]) for s in layout["segments"]]
    # drawn to scale: the widths follow the bytes (the bar's gaps and borders aside)
    widths = [bars.nth(i).bounding_box()["width"] for i in range(len(layout["segments"]) - 1)]
    sizes = [s["size"] for s in layout["segments"][:-1]]
    assert max(widths) / min(widths) == pytest.approx(max(sizes) / min(sizes), rel=0.25)
    indexed = next(s for s in layout["segments"] if s["offsetIndexEntries"])
    page.locator(f'#segment-bar .segment[data-base="{indexed["baseOffset"]}"]').click()
    expect(page.locator("#offset-index tbody tr")).to_have_count(indexed["offsetIndexEntries"])
    entries = get(broker_console, f"api/topics/{LAID}/partitions/0/segments/{indexed['baseOffset']}")[1]
    assert cells_text(page, "offset-index", 2) == [str(e["position"]) for e in entries["offsetIndex"]]
    expect(page.locator("#segment-indexes")).not_to_contain_text("null")  # nothing drawn for the absent


def test_the_layout_page_of_a_console_without_a_brokers_http_port_says_why(page, broker):
    from playwright.sync_api import expect

    with start(broker.bootstrap_servers) as console:
        page.goto(console.url + f"#/topics/{LAID}/partitions/0/layout")
        expect(page.locator("#error")).to_contain_text("--broker-http")


def cells_text(page: Any, table: str, column: int) -> list[str]:
    return [c.strip() for c in page.locator(f"#{table} tbody tr td:nth-child({column})").all_inner_texts()]


def test_seglog_broker_serves_its_console_and_metrics_on_its_http_port(tmp_path):
    command = [sys.executable, "-m", "seglog", "broker", "--override", f"log.dirs={tmp_path}"]
    command += ["--override", "listeners=PLAINTEXT://127.0.0.1:0", "--http-port", "0"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("serving on 127.0.0.1:")
        line = process.stdout.readline()
        assert line.startswith("also serving the console and /metrics on http://127.0.0.1:"), line
        url = line.split()[-1]
        with urllib.request.urlopen(url + "api/console", timeout=60) as answer:
            assert b'"brokerId": 0' in answer.read()
        with urllib.request.urlopen(url + "metrics", timeout=60) as answer:
            assert b"seglog_requests_total" in answer.read()
    finally:
        process.terminate()
        assert process.wait(60) == 0


def _produce(bootstrap: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(count):
        producer.produce("traffic", value=b"t" * 1000)
    assert producer.flush(30) == 0


def test_throughput_is_the_brokers_counters_per_second(broker, broker_console, first_timestamp):
    with start(broker.bootstrap_servers, broker_http=[broker_console.url]) as console:
        for server in (broker_console, console):
            status, first = get(server, "api/throughput")
            assert status == 200, first
            assert first["seglogBrokers"] == 1
            assert [s["error"] for s in first["sources"]] == [None]
        _produce(broker.bootstrap_servers, 50)

        def rates(server: ConsoleServer) -> Any:
            found = get(server, "api/throughput")[1]
            moved = [p for p in found["points"] if p["bytesIn"] > 50_000 / 60]
            return moved or None

        for server in (broker_console, console):  # 50 KB came in within the points' span, a minute at most
            (point, *_) = wait_for(lambda server=server: rates(server), 60, "a point with the bytes produced")
            assert point["requests"] > 0 and point["bytesOut"] > 0 and point["brokers"] == 1


def test_a_broker_with_metrics_alone_gives_its_counters(tmp_path):
    with (
        seglog.broker.start(str(tmp_path), metrics_port=0) as plain,
        start(plain.bootstrap_servers, broker_http=[f"127.0.0.1:{plain.metrics_port}"]) as console,
    ):
        assert get(console, "api/throughput")[1]["sources"][0]["error"] is None
        admin = AdminClient({"bootstrap.servers": plain.bootstrap_servers})  # held until it answers
        admin.create_topics([NewTopic("measured", 1, 1)])["measured"].result(60)
        status, found = get(console, "api/topics/measured/partitions/0/layout")
        assert status == 501  # /metrics alone does not say which broker it is, nor holds a layout
        assert "reads the disks of brokers none yet" in found["error"]


def test_throughput_of_a_console_without_seglog_brokers_says_why(broker):
    with start(broker.bootstrap_servers) as console:
        assert get(console, "api/throughput")[1] == {"sources": [], "points": [], "seglogBrokers": 0}


def test_the_cluster_page_charts_the_throughput(page, broker, broker_console):
    from playwright.sync_api import expect

    open_page(page, broker_console, "#/cluster", "clusterPage")
    expect(page.locator("#throughput-sources")).to_contain_text("Counters of 1 of 1 live brokers (in-process)")
    _produce(broker.bootstrap_servers, 20)
    chart = page.locator("#chart-requests")  # drawn at a refresh, once two samples were taken
    expect(chart.locator("polyline")).to_have_count(1)
    expect(page.locator("#chart-bytes-in")).to_have_attribute("data-last", re.compile(r"^\d"))


def test_the_cluster_page_of_a_console_without_seglog_brokers_says_why(page, broker):
    from playwright.sync_api import expect

    with start(broker.bootstrap_servers) as console:
        open_page(page, console, "#/cluster", "clusterPage")
        expect(page.locator("#throughput-none")).to_contain_text("Kafka's protocol has no request for them")


def test_a_broker_http_address_that_is_not_http_is_a_usage_error():
    command = [sys.executable, "-m", "seglog", "console", "--bootstrap-server", "127.0.0.1:1"]
    command += ["--broker-http", "https://broker:8080"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--broker-http: 'https://broker:8080' is not an http:// address" in done.stderr


SHOTS = os.environ.get("SEGLOG_CONSOLE_SCREENSHOTS")  # a dir: each page's screenshot is saved there


def test_every_page_of_a_brokers_console_draws(page, broker, broker_console, first_timestamp):
    """Each page draws without an error; with SEGLOG_CONSOLE_SCREENSHOTS set, as the README's
    screenshots (docs/console/) are made."""
    from confluent_kafka import Consumer

    committer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "readers"})
    committer.commit(offsets=[KafkaPartition(LAID, 0, RECORDS // 2)], asynchronous=False)
    committer.close()
    layout = get(broker_console, f"api/topics/{LAID}/partitions/0/layout")[1]
    pages = [
        ("cluster", "#/cluster", "clusterPage"),
        ("topics", "#/topics", "topicsPage"),
        ("topic", f"#/topics/{LAID}", "topicPage"),
        ("layout", f"#/topics/{LAID}/partitions/0/layout", "layoutPage"),
        ("messages", f"#/topics/{LAID}/messages?partition=0&limit=8", "messagesPage"),
        ("group", "#/groups/readers", "groupPage"),
        ("transactions", "#/transactions", "transactionsPage"),
    ]
    page.set_viewport_size({"width": 1280, "height": 900})
    for name, where, loaded in pages:
        open_page(page, broker_console, where, loaded)
        if name == "cluster":  # its charts, once the console sampled twice (at the page's refresh)
            page.locator("#chart-requests").wait_for()
            if SHOTS:  # a line to see: traffic, and two refreshes more
                _produce(broker.bootstrap_servers, 200)
                page.wait_for_selector("#chart-requests[data-points='3']")
        if name == "layout":  # a segment's entries shown
            base = next(s for s in layout["segments"] if s["offsetIndexEntries"])["baseOffset"]
            page.locator(f'#segment-bar .segment[data-base="{base}"]').click()
            page.locator("#offset-index").wait_for()
        if SHOTS:
            page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def test_reading_a_layout_loads_nothing_into_the_live_log(tmp_path):
    """The broker's sealed segments whose indexes it has not loaded since it started stay so: the
    layout reads their files again, read-only, and closes them."""
    config = {"log.segment.bytes": SEGMENT_BYTES, "log.index.interval.bytes": 150}
    with seglog.broker.start(str(tmp_path), config=config) as first:
        _produce_one_a_batch(first.bootstrap_servers, "restarted", 30)
    with (
        seglog.broker.start(str(tmp_path), config=config) as again,
        serve_in_broker(again.server, "127.0.0.1", 0, read_only=True) as console,
    ):
        live = again.server.replicas.partition("restarted", 0).log
        sealed = live.segments[:-1]
        assert len(sealed) > 2 and not any(s.indexes_loaded for s in sealed)
        status, layout = get(console, "api/topics/restarted/partitions/0/layout")
        assert status == 200, layout
        assert sum(s["offsetIndexEntries"] for s in layout["segments"][:-1]) > 0  # read from the files
        for s in layout["segments"][:-1]:
            assert get(console, f"api/topics/restarted/partitions/0/segments/{s['baseOffset']}")[0] == 200
        assert live.segments[:-1] == sealed and not any(s.indexes_loaded for s in sealed)


def test_layouts_read_while_retention_deletes_segments_under_them(broker, broker_console):
    """Records deleted below offsets that rise while layouts are read: retention deletes the
    segments below the log start meanwhile, and every layout still answers whole."""
    _produce_one_a_batch(broker.bootstrap_servers, "shrinking", 60)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    stop, answers = threading.Event(), []

    def read() -> None:
        while not stop.is_set():
            answers.append(get(broker_console, "api/topics/shrinking/partitions/0/layout"))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for below in range(5, 60, 5):
            (deleted,) = admin.delete_records([KafkaPartition("shrinking", 0, below)]).values()
            assert deleted.result(60).low_watermark == below
    finally:
        stop.set()
        reader.join(60)
    assert answers and all(status == 200 for status, _ in answers), [a for a in answers if a[0] != 200][:3]
    for _, layout in answers:
        bases = [s["baseOffset"] for s in layout["segments"]]
        assert bases == sorted(bases) and bases[0] <= layout["logStartOffset"]
    final = get(broker_console, "api/topics/shrinking/partitions/0/layout")[1]
    assert final["logStartOffset"] == 55
    assert 0 < final["segments"][0]["baseOffset"] <= 55  # the segments below it went


def _produce_one_a_batch(bootstrap: str, topic: str, count: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # held until it answers
    admin.create_topics([NewTopic(topic, 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)})])[topic].result(60)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for _ in range(count):
        producer.produce(topic, value=b"r" * 100, partition=0)
        assert producer.flush(30) == 0
