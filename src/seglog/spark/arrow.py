"""Segment bytes to Arrow record batches, with the columns of Spark's Kafka source.

    key            binary                                  null: no key
    value          binary                                  null: a tombstone
    topic          string                                  one value per batch
    partition      int32                                   one value per batch
    offset         int64
    timestamp      timestamp[us, tz=UTC]                   Kafka's ms x 1000
    timestampType  int32                                   -1 none (magic 0),
                                                           0 CreateTime, 1 LogAppendTime
    headers        list<element: struct<key: string,       only with includeHeaders;
                                        value: binary>>    null: no headers (as Spark's)

This is exactly ``to_arrow_schema`` of that Spark schema (nullable fields, the
list's child named ``element``, UTC): Spark's Python data source compares the
first Arrow batch's schema with it and refuses any other.

The C ``ColumnBuilder`` (``_columns.c``, beside this module) decodes records straight
into Arrow buffers and hands them over without copying; here they are wrapped
with ``pyarrow.Array.from_buffers``, so there is no Python object per record.
A record's bytes are copied once, from the batch into the column: an
uncompressed batch's records are read in place (a view of the chunk of the
segment the log read with ``pread``: segments are never mapped, see
storage/), a compressed batch is decompressed once. The constant ``topic`` and
``partition`` columns are slices of one array made per reader.

Control batches (transaction markers, KRaft's LeaderChange and snapshot
records) are skipped: Spark's Kafka source never shows them, since the Kafka
consumer drops them. Aborted transactions are not filtered (Spark reads with
``read_uncommitted`` unless told otherwise; that filtering, if wanted, belongs
with the storage layer's transaction index). A legacy (v0/v1) message is
decoded into Python records and appended one by one, a cost paid only by logs
that still hold pre-0.11 data.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa

from ..records import NO_TIMESTAMP, AnyBatch, LegacyBatch, RecordBatch
from ..records.layout import COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK, HEADER, HEADER_SIZE, TIMESTAMP_TYPE_MASK
from ._columns import ColumnBuilder

# Spark's names: a list's child is "element"; every field is nullable
HEADER_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
MAX_ROWS = 65_536  # rows per Arrow batch handed to Spark (a target: whole Kafka batches go in)
MAX_DATA_BYTES = 64 * 1024 * 1024  # bytes of keys, values and headers per Arrow batch
END_OF_LOG = 2**63 - 1


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema of the rows, the one Spark expects for ``spark_schema_ddl``."""
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", TIMESTAMP_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", HEADER_TYPE))
    return pa.schema(fields)


def spark_schema_ddl(include_headers: bool) -> str:
    ddl = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
    return ddl + (", headers array<struct<key: string, value: binary>>" if include_headers else "")


