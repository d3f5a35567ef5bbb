"""Writing DataFrames to seglog topics, with the columns of Spark's Kafka sink.

    df.write.format("seglog").option("path", LOG_DIR).option("topic", "events").mode("append").save()

Columns: ``value`` (required), ``key``, ``topic`` (the ``topic`` option, when given, overrides it),
``partition``, ``headers`` (array<struct<key: string, value: binary>>). A ``timestamp``
column is ignored, as Spark's Kafka sink ignores it (records get the write's time), unless
the option ``useTimestampColumn`` is true: a copied topic would otherwise carry its old
times into the next retention pass. A row without a partition goes where Kafka's default
partitioner puts it. The ``kafka.*`` producer options that mean something here are
honoured (``options.producer_options``); the save mode is append only.

Nothing a task writes is visible until the whole write commits. The sink only
encodes Arrow into record batches; staging them and committing them is the
storage layer's (``storage.staged_append``): each task stages its batches beside
the log dir in files laid out as segments, and the driver, holding the dir's lock
for the commit only (the logs' owner for that time), appends them all or nothing;
an aborted write deletes them. So a failed task leaves no record behind, and a dir
that another process owns is refused when the write starts. A batch write keeps a
marker open while it runs, so that tasks starting after an abort stage nothing; a
streaming writer serves every micro-batch of its query, and has none. Staging
files left by a driver that died are removed when the next write starts, under the
dir's lock, so never while a commit runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import RecordTooLargeError, SeglogError, UnknownTopicOrPartitionError
from ..partitioner import StickyPartitioner, partitions_for_keys
from ..records import HEADER_SIZE, Compression, build_batches_from_columns
from ..storage import open as open_logs
from ..storage.staged_append import StagedFile, Staging, commit_staged, remove_dead_staging
from . import options as opt

log = logging.getLogger(__name__)

_BATCH_BYTES = 512 * 1024  # half of max.message.bytes by default (a batch may pass it by a record)


@dataclass
class StagedWrite(WriterCommitMessage):
    files: list[StagedFile]  # (topic, partition, path) of a task's staging files, in write order
    rows: int


class Encoder:
    """A task's side: Arrow batches into record batches, grouped by topic and partition (for the
    log dirs' staging here, or for the producer of ``broker_sink``).

    The work is columnar: pyarrow splits the rows by topic and partition, and the C
    encoder (``build_batches_from_columns``) writes records, headers too, straight from the
    Arrow buffers. ``partitions(topic)`` is the
    topic's partitions that can be written (it raises for a topic that cannot), ``batch_bytes(topic)``
    what its batches are filled to.
    """

    def __init__(
        self,
        topic: str | None,
        partitions: Callable[[str], list[int]],
        batch_bytes: Callable[[str], int],
        compression: Compression,
        *,
        use_timestamps: bool = False,
        max_record_bytes: int | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.batch_bytes = batch_bytes
        self.compression = compression
        self.use_timestamps = use_timestamps
        self.max_record_bytes = max_record_bytes
        # keyless rows stick to a partition present here (Kafka's: an available one), keyed rows
        # hash over the topic's count, its highest partition + 1 where a dir holds only some
        self.choosers: dict[str, StickyPartitioner] = {}

    def encode(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, list[bytearray]]]:
        """The rows of ``batch`` as record batches: (topic, partition, batches), in row order
        within each partition."""
        if not self.use_timestamps and "timestamp" in batch.schema.names:
            batch = batch.drop_columns(["timestamp"])  # records get the write's time
        if self.max_record_bytes is not None:
            _check_record_sizes(batch, self.max_record_bytes)
        if self.topic is not None:  # as in Spark's Kafka sink, the option overrides the column
            yield from self._encode_topic(self.topic, batch)
        elif "topic" in batch.schema.names:
            column = batch.column("topic")
            if column.null_count:
                raise opt.OptionError('a row has no topic: give a "topic" column or the "topic" option')
            for topic in pc.unique(column).to_pylist():
                yield from self._encode_topic(topic, batch.filter(pc.equal(column, topic)))
        elif batch.num_rows:
            raise opt.OptionError('a row has no topic: give a "topic" column or the "topic" option')

    def _encode_topic(self, topic: str, rows: pa.RecordBatch) -> Iterator[tuple[str, int, list[bytearray]]]:
        present = self.partitions(topic)
        if topic not in self.choosers:
            self.choosers[topic] = StickyPartitioner(len(present))
        targets = self._partitions(topic, present, rows)
        chosen = pc.unique(targets)
        limit = self.batch_bytes(topic)
        if len(chosen) == 1:  # the usual case: a task's rows of one partition, or keyless rows
            yield topic, chosen[0].as_py(), self._batches(rows, limit)
        else:
            for p in chosen:  # typed scalars: pc.equal converts a Python int with imports each call
                yield topic, p.as_py(), self._batches(rows.filter(pc.equal(targets, p)), limit)
        self.choosers[topic].batch_done()

    def _partitions(self, topic: str, present: list[int], rows: pa.RecordBatch) -> pa.Array:
        """Each row's partition: its ``partition`` column, else Kafka's default partitioner."""
        count = present[-1] + 1
        given = rows.column("partition").cast(pa.int32()) if "partition" in rows.schema.names else None
        if given is not None and given.null_count == 0:
            chosen = given
        else:
            key = _binary(rows, "key")
            by_key = pa.Array.from_buffers(
                pa.int32(), len(rows), [None, pa.py_buffer(partitions_for_keys(len(rows), key, count))]
            )
            sticky = pa.scalar(present[self.choosers[topic].partition(None)], pa.int32())
            chosen = pc.if_else(pc.equal(by_key, -1), sticky, by_key)
            if given is not None:
                chosen = pc.coalesce(given, chosen)
        missing = pc.invert(pc.is_in(chosen, pa.array(present, pa.int32())))
        if pc.any(missing).as_py():
            bad = pc.filter(chosen, missing)[0].as_py()
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {bad} here (it has {present})")
        return chosen

    def _batches(self, rows: pa.RecordBatch, limit: int) -> list[bytearray]:
        return build_batches_from_columns(
            len(rows),
            _binary(rows, "key"),
            _binary(rows, "value"),
            _timestamps(rows),
            _headers(rows),
            compression=self.compression,
            max_bytes=limit,
        )


# a v2 record's framing beyond its key and value, at most (length, attributes, deltas, lengths)
_RECORD_OVERHEAD = 21
_BATCH_OVERHEAD = HEADER_SIZE


def _check_record_sizes(rows: pa.RecordBatch, limit: int) -> None:
    """Kafka's producer refuses a record larger than max.request.size, before sending it."""
    size = pa.scalar(0, pa.int64())
    for name in ("key", "value"):
        if name in rows.schema.names:
            size = pc.add(size, pc.fill_null(pc.binary_length(rows.column(name)).cast(pa.int64()), 0))
    if "headers" in rows.schema.names:
        headers = pc.list_flatten(rows.column("headers"))
        if len(headers):  # header bytes, summed per row
            lengths = pc.add(
                pc.fill_null(pc.binary_length(pc.struct_field(headers, "key")), 0).cast(pa.int64()),
                pc.fill_null(pc.binary_length(pc.struct_field(headers, "value")), 0).cast(pa.int64()),
            )
            owners = pc.list_parent_indices(rows.column("headers"))
            per_row = pa.table({"row": owners, "n": lengths}).group_by("row").aggregate([("n", "sum")])
            extra = [0] * len(rows)
            for row, n in zip(per_row.column("row").to_pylist(), per_row.column("n_sum").to_pylist(), strict=True):
                extra[row] = n
            size = pc.add(size, pa.array(extra, pa.int64()))
    largest = pc.max(size).as_py() if len(rows) else None
    if largest is not None and largest + _RECORD_OVERHEAD + _BATCH_OVERHEAD > limit:
        raise RecordTooLargeError(
            f"a record is {largest + _RECORD_OVERHEAD + _BATCH_OVERHEAD} bytes when serialized, larger than "
            f"{limit}, the value of the kafka.max.request.size option"
        )


