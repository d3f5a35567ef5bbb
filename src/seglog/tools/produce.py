"""``seglog produce``: append lines from stdin as records (like kafka-console-producer.sh).

Each line is a record value; with ``--key-separator S`` the part before the
first S is the key. Records go to ``--partition`` or, as Kafka's default
partitioner would put them, by the murmur2 hash of the key (sticky for
keyless records). Lines are batched, one batch per partition per
``--batch-size`` records.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import InvalidRecordError
from ..partitioner import StickyPartitioner
from ..records import Compression, Record
from .arguments import UsageError, batch_size, partition_id
from .logdir import add_log_dir_argument, open_log_dirs


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("produce", help="append lines from stdin to a topic")
    add_log_dir_argument(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=partition_id, help="the partition (default: Kafka's default partitioner)")
    p.add_argument("--key-separator", help="split each line into key and value at the first separator")
    p.add_argument("--compression", choices=[c.name.lower() for c in Compression], help="default: the topic's")
    p.add_argument("--batch-size", type=batch_size, default=1000, help="records per batch (default 1000)")
    p.set_defaults(run=run)


def _record(line: bytes, separator: bytes | None) -> Record | None:
    """The line as a record; None when the separator is not in it."""
    if separator is None:
        return Record(None, line)
    key, sep, value = line.partition(separator)
    return Record(key, value) if sep else None


def run(args: argparse.Namespace) -> int:
    if args.key_separator == "":
        raise UsageError("--key-separator cannot be empty")
    # bytes as the shell gave them (os.fsencode: a separator need not be UTF-8)
    separator = os.fsencode(args.key_separator) if args.key_separator is not None else None
    with open_log_dirs(args) as logs:
        partitions = logs.partitions(args.topic)
        if args.partition is not None:
            logs.partition(args.topic, args.partition)  # fails clearly if it does not exist
        chooser = StickyPartitioner(len(partitions))
        pending: dict[int, list[Record]] = {}
        count = 0

        def send(p: int) -> None:
            logs.partition(args.topic, p).append(pending.pop(p), compression=args.compression)
            chooser.batch_done()

        for number, raw in enumerate(sys.stdin.buffer, 1):
            record = _record(raw.rstrip(b"\r\n"), separator)
            if record is None:
                for p in list(pending):  # the lines before it are appended, as Kafka's producer sends them
                    send(p)
                raise InvalidRecordError(
                    f"no key separator {separator!r} in line {number} ({raw[:60]!r}); "
                    f"the {count} records before it were appended"
                )
            p = args.partition if args.partition is not None else partitions[chooser.partition(record.key)]
            pending.setdefault(p, []).append(record)
            count += 1
            if len(pending[p]) >= args.batch_size:
                send(p)
        for p in list(pending):
            send(p)
    print(f"Produced {count} records to {args.topic}.", file=sys.stderr)
    return 0
