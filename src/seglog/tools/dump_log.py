"""``seglog dump-log``: print what segment and index files hold, as Kafka's kafka-dump-log.sh does.

Files are told apart by suffix, as Kafka's DumpLogSegments tells them:

- ``.index``: ``offset: N position: P`` per entry, each checked against the
  batch that starts at P in the ``.log`` beside it (its last offset must be N);
- ``.timeindex``: ``timestamp: T offset: N`` per entry;
- anything else (``.log``, a KRaft ``.checkpoint`` snapshot, a capture) is
  read as batches: one line per batch and, with ``--deep-iteration`` or
  ``--print-data-log``, one per record, control records with their typed
  value. The lines are Kafka's, word for word.

``--index-sanity-check`` checks an index instead of printing it: whole
entries, offsets and timestamps increasing, positions inside the log.
``--json`` prints JSON Lines, one object per batch, record, index entry or
error, each with a ``type``.

Corrupt input never ends the command with a traceback: each fault is
reported with its file, byte position and cause (``error at position 1234:
CRC mismatch ...``), the dump goes on with the next batch where the framing
allows it (a bad CRC leaves the framing intact; a bad magic or size does not,
so the file ends there), and the command exits 1.
"""

from __future__ import annotations

import argparse
import io
import json
import mmap
import os
import re
import sys
from collections.abc import Iterable
from typing import Any

from ..errors import SeglogError
from ..records import (
    AnyBatch,
    BatchIterator,
    Compression,
    ControlRecordType,
    EndTransactionMarker,
    LeaderChange,
    LegacyBatch,
    Record,
    RecordBatch,
    SnapshotFooter,
    SnapshotHeader,
    UnknownControlRecord,
    parse_control_record,
)
from ..records.batches import stream_records
from ..records.compression import decompress
from ..records.control import ControlRecord, KRaftVersion
from ..storage.index import OffsetIndex, TimeIndex
from ..storage.naming import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, parse_offset_file
from .arguments import UsageError
from .logdir import b64, record_json

_SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")  # KRaft: <end offset>-<epoch>
_NOT_BATCHES = {".snapshot": "producer-state snapshot", ".txnindex": "transaction index"}


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "dump-log",
        help="print the batches, records or index entries of segment files",
        description="Parse log segment, snapshot and index files and print what they hold (Kafka's kafka-dump-log.sh).",
    )
    p.add_argument("--files", required=True, help="comma-separated files (.log, .index, .timeindex, .checkpoint)")
    p.add_argument("--print-data-log", action="store_true", help="print each record's key and value (implies deep)")
    p.add_argument("--deep-iteration", action="store_true", help="print every record, not only the batches")
    p.add_argument("--index-sanity-check", action="store_true", help="check indexes without printing their entries")
    p.add_argument("--json", action="store_true", help="JSON Lines: one object per batch, record, entry or error")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")  # keys and values are anyone's bytes
    paths = [f.strip() for f in args.files.split(",") if f.strip()]
    if not paths:
        raise UsageError("--files names no file")
    out = _Output(args.json)
    deep = args.deep_iteration or args.print_data_log
    for path in paths:
        out.file = path
        out.text(f"Dumping {path}")
        before = out.errors
        try:
            _dump_file(path, args, deep, out)
        except OSError as e:
            out.error(None, f"cannot read {path}: {e.strerror or e}")
        except SeglogError as e:  # a fault none of the dumps below expected; still no traceback
            out.fault(e)
        if out.errors > before:
            print(f"seglog dump-log: {out.errors - before} error(s) in {path}", file=sys.stderr)
    return 1 if out.errors else 0


