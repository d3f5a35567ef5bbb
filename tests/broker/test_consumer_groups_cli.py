"""``seglog consumer-groups`` against a broker: --list, --describe (Kafka's table),
--reset-offsets (dry run, --execute, each scenario), --delete, the errors; and a
``__consumer_offsets`` Kafka wrote, loaded by the broker and shown by the tool."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

import seglog
from seglog.cli import main

from .test_groups import GROUP_BROKER, Recorded, committed, create_topic, poll_until, produce

HEADER = "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID"


@pytest.fixture(scope="module")
def seglog_broker_config() -> dict[str, Any]:
    return GROUP_BROKER


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(["consumer-groups", *argv])
    except SystemExit as e:  # argparse's own errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def rows(out: str) -> list[list[str]]:
    lines = [line.split() for line in out.splitlines() if line.strip()]
    return lines[1:]


def test_list_describe_reset_delete(seglog_broker, capsys) -> None:
    b = ("--bootstrap-server", seglog_broker.bootstrap_servers)
    create_topic(seglog_broker.bootstrap_servers, "clicks", 2)
    produce(seglog_broker.bootstrap_servers, "clicks", 2, 20)
    member = Recorded(seglog_broker.bootstrap_servers, "viewers", "clicks", **{"client.id": "viewer-1"})
    poll_until([member], lambda: len(member.records) == 20, "the records consumed")
    member.consumer.commit(
        offsets=[TopicPartition("clicks", 0, 6), TopicPartition("clicks", 1, 10)], asynchronous=False
    )

    assert run(capsys, *b, "--list")[1].split() == ["viewers"]
    code, out, _ = run(capsys, *b, "--describe", "--group", "viewers")
    assert code == 0 and out.startswith("\n" + HEADER)
    member_id = member.consumer.memberid()
    assert rows(out) == [
        ["viewers", "clicks", "0", "6", "10", "4", member_id, "/127.0.0.1", "viewer-1"],
        ["viewers", "clicks", "1", "10", "10", "0", member_id, "/127.0.0.1", "viewer-1"],
    ]
    # an active group's offsets are not reset, nor is it deleted
    code, _, err = run(
        capsys, *b, "--reset-offsets", "--group", "viewers", "--topic", "clicks", "--to-earliest", "--execute"
    )
    assert code == 1
    assert (
        err
        == "error: Assignments can only be reset if the group 'viewers' is inactive, but the current state is Stable.\n"
    )
    code, _, err = run(capsys, *b, "--delete", "--group", "viewers")
    assert code == 1 and err.startswith("error: cannot delete group viewers: NON_EMPTY_GROUP")
    member.consumer.close()

    code, out, err = run(capsys, *b, "--describe", "--group", "viewers")
    assert "Consumer group 'viewers' has no active members." in err
    assert rows(out) == [
        ["viewers", "clicks", "0", "6", "10", "4", "-", "-", "-"],
        ["viewers", "clicks", "1", "10", "10", "0", "-", "-", "-"],
    ]

    reset = ("--reset-offsets", "--group", "viewers", "--topic", "clicks")
    code, out, _ = run(capsys, *b, *reset, "--to-earliest")  # a dry run
    assert code == 0 and rows(out) == [["viewers", "clicks", "0", "0"], ["viewers", "clicks", "1", "0"]]
    assert out.splitlines()[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 6, 1: 10}
    assert run(capsys, *b, *reset, "--shift-by", "-8", "--execute")[0] == 0
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 0, 1: 2}  # not below the start
    assert run(capsys, *b, *reset, "--shift-by", "5", "--execute", "--topic", "clicks:1")[0] == 0
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 5, 1: 7}
    assert (
        run(capsys, *b, "--reset-offsets", "--group", "viewers", "--topic", "clicks:0", "--to-latest", "--execute")[0]
        == 0
    )
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 10, 1: 7}
    assert run(capsys, *b, *reset, "--to-datetime", "2000-01-01T00:00:00.000", "--execute")[0] == 0
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 0, 1: 0}
    assert run(capsys, *b, *reset, "--to-datetime", "2999-01-01T00:00:00.000Z", "--execute")[0] == 0
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 10, 1: 10}
    everything = ("--reset-offsets", "--group", "viewers", "--all-topics", "--to-earliest", "--execute")
    assert run(capsys, *b, *everything)[0] == 0
    assert committed(seglog_broker.bootstrap_servers, "viewers", "clicks", 2) == {0: 0, 1: 0}

    code, out, _ = run(capsys, *b, "--delete", "--group", "viewers")
    assert code == 0 and out == "Deletion of requested consumer groups ('viewers') was successful.\n"
    assert run(capsys, *b, "--list")[1] == ""
    code, _, err = run(capsys, *b, "--describe", "--group", "viewers")
    assert code == 1 and err == "error: Consumer group 'viewers' does not exist.\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--describe",), "error: --group is required"),
        (("--reset-offsets", "--group", "g", "--topic", "t"), "error: --reset-offsets needs one of"),
        (("--reset-offsets", "--group", "g", "--to-latest"), "error: --reset-offsets needs --topic"),
        (("--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday"), "error: --to-datetime"),
        (("--reset-offsets", "--group", "g", "--topic", "t:x", "--to-latest"), "error: --topic takes"),
        (("--describe", "--group", "g", "--to-latest"), "error: --topic, --all-topics"),
        (("--list", "--delete"), "error: argument --delete: not allowed with argument --list"),
        (("--reset-offsets", "--group", "g", "--topic", "t", "--shift-by", "x"), "error: argument --shift-by"),
    ],
)
def test_usage_errors_exit_2_in_one_line(seglog_broker, capsys, argv: tuple[str, ...], message: str) -> None:
    code, _, err = run(capsys, "--bootstrap-server", seglog_broker.bootstrap_servers, *argv)
    assert code == 2 and err.startswith(message) and err.count("\n") == 1 and "Traceback" not in err


def test_runtime_errors_exit_1_in_one_line(seglog_broker, capsys) -> None:
    b = ("--bootstrap-server", seglog_broker.bootstrap_servers)
    create_topic(seglog_broker.bootstrap_servers, "fresh", 1)
    code, _, err = run(capsys, *b, "--reset-offsets", "--group", "nobody", "--topic", "fresh", "--shift-by", "1")
    assert (
        code == 1
        and err == "error: Cannot shift offset for partition fresh-0 since there is no current committed offset\n"
    )
    code, _, err = run(capsys, *b, "--reset-offsets", "--group", "nobody", "--topic", "missing", "--to-latest")
    assert code == 1 and err.startswith("error: topic missing: UNKNOWN_TOPIC_OR_PARTITION")
    code, _, err = run(capsys, "--bootstrap-server", "127.0.0.1:1", "--list")
    assert code == 1 and err.startswith("error: cannot connect to 127.0.0.1:1")


def test_a_kafka_written_consumer_offsets_loads(seglog_broker_factory, kafka_data: Path, tmp_path, capsys) -> None:
    source = kafka_data / "real_segments/mscaldas2012_kafka-connect-spooldir__cp5.1.2/kafka-data"
    shutil.copytree(source, tmp_path / "data")
    with seglog.open(str(tmp_path / "data"), read_only=True, background=False) as logs:
        end = logs.partition("_confluent-command", 0).log_end_offset
    broker = seglog_broker_factory(str(tmp_path / "data"))
    b = ("--bootstrap-server", broker.bootstrap_servers)
    groups = run(capsys, *b, "--list")[1].split()
    assert {"_confluent-controlcenter-5-1-2-1", "_confluent-controlcenter-5-1-2-1-command"} <= set(groups)
    code, out, err = run(capsys, *b, "--describe", "--group", "_confluent-controlcenter-5-1-2-1-command")
    assert code == 0 and "has no active members" in err
    group = "_confluent-controlcenter-5-1-2-1-command"
    assert rows(out) == [[group, "_confluent-command", "0", "2", str(end), str(end - 2), "-", "-", "-"]]
    code, out, _ = run(capsys, *b, "--describe", "--group", "_confluent-controlcenter-5-1-2-1")
    assert code == 0 and len(rows(out)) == 17
    code, _, err = run(capsys, *b, "--describe", "--group", "compose-connect-group")  # Kafka Connect's
    assert code == 1 and err == "error: compose-connect-group is not a consumer group (protocol type connect)\n"
