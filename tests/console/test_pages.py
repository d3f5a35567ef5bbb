"""The console's pages in a real headless Chromium (conftest.py's ``page``), against the broker,
records and group of conftest.py.

Each check waits for what it looks for (Playwright's ``expect`` retries until its timeout): no
sleeps, so a loaded machine is slower, not failing."""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.console import start

from .conftest import COMMITTED, GROUP, PRODUCED, SCRIPT, STEP_MS, TOPIC, begin_transaction, filled_topic, open_page


def cells(page: Any, table: str, column: int) -> list[str]:
    return [c.strip() for c in page.locator(f"#{table} tbody tr td:nth-child({column})").all_inner_texts()]


def test_cluster_page_shows_the_broker(page, console, cluster):
    from playwright.sync_api import expect

    open_page(page, console, "#/cluster", "clusterPage")
    row = page.locator("#brokers tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td")).to_have_text([str(cluster.broker_id), "127.0.0.1", str(cluster.port), "", "yes", "up"])
    expect(page.locator("#count-offline")).to_have_text("0")


def test_topic_page_shows_each_partitions_high_watermark(page, console):
    from playwright.sync_api import expect

    open_page(page, console, "#/topics", "topicsPage")
    page.locator("#topics").get_by_role("link", name=TOPIC, exact=True).click()
    expect(page.locator("#view")).to_have_attribute("data-loaded", "topicPage")
    expect(page.locator("#topic-name")).to_have_text(TOPIC)
    expect(page.locator("#partitions tbody tr")).to_have_count(len(PRODUCED))
    assert cells(page, "partitions", 1) == [str(p) for p in PRODUCED]
    assert cells(page, "partitions", 6) == [str(n) for n in PRODUCED.values()]
    expect(page.locator('#configs tr[data-config="retention.ms"] td')).to_have_text(
        ["retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"]
    )


def test_the_topic_filter_keeps_the_matching_topics(page, console):
    from playwright.sync_api import expect

    open_page(page, console, "#/topics", "topicsPage")
    offsets = page.locator('#topics tr[data-topic="__consumer_offsets"]')
    expect(offsets).to_be_visible()
    page.locator("#topic-filter").fill(TOPIC[:3].upper())  # any case
    kept = page.locator(f'#topics tr[data-topic="{TOPIC}"]')
    expect(kept).to_be_visible()
    expect(offsets).to_be_hidden()
    expect(kept.locator("td").nth(5)).to_have_text("1 h")  # its retention.ms, 3600000


def test_messages_browser_shows_records_as_text_never_as_markup(page, console, cluster):
    from playwright.sync_api import expect

    open_page(page, console, f"#/topics/{TOPIC}/messages?partition=0&offset=2", "messagesPage")
    expect(page.locator("#messages tbody tr")).to_have_count(PRODUCED[0] - 2)
    assert cells(page, "messages", 1) == [str(o) for o in range(2, PRODUCED[0])]
    assert cells(page, "messages", 3) == [f"key-0-{o}" for o in range(2, PRODUCED[0])]
    assert cells(page, "messages", 4)[-1] == SCRIPT
    assert cells(page, "messages", 5)[0] == "source: test"
    assert page.evaluate("window.pwned") is None
    expect(page.locator("#next-page")).to_have_count(0)  # the page reached the high watermark
    # a malformed offset typed in: the page says so, and the form stays to correct it
    page.locator("#browse input[name=offset]").fill("ten")
    page.locator("#browse button").click()
    expect(page.locator("#error")).to_contain_text("offset is a whole number")
    # from a time typed as a date: the first record at or after it
    at = datetime.fromtimestamp((cluster.first_timestamp + 3 * STEP_MS) / 1000, UTC)
    page.locator("#browse input[name=offset]").fill("")
    page.locator("#browse input[name=time]").fill(at.isoformat(timespec="milliseconds"))
    page.locator("#browse button").click()
    expect(page.locator("#messages tbody tr td:first-child")).to_have_text([str(o) for o in range(3, PRODUCED[0])])


def test_groups_page_shows_the_groups_lag(page, console):
    from playwright.sync_api import expect

    lag = sum(PRODUCED[p] - COMMITTED[p] for p in PRODUCED)
    open_page(page, console, "#/groups", "groupsPage")
    row = page.locator("#groups tbody tr").filter(has_text=GROUP)
    expect(row.locator("td").nth(3)).to_have_text(str(lag))
    row.get_by_role("link", name=GROUP).click()
    expect(page.locator("#view")).to_have_attribute("data-loaded", "groupPage")
    expect(page.locator("#total-lag")).to_have_text(str(lag))
    expect(page.locator("#offsets tbody tr")).to_have_count(len(PRODUCED))
    assert cells(page, "offsets", 5) == [str(PRODUCED[p] - COMMITTED[p]) for p in sorted(PRODUCED)]


