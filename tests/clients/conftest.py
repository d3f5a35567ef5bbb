"""Kafka clients beyond the Python ones, each against a real seglog broker: kcat (librdkafka as
Debian ships it), kafkajs (npm) and Sarama (Debian's Go package). The Go and JavaScript clients
are small programs here (``go/sarama_client.go``, ``js/kafkajs_client.js``) that take a list of
operations as JSON on stdin and print what each returned; the tests say what to do and check
every value, key, header, timestamp and offset.

A client whose toolchain is missing skips its tests, saying what to install; under CI
(``CI`` set), where ``make install`` installs them, a missing one fails instead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import pytest

HERE = Path(__file__).parent
JS = HERE / "js"
GO_SOURCE = HERE / "go" / "sarama_client.go"
# Debian's Go packages, found without modules (there is no module proxy to ask)
GO_ENV = {"GO111MODULE": "off", "GOPATH": "/usr/share/gocode", "GOFLAGS": ""}
SARAMA = Path(GO_ENV["GOPATH"]) / "src/github.com/Shopify/sarama"
BASE_TS = 1_700_000_000_000


def missing(what: str, install: str) -> NoReturn:
    """Skip (or, under CI, fail): a client's toolchain is not installed."""
    message = f"{what} is not installed ({install}; `make install` does it as root)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: CI must have it")
    pytest.skip(message)


def records(n: int, tag: str) -> list[dict[str, Any]]:
    """``n`` records as the client programs take them: null and non-ASCII keys and values,
    repeated and empty headers, timestamps 10 ms apart from BASE_TS."""
    out = []
    for i in range(n):
        headers = [["h", f"{tag}-{i}"], ["h", "again"]] if i % 3 == 0 else [] if i % 3 == 1 else [["only", ""]]
        out.append(
            {
                "key": None if i % 5 == 4 else f"key-{i}",
                "value": None if i % 7 == 6 else f"{tag} value {i} é€ " + "x" * (i % 40),
                "headers": headers,
                "timestamp": BASE_TS + 10 * i,
            }
        )
    return out


def round_trip(topic: str, codec: str, read: str, earliest: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ops of one codec's round trip, and the records with the offsets they should come back
    with: create ``topic`` (2 partitions), produce 30 records at acks 1 then 25 at acks all to
    partition 1, read them with op ``read`` from ``earliest`` (the client's word for it) and the
    last 18 from offset 37."""
    acks_1, acks_all = records(30, f"{codec}-1"), records(25, f"{codec}-all")
    produce = {"op": "produce", "topic": topic, "partition": 1, "compression": codec}
    ops = [
        {"op": "create_topic", "topic": topic, "partitions": 2},
        {**produce, "acks": 1, "records": acks_1},
        {**produce, "acks": -1, "records": acks_all},
        {"op": read, "topic": topic, "partition": 1, "offset": earliest, "count": 55},
        {"op": read, "topic": topic, "partition": 1, "offset": 37, "count": 18},
    ]
    return ops, [{**r, "offset": i} for i, r in enumerate(acks_1 + acks_all)]


def run_ops(command: Sequence[str], request: dict[str, Any], timeout: float = 120) -> list[dict[str, Any]]:
    """Run a client program on ``request``; its list of per-op outcomes."""
    done = subprocess.run(
        list(command), input=json.dumps(request), capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{command[0]} failed ({done.returncode}): {done.stderr[-3000:]}"
    outcomes = json.loads(done.stdout)
    assert len(outcomes) == len(request["ops"])
    return outcomes


def results(outcomes: list[dict[str, Any]]) -> list[Any]:
    """The results of ops that all succeeded."""
    errors = [(i, o["error"]) for i, o in enumerate(outcomes) if "error" in o]
    assert errors == [], errors
    return [o.get("result") for o in outcomes]


@pytest.fixture(scope="session")
def kafkajs_command() -> list[str]:
    node = shutil.which("node")
    if node is None:
        missing("Node.js", "apt-get install nodejs npm")
    if not (JS / "node_modules" / "kafkajs").is_dir():
        missing("kafkajs", f"npm ci --prefix {JS}")
    return [node, str(JS / "kafkajs_client.js")]


@pytest.fixture(scope="session")
def sarama_command(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The Sarama program, built once per session (Go's build cache keeps later builds short)."""
    go = shutil.which("go")
    if go is None or not SARAMA.is_dir():
        missing("Go with Sarama", "apt-get install golang-go golang-github-shopify-sarama-dev")
    binary = tmp_path_factory.mktemp("sarama") / "sarama_client"
    env = {**os.environ, **GO_ENV}
    built = subprocess.run(
        [go, "build", "-o", str(binary), str(GO_SOURCE)], env=env, capture_output=True, text=True, timeout=600
    )
    assert built.returncode == 0, f"go build failed: {built.stderr[-3000:]}"
    return [str(binary)]


def kcat_path() -> str:
    kcat = shutil.which("kcat")
    if kcat is None:
        missing("kcat", "apt-get install kcat")
    return kcat
