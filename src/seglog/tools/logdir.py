"""What the log-dir commands share: opening the dir (taking its lock) and parsing key=value."""

from __future__ import annotations

import argparse
import base64
from typing import Any

from ..records import Record
from ..storage import LogManager, open


def add_log_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dir", required=True, action="append", help="a log directory (repeat for several log.dirs)"
    )


def open_log_dirs(args: argparse.Namespace) -> LogManager:
    """Open the dirs as their owner; a dir another process owns raises LogDirLockedError."""
    return open(args.log_dir, background=False)


def parse_configs(items: list[str] | None) -> dict[str, str]:
    """``["a=1,b=2", "c=3"]`` → ``{"a": "1", "b": "2", "c": "3"}`` (Kafka's --add-config syntax;
    a value holding commas goes in square brackets: ``cleanup.policy=[compact,delete]``)."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in _split_outside_brackets(item):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise argparse.ArgumentTypeError(f"expected key=value, got {part!r}")
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


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def record_json(record: Record, timestamp_type: str, **extra: Any) -> dict[str, Any]:
    """The JSON shape of a record, shared by ``consume --json`` and ``dump-log --json``."""
    return {
        "type": "record",
        **extra,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "timestampType": timestamp_type,
        "key": b64(record.key),
        "value": b64(record.value),
        "headers": [{"key": _text(k), "value": b64(v)} for k, v in record.headers],
    }


def _text(key: str) -> str:
    """A header key as Java reads it (UTF-8, bad bytes replaced): a key that is not UTF-8 on disk
    reads back with lone surrogates, which strict JSON parsers refuse."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
