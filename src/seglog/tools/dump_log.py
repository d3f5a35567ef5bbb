"""``seglog dump-log``: print what segment and index files hold (Kafka's kafka-dump-log.sh).

For a file of batches (``.log``, a KRaft ``.checkpoint``, any capture) one line
per batch and, with ``--deep-iteration`` or ``--print-data-log``, one per
record; for ``.index`` and ``.timeindex`` files their entries. ``--json``
prints the same as JSON Lines. Corrupt input is reported with its position and
fault; the dump goes on with the next batch where the framing allows (a bad
CRC leaves the framing intact, a bad size or magic does not) and the command
exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
from collections.abc import Callable
from typing import Any

from ..errors import CorruptIndexError, SeglogError
from ..records import AnyBatch, BatchIterator, LegacyBatch, Record, RecordBatch, parse_control_record
from ..records.control import ControlRecord, EndTransactionMarker
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.naming import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_offset_file
from .logdir import b64, record_json

Emit = Callable[[dict[str, Any], str], None]


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser("dump-log", help="print the batches, records or index entries of files")
    p.add_argument("--files", required=True, help="comma-separated files (.log, .index, .timeindex, ...)")
    p.add_argument("--print-data-log", action="store_true", help="print records with their keys and values")
    p.add_argument("--deep-iteration", action="store_true", help="print records (of compressed batches too)")
    p.add_argument("--index-sanity-check", action="store_true", help="check index entries against the log")
    p.add_argument("--json", action="store_true", help="JSON Lines instead of text")
    p.set_defaults(run=run)


class _Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.errors = 0

    def emit(self, obj: dict[str, Any], text: str) -> None:
        print(json.dumps(obj) if self.as_json else text)

    def error(self, file: str, err: SeglogError | str) -> None:
        self.errors += 1
        message = str(err)
        position = getattr(err, "position", None)
        where = f"error at position {position}: " if position is not None else "error: "
        self.emit({"type": "error", "file": file, "position": position, "message": message}, where + message)


def run(args: argparse.Namespace) -> int:
    out = _Output(args.json)
    for path in (f for f in args.files.split(",") if f):
        if not args.json:
            print(f"Dumping {path}")
        try:
            _dump_file(path, args, out)
        except OSError as e:
            out.error(path, f"cannot read {path}: {e.strerror}")
        except SeglogError as e:
            out.error(path, e)
    return 1 if out.errors else 0


def _dump_file(path: str, args: argparse.Namespace, out: _Output) -> None:
    name = os.path.basename(path)
    parsed = parse_offset_file(name)
    if parsed is not None and parsed[1] == INDEX_SUFFIX:
        _dump_offset_index(path, parsed[0], args.index_sanity_check, out)
    elif parsed is not None and parsed[1] == TIME_INDEX_SUFFIX:
        _dump_time_index(path, parsed[0], args.index_sanity_check, out)
    else:
        if parsed is not None and parsed[1] == LOG_SUFFIX and not args.json:
            print(f"Log starting offset: {parsed[0]}")
        _dump_batches(path, args.print_data_log, args.deep_iteration or args.print_data_log, out)


# --- batches -------------------------------------------------------------------------


def _map(path: str) -> memoryview:
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b"")


def _dump_batches(path: str, print_data: bool, deep: bool, out: _Output) -> None:
    data = _map(path)
    scan = BatchIterator(data)
    while True:
        try:
            batch = next(scan)
        except StopIteration:
            break
        except SeglogError as e:
            out.error(path, e)  # the framing is broken: nothing after it can be trusted
            return
        fault = _fault(batch)
        out.emit(_batch_json(batch, fault is None), _batch_text(batch, fault is None))
        if fault is not None:
            out.error(path, fault)
            continue
        if deep:
            _dump_records(path, batch, print_data, out)
    if scan.remaining:
        out.error(path, SeglogError(f"{scan.remaining} bytes of a partial batch at the end", position=scan.position))


def _fault(batch: AnyBatch) -> SeglogError | None:
    try:
        batch.validate()
    except SeglogError as e:
        return e
    return None


def _batch_json(batch: AnyBatch, valid: bool) -> dict[str, Any]:
    return {
        "type": "batch",
        "baseOffset": batch.base_offset,
        "lastOffset": batch.last_offset,
        "count": batch.record_count,
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms if isinstance(batch, RecordBatch) else -1,
        "position": batch.position,
        "timestampType": batch.timestamp_type.label,
        "maxTimestamp": batch.max_timestamp,
        "size": batch.size_in_bytes,
        "magic": batch.magic,
        "compresscodec": batch.compression.name.lower(),
        "crc": batch.crc,
        "isvalid": valid,
    }


def _batch_text(batch: AnyBatch, valid: bool) -> str:
    horizon = "OptionalLong.empty"
    if isinstance(batch, RecordBatch) and batch.has_delete_horizon:
        horizon = f"OptionalLong[{batch.delete_horizon_ms}]"
    if isinstance(batch, LegacyBatch):
        count, base = (1, batch.offset) if batch.compression.name == "NONE" else (batch.record_count, batch.base_offset)
    else:
        count, base = batch.record_count, batch.base_offset
    return (
        f"baseOffset: {base} lastOffset: {batch.last_offset} count: {count} "
        f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
        f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
        f"partitionLeaderEpoch: {batch.partition_leader_epoch} isTransactional: {_b(batch.is_transactional)} "
        f"isControl: {_b(batch.is_control)} deleteHorizonMs: {horizon} position: {batch.position} "
        f"{batch.timestamp_type.label}: {batch.max_timestamp} size: {batch.size_in_bytes} "
        f"magic: {batch.magic} compresscodec: {batch.compression.name.lower()} crc: {batch.crc} isvalid: {_b(valid)}"
    )


def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _dump_records(path: str, batch: AnyBatch, print_data: bool, out: _Output) -> None:
    try:
        records = batch.records()
    except SeglogError as e:
        out.error(path, e.at(position=batch.position))
        return
    label = batch.timestamp_type.label
    for record in records:
        sequence = _sequence(batch, record)
        control = None
        if batch.is_control:
            try:
                control = parse_control_record(record, batch.position)
            except SeglogError as e:
                out.error(path, e)
        obj = record_json(record, label, sequence=sequence, isControl=batch.is_control)
        if control is not None:
            obj["control"] = _control_json(control)
        out.emit(obj, _record_text(record, label, sequence, control, print_data))


def _sequence(batch: AnyBatch, record: Record) -> int:
    if batch.base_sequence < 0:
        return -1
    return (batch.base_sequence + record.offset - batch.base_offset) & 0x7FFFFFFF


def _record_text(record: Record, label: str, sequence: int, control: ControlRecord | None, print_data: bool) -> str:
    key_size = -1 if record.key is None else len(record.key)
    value_size = -1 if record.value is None else len(record.value)
    text = (
        f"| offset: {record.offset} {label}: {record.timestamp} keySize: {key_size} valueSize: {value_size} "
        f"sequence: {sequence} headerKeys: [{','.join(k for k, _ in record.headers)}]"
    )
    if control is not None:
        return text + " " + _control_text(control)
    if print_data:
        text += f" key: {_printable(record.key)} payload: {_printable(record.value)}"
    return text


def _printable(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="replace")


def _control_json(control: ControlRecord) -> dict[str, Any]:
    fields = {k: (v.name if hasattr(v, "name") else v) for k, v in vars(control).items()}
    for k, v in fields.items():
        if isinstance(v, bytes):
            fields[k] = b64(v)
        elif isinstance(v, tuple):
            fields[k] = list(v)
    return {"kind": type(control).__name__, **fields}


def _control_text(control: ControlRecord) -> str:
    if isinstance(control, EndTransactionMarker):
        return f"endTxnMarker: {control.type.name} coordinatorEpoch: {control.coordinator_epoch}"
    body = _control_json(control)
    kind = body.pop("kind")
    return f"{kind}: {json.dumps(body)}"


# --- indexes ----------------------------------------------------------------------------


def _log_beside(path: str, base: int) -> str:
    return os.path.join(os.path.dirname(path), f"{base:020d}{LOG_SUFFIX}")


def _dump_offset_index(path: str, base: int, sanity: bool, out: _Output) -> None:
    index = OffsetIndex(path, base, max(os.path.getsize(path), 8), writable=False)
    for slot in range(index.entries):
        offset, position = index.entry(slot)
        out.emit(
            {"type": "offset-index-entry", "offset": offset, "position": position},
            f"offset: {offset} position: {position}",
        )
    if sanity:
        _check_offset_index(path, index, out)


def _check_offset_index(path: str, index: OffsetIndex, out: _Output) -> None:
    log_path = _log_beside(path, index.base_offset)
    if not os.path.exists(log_path):
        out.error(path, f"no log file {log_path} to check the index against")
        return
    data = _map(log_path)
    try:
        index.verify(len(data))
    except CorruptIndexError as e:
        out.error(path, e)
        return
    for slot in range(index.entries):
        offset, position = index.entry(slot)
        try:
            batch = next(BatchIterator(data, position))
        except (StopIteration, SeglogError):
            out.error(path, f"entry {slot} (offset {offset}) points at position {position}, where no batch starts")
            continue
        if batch.last_offset != offset:
            out.error(
                path,
                f"entry {slot}: index offset {offset}, but the batch at position {position} "
                f"ends at offset {batch.last_offset}",
            )
    if not out.as_json:
        print(f"{path} passed sanity check." if not out.errors else f"{path} failed sanity check.")


def _dump_time_index(path: str, base: int, sanity: bool, out: _Output) -> None:
    index = TimeIndex(path, base, max(os.path.getsize(path), 12), writable=False)
    for slot in range(index.entries):
        timestamp, offset = index.entry(slot)
        out.emit(
            {"type": "time-index-entry", "timestamp": timestamp, "offset": offset},
            f"timestamp: {timestamp} offset: {offset}",
        )
    if sanity:
        try:
            index.verify()
        except CorruptIndexError as e:
            out.error(path, e)
        else:
            if not out.as_json:
                print(f"{path} passed sanity check.")
