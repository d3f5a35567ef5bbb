"""``seglog consume``: print records of a topic (like kafka-console-consumer.sh).

By default it starts at the end of each partition, as Kafka's console consumer
does (``--from-beginning``, ``--offset N`` or ``--timestamp MS`` to start
elsewhere), reads up to the high watermark and stops. Values are printed as
they are; ``--property print.key=true`` and friends add fields, and
``--json`` prints one JSON object per record (key and value in base64).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from typing import Any

from ..records import Record
from ..storage import PartitionLog
from .logdir import add_log_dir_argument, open_log_dirs, parse_configs, record_json

_PROPERTIES = {
    "print.key": "false",
    "print.value": "true",
    "print.timestamp": "false",
    "print.offset": "false",
    "print.partition": "false",
    "print.headers": "false",
    "key.separator": "\t",
}


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("consume", help="print records of a topic")
    add_log_dir_argument(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="one partition (default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", type=int, help="start at this offset (needs --partition)")
    start.add_argument("--timestamp", type=int, help="start at the first record with timestamp >= MS")
    p.add_argument("--max-messages", type=int, help="stop after N records")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="print.key, print.timestamp, print.offset, print.partition, print.headers, key.separator",
    )
    p.set_defaults(run=run)


def _start(pl: PartitionLog, args: argparse.Namespace) -> int:
    if args.from_beginning:
        return pl.log_start_offset
    if args.offset is not None:
        return args.offset
    if args.timestamp is not None:
        found = pl.offset_for_timestamp(args.timestamp)
        return pl.high_watermark if found is None else found[0]
    return pl.high_watermark


def _records(pl: PartitionLog, start: int) -> Iterator[tuple[Record, str]]:
    for batch in pl.batches(start):
        if batch.is_control:
            continue
        label = batch.timestamp_type.label
        for record in batch.records():
            if record.offset >= start:
                yield record, label


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        raise SystemExit("error: --offset needs --partition")
    props = {**_PROPERTIES, **parse_configs(args.property)}
    out = sys.stdout.buffer
    count = 0
    with open_log_dirs(args) as logs:
        partitions = [args.partition] if args.partition is not None else logs.partitions(args.topic)
        for p in partitions:
            pl = logs.partition(args.topic, p)
            for record, label in _records(pl, _start(pl, args)):
                if args.max_messages is not None and count >= args.max_messages:
                    break
                if args.json:
                    obj = record_json(record, label, topic=args.topic, partition=p)
                    out.write(json.dumps(obj).encode() + b"\n")
                else:
                    out.write(_format(record, p, label, props) + b"\n")
                count += 1
    out.flush()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _format(record: Record, partition: int, label: str, props: dict[str, str]) -> bytes:
    sep = props["key.separator"].encode()
    fields: list[bytes] = []
    if props["print.timestamp"] == "true":
        fields.append(f"{label}:{record.timestamp}".encode())
    if props["print.partition"] == "true":
        fields.append(f"Partition:{partition}".encode())
    if props["print.offset"] == "true":
        fields.append(f"Offset:{record.offset}".encode())
    if props["print.headers"] == "true":
        text = ",".join(f"{k}:{'null' if v is None else v.decode(errors='replace')}" for k, v in record.headers)
        fields.append((text or "NO_HEADERS").encode())
    if props["print.key"] == "true":
        fields.append(b"null" if record.key is None else record.key)
    if props["print.value"] == "true":
        fields.append(b"null" if record.value is None else record.value)
    return sep.join(fields)