def to_arrow_batches(
    batches: Iterable[AnyBatch],
    topic: str,
    partition: int,
    start: int = 0,
    end: int = END_OF_LOG,
    *,
    include_headers: bool = False,
    max_rows: int = MAX_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The records of ``batches`` with offsets in [start, end), as Arrow record batches.

    ``batches`` are what ``BatchIterator`` yields (``RecordBatch`` or ``LegacyBatch``),
    in offset order; a read range may start and end inside a batch. Each Arrow
    batch holds whole Kafka batches, about ``max_rows`` rows (more by at most one
    Kafka batch) and at most about ``MAX_DATA_BYTES`` of keys, values and headers.
    Corrupt records raise ``CorruptRecordError`` with the batch's position.
    """
    return ArrowAssembler(topic, partition, include_headers, max_rows).record_batches(batches, start, end)


class ArrowAssembler:
    """Turns the batches of one partition into Arrow record batches; reusable across reads.
    ``check_crcs``: each batch's CRC is checked first (in the builder's C call, over the bytes
    it is about to decode), as Kafka's consumer does with ``check.crcs``: for bytes that came
    over the network; a log's reads check their own (``PartitionLog.batches``)."""

    def __init__(
        self, topic: str, partition: int, include_headers: bool, max_rows: int = MAX_ROWS, *, check_crcs: bool = False
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.max_rows = max_rows
        self.check_crcs = check_crcs
        self.schema = arrow_schema(include_headers)
        self._builder = ColumnBuilder(with_headers=include_headers)
        self._constants: tuple[pa.Array, pa.Array] | None = None

    def record_batches(
        self, batches: Iterable[AnyBatch], start: int = 0, end: int = END_OF_LOG
    ) -> Iterator[pa.RecordBatch]:
        """Rows with offsets in [start, end) of ``batches``, as Arrow record batches."""
        builder, max_rows = self._fresh_builder(), self.max_rows
        for batch in batches:
            if not self._append(batch, start, end):
                yield self._finish()
                self._append(batch, start, end)
            if builder.rows >= max_rows:
                yield self._finish()
        if builder.rows:
            yield self._finish()

    def _fresh_builder(self) -> ColumnBuilder:
        if self._builder.rows:  # left by a read that failed part way
            self._builder.finish()
        return self._builder

    def _append(self, batch: AnyBatch, start: int, end: int) -> bool:
        """Appends the rows of one batch in [start, end); False, appending nothing, when
        the batch's bytes would take the Arrow batch past MAX_DATA_BYTES: finish first."""
        builder = self._builder
        if not isinstance(batch, RecordBatch):
            if not batch.is_control:
                if self.check_crcs:
                    batch.validate()  # (the rare legacy message: its CRC32 in Python)
                self._append_legacy(batch, start, end)
            return True
        view = batch.buffer
        base_offset, _, _, _, _, attributes, last_delta, base_ts, max_ts, _, _, _, count = HEADER.unpack_from(view, 0)
        if attributes & CONTROL_FLAG_MASK or base_offset + last_delta < start or base_offset >= end:
            return True
        if attributes & COMPRESSION_CODEC_MASK and self.check_crcs:
            batch.validate()  # before decompressing bytes that may be damaged
        section = view[HEADER_SIZE:] if not attributes & COMPRESSION_CODEC_MASK else batch.records_section()
        if builder.rows and builder.data_bytes + len(section) > MAX_DATA_BYTES:
            return False
        log_append_time = bool(attributes & TIMESTAMP_TYPE_MASK)
        ts_type = int(log_append_time)
        checked = view if self.check_crcs and not attributes & COMPRESSION_CODEC_MASK else None
        builder.append(
            section, count, base_offset, base_ts, log_append_time, max_ts, ts_type, batch.position, start, end, checked
        )
        return True

    def _append_legacy(self, batch: LegacyBatch, start: int, end: int) -> None:
        ts_type = int(batch.timestamp_type)
        for r in batch.records():
            if start <= r.offset < end:
                ts = NO_TIMESTAMP if r.timestamp is None else r.timestamp
                self._builder.append_record(r.offset, ts, ts_type, r.key, r.value, r.headers, batch.position)

    def _constant_columns(self, rows: int) -> tuple[pa.Array, pa.Array]:
        """topic and partition for ``rows`` rows: slices of arrays made once (slicing is free)."""
        if self._constants is None or len(self._constants[0]) < rows:
            size = max(rows, self.max_rows)
            self._constants = (
                pa.repeat(pa.scalar(self.topic, pa.string()), size),
                pa.repeat(pa.scalar(self.partition, pa.int32()), size),
            )
        topic, partition = self._constants
        return topic.slice(0, rows), partition.slice(0, rows)

    def _finish(self) -> pa.RecordBatch:
        return self.assemble(self._builder.finish())

    def assemble(self, cols: dict[str, Any]) -> pa.RecordBatch:
        """An Arrow record batch from the buffers of ``ColumnBuilder.finish()`` (no copy)."""
        rows = cols["rows"]
        topic, partition = self._constant_columns(rows)
        arrays = [
            _var(pa.binary(), rows, cols["key"]),
            _var(pa.binary(), rows, cols["value"]),
            topic,
            partition,
            _fixed(pa.int64(), rows, cols["offset"]),
            _fixed(TIMESTAMP_TYPE, rows, cols["timestamp"]),
            _fixed(pa.int32(), rows, cols["timestampType"]),
        ]
        if self.include_headers:
            validity, list_offsets, (entries, keys, values), nulls = cols["headers"]
            struct = pa.Array.from_buffers(
                HEADER_TYPE.value_type,
                entries,
                [None],
                children=[_var(pa.string(), entries, keys), _var(pa.binary(), entries, values)],
            )
            buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(list_offsets)]
            arrays.append(pa.Array.from_buffers(HEADER_TYPE, rows, buffers, null_count=nulls, children=[struct]))
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _fixed(arrow_type: pa.DataType, rows: int, values: Any) -> pa.Array:
    return pa.Array.from_buffers(arrow_type, rows, [None, pa.py_buffer(values)], null_count=0)


def _var(arrow_type: pa.DataType, rows: int, column: tuple) -> pa.Array:
    """A binary or string column from (validity or None, int32 offsets, data, null count)."""
    validity, offsets, data, nulls = column
    buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(arrow_type, rows, buffers, null_count=nulls)
