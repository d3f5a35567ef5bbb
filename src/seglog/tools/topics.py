"""``seglog topics``: create, list, describe, alter and delete topics of a log dir
(modeled on Kafka's kafka-topics.sh, with kafka-configs.sh's --alter)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..storage import LogManager, PartitionLog
from .logdir import add_log_dir_argument, open_log_dirs, parse_configs


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter or delete topics of a log dir")
    add_log_dir_argument(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic", help="the topic (describe: all topics when omitted)")
    p.add_argument("--partitions", type=int, help="partition count for --create (default num.partitions)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config for --create")
    p.add_argument("--add-config", action="append", metavar="KEY=VALUE[,KEY=VALUE]", help="for --alter")
    p.add_argument("--delete-config", action="append", metavar="KEY", help="for --alter")
    p.add_argument("--json", action="store_true", help="--describe as JSON")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if (args.create or args.alter or args.delete) and not args.topic:
        raise SystemExit("error: --topic is required with --create, --alter and --delete")
    with open_log_dirs(args) as logs:
        if args.create:
            logs.create_topic(args.topic, args.partitions, parse_configs(args.config))
            print(f"Created topic {args.topic}.")
        elif args.list:
            for topic in logs.topics():
                print(topic)
        elif args.delete:
            logs.delete_topic(args.topic)
            print(f"Topic {args.topic} is marked for deletion.")
        elif args.alter:
            deletes = [k for item in args.delete_config or [] for k in item.split(",") if k]
            logs.alter_topic_config(args.topic, parse_configs(args.add_config), deletes)
            print(f"Completed updating config for topic {args.topic}.")
        else:
            describe(logs, [args.topic] if args.topic else logs.topics(), args.json)
    return 0


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
                        "partitions": [partition_info(pl) for pl in partitions],
                    }
                )
            )
            continue
        overrides = ",".join(f"{k}={_text(v)}" for k, v in sorted(config.overrides.items()))
        print(f"Topic: {topic}\tPartitionCount: {len(partitions)}\tConfigs: {overrides}")
        for pl in partitions:
            info = partition_info(pl)
            print("\t" + "\t".join(f"{_label(k)}: {v}" for k, v in info.items() if k != "segments"))
            for seg in info["segments"]:
                print("\t\t" + "\t".join(f"{_label(k)}: {v}" for k, v in seg.items()))


def partition_info(pl: PartitionLog) -> dict[str, Any]:
    return {
        "partition": pl.partition,
        "logStartOffset": pl.log_start_offset,
        "logEndOffset": pl.log_end_offset,
        "highWatermark": pl.high_watermark,
        "size": pl.size_in_bytes,
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


def _label(key: str) -> str:
    return key[0].upper() + key[1:]


def _text(value: Any) -> str:
    return ",".join(value) if isinstance(value, tuple) else str(value)


def _jsonable(config: dict[str, Any]) -> dict[str, Any]:
    return {k: _text(v) if isinstance(v, tuple) else v for k, v in config.items()}
