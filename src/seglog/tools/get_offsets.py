"""``seglog get-offsets``: offsets by time, one ``topic:partition:offset`` line per
partition (like kafka-get-offsets.sh)."""

from __future__ import annotations

import argparse
from typing import Any

from ..storage import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from .arguments import INT64_MAX, int_between, partition_list
from .logdir import LogDirTopic, add_log_dir_argument, open_log_dirs_read_only

_NAMED = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}


_MILLISECONDS = int_between(MAX_TIMESTAMP, INT64_MAX)


def _time(text: str) -> int:
    """A name, a timestamp in ms, or Kafka's numbers for the names (-1 latest, -2 earliest, -3 max)."""
    if text in _NAMED:
        return _NAMED[text]
    try:
        return _MILLISECONDS(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected earliest, latest, max-timestamp or milliseconds, got {text!r}"
        ) from None


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("get-offsets", help="offsets of a topic's partitions at a time")
    add_log_dir_argument(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=partition_list, help="comma-separated partitions (default: all)")
    p.add_argument(
        "--time",
        type=_time,
        default=LATEST_TIMESTAMP,
        help="earliest, latest (default), max-timestamp, or a timestamp in ms",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with open_log_dirs_read_only(args) as logs:
        return get_offsets(LogDirTopic(logs, args.topic), args)


def get_offsets(source: LogDirTopic, args: argparse.Namespace) -> int:
    partitions = args.partitions if args.partitions else source.partitions()
    found = [(p, source.offset_for_timestamp(p, args.time)) for p in partitions]  # any unknown before a line
    for p, offset in found:
        # Kafka prints no offset when no record is that recent
        print(f"{source.topic}:{p}:{'' if offset is None else offset}")
    return 0
