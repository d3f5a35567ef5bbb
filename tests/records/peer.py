"""kafka-python 3.x as the peer that seglog's reads and writes are checked against.

Each helper gives the same tuple shape for both readers, so a test compares them with ``==``.
kafka-python reads a v0 timestamp as None where seglog gives -1 (NO_TIMESTAMP).
"""

from __future__ import annotations

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords

from seglog.records import AnyBatch, BatchIterator, LegacyBatch, RecordBatch


def kafka_python_batches(data: bytes) -> list:
    out, records = [], MemoryRecords(bytes(data))
    while (batch := records.next_batch()) is not None:
        out.append(batch)
    return out


def kafka_python_records(data: bytes) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every record of a buffer of batches."""
    return [
        (r.offset, -1 if r.timestamp is None else r.timestamp, r.key, r.value, [tuple(h) for h in (r.headers or [])])
        for batch in kafka_python_batches(data)
        for r in batch
    ]


def seglog_records(data: bytes) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for b in BatchIterator(data) for r in b.records()]


def kafka_python_header(b) -> tuple:
    """The header fields kafka-python reads from a batch (DefaultRecordBatch or LegacyRecordBatch)."""
    if b.magic < 2:
        return (b.base_offset, b.magic, b.timestamp_type or 0, b.compression_type, b.size_in_bytes)
    return (
        b.base_offset,
        b.last_offset_delta,
        b.first_timestamp,
        b.max_timestamp,
        b.producer_id,
        b.producer_epoch,
        b.base_sequence,
        b.leader_epoch,
        b.records_count,
        b.crc,
        b.is_transactional,
        b.is_control_batch,
        b.timestamp_type,
        b.compression_type,
    )


def seglog_header(b: AnyBatch) -> tuple:
    """The same fields, as seglog reads them."""
    if isinstance(b, LegacyBatch):  # a wrapper's offset field is what kafka-python calls its base offset
        return (b.offset, b.magic, max(int(b.timestamp_type), 0), int(b.compression), b.size_in_bytes)
    return (
        b.base_offset,
        b.last_offset_delta,
        b.base_timestamp,
        b.max_timestamp,
        b.producer_id,
        b.producer_epoch,
        b.base_sequence,
        b.partition_leader_epoch,
        b.record_count,
        b.crc,
        b.is_transactional,
        b.is_control,
        int(b.timestamp_type),
        int(b.compression),
    )


def both_headers(data: bytes) -> tuple[tuple, tuple]:
    """(seglog's, kafka-python's) header of one v2 batch."""
    return seglog_header(RecordBatch(data)), kafka_python_header(DefaultRecordBatch(bytes(data)))
