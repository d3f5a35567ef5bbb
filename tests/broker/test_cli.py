"""The command line's --bootstrap-server forms against an embedded broker."""

from __future__ import annotations

import io
import json

import pytest

from seglog.cli import main


def _run(capsys, monkeypatch, *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_topics_produce_consume_offsets_configs_delete_records(seglog_broker, capsys, monkeypatch, tmp_path) -> None:
    b = ("--bootstrap-server", seglog_broker.bootstrap_servers)
    assert _run(capsys, monkeypatch, "topics", *b, "--create", "--topic", "cli", "--partitions", "2")[1] == (
        "Created topic cli.\n"
    )
    code, _, err = _run(capsys, monkeypatch, "topics", *b, "--create", "--topic", "cli")
    assert code == 1 and "already exists" in err
    assert "cli\n" in _run(capsys, monkeypatch, "topics", *b, "--list")[1]

    lines = "".join(f"k{i % 3}:v{i}\n" for i in range(30))
    assert _run(capsys, monkeypatch, "produce", *b, "--topic", "cli", "--key-separator", ":", stdin=lines)[0] == 0
    code, out, err = _run(capsys, monkeypatch, "consume", *b, "--topic", "cli", "--from-beginning")
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(30)) and "Processed a total of 30 messages" in err
    code, out, _ = _run(capsys, monkeypatch, "get-offsets", *b, "--topic", "cli")
    ends = {line.rsplit(":", 1)[0]: int(line.rsplit(":", 1)[1]) for line in out.split()}
    assert sum(ends.values()) == 30 and set(ends) == {"cli:0", "cli:1"}
    full = max((0, 1), key=lambda p: ends[f"cli:{p}"])  # three keys: one partition may hold them all

    code, out, _ = _run(
        capsys, monkeypatch, "consume", *b, "--topic", "cli", "--partition", str(full), "--offset", "1", "--json"
    )
    records = [json.loads(line) for line in out.split("\n") if line]
    assert [r["offset"] for r in records] == list(range(1, ends[f"cli:{full}"]))

    assert (
        _run(
            capsys,
            monkeypatch,
            "configs",
            *b,
            "--entity-type",
            "topics",
            "--entity-name",
            "cli",
            "--alter",
            "--add-config",
            "retention.ms=5000",
        )[0]
        == 0
    )
    out = _run(capsys, monkeypatch, "configs", *b, "--entity-type", "topics", "--entity-name", "cli", "--describe")[1]
    assert "retention.ms=5000" in out and "DYNAMIC_TOPIC_CONFIG:retention.ms=5000" in out
    out = _run(capsys, monkeypatch, "topics", *b, "--describe", "--topic", "cli")[1]
    assert "PartitionCount: 2" in out and "Configs: retention.ms=5000" in out and "Leader: 0" in out

    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [{"topic": "cli", "partition": full, "offset": 2}], "version": 1}))
    out = _run(capsys, monkeypatch, "delete-records", *b, "--offset-json-file", str(offsets))[1]
    assert f"partition: cli-{full}\tlow_watermark: 2" in out
    assert (
        _run(capsys, monkeypatch, "get-offsets", *b, "--topic", "cli", "--partitions", str(full), "--time", "earliest")[
            1
        ]
        == f"cli:{full}:2\n"
    )

    assert _run(capsys, monkeypatch, "topics", *b, "--alter", "--topic", "cli", "--partitions", "3")[0] == 0
    assert _run(capsys, monkeypatch, "topics", *b, "--delete", "--topic", "cli")[0] == 0
    code, _, err = _run(capsys, monkeypatch, "consume", *b, "--topic", "cli")
    assert code == 1 and "error:" in err


def test_an_unknown_topic_is_named_by_its_error(seglog_broker, capsys, monkeypatch) -> None:
    code, _, err = _run(
        capsys, monkeypatch, "get-offsets", "--bootstrap-server", seglog_broker.bootstrap_servers, "--topic", "nope"
    )
    assert code == 1 and err.strip() == "error: topic nope: UNKNOWN_TOPIC_OR_PARTITION"


def test_unreachable_broker_is_one_line(capsys, monkeypatch) -> None:
    code, _, err = _run(capsys, monkeypatch, "topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert code == 1 and err.startswith("error: cannot connect to 127.0.0.1:1") and "Traceback" not in err


@pytest.mark.parametrize("argv", [("delete-records",), ("configs", "--entity-type", "topics")])
def test_broker_only_commands_need_the_server(capsys, monkeypatch, argv) -> None:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    assert e.value.code == 2