def _binary(rows: pa.RecordBatch, name: str) -> tuple | None:
    """A binary (or string) column as the C encoder takes it: Arrow's buffers."""
    return _buffers(rows.column(name)) if name in rows.schema.names else None


def _buffers(column: pa.Array) -> tuple:
    if pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    validity, offsets, data = column.buffers()[:3]
    return (validity, offsets, data if data is not None else b"", column.offset)


def _timestamps(rows: pa.RecordBatch) -> tuple | None:
    if "timestamp" not in rows.schema.names:
        return None
    column = rows.column("timestamp").cast(pa.int64())
    validity, values = column.buffers()[:2]
    return (validity, values, column.offset)


def _headers(rows: pa.RecordBatch) -> tuple | None:
    """The headers column as the C encoder takes it: each row's count (a null list: none), then
    every row's header keys and values one after another, Arrow's buffers."""
    if "headers" not in rows.schema.names:
        return None
    column = rows.column("headers")
    counts = pc.fill_null(pc.list_value_length(column), 0).cast(pa.int32())
    if counts.offset:  # (the C reads the counts from the buffer's start)
        counts = pa.concat_arrays([pa.array([], pa.int32()), counts])
    entries = pc.list_flatten(column)
    if not len(entries):
        return None
    keys, values = pc.struct_field(entries, "key"), pc.struct_field(entries, "value")
    return (counts.buffers()[1], len(entries), _buffers(keys), _buffers(values))


# the column types Spark's Kafka sink takes (other columns are ignored, as there)
_COLUMN_TYPES = {
    "key": ("binary", "string"),
    "value": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
    "timestamp": ("timestamp",),
}


def check_columns(options: dict[str, str], schema: StructType) -> tuple[str | None, bool]:
    """The ``topic`` option and ``useTimestampColumn`` of a write, after checking that the columns
    are those of Spark's Kafka sink: a value, a topic (or the option), each of its type."""
    topic = next((v for k, v in options.items() if k.lower() == "topic"), None)
    names = {f.name for f in schema.fields}
    if "value" not in names:
        raise opt.OptionError('writing to seglog needs a "value" column')
    use_timestamps = opt.parse_bool(options, "useTimestampColumn", False)
    _check_types(schema, use_timestamps)
    if topic is None and "topic" not in names:
        raise opt.OptionError('writing to seglog needs a "topic" column or the "topic" option')
    return topic, use_timestamps