def test_a_groups_lag_chart_moves_as_it_commits(page, console, cluster):
    from playwright.sync_api import expect

    # a group of no member, whose offsets an admin's commits set (as kafka-consumer-groups --reset-offsets)
    committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "charted", "enable.auto.commit": False})
    try:
        committer.commit(offsets=[KafkaPartition(TOPIC, p, 0) for p in PRODUCED], asynchronous=False)
        open_page(page, console, "#/groups/charted", "groupPage")
        chart = page.locator("#lag-chart")
        expect(chart).to_have_attribute("data-last", str(sum(PRODUCED.values())))
        committer.commit(offsets=[KafkaPartition(TOPIC, p, n) for p, n in PRODUCED.items()], asynchronous=False)
        expect(chart).to_have_attribute("data-last", "0")  # the page asked again by itself
        assert int(chart.get_attribute("data-points")) >= 2
        expect(chart.locator("polyline")).to_have_attribute("points", re.compile(r"^\S+( \S+)+$"))  # a line drawn
    finally:
        committer.close()


def test_transactions_page_shows_an_open_transaction(page, console, cluster):
    from playwright.sync_api import expect

    producer = begin_transaction(cluster.bootstrap, "page-txn", "in-page-transaction")
    open_page(page, console, "#/transactions", "transactionsPage")
    page.locator("#transactions").get_by_role("link", name="page-txn").click()
    expect(page.locator("#transaction-state")).to_have_text("Ongoing")
    expect(page.locator("#transaction-partitions tbody tr td")).to_have_text(["in-page-transaction", "0"])
    producer.abort_transaction(60)
    expect(page.locator("#transaction-state")).to_have_text("CompleteAbort")  # the page asks again by itself


def act(page: Any, action: str, fields: dict[str, str], question: str = "") -> None:
    """Fill an action's form (its id ``action``), ask, see ``question`` asked, and confirm."""
    from playwright.sync_api import expect

    for name, value in fields.items():
        page.locator(f"#{action} input[name={name}]").fill(value)
    page.locator(f"#{action}-button").click()
    expect(page.locator(f"#{action}-confirm")).to_contain_text(question)
    page.locator(f"#{action}-confirm-button").click()


def test_create_a_topic_through_the_form(page, console):
    from playwright.sync_api import expect

    open_page(page, console, "#/topics", "topicsPage")
    act(page, "create-topic", {"name": "from-the-browser", "partitions": "2"}, "Create topic from-the-browser with 2")
    expect(page.locator('#topics tr[data-topic="from-the-browser"] td').nth(1)).to_have_text("2")
    expect(page.locator("#create-topic-done")).to_have_text("Created topic from-the-browser.")
    act(page, "create-topic", {"name": TOPIC})  # the broker's refusal, shown as it said it
    expect(page.locator("#create-topic-error")).to_contain_text("already exists")


def test_change_a_config_and_add_partitions_through_the_topic_page(page, console, cluster):
    from playwright.sync_api import expect

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until it answers
    admin.create_topics([NewTopic("changed", 1, 1)])["changed"].result(60)
    open_page(page, console, "#/topics/changed", "topicPage")
    act(page, "alter-config", {"key": "retention.ms", "value": "120000"}, "Set retention.ms = 120000 on topic changed?")
    expect(page.locator('#configs tr[data-config="retention.ms"] td')).to_have_text(
        ["retention.ms", "120000", "DYNAMIC_TOPIC_CONFIG"]
    )
    act(page, "add-partitions", {"count": "3"}, "Grow topic changed from 1 to 3 partitions?")
    expect(page.locator("#partitions tbody tr")).to_have_count(3)
    expect(page.locator("#add-partitions-done")).to_have_text("Topic changed has 3 partitions.")
    act(page, "add-partitions", {"count": "2"})  # the broker's refusal: fewer than the topic has
    expect(page.locator("#add-partitions-error")).to_contain_text("changed")


def test_a_topic_deleted_while_its_page_is_open_is_said_so(page, console, cluster):
    from playwright.sync_api import expect

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until it answers
    admin.create_topics([NewTopic("doomed", 1, 1)])["doomed"].result(60)
    open_page(page, console, "#/topics/doomed", "topicPage")
    admin.delete_topics(["doomed"])["doomed"].result(60)
    expect(page.locator("#error")).to_contain_text("topic doomed: UNKNOWN_TOPIC_OR_PARTITION")  # at its refresh


def test_an_unreachable_cluster_is_said_so_on_the_page(page):
    from playwright.sync_api import expect

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        port = closed.getsockname()[1]
        with start(f"127.0.0.1:{port}") as server:
            page.goto(server.url + "#/cluster")
            expect(page.locator("#error")).to_contain_text(f"cannot connect to 127.0.0.1:{port}")


def test_a_read_only_console_has_no_create_form(page, read_only_console):
    from playwright.sync_api import expect

    open_page(page, read_only_console, "#/topics", "topicsPage")
    expect(page.locator(f'#topics tr[data-topic="{TOPIC}"]')).to_be_visible()
    expect(page.locator("#create-topic")).to_have_count(0)
    open_page(page, read_only_console, f"#/topics/{TOPIC}", "topicPage")
    expect(page.locator("#partitions tbody tr")).to_have_count(len(PRODUCED))
    expect(page.locator("form.action")).to_have_count(0)
    expect(page.locator("#view")).not_to_contain_text("null")  # nothing drawn where the form was
    expect(page.locator("#bootstrap")).to_contain_text("read-only")


