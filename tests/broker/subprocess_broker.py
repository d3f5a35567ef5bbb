"""A ``seglog broker`` child process for the tests that kill or signal it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


class BrokerProcess:
    def __init__(self, log_dir: Path, *overrides: str, config: Path | None = None) -> None:
        self.log_dir = log_dir
        args = [sys.executable, "-m", "seglog.cli", "broker", "--override", f"log.dirs={log_dir}"]
        args += ["--override", "listeners=PLAINTEXT://127.0.0.1:0"]
        if config is not None:
            args += ["--config", str(config)]
        for o in overrides:
            args += ["--override", o]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if not line.startswith("serving on "):
            self.proc.kill()
            _, err = self.proc.communicate(timeout=30)
            raise RuntimeError(f"the broker did not start: {line!r} {err}")
        self.bootstrap_servers = line.split()[-1]

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)

    def terminate(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=60)
        return self.proc.returncode, err

    def __enter__(self) -> BrokerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def run_broker(log_dir: Path, *overrides: str) -> subprocess.CompletedProcess[str]:
    """A broker that is expected to fail at start: its exit code and output."""
    args = [sys.executable, "-m", "seglog.cli", "broker", "--override", f"log.dirs={log_dir}"]
    args += ["--override", "listeners=PLAINTEXT://127.0.0.1:0"]
    for o in overrides:
        args += ["--override", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=dict(os.environ))
