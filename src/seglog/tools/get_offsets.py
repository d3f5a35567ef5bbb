"""``seglog get-offsets``: offsets by time, one ``topic:partition:offset`` line per
partition (like kafka-get-offsets.sh)."""

from __future__ import annotations

import argparse
from typing import Any

from ..storage import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from .logdir import add_log_dir_argument, open_log_dirs

_NAMED = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}


def _time(text: str) -> int:
    if text in _NAMED:
        return _NAMED[text]
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected earliest, latest, max-timestamp or milliseconds") from None


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("get-offsets", help="offsets of a topic's partitions at a time")
    add_log_dir_argument(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", help="comma-separated partitions (default: all)")
    p.add_argument(
        "--time",
        type=_time,
        default=LATEST_TIMESTAMP,
        help="earliest, latest (default), max-timestamp, or a timestamp in ms",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    with open_log_dirs(args) as logs:
        wanted = [int(p) for p in args.partitions.split(",")] if args.partitions else logs.partitions(args.topic)
        for p in wanted:
            found = logs.partition(args.topic, p).offset_for_timestamp(args.time)
            # Kafka prints no offset when no record is that recent
            print(f"{args.topic}:{p}:{'' if found is None else found[0]}")
    return 0
