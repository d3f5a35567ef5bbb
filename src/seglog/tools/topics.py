"""``seglog topics``: create, list, describe, alter and delete topics of a log dir
(modeled on Kafka's kafka-topics.sh, with kafka-configs.sh's --alter)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from ..storage import LogManager, PartitionLog
from ..storage.cleaner import CleanerStats
from .arguments import UsageError, parse_configs, partition_count
from .logdir import add_log_dir_argument, open_log_dirs, open_log_dirs_read_only

# options that go with one action only, as kafka-topics.sh checks them
_ACTION_OF = {"partitions": "create", "config": "create", "add_config": "alter", "delete_config": "alter"}


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter or delete topics of a log dir")
    add_log_dir_argument(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic", help="the topic (describe: all topics when omitted)")
    p.add_argument("--partitions", type=partition_count, help="partition count for --create (default num.partitions)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config for --create")
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]", help="for --alter")
    p.add_argument("--delete-config", action="append", metavar="KEY", help="for --alter")
    p.add_argument("--json", action="store_true", help="--describe as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    _check_options(args)
    if args.list or args.describe:
        with open_log_dirs_read_only(args) as logs:
            if args.list:
                for topic in logs.topics():
                    print(topic)
            else:
                describe(logs, [args.topic] if args.topic else logs.topics(), args.json)
        return 0
    configs = parse_configs(args.config)
    added = parse_configs(args.add_config)
    deletes = [k for item in args.delete_config or [] for k in item.split(",") if k]
    with open_log_dirs(args) as logs:
        if args.create:
            logs.create_topic(args.topic, args.partitions, configs)
            print(f"Created topic {args.topic}.")
        elif args.delete:
            logs.delete_topic(args.topic)
            print(f"Topic {args.topic} is marked for deletion.")
        else:
            logs.alter_topic_config(args.topic, added, deletes)
            print(f"Completed updating config for topic {args.topic}.")
    return 0


def _check_options(args: argparse.Namespace) -> None:
    if (args.create or args.alter or args.delete) and not args.topic:
        raise UsageError("--topic is required with --create, --alter and --delete")
    for option, action in _ACTION_OF.items():
        if getattr(args, option) is not None and not getattr(args, action):
            raise UsageError(f"--{option.replace('_', '-')} goes with --{action} only")
    if args.json and not args.describe:
        raise UsageError("--json goes with --describe only")
    if args.alter and not (args.add_config or args.delete_config):
        raise UsageError("--alter needs --add-config or --delete-config")


def describe(logs: LogManager, topics: list[str], as_json: bool) -> None:
    for topic in topics:
        config = logs.topic_config(topic)
        partitions = [logs.partition(topic, p) for p in logs.partitions(topic)]
        if as_json:
            print(
                json.dumps(
                    {
                        "topic": topic,
                        "configs": _jsonable(config.overrides),
                        "partitions": [partition_info(logs, pl) for pl in partitions],
                    }
                )
            )
            continue
        overrides = ",".join(f"{k}={_text(v)}" for k, v in sorted(config.overrides.items()))
        print(f"Topic: {topic}\tPartitionCount: {len(partitions)}\tConfigs: {overrides}")
        for pl in partitions:
            info = partition_info(logs, pl)
            print("\t" + "\t".join(f"{_label(k)}: {v}" for k, v in info.items() if k != "segments"))
            for seg in info["segments"]:
                print("\t\t" + "\t".join(f"{_label(k)}: {v}" for k, v in seg.items()))


def partition_info(logs: LogManager, pl: PartitionLog) -> dict[str, Any]:
    state = logs.cleaning_state(pl.topic, pl.partition)
    return {
        "partition": pl.partition,
        "logStartOffset": pl.log_start_offset,
        "logEndOffset": pl.log_end_offset,
        "highWatermark": pl.high_watermark,
        "size": pl.size_in_bytes,
        "dirtyRatio": round(state.dirty_ratio, 4),
        "lastCleaning": _cleaning(state.last),
        "uncleanable": state.uncleanable,
        "dir": pl.dir,
        "segments": [
            {
                "baseOffset": s.base_offset,
                "size": s.size,
                "indexEntries": s.offset_index.entries,
                "timeIndexEntries": s.time_index.entries,
                "largestTimestamp": s.max_timestamp,
            }
            for s in pl.segments
        ],
    }


def _cleaning(stats: CleanerStats | None) -> str | None:
    """The cleaner's last round, in a line: when, what it read and kept."""
    if stats is None:
        return None
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stats.start_ms / 1000))
    return (
        f"{when} offsets {stats.first_dirty_offset}..{stats.end_offset - 1}: {stats.bytes_read} -> "
        f"{stats.bytes_written} bytes, {stats.records_removed} records removed, {stats.seconds:.3f} s"
    )


def _label(key: str) -> str:
    return key[0].upper() + key[1:]


def _text(value: Any) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _jsonable(config: dict[str, Any]) -> dict[str, Any]:
    return {k: _text(v) if isinstance(v, tuple) else v for k, v in config.items()}