class _Output:
    """Text lines as Kafka prints them, or JSON Lines; counts the errors reported."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.errors = 0
        self.file = ""

    def emit(self, obj: dict[str, Any], text: str) -> None:
        if self.as_json:
            print(json.dumps({**obj, "file": self.file}))
        else:
            print(text)

    def text(self, line: str) -> None:
        """A line only the text form has (file headers, sanity verdicts)."""
        if not self.as_json:
            print(line)

    def error(self, position: int | None, message: str, offset: int | None = None) -> None:
        self.errors += 1
        where = "error" if position is None else f"error at position {position}"
        text = f"{where}: {message}" + ("" if offset is None else f" (offset {offset})")
        self.emit({"type": "error", "position": position, "offset": offset, "message": message}, text)

    def fault(self, e: SeglogError) -> None:
        self.error(e.position, e.message, e.offset)


def _dump_file(path: str, args: argparse.Namespace, deep: bool, out: _Output) -> None:
    name = os.path.basename(path)
    os.stat(path)  # a missing file is an OSError here, whatever its kind
    suffix = os.path.splitext(name)[1]
    parsed = parse_offset_file(name)
    if suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        if parsed is None:
            out.error(None, f"{name}: an index is named after its segment's base offset (20 digits)")
        elif suffix == INDEX_SUFFIX:
            _dump_offset_index(path, parsed[0], args.index_sanity_check, out)
        else:
            _dump_time_index(path, parsed[0], args.index_sanity_check, out)
        return
    if suffix in _NOT_BATCHES:
        out.error(None, f"{name} is a {_NOT_BATCHES[suffix]}, which dump-log does not read")
        return
    if suffix == LOG_SUFFIX and parsed is not None:
        out.text(f"Log starting offset: {parsed[0]}")
    elif snapshot := _SNAPSHOT_NAME.match(name):
        out.text(f"Snapshot end offset: {int(snapshot[1])}, epoch: {int(snapshot[2])}")
    _dump_batches(path, deep, args.print_data_log, out)


def _map(path: str) -> memoryview:
    """The file's bytes without reading them all in (a segment is up to 1 GiB)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return memoryview(mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) if size else b"")


# --- batches ------------------------------------------------------------------------


def _dump_batches(path: str, deep: bool, print_data: bool, out: _Output) -> None:
    data = _map(path)
    scan = BatchIterator(data)
    while True:
        try:
            batch = next(scan)
        except StopIteration:
            break
        except SeglogError as e:  # bad framing: nothing after it can be trusted to start a batch
            out.fault(e)
            return
        valid = batch.is_valid  # isvalid is the CRC's verdict, as in Kafka
        out.emit(_batch_json(batch, valid), _batch_text(batch, valid))
        fault = _validate(batch)
        if fault is not None:
            out.fault(fault)
        # a batch with a bad CRC is still printed record by record (this is a tool for looking at
        # corrupt logs); one whose codec is unknown has no records to show
        if deep and _field(batch, "compression") is not None:
            _dump_records(batch, print_data, out)
    if scan.remaining:
        out.text(f"Found {scan.remaining} invalid bytes at the end of {os.path.basename(path)}")
        out.error(scan.position, f"{scan.remaining} bytes at the end do not hold a whole batch")


def _validate(batch: AnyBatch) -> SeglogError | None:
    try:
        batch.validate()
        batch.compression  # noqa: B018 (an unknown codec id is a fault of the batch too)
    except SeglogError as e:
        return e
    return None


def _field(batch: AnyBatch, name: str) -> Any:
    """A field a corrupt batch may fail to give, or None: an unknown codec id has no codec, and a
    compressed legacy wrapper is opened to learn its count and base offset."""
    try:
        return getattr(batch, name)
    except SeglogError:
        return None


def _codec_name(batch: AnyBatch) -> str:
    codec = _field(batch, "compression")
    return f"unknown({batch.attributes & 7})" if codec is None else codec.name.lower()


