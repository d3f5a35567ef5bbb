"""What the commands' arguments may be, and how a mistake in them is reported.

A mistake in the command line ends the command with one line, ``error: ...``,
and exit code 2, whether argparse finds it (a missing or unknown option, a
number that is not one) or the command does once its arguments are parsed
(``UsageError``: options that do not go together, a ``key=value`` without
``=``). Runtime errors (an unknown topic, an offset outside the log) exit 1.

Numbers are checked against the Java types Kafka's tools parse them into:
partition ids and counts are int32, offsets and timestamps int64.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from ..client import PLAINTEXT, ClientSecurity, client_security
from ..errors import InvalidConfigurationError
from ..properties import parse_properties

INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1
USAGE_EXIT = 2  # argparse's own, for every mistake in the command line


class UsageError(Exception):
    """A mistake in the command line found after parsing it."""


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that reports a mistake in one line, as every other error of the command."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_EXIT, f"error: {message} (see {self.prog} --help)\n")


def int_between(low: int, high: int) -> Callable[[str], int]:
    """An argument type: an integer in [low, high]."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer from {low} to {high}, got {text!r}")
        return value

    return parse


partition_id = int_between(0, INT32_MAX)
partition_count = int_between(1, INT32_MAX)
offset = int_between(0, INT64_MAX)
timestamp = int_between(0, INT64_MAX)
message_count = int_between(0, INT32_MAX)
batch_size = int_between(1, INT32_MAX)
milliseconds = int_between(0, INT32_MAX)


def partition_list(text: str) -> list[int]:
    """``0,2,5``: partition ids, comma-separated."""
    return [partition_id(part.strip()) for part in text.split(",")]


def log_dir(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("an empty path is not a log dir")
    return text


def parse_configs(items: list[str] | None) -> dict[str, str]:
    """``["a=1,b=2", "c=3"]`` → ``{"a": "1", "b": "2", "c": "3"}`` (Kafka's --add-config syntax;
    a value holding commas goes in square brackets: ``cleanup.policy=[compact,delete]``)."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in _split_outside_brackets(item):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise UsageError(f"expected key=value, got {part!r}")
            out[key.strip()] = value.strip().strip("[]")
    return out


def _split_outside_brackets(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in parts if p.strip()]


def add_bootstrap_server(p: argparse.ArgumentParser, help: str = "the broker to talk to") -> None:
    """``--bootstrap-server`` and, as Kafka's tools take it beside, ``--command-config``."""
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help=help)
    p.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties: security.protocol, sasl.mechanism, sasl.username/password or sasl.jaas.config, ssl.*",
    )


def command_security(args: argparse.Namespace) -> ClientSecurity:
    """The security settings of ``--command-config`` (plaintext without one)."""
    path = getattr(args, "command_config", None)
    if path is None:
        return PLAINTEXT
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InvalidConfigurationError(f"--command-config: cannot read {path}: {e.strerror}") from None
    try:
        return client_security(parse_properties(text, path))
    except InvalidConfigurationError as e:
        raise e.at(file=path) from None
