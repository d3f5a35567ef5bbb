"""SIGKILL a real process while it compacts; the reopened log is as before or after the cleaning.

A child process opens a prepared log dir and cleans it. It dies by SIGKILL either at its
k-th file operation that changes something (write, fsync, rename, unlink, truncate...), k
drawn at random, or at a random moment chosen by the parent (the child then pauses a
millisecond at each such operation, to stretch the windows between them). The parent
reopens the dir (an unclean shutdown: recovery runs) and checks it.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import seglog
from seglog.records import Compression, Record, build_batch, end_transaction_marker

NOW = 1_700_000_000_000
TOPIC_CONFIG = {"cleanup.policy": "compact", "delete.retention.ms": 1000, "segment.bytes": 1 << 20}
CLEAN_AT = NOW + 5000  # the children clean at this time: tombstones stamped at NOW have expired

CHILD = r"""
import os, signal, sys, time
import seglog
from seglog.storage import fileio

directory, kill_at, pause, now = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
MUTATING = {"write", "fsync", "rename", "unlink", "truncate", "allocate", "mkdir"}
count = 0
check = fileio.faults.check

def counting(op, path):
    global count
    if op in MUTATING:
        count += 1
        if count == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        if pause:
            time.sleep(pause)
    check(op, path)

logs = seglog.open(directory, clock=lambda: now, background=False)
fileio.faults.check = counting
print("READY", flush=True)
logs.clean(force=True)
fileio.faults.check = check
print("DONE", count, flush=True)
os._exit(0)  # no clean shutdown either: only the cleaning is under test
"""


def view(log) -> list[tuple]:
    return [(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in log.records()]


def build(directory: Path) -> None:
    with seglog.open(str(directory), clock=lambda: NOW, background=False) as logs:
        logs.create_topic("c", 1, TOPIC_CONFIG)
        log = logs.partition("c", 0)
        rng = random.Random(7)
        for i in range(400):
            key = b"k%d" % rng.randrange(40)
            value = None if rng.random() < 0.1 else b"v%d" % i * rng.randrange(1, 8)
            log.append([Record(key, value, NOW + i, [("h", b"%d" % i)])], compression=Compression.LZ4)
            if i == 150:  # a producer's batches and an aborted transaction
                log.append([Record(b"p", b"1", NOW)], producer_id=3, producer_epoch=0, base_sequence=0)
                txn = build_batch([(b"k1", b"aborted", NOW)], producer_id=4, producer_epoch=0, transactional=True)
                log.append_batches(txn)
                abort = build_batch(
                    [end_transaction_marker(False, timestamp=NOW)],
                    producer_id=4,
                    producer_epoch=0,
                    transactional=True,
                    control=True,
                )
                log.append_batches(abort, origin="coordinator")
            if i % 100 == 99:
                log.roll()
        # a first cleaning at NOW stamps the tombstones with a horizon of NOW + 1000
        logs.clean(force=True)
        for i in range(200):
            log.append([Record(b"k%d" % (i % 50), b"w%d" % i, NOW + 1000 + i)])
            if i % 70 == 69:
                log.roll()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    d = tmp_path_factory.mktemp("pristine")
    build(d)
    with seglog.open(str(d), clock=lambda: CLEAN_AT, background=False) as logs:
        before = view(logs.partition("c", 0))
    ref = tmp_path_factory.mktemp("ref") / "dir"
    shutil.copytree(d, ref)
    with seglog.open(str(ref), clock=lambda: CLEAN_AT, background=False) as logs:
        logs.clean(force=True)
        after = view(logs.partition("c", 0))
    assert before != after
    return d, before, after


def run_child(directory: Path, kill_at: int, pause: float = 0.0, kill_after: float | None = None):
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(directory), str(kill_at), str(pause), str(CLEAN_AT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready.startswith("READY"), proc.stderr.read() if proc.stderr else ready
    start = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err, time.monotonic() - start


@pytest.mark.slow
def test_sigkill_while_cleaning(pristine, tmp_path):
    source, before, after = pristine
    # a calibration run: how many changing file operations, and how long, a cleaning takes
    calib = tmp_path / "calibration"
    shutil.copytree(source, calib)
    code, out, err, paused_seconds = run_child(calib, 0, pause=0.001)
    assert code == 0, err
    total = int(out.split()[-1])
    assert total > 20
    rng = random.Random()
    kills = states = 0
    seen = set()
    runs = 0
    started = time.monotonic()
    while runs < 40 and (runs < 24 or time.monotonic() - started < 40):
        runs += 1
        d = tmp_path / f"run{runs}"
        shutil.copytree(source, d)
        if runs % 3:
            code, _, err, _ = run_child(d, rng.randint(1, total))
        else:
            code, _, err, _ = run_child(d, 0, pause=0.001, kill_after=rng.uniform(0, paused_seconds))
        assert code in (0, -signal.SIGKILL), err
        kills += code == -signal.SIGKILL
        with seglog.open(str(d), clock=lambda: CLEAN_AT, background=False) as logs:
            log = logs.partition("c", 0)
            got = view(log)
            assert got in (before, after), f"run {runs}: the log is neither before nor after the cleaning"
            seen.add(got == after)
            leftovers = [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
            assert not leftovers
            # and the log cleans on to the same result
            logs.clean(force=True)
            assert view(log) == after
            states += 1
        shutil.rmtree(d)
    assert kills >= 20 and seen == {False, True}