def _check_types(schema: StructType, use_timestamps: bool) -> None:
    for f in schema.fields:
        allowed = _COLUMN_TYPES.get(f.name) if f.name != "timestamp" or use_timestamps else None
        if allowed is not None and f.dataType.simpleString() not in allowed:
            raise opt.OptionError(
                f"column {f.name} must be of type {' or '.join(allowed)}, not {f.dataType.simpleString()}"
            )


class _SinkBase:
    """Driver-side setup shared by the batch and the streaming writer."""

    # a streaming writer serves every micro-batch of its query, so it has no marker to close
    uses_marker = True

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.dirs = opt.log_dirs(options)
        self.topic, self.use_timestamps = check_columns(options, schema)
        self.producer = opt.producer_options(options)
        # take the lock once now: a dir another process owns is refused before any task runs
        with open_logs(self.dirs, background=False) as logs:
            self.partitions = {t: logs.partitions(t) for t in logs.topics()}
            configs = {t: logs.topic_config(t) for t in self.partitions}
            remove_dead_staging(self.dirs[0])  # under the lock: no commit is reading them
        self.file_bytes = {t: c.segment_bytes for t, c in configs.items()}
        # a batch may pass its limit by one record: half of what the log takes leaves room
        asked = self.producer.batch_size
        batch_size = min(_BATCH_BYTES if asked is None else asked, self.producer.max_request_size)
        self.batch_bytes = {
            t: max(1, min(batch_size, c.max_message_bytes // 2, c.segment_bytes // 2)) for t, c in configs.items()
        }
        if self.topic is not None and self.topic not in self.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {self.topic!r}: create it before writing to it")
        self.staging = Staging.begin(self.dirs[0], marked=self.uses_marker)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        encoder = Encoder(
            self.topic,
            self._present,
            self.batch_bytes.__getitem__,
            self.producer.compression,
            use_timestamps=self.use_timestamps,
            max_record_bytes=self.producer.max_request_size,
        )
        rows = 0
        with self.staging.writer(self.file_bytes) as staged:  # a failed task leaves nothing behind
            for batch in iterator:
                rows += batch.num_rows
                for topic, partition, batches in encoder.encode(batch):
                    staged.append(topic, partition, batches)
        return StagedWrite(staged.files, rows)

    def _present(self, topic: str) -> list[int]:
        """The partitions of ``topic`` in the log dirs."""
        if topic not in self.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}: create it before writing to it")
        return self.partitions[topic]

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [m for m in messages if isinstance(m, StagedWrite)]
        try:
            self.staging.close()  # from here on, a late task (a speculative copy) stages nothing
            # the dirs' lock makes this process the logs' owner for the commit
            with open_logs(self.dirs, background=False) as logs:
                commit_staged(logs, [f for m in staged for f in m.files])
        except BaseException as e:
            try:
                self._discard(staged)
            except SeglogError as cleanup:
                e.add_note(f"removing the write's staging files failed too: {cleanup}")
            raise
        try:
            self._discard(staged)
        except SeglogError as e:  # the write is in: what is left, the next write's sweep removes
            log.warning("write %s committed, but removing its staging files failed: %s", self.staging.write_id, e)

    def _discard(self, messages: list[Any]) -> None:
        """Remove this write's staging files, those of tasks that died without a word too."""
        self.staging.discard(p for m in messages if isinstance(m, StagedWrite) for _, _, p in m.files)


class SeglogWriter(_SinkBase, DataSourceArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._discard(messages)


class SeglogStreamWriter(_SinkBase, DataSourceStreamArrowWriter):
    uses_marker = False

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._discard(messages)


def batch_writer(options: dict[str, str], schema: StructType) -> DataSourceArrowWriter:
    """A batch write's writer: through the brokers with ``kafka.bootstrap.servers``
    (``broker_sink``), else into the log dirs of ``path``."""
    from .eos_sink import refuse_in_batch_writes

    refuse_in_batch_writes(options)
    if opt.client_options(options) is None:
        return SeglogWriter(options, schema)
    from .broker_sink import BrokerWriter

    return BrokerWriter(options, schema)


def stream_writer(options: dict[str, str], schema: StructType) -> DataSourceStreamArrowWriter:
    """``batch_writer`` for a streaming query; with ``exactlyOnce``, ``eos_sink``'s (through the brokers only)."""
    from .eos_sink import ExactlyOnceStreamWriter, exactly_once

    if opt.client_options(options) is None:
        if exactly_once(options):
            raise opt.OptionError("option exactlyOnce: only a write through kafka.bootstrap.servers is exactly-once")
        return SeglogStreamWriter(options, schema)
    if exactly_once(options):
        return ExactlyOnceStreamWriter(options, schema)
    from .broker_sink import BrokerStreamWriter

    return BrokerStreamWriter(options, schema)
