"""Every subcommand run with malformed arguments: one line ``error: ...`` on stderr, never a
traceback; exit code 2 for a mistake in the command line, 1 for an error at run time (an
unknown topic, an offset outside the log, a log dir that is not there)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

import seglog
from seglog.cli import main

D, F, M = "{dir}", "{file}", "{missing}"  # a log dir, a regular file, a path that is not there
BAD = os.fsdecode(b"t\xff")  # a non-UTF-8 argument, as Python decodes argv
INT32_OVER, INT64_OVER = str(1 << 31), str(1 << 63)

CASES = [
    # the command itself
    ([], 2, "required: COMMAND"),
    (["bogus"], 2, "invalid choice"),
    (["--verbose"], 2, "required: COMMAND"),
    # topics
    (["topics", "--list"], 2, "--log-dir"),
    (["topics", "--log-dir", D], 2, "one of the arguments"),
    (["topics", "--log-dir", D, "--list", "--create"], 2, "not allowed with"),
    (["topics", "--log-dir", ""], 2, "empty path"),
    (["topics", "--log-dir", D, "--create"], 2, "--topic is required"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--config", "foo"], 2, "expected key=value"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--config", "=1"], 2, "expected key=value"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--config", "segment.bytes=abc"], 1, "segment.bytes"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--config", "no.such.key=1"], 1, "no.such.key"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--partitions", "two"], 2, "--partitions"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--partitions", "0"], 2, "from 1 to"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--partitions", "-1"], 2, "--partitions"),
    (["topics", "--log-dir", D, "--create", "--topic", "x", "--partitions", INT32_OVER], 2, "from 1 to 2147483647"),
    (["topics", "--log-dir", D, "--create", "--topic", "t"], 1, "already exists"),
    (["topics", "--log-dir", D, "--create", "--topic", "../x"], 1, "illegal"),
    (["topics", "--log-dir", D, "--create", "--topic", BAD], 1, "illegal"),
    (["topics", "--log-dir", D, "--list", "--partitions", "3"], 2, "--partitions goes with --create"),
    (["topics", "--log-dir", D, "--list", "--json"], 2, "--json goes with --describe"),
    (["topics", "--log-dir", D, "--describe", "--add-config", "a=1"], 2, "--add-config goes with --alter"),
    (["topics", "--log-dir", D, "--alter", "--topic", "t"], 2, "needs --add-config or --delete-config"),
    (["topics", "--log-dir", D, "--alter", "--topic", "t", "--add-config", "foo"], 2, "expected key=value"),
    (["topics", "--log-dir", D, "--alter", "--topic", "t", "--add-config", "a=1,foo"], 2, "expected key=value"),
    (["topics", "--log-dir", D, "--alter", "--topic", "nope", "--add-config", "retention.ms=1"], 1, "nope"),
    (["topics", "--log-dir", D, "--alter", "--topic", "t", "--add-config", "retention.ms=x"], 1, "retention.ms"),
    (["topics", "--log-dir", D, "--delete", "--topic", "nope"], 1, "nope"),
    (["topics", "--log-dir", D, "--describe", "--topic", "nope"], 1, "unknown topic 'nope'"),
    (["topics", "--log-dir", D, "--describe", "--topic", BAD], 1, "unknown topic"),
    (["topics", "--log-dir", M, "--list"], 1, "no log dir at"),
    (["topics", "--log-dir", M, "--describe"], 1, "no log dir at"),
    (["topics", "--log-dir", F, "--list"], 1, "is a file, not a log dir"),
    (["topics", "--log-dir", F, "--create", "--topic", "x"], 1, "is a file, not a log dir"),
    # produce
    (["produce", "--log-dir", D], 2, "--topic"),
    (["produce", "--log-dir", D, "--topic", "nope"], 1, "unknown topic 'nope'"),
    (["produce", "--log-dir", D, "--topic", "t", "--partition", "x"], 2, "--partition"),
    (["produce", "--log-dir", D, "--topic", "t", "--partition", "-1"], 2, "from 0 to"),
    (["produce", "--log-dir", D, "--topic", "t", "--partition", INT32_OVER], 2, "from 0 to 2147483647"),
    (["produce", "--log-dir", D, "--topic", "t", "--partition", "7"], 1, "no partition t-7"),
    (["produce", "--log-dir", D, "--topic", "t", "--compression", "foo"], 2, "invalid choice"),
    (["produce", "--log-dir", D, "--topic", "t", "--batch-size", "0"], 2, "--batch-size"),
    (["produce", "--log-dir", D, "--topic", "t", "--batch-size", "many"], 2, "--batch-size"),
    (["produce", "--log-dir", D, "--topic", "t", "--batch-size", INT64_OVER], 2, "--batch-size"),
    (["produce", "--log-dir", D, "--topic", "t", "--key-separator", ""], 2, "cannot be empty"),
    (["produce", "--log-dir", F, "--topic", "t"], 1, "is a file, not a log dir"),
    # consume
    (["consume", "--log-dir", D], 2, "--topic"),
    (["consume", "--log-dir", D, "--topic", "nope"], 1, "unknown topic 'nope'"),
    (["consume", "--log-dir", D, "--topic", BAD], 1, "unknown topic"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "9"], 1, "no partition t-9"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "x"], 2, "--partition"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "-1"], 2, "--partition"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", INT32_OVER], 2, "--partition"),
    (["consume", "--log-dir", D, "--topic", "t", "--offset", "1"], 2, "--offset needs --partition"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "0", "--offset", "-1"], 2, "--offset"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "0", "--offset", "x"], 2, "--offset"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "0", "--offset", INT64_OVER], 2, "--offset"),
    (["consume", "--log-dir", D, "--topic", "t", "--partition", "0", "--offset", "6"], 1, "out of range"),
    (["consume", "--log-dir", D, "--topic", "t", "--from-beginning", "--timestamp", "1"], 2, "not allowed with"),
    (["consume", "--log-dir", D, "--topic", "t", "--timestamp", "-5"], 2, "--timestamp"),
    (["consume", "--log-dir", D, "--topic", "t", "--timestamp", INT64_OVER], 2, "--timestamp"),
    (["consume", "--log-dir", D, "--topic", "t", "--max-messages", "-1"], 2, "--max-messages"),
    (["consume", "--log-dir", D, "--topic", "t", "--max-messages", "ten"], 2, "--max-messages"),
    (["consume", "--log-dir", D, "--topic", "t", "--timeout-ms", "-1"], 2, "--timeout-ms"),
    (["consume", "--log-dir", D, "--topic", "t", "--timeout-ms", INT64_OVER], 2, "--timeout-ms"),
    (["consume", "--log-dir", D, "--topic", "t", "--property", "print.key"], 2, "key=value"),
    (["consume", "--log-dir", D, "--topic", "t", "--property", "print.key=maybe"], 2, "true or false"),
    (["consume", "--log-dir", D, "--topic", "t", "--property", "print.keys=true"], 2, "unknown property"),
    (["consume", "--log-dir", M, "--topic", "t"], 1, "no log dir at"),
    (["consume", "--log-dir", F, "--topic", "t"], 1, "is a file, not a log dir"),
    # get-offsets
    (["get-offsets", "--log-dir", D], 2, "--topic"),
    (["get-offsets", "--log-dir", D, "--topic", "nope"], 1, "unknown topic 'nope'"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--partitions", "a,b"], 2, "--partitions"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--partitions", "0,,1"], 2, "--partitions"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--partitions", "-1"], 2, "--partitions"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--partitions", "0,9"], 1, "no partition t-9"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--time", "yesterday"], 2, "--time"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--time", "-7"], 2, "--time"),
    (["get-offsets", "--log-dir", D, "--topic", "t", "--time", INT64_OVER], 2, "--time"),
    (["get-offsets", "--log-dir", M, "--topic", "t"], 1, "no log dir at"),
    # dump-log (its faults in a file are its report, on stdout, and exit 1)
    (["dump-log"], 2, "--files"),
    (["dump-log", "--files", ""], 2, "names no file"),
    (["dump-log", "--files", ","], 2, "names no file"),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    root = tmp_path_factory.mktemp("malformed")
    with seglog.open(str(root / "logs"), background=False) as logs:
        logs.create_topic("t", 2)
        logs.partition("t", 0).append([seglog.Record(None, b"v%d" % i) for i in range(5)])
    (root / "file").write_bytes(b"not a dir")
    return {"dir": str(root / "logs"), "file": str(root / "file"), "missing": str(root / "missing")}


def fill(argv: list[str], places: dict[str, str]) -> list[str]:
    return [arg.format(**places) if arg in (D, F, M) else arg for arg in argv]


def check(code: int, out: str, err: str, expected_code: int, fragment: str) -> None:
    assert "Traceback" not in out + err
    assert code == expected_code, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert fragment in err


@pytest.mark.parametrize(("argv", "code", "fragment"), CASES, ids=[" ".join(c[0]) or "(none)" for c in CASES])
def test_malformed_arguments(argv, code, fragment, places, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    try:
        got = main(fill(argv, places))
    except SystemExit as e:  # argparse exits
        got = e.code
    out, err = capsys.readouterr()
    check(got, out, err, code, fragment)
    assert not os.path.exists(places["missing"])  # no command made a dir of a missing path


@pytest.mark.parametrize(
    "argv",
    [
        ["topics", "--log-dir", D, "--create", "--topic", "x", "--config", "foo"],
        ["topics", "--log-dir", D, "--alter", "--topic", "t", "--add-config", "foo"],
        ["consume", "--log-dir", D, "--topic", "t", "--property", "print.key"],
        ["get-offsets", "--log-dir", D, "--topic", "t", "--partitions", "a,b"],
    ],
)
def test_the_reported_tracebacks_are_one_line_errors_in_a_real_process(argv, places):
    done = subprocess.run(
        [sys.executable, "-m", "seglog", *fill(argv, places)], capture_output=True, text=True, timeout=60
    )
    check(done.returncode, done.stdout, done.stderr, 2, "")


def test_non_utf8_arguments_in_a_real_process(places):
    """argv bytes that are not UTF-8 (a topic, a log dir, a separator) reach the messages
    escaped, not as a UnicodeEncodeError."""
    seglog_cmd = os.path.join(os.path.dirname(sys.executable), "seglog")
    log_dir = os.fsencode(places["dir"])
    for argv, code, fragment in [
        ([b"consume", b"--log-dir", log_dir, b"--topic", b"t\xff"], 1, "unknown topic 't\\udcff'"),
        ([b"topics", b"--log-dir", log_dir + b"\xff", b"--describe"], 1, "no log dir at"),
        ([b"topics", b"--log-dir", log_dir, b"--create", b"--topic", b"\xff"], 1, "illegal"),
    ]:
        done = subprocess.run([seglog_cmd, *argv], capture_output=True, timeout=60)
        check(done.returncode, done.stdout.decode(), done.stderr.decode(errors="replace"), code, fragment)
    consume = [seglog_cmd, "consume", "--log-dir", log_dir, "--topic", "t", "--partition", "0", "--from-beginning"]
    sep = subprocess.run(
        [*consume, "--timeout-ms", "0", "--property", "print.key=true", b"--property", b"key.separator=\xff"],
        capture_output=True,
        timeout=60,
    )
    assert sep.returncode == 0 and sep.stdout.splitlines()[0] == b"null\xffv0", sep.stderr


def test_produce_stops_at_a_line_without_the_key_separator(tmp_path):
    with seglog.open(str(tmp_path), background=False) as logs:
        logs.create_topic("t", 1)
    done = subprocess.run(
        [sys.executable, "-m", "seglog", "produce", "--log-dir", str(tmp_path), "--topic", "t", "--key-separator", ":"],
        input=b"a:1\nb:2\nc:3\nnone\nd:4\n",
        capture_output=True,
        timeout=60,
    )
    err = done.stderr.decode()
    check(done.returncode, done.stdout.decode(), err, 1, "no key separator b':' in line 4")
    with seglog.open(str(tmp_path), read_only=True) as logs:  # the lines before it were appended
        got = [(r.key, r.value) for r in logs.partition("t", 0).records()]
    assert got == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
