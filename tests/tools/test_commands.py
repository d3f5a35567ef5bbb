"""The log-dir commands run as a user runs them: topics, produce, consume, get-offsets."""

from __future__ import annotations

import ast
import base64
import fcntl
import json
import os
import subprocess
import sys

import seglog
from seglog.partitioner import partition_for_key


def run(*args, stdin=""):
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args], input=stdin, capture_output=True, text=True, timeout=60
    )


def test_create_produce_consume_and_offsets(tmp_path):
    d = str(tmp_path)
    assert (
        run(
            "topics",
            "--log-dir",
            d,
            "--create",
            "--topic",
            "web",
            "--partitions",
            "3",
            "--config",
            "segment.bytes=20000",
        ).returncode
        == 0
    )
    assert run("topics", "--log-dir", d, "--list").stdout.split() == ["web"]
    lines = "".join(f"user{i}:hit {i}\n" for i in range(300))
    produced = run("produce", "--log-dir", d, "--topic", "web", "--key-separator", ":", stdin=lines)
    assert produced.returncode == 0, produced.stderr
    offsets = dict(line.rsplit(":", 1) for line in run("get-offsets", "--log-dir", d, "--topic", "web").stdout.split())
    assert sum(int(v) for v in offsets.values()) == 300
    for p in range(3):  # keys land where Kafka's default partitioner puts them
        expected = sum(1 for i in range(300) if partition_for_key(b"user%d" % i, 3) == p)
        assert int(offsets[f"web:{p}"]) == expected
    out = run(
        "consume",
        "--log-dir",
        d,
        "--topic",
        "web",
        "--partition",
        "1",
        "--from-beginning",
        "--timeout-ms",
        "0",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
    )
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert [int(r[0].split(":")[1]) for r in rows] == list(range(len(rows)))
    assert all(partition_for_key(r[1].encode(), 3) == 1 and r[2] == "hit " + r[1][4:] for r in rows)
    assert f"Processed a total of {len(rows)} messages" in out.stderr


def test_consume_json_timestamp_and_max_messages(tmp_path):
    d = str(tmp_path)
    with seglog.open(d, background=False) as logs:
        logs.create_topic("t", 1)
        logs.partition("t", 0).append(
            [seglog.Record(b"k%d" % i, b"v%d" % i, 1_000 + i, [("h", b"x")]) for i in range(10)]
        )
    out = run("consume", "--log-dir", d, "--topic", "t", "--timestamp", "1004", "--max-messages", "3", "--json")
    objs = [json.loads(line) for line in out.stdout.splitlines()]
    assert [o["offset"] for o in objs] == [4, 5, 6]
    assert base64.b64decode(objs[0]["value"]) == b"v4" and objs[0]["headers"] == [{"key": "h", "value": "eA=="}]
    assert objs[0]["timestampType"] == "CreateTime" and objs[0]["topic"] == "t"
    latest = run("consume", "--log-dir", d, "--topic", "t", "--timeout-ms", "0")
    assert latest.stdout == "" and "total of 0 messages" in latest.stderr  # starts at the end, as Kafka's
    assert run("get-offsets", "--log-dir", d, "--topic", "t", "--time", "1007").stdout.strip() == "t:0:7"
    assert run("get-offsets", "--log-dir", d, "--topic", "t", "--time", "earliest").stdout.strip() == "t:0:0"


def test_alter_describe_and_delete(tmp_path):
    d = str(tmp_path)
    run("topics", "--log-dir", d, "--create", "--topic", "kv", "--config", "segment.bytes=1000")
    run(
        "produce",
        "--log-dir",
        d,
        "--topic",
        "kv",
        "--key-separator",
        ":",
        "--batch-size",
        "10",
        stdin="".join(f"k{i % 5}:v{i}\n" for i in range(400)),
    )
    altered = run(
        "topics",
        "--log-dir",
        d,
        "--alter",
        "--topic",
        "kv",
        "--add-config",
        "cleanup.policy=compact,min.cleanable.dirty.ratio=0.01",
    )
    assert altered.returncode == 0, altered.stderr
    with seglog.open(d, background=False) as logs:
        assert logs.clean()
    described = json.loads(run("topics", "--log-dir", d, "--describe", "--topic", "kv", "--json").stdout)
    (part,) = described["partitions"]
    assert described["configs"]["cleanup.policy"] == "compact"
    assert part["logStartOffset"] == 0 and part["logEndOffset"] == 400
    assert part["lastCleaning"] and "records removed" in part["lastCleaning"] and part["dirtyRatio"] < 0.5
    assert part["segments"][0]["baseOffset"] == 0
    text = run("topics", "--log-dir", d, "--describe").stdout
    assert "LogStartOffset: 0" in text and "DirtyRatio:" in text and "LastCleaning: " in text
    assert run("topics", "--log-dir", d, "--delete", "--topic", "kv").returncode == 0
    assert run("topics", "--log-dir", d, "--list").stdout == ""


def test_bad_input_and_a_locked_dir(tmp_path):
    d = str(tmp_path)
    bad = run("topics", "--log-dir", d, "--create", "--topic", "../x")
    assert bad.returncode == 1 and "is illegal" in bad.stderr and "Traceback" not in bad.stderr
    assert "unknown topic 'nope'" in run("consume", "--log-dir", d, "--topic", "nope").stderr
    run("topics", "--log-dir", d, "--create", "--topic", "t")
    assert "no partition t-5" in run("consume", "--log-dir", d, "--topic", "t", "--partition", "5").stderr
    fd = os.open(os.path.join(d, ".lock"), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        locked = run("produce", "--log-dir", d, "--topic", "t", stdin="x\n")
        assert locked.returncode == 1 and "in use by another process" in locked.stderr
        assert run("topics", "--log-dir", d, "--list").stdout == "t\n"  # a reader takes no lock
    finally:
        os.close(fd)


def _modules_imported(argv: list[str], prefixes: tuple[str, ...]) -> list[str]:
    probe = (
        f"import sys\nfrom seglog.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in sys.modules if m.startswith({prefixes!r})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.splitlines()[-1])


def test_a_command_imports_only_its_own_module():
    # `seglog dump-log` (and every log-dir command) starts without the broker's and the console's
    # hundreds of modules; the console and the commands' --bootstrap-server forms talk to brokers
    # through client/ and load no broker either; `seglog --help` still lists every command
    assert _modules_imported(["dump-log", "--help"], ("seglog.broker", "seglog.console")) == []
    for command in ("console", "configs", "topics"):
        assert _modules_imported([command, "--help"], ("seglog.broker",)) == [], command
    listed = run("--help").stdout
    for command in ("dump-log", "broker", "console", "configs", "reassign-partitions"):
        assert command in listed
