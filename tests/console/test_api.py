"""The console's JSON API against a real broker: every figure checked against what was produced
and committed (conftest.py), and against confluent-kafka's own view where it has one."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaPartition
from confluent_kafka.admin import AdminClient, NewTopic

from seglog.console import start
from seglog.console.figures import SHOWN_CHARS

from ..broker.conftest import wait_for
from .conftest import (
    BINARY,
    COMMITTED,
    GROUP,
    PRODUCED,
    SCRIPT,
    STEP_MS,
    TOPIC,
    begin_transaction,
    filled_topic,
    value_of,
)


def get(server: Any, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(server.url + path, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def post(server: Any, path: str, body: Any, kind: str = "application/json") -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(server.url + path, data=data, headers={"Content-Type": kind}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def kafka_topics(bootstrap: str) -> dict[str, Any]:
    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30).topics


def test_cluster_names_the_broker_and_counts_as_librdkafka_sees_them(console, cluster):
    status, found = get(console, "api/cluster")
    assert status == 200
    assert found["brokers"] == [
        {
            "id": cluster.broker_id,
            "host": "127.0.0.1",
            "port": cluster.port,
            "rack": None,
            "alive": True,
            "controller": True,
        }
    ]
    topics = kafka_topics(cluster.bootstrap)
    assert found["topics"] == len(topics)
    assert found["partitions"] == sum(len(t.partitions) for t in topics.values())
    assert (found["underReplicated"], found["offline"]) == (0, 0)


def test_topics_lists_partitions_replication_and_internal(console):
    status, found = get(console, "api/topics?details=true")
    assert status == 200
    by_name = {t["name"]: t for t in found["topics"]}
    size = by_name[TOPIC].pop("size")
    assert by_name[TOPIC] == {
        "name": TOPIC,
        "partitions": 3,
        "replicationFactor": 1,
        "internal": False,
        "underReplicated": 0,
        "retentionMs": "3600000",
        "cleanupPolicy": "delete",
    }
    assert by_name["__consumer_offsets"]["internal"] is True
    assert by_name["__consumer_offsets"]["cleanupPolicy"] == "compact"
    # the bytes of its batches: each record's key and value at least, and no more than a batch each
    data = sum(len(f"key-{p}-{i}") + len(value_of(p, i)) for p, n in PRODUCED.items() for i in range(n))
    assert data < size < data + sum(PRODUCED.values()) * 200
    # without details=true, the list is Metadata's alone
    plain = {t["name"]: t for t in get(console, "api/topics")[1]["topics"]}[TOPIC]
    assert plain.keys() == {"name", "partitions", "replicationFactor", "internal", "underReplicated"}


def test_details_naming_a_list_reuse_its_metadata_and_else_ask_it(console):
    """The page asks the details naming the list it drew (its ``metadata``): the same topics, the
    same figures as details asked alone; a number no list answered (or one long gone) asks anew."""
    status, listed = get(console, "api/topics")
    assert status == 200 and isinstance(listed["metadata"], int)
    after = get(console, f"api/topics?details=true&after={listed['metadata']}")[1]["topics"]
    assert [t["name"] for t in after] == [t["name"] for t in listed["topics"]]
    alone = {t["name"]: t for t in get(console, "api/topics?details=true")[1]["topics"]}
    assert {t["name"]: t for t in after}[TOPIC] == alone[TOPIC]
    unknown = get(console, f"api/topics?details=true&after={listed['metadata'] + 1000}")[1]["topics"]
    assert {t["name"] for t in unknown} == set(alone)
    assert get(console, "api/topics?details=true&after=soon")[0] == 400


def test_topic_has_each_partitions_offsets_and_its_configs_with_their_source(console, cluster):
    status, found = get(console, f"api/topics/{TOPIC}")
    assert status == 200
    assert [
        (p["partition"], p["leader"], p["replicas"], p["isr"], p["logStartOffset"], p["highWatermark"])
        for p in found["partitionList"]
    ] == [(p, cluster.broker_id, [cluster.broker_id], [cluster.broker_id], 0, n) for p, n in PRODUCED.items()]
    configs = {c["name"]: c for c in found["configs"]}
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")


def test_an_unknown_topic_is_404_with_the_brokers_error(console):
    status, found = get(console, "api/topics/no-such-topic")
    assert status == 404
    assert "UNKNOWN_TOPIC_OR_PARTITION" in found["error"]


def test_messages_from_an_offset_with_keys_values_headers_and_timestamps(console):
    status, found = get(console, f"api/topics/{TOPIC}/messages?partition=0&offset=3&limit=10")
    assert status == 200
    assert (found["logStartOffset"], found["highWatermark"]) == (0, PRODUCED[0])
    assert [m["offset"] for m in found["messages"]] == [3, 4]
    third, script = found["messages"]
    assert third["key"] == {"text": "key-0-3"}
    assert third["value"] == {"text": "order 0-3 é"}
    assert third["headers"] == [{"key": "source", "value": {"text": "test"}}]
    assert third["timestamp"] > 0 and third["timestampType"] == "CreateTime"
    assert script["value"] == {"text": SCRIPT}


def test_messages_from_a_timestamp_start_at_the_first_record_at_or_after_it(console, cluster):
    at = cluster.first_timestamp + STEP_MS * 2 + STEP_MS // 2  # between offsets 2 and 3
    status, found = get(console, f"api/topics/{TOPIC}/messages?partition=0&timestamp={at}&limit=1")
    assert status == 200
    assert [(m["offset"], m["timestamp"]) for m in found["messages"]] == [(3, cluster.first_timestamp + STEP_MS * 3)]
    later = cluster.first_timestamp + STEP_MS * PRODUCED[0]  # no record is that recent
    assert get(console, f"api/topics/{TOPIC}/messages?partition=0&timestamp={later}")[1]["messages"] == []


def test_a_huge_value_is_cut_for_the_page_saying_its_size(console, cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held: a freed client drops its answers
    admin.create_topics([NewTopic("huge", 1, 1)])["huge"].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "message.max.bytes": 2_000_000})
    producer.produce("huge", value=b"x" * 1_000_000, partition=0)
    producer.produce("huge", value=b"\xff" * 100_000, partition=0)
    assert producer.flush(60) == 0
    status, found = get(console, "api/topics/huge/messages")
    assert status == 200
    text, binary = (m["value"] for m in found["messages"])
    assert text == {"text": "x" * SHOWN_CHARS, "size": 1_000_000}
    assert binary == {"hex": "ff" * (SHOWN_CHARS // 2), "size": 100_000}


def test_messages_that_are_not_utf8_come_as_hex_and_a_limit_stops_the_page(console):
    status, found = get(console, f"api/topics/{TOPIC}/messages?partition=1&limit=2")
    assert status == 200
    assert [m["offset"] for m in found["messages"]] == [0, 1]  # from the log start
    assert found["messages"][0]["value"] == {"hex": BINARY.hex()}


def test_messages_at_the_high_watermark_are_none(console):
    status, found = get(console, f"api/topics/{TOPIC}/messages?partition=2&offset={PRODUCED[2]}")
    assert (status, found["messages"]) == (200, [])


def test_bad_message_requests_are_400_and_say_why(console):
    for query, why in [
        ("partition=0&offset=abc", "offset is a whole number"),
        ("partition=-1", "partition is a whole number"),
        ("partition=9", "has no partition 9"),
        (f"partition=0&offset={PRODUCED[0] + 1}", "not between its log start and its high watermark"),
        ("partition=0&limit=0", "limit is from 1"),
        ("partition=0&timestamp=yesterday", "timestamp is a whole number"),
        ("partition=0&offset=1&timestamp=1", "not both"),
    ]:
        status, found = get(console, f"api/topics/{TOPIC}/messages?{query}")
        assert status == 400, query
        assert why in found["error"], (query, found)


def test_groups_have_their_state_members_and_lag(console):
    lag = {p: PRODUCED[p] - COMMITTED[p] for p in PRODUCED}
    status, found = get(console, "api/groups")
    assert status == 200
    assert {"id": GROUP, "state": "Stable", "protocol": "range", "totalLag": sum(lag.values()), "members": 1} in found[
        "groups"
    ]
    status, group = get(console, f"api/groups/{GROUP}")
    assert status == 200
    assert (group["state"], group["protocolType"], group["totalLag"]) == ("Stable", "consumer", sum(lag.values()))
    (member,) = group["members"]
    assert member["assignment"] == [{"topic": TOPIC, "partition": p} for p in sorted(PRODUCED)]
    assert [(o["partition"], o["committed"], o["highWatermark"], o["lag"], o["member"]) for o in group["offsets"]] == [
        (p, COMMITTED[p], PRODUCED[p], lag[p], member["memberId"]) for p in sorted(PRODUCED)
    ]


def test_a_group_page_outlives_a_deleted_topic_it_committed_to(console, cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until it answers
    admin.create_topics([NewTopic("short-lived", 1, 1)])["short-lived"].result(60)
    committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "orphaned", "enable.auto.commit": False})
    offsets = [KafkaPartition("short-lived", 0, 0), KafkaPartition(TOPIC, 0, 1)]
    committer.commit(offsets=offsets, asynchronous=False)
    committer.close()
    admin.delete_topics(["short-lived"])["short-lived"].result(60)
    wait_for(lambda: "short-lived" not in kafka_topics(cluster.bootstrap), 60, "the topic to go")
    status, group = get(console, "api/groups/orphaned")
    assert status == 200, group
    rows = {o["topic"]: (o["committed"], o["highWatermark"], o["lag"]) for o in group["offsets"]}
    assert rows[TOPIC] == (1, PRODUCED[0], PRODUCED[0] - 1)
    # the deleted topic's offsets, while the broker still keeps them (Kafka removes them soon after): no lag
    assert rows.get("short-lived", (0, None, None)) == (0, None, None)


def test_an_unknown_group_is_404(console):
    status, found = get(console, "api/groups/no-such-group")
    assert status == 404
    assert "no-such-group" in found["error"]


def test_transactions_show_an_open_transaction_its_partitions_and_its_end(console, cluster):
    producer = begin_transaction(cluster.bootstrap, "console-txn", "in-transaction")
    status, found = get(console, "api/transactions")
    assert status == 200
    (listed,) = [t for t in found["transactions"] if t["transactionalId"] == "console-txn"]
    assert (listed["state"], listed["coordinator"]) == ("Ongoing", cluster.broker_id)
    status, described = get(console, "api/transactions/console-txn")
    assert status == 200
    assert (described["state"], described["producerId"]) == ("Ongoing", listed["producerId"])
    assert described["partitions"] == [{"topic": "in-transaction", "partition": 0}]
    assert described["startTimeMs"] is not None
    producer.commit_transaction(60)
    wait_for(lambda: get(console, "api/transactions/console-txn")[1]["state"] == "CompleteCommit", 60, "the commit")
    # the record written in it, and the commit marker after it
    found = get(console, "api/topics/in-transaction/messages")[1]["messages"]
    assert [(m["offset"], m["control"]) for m in found] == [(0, None), (1, "COMMIT")]
    assert found[0]["transactional"] is True
    status, found = get(console, "api/transactions/no-such-id")
    assert status == 404
    assert "no-such-id" in found["error"]


def test_create_topic_and_the_brokers_refusal(console, cluster):
    status, made = post(console, "api/topics", {"name": "made-by-console", "partitions": 2})
    assert (status, made) == (201, {"name": "made-by-console", "partitions": 2, "replicationFactor": 1})
    assert len(kafka_topics(cluster.bootstrap)["made-by-console"].partitions) == 2
    status, refused = post(console, "api/topics", {"name": TOPIC})
    assert status == 409
    assert "already exists" in refused["error"]
    status, refused = post(console, "api/topics", {"name": "too-replicated", "replicationFactor": 3})
    assert status == 400
    assert "too-replicated" in refused["error"]
    assert "too-replicated" not in kafka_topics(cluster.bootstrap)


def test_add_partitions_and_change_configs_or_the_brokers_refusal(console, cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until it answers
    admin.create_topics([NewTopic("altered", 1, 1)])["altered"].result(60)
    assert post(console, "api/topics/altered/partitions", {"count": 3}) == (200, {"name": "altered", "partitions": 3})
    assert len(kafka_topics(cluster.bootstrap)["altered"].partitions) == 3
    status, refused = post(console, "api/topics/altered/partitions", {"count": 2})
    assert status == 400
    assert "altered" in refused["error"]

    def retention() -> tuple[str, str]:
        found = {c["name"]: c for c in get(console, "api/topics/altered")[1]["configs"]}["retention.ms"]
        return found["value"], found["source"]

    assert post(console, "api/topics/altered/configs", {"set": {"retention.ms": "60000"}})[0] == 200
    assert retention() == ("60000", "DYNAMIC_TOPIC_CONFIG")
    assert post(console, "api/topics/altered/configs", {"delete": ["retention.ms"]})[0] == 200
    assert retention()[1] != "DYNAMIC_TOPIC_CONFIG"
    status, refused = post(console, "api/topics/altered/configs", {"set": {"no.such.config": "1"}})
    assert status == 400
    assert "no.such.config" in refused["error"]
    assert post(console, "api/topics/altered/configs", {})[0] == 400


def test_create_topic_refuses_malformed_requests(console):
    assert post(console, "api/topics", b"{not json")[0] == 400
    assert post(console, "api/topics", {"name": "x", "partitions": "two"})[0] == 400
    assert post(console, "api/topics", {"partitions": 2})[0] == 400
    # a form of another site can POST this type without the browser asking first: refused
    assert post(console, "api/topics", b"name=x", "application/x-www-form-urlencoded")[0] == 400


def test_a_read_only_console_refuses_to_create(read_only_console, cluster):
    assert get(read_only_console, "api/console")[1]["readOnly"] is True
    status, refused = post(read_only_console, "api/topics", {"name": "not-made"})
    assert status == 403
    assert "read-only" in refused["error"]
    assert "not-made" not in kafka_topics(cluster.bootstrap)
    assert post(read_only_console, f"api/topics/{TOPIC}/partitions", {"count": 9})[0] == 403
    assert post(read_only_console, f"api/topics/{TOPIC}/configs", {"set": {"retention.ms": "1"}})[0] == 403
    assert len(kafka_topics(cluster.bootstrap)[TOPIC].partitions) == len(PRODUCED)


def test_an_unreachable_cluster_is_502_and_the_console_goes_on():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        with start(f"127.0.0.1:{port}") as server:
            status, found = get(server, "api/cluster")
            assert status == 502
            assert f"127.0.0.1:{port}" in found["error"]
            assert get(server, "api/console")[0] == 200


def test_seglog_console_serves_from_the_command_line(cluster):
    command = [sys.executable, "-m", "seglog", "console", "--bootstrap-server", cluster.bootstrap]
    process = subprocess.Popen([*command, "--port", "0", "--read-only"], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith(f"seglog console of {cluster.bootstrap} at http://127.0.0.1:"), line
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "api/topics", timeout=60) as answer:
            assert TOPIC in {t["name"] for t in json.loads(answer.read())["topics"]}
        with urllib.request.urlopen(url, timeout=60) as page:
            assert b"/static/console.js" in page.read()
    finally:
        process.terminate()
        process.wait(30)


def test_records_of_an_aborted_transaction_are_marked_and_markers_named(console, cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # held until it answers
    admin.create_topics([NewTopic("mixed", 1, 1)])["mixed"].result(60)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "mixed-txn"})
    producer.init_transactions(60)
    for values, end in [([b"a0", b"a1"], producer.abort_transaction), ([b"c0"], producer.commit_transaction)]:
        producer.begin_transaction()
        for value in values:
            producer.produce("mixed", value=value, partition=0)
        assert producer.flush(60) == 0
        end(60)
    found = get(console, "api/topics/mixed/messages")[1]["messages"]
    assert [(m["offset"], m["control"], m["aborted"]) for m in found] == [
        (0, None, True),
        (1, None, True),
        (2, "ABORT", False),
        (3, None, False),
        (4, "COMMIT", False),
    ]
    # librdkafka's read_committed consumer sees the committed record alone
    committed = {"bootstrap.servers": cluster.bootstrap, "group.id": "reader", "isolation.level": "read_committed"}
    reader = Consumer(committed)
    try:
        reader.assign([KafkaPartition("mixed", 0, 0)])
        seen = [m.value() for m in reader.consume(1, timeout=30)]
    finally:
        reader.close()
    assert seen == [b"c0"] and found[3]["value"] == {"text": "c0"}
    # from the middle of the aborted transaction: still marked (the Fetch's aborted list covers it)
    assert get(console, "api/topics/mixed/messages?offset=1&limit=1")[1]["messages"][0]["aborted"] is True
    # a transaction still open, past the last stable offset: shown, its end not known yet
    producer.begin_transaction()
    producer.produce("mixed", value=b"open", partition=0)
    assert producer.flush(60) == 0
    (open_record,) = get(console, "api/topics/mixed/messages?offset=5")[1]["messages"]
    assert (open_record["value"], open_record["transactional"]) == ({"text": "open"}, True)
    assert open_record["aborted"] is False
    producer.abort_transaction(60)


def test_a_filter_keeps_the_records_whose_key_or_value_holds_the_text(console):
    def shown(query: str) -> tuple[list[int], Any]:
        status, found = get(console, f"api/topics/{TOPIC}/messages?partition=0&{query}")
        assert status == 200, found
        return [m["offset"] for m in found["messages"]], found

    assert shown("filter=0-3")[0] == [3]  # value "order 0-3 é", key "key-0-3"
    assert shown("filter=ORDER%200-1")[0] == [1]  # any case
    assert shown("filter=%3Cscript")[0] == [4]
    offsets, found = shown("filter=key-0&limit=2")
    assert offsets == [0, 1] and found["nextOffset"] == 2 and found["filter"] == "key-0"
    offsets, found = shown("filter=nowhere")
    assert offsets == [] and found["scanned"] == PRODUCED[0] and found["nextOffset"] == PRODUCED[0]


def _watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return tuple(reader.get_watermark_offsets(KafkaPartition(topic, partition), timeout=30))
    finally:
        reader.close()


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = reader.committed([KafkaPartition(topic, p) for p in range(partitions)], timeout=30)
        return [tp.offset for tp in found]
    finally:
        reader.close()


def test_delete_records_below_an_offset_or_the_leaders_refusal(console, read_only_console, cluster):
    filled_topic(cluster.bootstrap, "trimmed", 5)
    assert post(read_only_console, "api/topics/trimmed/delete-records", {"partition": 0, "offset": 2})[0] == 403
    assert _watermarks(cluster.bootstrap, "trimmed", 0) == (0, 5)
    done = post(console, "api/topics/trimmed/delete-records", {"partition": 0, "offset": 2})
    assert done == (200, {"topic": "trimmed", "partition": 0, "lowWatermark": 2})
    assert _watermarks(cluster.bootstrap, "trimmed", 0) == (2, 5)
    status, refused = post(console, "api/topics/trimmed/delete-records", {"partition": 0, "offset": 9})
    assert status == 400 and "OFFSET_OUT_OF_RANGE" in refused["error"], refused
    assert post(console, "api/topics/trimmed/delete-records", {"partition": 0, "offset": -1})[1]["lowWatermark"] == 5
    assert post(console, "api/topics/trimmed/delete-records", {"offset": 1})[0] == 400  # which partition?
    assert post(console, "api/topics/no-such/delete-records", {"partition": 0, "offset": 1})[0] == 404


def test_reset_a_groups_offsets_only_when_it_is_empty(console, read_only_console, cluster):
    settings = {"bootstrap.servers": cluster.bootstrap, "group.id": "resettable", "enable.auto.commit": False}
    committer = Consumer(settings)
    committer.commit(offsets=[KafkaPartition(TOPIC, p, 1) for p in PRODUCED], asynchronous=False)
    committer.close()
    path = "api/groups/resettable/reset-offsets"
    assert post(read_only_console, path, {"to": "earliest"})[0] == 403
    status, done = post(console, path, {"to": "latest"})
    assert status == 200, done
    assert [o["offset"] for o in done["offsets"]] == list(PRODUCED.values())
    assert _committed(cluster.bootstrap, "resettable", TOPIC, 3) == list(PRODUCED.values())
    assert post(console, path, {"to": "earliest"})[0] == 200
    assert _committed(cluster.bootstrap, "resettable", TOPIC, 3) == [0, 0, 0]
    assert post(console, path, {"to": "offset", "offset": 4, "topic": TOPIC})[0] == 200
    assert _committed(cluster.bootstrap, "resettable", TOPIC, 3) == [min(4, n) for n in PRODUCED.values()]
    at = cluster.first_timestamp + STEP_MS * 2  # offset 2 of each partition
    assert post(console, path, {"to": "timestamp", "timestamp": at})[0] == 200
    assert _committed(cluster.bootstrap, "resettable", TOPIC, 3) == [2, 2, 2]
    # a group with a member is refused, as kafka-consumer-groups.sh refuses it
    status, refused = post(console, f"api/groups/{GROUP}/reset-offsets", {"to": "earliest"})
    assert status == 409
    assert "can only be reset if the group 'billing' is inactive, but the current state is Stable" in refused["error"]
    for bad, why in [({"to": "yesterday"}, "to is one of"), ({"to": "offset"}, "needs offset"), ({}, "to is one of")]:
        status, refused = post(console, path, bad)
        assert status == 400 and why in refused["error"], (bad, refused)