def _batch_text(batch: AnyBatch, valid: bool) -> str:
    # Kafka's DumpLogSegments.printBatchLevel, word for word
    if isinstance(batch, RecordBatch):
        horizon = f"OptionalLong[{batch.delete_horizon_ms}]" if batch.has_delete_horizon else "OptionalLong.empty"
        head = (
            f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: {batch.record_count} "
            f"baseSequence: {batch.base_sequence} lastSequence: {batch.last_sequence} "
            f"producerId: {batch.producer_id} producerEpoch: {batch.producer_epoch} "
            f"partitionLeaderEpoch: {batch.partition_leader_epoch} isTransactional: {_b(batch.is_transactional)} "
            f"isControl: {_b(batch.is_control)} deleteHorizonMs: {horizon}"
        )
    else:
        head = f"offset: {batch.last_offset}"
    return (
        f"{head} position: {batch.position} {batch.timestamp_type.label}: {batch.max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {batch.magic} compresscodec: {_codec_name(batch)} "
        f"crc: {batch.crc} isvalid: {_b(valid)}"
    )


def _batch_json(batch: AnyBatch, valid: bool) -> dict[str, Any]:
    return {
        "type": "batch",
        "baseOffset": _field(batch, "base_offset"),
        "lastOffset": batch.last_offset,
        "count": _field(batch, "record_count"),
        "baseSequence": batch.base_sequence,
        "lastSequence": batch.last_sequence,
        "producerId": batch.producer_id,
        "producerEpoch": batch.producer_epoch,
        "partitionLeaderEpoch": batch.partition_leader_epoch,
        "isTransactional": batch.is_transactional,
        "isControl": batch.is_control,
        "deleteHorizonMs": batch.delete_horizon_ms
        if isinstance(batch, RecordBatch) and batch.has_delete_horizon
        else None,
        "position": batch.position,
        "timestampType": batch.timestamp_type.label,
        "maxTimestamp": batch.max_timestamp,
        "size": batch.size_in_bytes,
        "magic": batch.magic,
        "compresscodec": _codec_name(batch),
        "crc": batch.crc,
        "isvalid": valid,
    }


def _b(flag: bool) -> str:
    return "true" if flag else "false"


# --- records --------------------------------------------------------------------------


def _dump_records(batch: AnyBatch, print_data: bool, out: _Output) -> None:
    try:
        _print_records(batch, print_data, out)
    except SeglogError as e:  # the records before the fault are printed, as Kafka's streaming dump prints them
        out.fault(e.at(position=batch.position))


def _print_records(batch: AnyBatch, print_data: bool, out: _Output) -> None:
    if isinstance(batch, LegacyBatch):
        records: Iterable[Record] = batch.records()
        legacy_crcs = _legacy_crcs(batch)
    else:
        # a compressed batch is inflated as its records are printed: a small file may hold batches
        # that inflate to gigabytes, and nothing needs them whole
        records, legacy_crcs = stream_records(batch), None
    label = batch.timestamp_type.label
    for i, record in enumerate(records):
        sequence = _sequence(batch, record)
        # the JSON object only for --json: base64 of a value is a third of its size more, for nothing
        obj = record_json(record, label, isControl=batch.is_control, sequence=sequence) if out.as_json else {}
        text = (
            f"| offset: {record.offset} {label}: {record.timestamp} keySize: {_size(record.key)} "
            f"valueSize: {_size(record.value)}"
        )
        if isinstance(batch, RecordBatch):
            keys = ",".join(_printable(k.encode("utf-8", "surrogateescape")) for k, _ in record.headers)
            text += f" sequence: {sequence} headerKeys: [{keys}]"
        elif legacy_crcs is not None:
            obj["crc"] = legacy_crcs[i]
            text += f" isValid: true crc: {legacy_crcs[i]}"  # records() checked every inner CRC
        if batch.is_control:
            control = _control(record, batch.position, out)
            if control is not None:
                kind, value = _control_value(control)
                obj.update(controlType=kind, control=value)
                text += " " + _control_text(control, kind, value)
        elif print_data:
            # Kafka prints a key and a payload only when they are there (keySize/valueSize -1 say null)
            text += "" if record.key is None else f" key: {_printable(record.key)}"
            text += "" if record.value is None else f" payload: {_printable(record.value)}"
        out.emit(obj, text)


