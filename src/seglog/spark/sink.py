"""Writing DataFrames to seglog topics, with the columns of Spark's Kafka sink.

    df.write.format("seglog").option("path", LOG_DIR).option("topic", "events").save()

Columns: ``value`` (required), ``key``, ``topic`` (or the ``topic`` option),
``partition``, ``headers`` (array<struct<key: string, value: binary>>), and,
beyond Kafka's sink, ``timestamp`` (the records' CreateTime; otherwise now).
A row without a partition goes where Kafka's default partitioner puts it.

Nothing a task writes is visible until the whole write commits: tasks encode
record batches into staging files at the log dir's root (Kafka ignores files
there), and the driver, holding the dir's lock for the commit only, appends
them; an aborted write deletes them. So a failed task leaves no record
behind, and a dir that another process owns is refused when the write starts.
"""

from __future__ import annotations

import contextlib
import os
import struct
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import UnknownTopicOrPartitionError
from ..partitioner import StickyPartitioner
from ..records import Compression, build_batch
from ..storage import open as open_logs
from . import options as opt

STAGING_PREFIX = ".seglog-staging-"
_FRAME = struct.Struct(">Hii")  # topic length, partition, batch bytes
_BATCH_BYTES = 512 * 1024  # well under max.message.bytes (1 MiB by default)


@dataclass
class StagedWrite(WriterCommitMessage):
    path: str
    rows: int


class _Encoder:
    """A task's side: rows of Arrow batches into record batches, grouped by partition."""

    def __init__(self, topic: str | None, partitions: dict[str, int], compression: Compression) -> None:
        self.topic = topic
        self.partitions = partitions
        self.compression = compression
        self.choosers = {t: StickyPartitioner(n) for t, n in partitions.items()}
        self.pending: dict[tuple[str, int], list[tuple]] = {}
        self.sizes: dict[tuple[str, int], int] = {}

    def rows(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, tuple]]:
        names = batch.schema.names
        n = batch.num_rows
        values = batch.column("value").to_pylist()
        keys = batch.column("key").to_pylist() if "key" in names else [None] * n
        topics = batch.column("topic").to_pylist() if "topic" in names else [self.topic] * n
        parts = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
        stamps = _millis(batch.column("timestamp")) if "timestamp" in names else [None] * n
        for key, value, topic, p, hdrs, ts in zip(keys, values, topics, parts, headers, stamps, strict=True):
            if topic is None:
                raise opt.OptionError('a row has no topic: give a "topic" column or the "topic" option')
            if topic not in self.partitions:
                raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}: create it before writing to it")
            if p is None:
                p = self.choosers[topic].partition(key)
            elif not 0 <= p < self.partitions[topic]:
                raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {p}")
            pairs = [(h["key"], h["value"]) for h in hdrs] if hdrs else ()
            yield topic, p, (_bytes(key), _bytes(value), ts, pairs)

    def add(self, topic: str, partition: int, record: tuple) -> bytes | None:
        tp = (topic, partition)
        self.pending.setdefault(tp, []).append(record)
        size = self.sizes.get(tp, 0) + 24 + len(record[0] or b"") + len(record[1] or b"")
        self.sizes[tp] = size
        return self.flush(tp) if size >= _BATCH_BYTES else None

    def flush(self, tp: tuple[str, int]) -> bytes:
        records = self.pending.pop(tp)
        self.sizes.pop(tp, None)
        self.choosers[tp[0]].batch_done()
        data = build_batch(records, compression=self.compression)
        topic = tp[0].encode()
        return _FRAME.pack(len(topic), tp[1], len(data)) + topic + bytes(data)


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _millis(column: pa.Array) -> list[int | None]:
    micros = column.cast(pa.int64()).to_pylist() if pa.types.is_timestamp(column.type) else column.to_pylist()
    return [None if m is None else m // 1000 for m in micros]


def read_staged(path: str) -> Iterator[tuple[str, int, bytes]]:
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        topic_len, partition, size = _FRAME.unpack_from(data, pos)
        pos += _FRAME.size
        topic = data[pos : pos + topic_len].decode()
        pos += topic_len
        yield topic, partition, data[pos : pos + size]
        pos += size


class _SinkBase:
    """Driver-side setup shared by the batch and the streaming writer."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.dirs = opt.log_dirs(options)
        self.topic = next((v for k, v in options.items() if k.lower() == "topic"), None)
        names = {f.name for f in schema.fields}
        if "value" not in names:
            raise opt.OptionError('writing to seglog needs a "value" column')
        if self.topic is None and "topic" not in names:
            raise opt.OptionError('writing to seglog needs a "topic" column or the "topic" option')
        codec = next((v for k, v in options.items() if k.lower() == "compression"), None)
        self.compression = Compression.parse(codec) if codec else Compression.NONE
        self.write_id = uuid.uuid4().hex
        # take the lock once now: a dir another process owns is refused before any task runs
        with open_logs(self.dirs, background=False) as logs:
            self.partitions = {t: len(logs.partitions(t)) for t in logs.topics()}
        if self.topic is not None and self.topic not in self.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {self.topic!r}: create it before writing to it")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        encoder = _Encoder(self.topic, self.partitions, self.compression)
        path = os.path.join(self.dirs[0], f"{STAGING_PREFIX}{self.write_id}-{uuid.uuid4().hex}")
        rows = 0
        try:
            with open(path, "xb") as out:
                for batch in iterator:
                    for topic, partition, record in encoder.rows(batch):
                        rows += 1
                        frame = encoder.add(topic, partition, record)
                        if frame is not None:
                            out.write(frame)
                for tp in list(encoder.pending):
                    out.write(encoder.flush(tp))
        except BaseException:
            os.unlink(path)  # a failed task leaves nothing behind
            raise
        return StagedWrite(path, rows)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [m for m in messages if isinstance(m, StagedWrite)]
        try:
            with open_logs(self.dirs, background=False) as logs:
                for message in staged:
                    for topic, partition, data in read_staged(message.path):
                        logs.partition(topic, partition).append_batches(data)
        finally:
            self._discard(staged)

    def _discard(self, messages: list[Any]) -> None:
        """Remove this write's staging files, those of tasks that died without a word too."""
        paths = {m.path for m in messages if isinstance(m, StagedWrite)}
        prefix = f"{STAGING_PREFIX}{self.write_id}-"
        paths.update(os.path.join(self.dirs[0], n) for n in os.listdir(self.dirs[0]) if n.startswith(prefix))
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


class SeglogWriter(_SinkBase, DataSourceArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._discard(messages)


class SeglogStreamWriter(_SinkBase, DataSourceStreamArrowWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._discard(messages)