def test_messages_as_json_filtered_with_aborted_records_marked(page, console, cluster):
    from playwright.sync_api import expect

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until it answers
    admin.create_topics([NewTopic("shown-json", 1, 1)])["shown-json"].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "shown-json-txn"})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce("shown-json", key=b"first", value=b'{"user": "ada", "items": [1, 2]}', partition=0)
    producer.produce("shown-json", key=b"second", value=b"not json", partition=0)
    assert producer.flush(60) == 0
    producer.abort_transaction(60)
    open_page(page, console, "#/topics/shown-json/messages", "messagesPage")
    rows = page.locator("#messages tbody tr")
    expect(rows).to_have_count(3)  # two aborted records and the ABORT marker
    expect(page.locator("#messages tbody tr.aborted")).to_have_count(2)
    expect(rows.nth(0).locator("td").first).to_have_text("0 txn aborted")
    expect(rows.nth(2)).to_contain_text("control record: ABORT")
    expect(rows.nth(0).locator("td").nth(3)).to_have_text('{"user": "ada", "items": [1, 2]}')
    page.locator("#browse select[name=view]").select_option("json")
    page.locator("#browse button").click()
    pretty = rows.nth(0).locator("td").nth(3).locator("pre.json")
    expect(pretty).to_have_text('{\n  "user": "ada",\n  "items": [\n    1,\n    2\n  ]\n}')
    expect(rows.nth(1).locator("td").nth(3)).to_have_text("not json")  # not JSON: as text
    page.locator("#browse input[name=filter]").fill("SECOND")
    page.locator("#browse button").click()
    expect(page.locator("#messages tbody tr td:first-child")).to_have_text(["1 txn aborted"])
    expect(page.locator("#messages-summary")).to_contain_text('3 records looked through for "SECOND"')
    page.locator("#browse select[name=view]").select_option("hex")
    page.locator("#browse button").click()
    expect(rows.nth(0).locator("td").nth(3).locator(".hex")).to_have_text(b"not json".hex())


def test_delete_records_through_the_topic_page(page, console, cluster):
    from playwright.sync_api import expect

    filled_topic(cluster.bootstrap, "trimmed-in-page", 4)
    open_page(page, console, "#/topics/trimmed-in-page", "topicPage")
    question = "Delete the records of trimmed-in-page-0 below offset 3? They cannot be brought back."
    act(page, "delete-records", {"partition": "0", "offset": "3"}, question)
    expect(page.locator("#delete-records-done")).to_have_text("Partition 0 of trimmed-in-page starts at offset 3.")
    expect(page.locator("#partitions tbody tr td").nth(4)).to_have_text("3")  # its log start, drawn again
    act(page, "delete-records", {"partition": "0", "offset": "10"})  # past the high watermark: refused
    expect(page.locator("#delete-records-error")).to_contain_text("OFFSET_OUT_OF_RANGE")


def test_reset_a_groups_offsets_through_its_page(page, console, cluster):
    from playwright.sync_api import expect

    settings = {"bootstrap.servers": cluster.bootstrap, "group.id": "reset-in-page", "enable.auto.commit": False}
    committer = Consumer(settings)
    committer.commit(offsets=[KafkaPartition(TOPIC, p, 0) for p in PRODUCED], asynchronous=False)
    committer.close()
    open_page(page, console, "#/groups/reset-in-page", "groupPage")
    expect(page.locator("#total-lag")).to_have_text(str(sum(PRODUCED.values())))
    page.locator("#reset-offsets select[name=to]").select_option("latest")
    asked = "Reset group reset-in-page's offsets of every topic it committed to the high watermark?"
    act(page, "reset-offsets", {}, asked)
    expect(page.locator("#reset-offsets-done")).to_have_text("Reset 3 offsets of group reset-in-page.")
    expect(page.locator("#total-lag")).to_have_text("0")
    page.locator("#reset-offsets select[name=to]").select_option("offset")
    act(page, "reset-offsets", {"at": "1", "topic": TOPIC}, f"of topic {TOPIC} to offset 1?")
    expect(page.locator("#total-lag")).to_have_text(str(sum(n - 1 for n in PRODUCED.values())))
    # a group with a member: refused, the broker-side reason shown
    open_page(page, console, f"#/groups/{GROUP}", "groupPage")
    act(page, "reset-offsets", {})
    expect(page.locator("#reset-offsets-error")).to_contain_text("the current state is Stable")


def test_a_read_only_console_has_no_delete_nor_reset_forms(page, read_only_console):
    from playwright.sync_api import expect

    open_page(page, read_only_console, f"#/groups/{GROUP}", "groupPage")
    expect(page.locator("#offsets tbody tr")).to_have_count(len(PRODUCED))
    expect(page.locator("#reset-offsets")).to_have_count(0)
    open_page(page, read_only_console, f"#/topics/{TOPIC}", "topicPage")
    expect(page.locator("#partitions tbody tr")).to_have_count(len(PRODUCED))
    expect(page.locator("#delete-records")).to_have_count(0)
