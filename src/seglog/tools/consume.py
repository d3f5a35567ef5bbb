"""``seglog consume``: print records of a topic (like kafka-console-consumer.sh).

By default it starts at the end of each partition, as Kafka's console consumer
does (``--from-beginning``, ``--offset N`` or ``--timestamp MS`` to start
elsewhere), and follows: it prints records as the dir's owner appends them
until Ctrl-C (SIGINT), then prints the count and exits 0. ``--max-messages N``
stops after N records or at the log end; ``--timeout-ms T`` stops after T ms
with no new record (0: at the log end). Values are printed as they are;
``--property print.key=true`` and friends add fields, and ``--json`` prints one
JSON object per record (key and value in base64).

The dir is read read-only, without its lock, so that ``seglog produce`` or the
process owning the dir appends while a consumer follows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from ..errors import OffsetOutOfRangeError
from ..records import Record
from .arguments import UsageError, message_count, milliseconds, offset, partition_id, timestamp
from .logdir import LogDirTopic, add_log_dir_argument, open_log_dirs_read_only, record_json

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
    p.add_argument("--partition", type=partition_id, help="one partition (default: all)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the log start offset")
    start.add_argument("--offset", type=offset, help="start at this offset (needs --partition)")
    start.add_argument("--timestamp", type=timestamp, help="start at the first record with timestamp >= MS")
    p.add_argument("--max-messages", type=message_count, help="stop after N records (or at the log end)")
    p.add_argument("--timeout-ms", type=milliseconds, help="stop after MS with no new record (0: at the log end)")
    p.add_argument("--json", action="store_true", help="one JSON object per record")
    p.add_argument(
        "--property",
        action="append",
        metavar="KEY=VALUE",
        help="print.key, print.timestamp, print.offset, print.partition, print.headers, key.separator",
    )
    p.set_defaults(run=run)


def _properties(items: list[str] | None) -> dict[str, str]:
    """Kafka's formatter properties, one ``key=value`` a --property (a separator may be a comma
    or a space: nothing is split or stripped)."""
    props = dict(_PROPERTIES)
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq:
            raise UsageError(f"--property takes key=value, got {item!r}")
        if key not in _PROPERTIES:
            raise UsageError(f"unknown property {key!r}; known: {', '.join(_PROPERTIES)}")
        if key.startswith("print."):
            if value.lower() not in ("true", "false"):
                raise UsageError(f"property {key} is true or false, not {value!r}")
            value = value.lower()
        props[key] = value
    return props


def run(args: argparse.Namespace) -> int:
    if args.offset is not None and args.partition is None:
        raise UsageError("--offset needs --partition")
    props = _properties(args.property)
    with open_log_dirs_read_only(args) as logs:
        return consume(LogDirTopic(logs, args.topic), args, props)


def consume(source: LogDirTopic, args: argparse.Namespace, props: dict[str, str]) -> int:
    """Print records from each partition's start position until a stop: --max-messages,
    --timeout-ms without a record (--max-messages alone: the log end), or SIGINT."""
    partitions = [args.partition] if args.partition is not None else source.partitions()
    positions = {p: _start(source, p, args) for p in partitions}
    timeout_ms = args.timeout_ms if args.timeout_ms is not None or args.max_messages is None else 0
    out = sys.stdout.buffer
    count = 0

    def enough() -> bool:
        return args.max_messages is not None and count >= args.max_messages

    try:
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        while not enough():
            before = count
            for p in partitions:
                for record, label in _records(source, p, positions):
                    if enough():
                        break
                    count += 1  # first: a SIGINT as write returns must not leave a printed record uncounted
                    out.write(_line(record, p, label, args.topic, props, args.json))
            out.flush()
            now = time.monotonic()
            if count > before and timeout_ms is not None:
                deadline = now + timeout_ms / 1000
            if enough() or (deadline is not None and now >= deadline):
                break
            source.wait(partitions, None if deadline is None else deadline - now)
    except KeyboardInterrupt:
        pass  # Ctrl-C ends a following consumer, as Kafka's: with the count, exit 0
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


def _start(source: LogDirTopic, partition: int, args: argparse.Namespace) -> int:
    log_start, end = source.offsets(partition)
    if args.from_beginning:
        return log_start
    if args.offset is not None:
        if not log_start <= args.offset <= end:
            raise OffsetOutOfRangeError(
                f"offset {args.offset} is out of range for {source.topic}-{partition}",
                log_start_offset=log_start,
                log_end_offset=end,
            )
        return args.offset
    if args.timestamp is not None:
        found = source.offset_for_timestamp(partition, args.timestamp)
        return end if found is None else found
    return end


def _records(source: LogDirTopic, partition: int, positions: dict[int, int]) -> Iterator[tuple[Record, str]]:
    """The records from the partition's position up to its high watermark; the position
    moves past each batch read (control batches and records below the position too)."""
    start = positions[partition]
    for batch in source.batches(partition, start):
        if not batch.is_control:
            label = batch.timestamp_type.label
            for record in batch.records():
                if record.offset >= start:
                    positions[partition] = record.offset + 1
                    yield record, label
        positions[partition] = max(positions[partition], batch.last_offset + 1)


def _line(record: Record, partition: int, label: str, topic: str, props: dict[str, str], as_json: bool) -> bytes:
    if as_json:
        return json.dumps(record_json(record, label, topic=topic, partition=partition)).encode() + b"\n"
    return _format(record, partition, label, props) + b"\n"


def _format(record: Record, partition: int, label: str, props: dict[str, str]) -> bytes:
    sep = os.fsencode(props["key.separator"])  # as the shell gave it: it need not be UTF-8
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