def _legacy_crcs(batch: LegacyBatch) -> list[int]:
    """The CRC of each message: the batch's own, or those of a compressed wrapper's inner messages."""
    if batch.compression == Compression.NONE:
        return [batch.crc]
    return [inner.crc for inner in BatchIterator(decompress(batch.compression, batch.value or b""))]


def _sequence(batch: AnyBatch, record: Record) -> int:
    if batch.base_sequence < 0:
        return -1
    return (batch.base_sequence + record.offset - batch.base_offset) & 0x7FFFFFFF  # Kafka's incrementSequence


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _printable(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")  # Kafka's StringDecoder


def _control(record: Record, position: int, out: _Output) -> ControlRecord | None:
    try:
        return parse_control_record(record, position)
    except SeglogError as e:
        out.error(position, f"control record at offset {record.offset}: {e.message}", record.offset)
        return None


def _control_value(control: ControlRecord) -> tuple[str, dict[str, Any]]:
    """The control type's name and the value as Kafka's JSON converters write it."""
    if isinstance(control, EndTransactionMarker):
        return control.type.name, {"version": control.version, "coordinatorEpoch": control.coordinator_epoch}
    if isinstance(control, LeaderChange):
        return "LEADER_CHANGE", {
            "version": control.version,
            "leaderId": control.leader_id,
            "voters": [{"voterId": v} for v in control.voters],
            "grantingVoters": [{"voterId": v} for v in control.granting_voters],
        }
    if isinstance(control, SnapshotHeader):
        return "SNAPSHOT_HEADER", {
            "version": control.version,
            "lastContainedLogTimestamp": control.last_contained_log_timestamp,
        }
    if isinstance(control, SnapshotFooter):
        return "SNAPSHOT_FOOTER", {"version": control.version}
    if isinstance(control, KRaftVersion):
        return "KRAFT_VERSION", {"version": control.version, "kRaftVersion": control.kraft_version}
    assert isinstance(control, UnknownControlRecord)
    try:
        kind = ControlRecordType(control.type).name
    except ValueError:
        kind = "UNKNOWN"
    return kind, {"typeId": control.type, "key": b64(control.key), "value": b64(control.value)}


def _control_text(control: ControlRecord, kind: str, value: dict[str, Any]) -> str:
    # Kafka's DumpLogSegments.printControlRecord
    if isinstance(control, EndTransactionMarker):
        return f"endTxnMarker: {kind} coordinatorEpoch: {control.coordinator_epoch}"
    compact = json.dumps(value, separators=(",", ":"))
    if isinstance(control, LeaderChange):
        return f"LeaderChange: {compact}"
    if isinstance(control, SnapshotHeader):
        return f"SnapshotHeader {compact}"
    if isinstance(control, SnapshotFooter):
        return f"SnapshotFooter {compact}"
    if isinstance(control, KRaftVersion):
        return f"KRaftVersion {compact}"
    return f"controlType: {kind}({value['typeId']})"


# --- indexes ----------------------------------------------------------------------------


def _log_beside(path: str, base: int) -> str:
    return os.path.join(os.path.dirname(path), f"{base:020d}{LOG_SUFFIX}")


def _log_size(path: str, base: int, out: _Output) -> int | None:
    log_path = _log_beside(path, base)
    try:
        return os.path.getsize(log_path)
    except OSError:
        out.text(f"(no {os.path.basename(log_path)} beside the index: entries not checked against it)")
        return None


def _dump_offset_index(path: str, base: int, sanity_only: bool, out: _Output) -> None:
    index = OffsetIndex(path, base, max(os.path.getsize(path), 8), writable=False)
    if sanity_only:
        _sanity(path, os.path.getsize(path), 8, _offset_index_faults(index, _log_size(path, base, out)), out)
        return
    if index.entries == 0:
        out.text(f"{path} is empty.")
        return
    log_path = _log_beside(path, base)
    log = _map(log_path) if os.path.exists(log_path) else None
    for slot in range(index.entries):
        offset, position = index.entry(slot)
        out.emit(
            {"type": "offset-index-entry", "offset": offset, "position": position},
            f"offset: {offset} position: {position}",
        )
        if log is not None:
            _check_entry_against_log(log, slot, offset, position, out)


def _check_entry_against_log(log: memoryview, slot: int, offset: int, position: int, out: _Output) -> None:
    """As Kafka's dump does: the batch at the entry's position must end at the entry's offset."""
    entry = f"entry {slot} (offset {offset}, position {position})"
    try:
        batch = next(BatchIterator(log, position), None) if 0 <= position < len(log) else None
    except SeglogError:
        batch = None
    if batch is None:
        out.error(slot * 8, f"{entry}: no whole batch starts at that position of the log")
    elif batch.last_offset != offset:
        out.error(slot * 8, f"{entry}: the batch there ends at offset {batch.last_offset}")


# A fault of an index: the byte position of the entry in the index file, and what is wrong with it.
_Fault = tuple[int, str]


def _offset_index_faults(index: OffsetIndex, log_size: int | None) -> list[_Fault]:
    faults = []
    prev_offset, prev_position = index.base_offset - 1, -1
    for slot in range(index.entries):
        offset, position = index.entry(slot)
        entry = f"entry {slot} (offset {offset}, position {position})"
        if offset <= prev_offset:
            faults.append((slot * 8, f"{entry}: offset does not increase (previous {prev_offset})"))
        if position <= prev_position:
            faults.append((slot * 8, f"{entry}: position does not increase (previous {prev_position})"))
        if log_size is not None and position >= log_size:
            faults.append((slot * 8, f"{entry}: position is past the end of the log ({log_size} bytes)"))
        prev_offset, prev_position = offset, position
    return faults


def _dump_time_index(path: str, base: int, sanity_only: bool, out: _Output) -> None:
    index = TimeIndex(path, base, max(os.path.getsize(path), 12), writable=False)
    if sanity_only:
        _sanity(path, os.path.getsize(path), 12, _time_index_faults(index), out)
        return
    if index.entries == 0:
        out.text(f"{path} is empty.")
        return
    for slot in range(index.entries):
        timestamp, offset = index.entry(slot)
        out.emit(
            {"type": "time-index-entry", "timestamp": timestamp, "offset": offset},
            f"timestamp: {timestamp} offset: {offset}",
        )


def _time_index_faults(index: TimeIndex) -> list[_Fault]:
    faults = []
    prev_ts: int | None = None
    prev_offset = index.base_offset
    for slot in range(index.entries):
        timestamp, offset = index.entry(slot)
        entry = f"entry {slot} (timestamp {timestamp}, offset {offset})"
        if prev_ts is not None and timestamp <= prev_ts:
            faults.append((slot * 12, f"{entry}: timestamp does not increase (previous {prev_ts})"))
        if offset < prev_offset:
            faults.append((slot * 12, f"{entry}: offset is below the previous {prev_offset}"))
        prev_ts, prev_offset = timestamp, max(offset, prev_offset)
    return faults


def _sanity(path: str, length: int, entry_size: int, faults: list[_Fault], out: _Output) -> None:
    """``length``: the file's, not what the index took of it (which ends at its last whole entry)."""
    if length % entry_size:
        faults.insert(0, (length // entry_size * entry_size, f"{length % entry_size} bytes that are not a whole entry"))
    for position, fault in faults:
        out.error(position, fault)
    out.text(f"{path} {'failed' if faults else 'passed'} sanity check.")
