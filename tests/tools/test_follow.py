"""``seglog consume`` follows a log as Kafka's console consumer does: a consumer process
reads the dir without its lock, another process (``seglog produce``) appends, the new
records show up, across segment rolls; SIGINT ends it with the count and exit 0."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading

import seglog

HANG_GUARD_S = 60  # only so that a broken follower fails the test instead of hanging it


def seglog_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "seglog", *args]


def produce(log_dir: str, lines: list[str], *extra: str) -> None:
    done = subprocess.run(
        seglog_cmd("produce", "--log-dir", log_dir, "--topic", "t", *extra),
        input="".join(f"{line}\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0, done.stderr


class Follower:
    """A ``seglog consume`` process whose output lines are read as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            seglog_cmd("consume", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def lines(self, n: int) -> list[str]:
        got: list[str] = []
        while len(got) < n:
            line = self._lines.get(timeout=HANG_GUARD_S)
            assert line is not None, f"the consumer ended after {got}: {self.stop()}"
            got.append(line)
        return got

    def stop(self) -> tuple[int, str]:
        """SIGINT, as Ctrl-C sends; the exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        _, err = self.process.communicate(timeout=HANG_GUARD_S)
        return self.process.returncode, err


def new_topic(path, config: dict | None = None) -> str:
    with seglog.open(str(path), background=False) as logs:
        logs.create_topic("t", 1, config or {})
        logs.partition("t", 0).append([seglog.Record(None, b"old%d" % i) for i in range(3)])
    return str(path)


def test_a_following_consumer_prints_what_another_process_produces(tmp_path):
    log_dir = new_topic(tmp_path)
    follower = Follower("--log-dir", log_dir, "--topic", "t", "--from-beginning")
    try:
        assert follower.lines(3) == ["old0", "old1", "old2"]  # then it waits, holding no lock
        produce(log_dir, ["new0", "new1"])
        assert follower.lines(2) == ["new0", "new1"]
        produce(log_dir, ["new2"])
        assert follower.lines(1) == ["new2"]
    finally:
        code, err = follower.stop()
    assert code == 0 and err.splitlines()[-1] == "Processed a total of 6 messages", err
    assert "Traceback" not in err


def test_a_following_consumer_reads_on_across_rolled_segments(tmp_path):
    log_dir = new_topic(tmp_path, {"segment.bytes": 500})
    follower = Follower("--log-dir", log_dir, "--topic", "t", "--partition", "0", "--offset", "3")
    try:
        lines = [f"line {i:04d} " + "x" * 40 for i in range(120)]
        produce(log_dir, lines[:60], "--batch-size", "3")
        assert follower.lines(60) == lines[:60]
        produce(log_dir, lines[60:], "--batch-size", "7")
        assert follower.lines(60) == lines[60:]
        with seglog.open(log_dir, read_only=True) as logs:
            assert len(logs.partition("t", 0).segments) > 10
    finally:
        code, err = follower.stop()
    assert code == 0 and "Processed a total of 120 messages" in err, err


def test_timeout_ms_ends_a_consumer_that_gets_no_message(tmp_path):
    log_dir = new_topic(tmp_path)
    done = subprocess.run(
        seglog_cmd("consume", "--log-dir", log_dir, "--topic", "t", "--from-beginning", "--timeout-ms", "200"),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0 and done.stdout.split() == ["old0", "old1", "old2"]
    assert done.stderr.splitlines()[-1] == "Processed a total of 3 messages"


def test_max_messages_alone_stops_at_the_log_end(tmp_path):
    log_dir = new_topic(tmp_path)
    done = subprocess.run(
        seglog_cmd("consume", "--log-dir", log_dir, "--topic", "t", "--from-beginning", "--max-messages", "10"),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert done.returncode == 0 and done.stdout.split() == ["old0", "old1", "old2"], done.stderr
