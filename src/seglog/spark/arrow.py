"""Segment bytes to Arrow record batches, with the columns of Spark's Kafka source.

The C ``ColumnBuilder`` decodes records straight into Arrow buffers (values
copied once, from the batch's bytes into the column); here they are wrapped
with ``pyarrow.Array.from_buffers``: no Python object per record. A compressed
batch is decompressed once. Control batches are skipped, as Spark's Kafka
source skips them. A legacy (v0/v1) batch is re-encoded as v2 first, a cost
paid only by logs that still hold pre-0.11 data.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from ..records import AnyBatch, RecordBatch, build_batch
from ..records._codec import ColumnBuilder
from ..records.batch import TimestampType

# Spark's names: a list's child is "element"; every field is nullable
HEADER_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
MAX_ROWS = 65_536  # rows per Arrow batch handed to Spark
MAX_DATA_BYTES = 64 * 1024 * 1024


def arrow_schema(include_headers: bool) -> pa.Schema:
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


def _var(arrow_type: pa.DataType, rows: int, column: tuple) -> pa.Array:
    validity, offsets, data, nulls = column
    buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(arrow_type, rows, buffers, null_count=nulls)


class ArrowAssembler:
    """Feeds batches of one partition into Arrow record batches of about MAX_ROWS rows."""

    def __init__(self, topic: str, partition: int, include_headers: bool, max_rows: int = MAX_ROWS) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.max_rows = max_rows
        self.schema = arrow_schema(include_headers)
        self._builder = ColumnBuilder(with_headers=include_headers)

    def record_batches(self, batches: Iterable[AnyBatch], start: int, end: int) -> Iterator[pa.RecordBatch]:
        """Rows with offsets in [start, end) of ``batches``, as Arrow record batches."""
        builder = self._builder
        for batch in batches:
            if batch.is_control:
                continue
            self._append(batch, start, end)
            if builder.rows >= self.max_rows or builder.data_bytes >= MAX_DATA_BYTES:
                yield self._finish()
        if builder.rows:
            yield self._finish()

    def _append(self, batch: AnyBatch, start: int, end: int) -> None:
        if not isinstance(batch, RecordBatch):
            ts_type = int(batch.timestamp_type)
            batch = RecordBatch(
                build_batch(batch.records(), base_offset=batch.base_offset, keep_offsets=True), batch.position
            )
        else:
            ts_type = int(batch.timestamp_type)
        self._builder.append(
            batch.records_section(),
            batch.record_count,
            batch.base_offset,
            batch.base_timestamp,
            ts_type == TimestampType.LOG_APPEND_TIME,
            batch.max_timestamp,
            ts_type,
            batch.position,
            start,
            end,
        )

    def _finish(self) -> pa.RecordBatch:
        cols = self._builder.finish()
        rows = cols["rows"]
        arrays = [
            _var(pa.binary(), rows, cols["key"]),
            _var(pa.binary(), rows, cols["value"]),
            pa.repeat(pa.scalar(self.topic, pa.string()), rows),
            pa.repeat(pa.scalar(self.partition, pa.int32()), rows),
            pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(cols["offset"])]),
            pa.Array.from_buffers(TIMESTAMP_TYPE, rows, [None, pa.py_buffer(cols["timestamp"])]),
            pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(cols["timestampType"])]),
        ]
        if self.include_headers:
            list_offsets, keys, values = cols["headers"]
            count = len(list_offsets) // 4 - 1
            entries = len(keys[1]) // 4 - 1
            struct = pa.StructArray.from_arrays(
                [_var(pa.string(), entries, keys), _var(pa.binary(), entries, values)],
                fields=list(HEADER_TYPE.value_type),
            )
            arrays.append(
                pa.ListArray.from_buffers(HEADER_TYPE, count, [None, pa.py_buffer(list_offsets)], children=[struct])
            )
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
