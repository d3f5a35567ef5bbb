"""Writing DataFrames to seglog topics, with the columns of Spark's Kafka sink.

    df.write.format("seglog").option("path", LOG_DIR).option("topic", "events").save()

Columns: ``value`` (required), ``key``, ``topic`` (the ``topic`` option, when given, overrides it),
``partition``, ``headers`` (array<struct<key: string, value: binary>>), and,
beyond Kafka's sink, ``timestamp`` (the records' CreateTime; otherwise now).
A row without a partition goes where Kafka's default partitioner puts it.

Nothing a task writes is visible until the whole write commits: tasks encode
record batches into staging files at the log dir's root (Kafka ignores files
there), and the driver, holding the dir's lock for the commit only, appends
them; an aborted write deletes them. So a failed task leaves no record
behind, and a dir that another process owns is refused when the write starts.

A batch write also leaves an empty marker file, ``.seglog-staging-<write id>``,
while it is open. When a task fails, Spark aborts the job while the other tasks
may still be starting or running; each task checks the marker after creating
each of its staging files, and the driver removes the marker before the staging
files, so a task that comes late removes its own files instead of leaving them
behind. (A streaming writer serves every micro-batch of its query, and Spark
makes several of them per query, so it has no marker: its write ids start with
``stream``.)

A commit is all or nothing: when an append fails part way (a record the log
refuses, a full disk), every partition the commit touched is truncated back to
where it ended before. Staging files left by a driver that died are removed when
the next write starts, under the dir's lock, so never while a commit runs: a
batch write's files without its marker (the driver died committing), and any
staging file or marker a week old (it died before).
"""

from __future__ import annotations

import contextlib
import os
import struct
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import KafkaStorageError, SeglogError, UnknownTopicOrPartitionError
from ..partitioner import StickyPartitioner
from ..records import Compression, _codec, build_batch, build_batches_from_columns
from ..storage import LogManager
from ..storage import open as open_logs
from . import options as opt

STAGING_PREFIX = ".seglog-staging-"
_FRAME = struct.Struct(">Hii")  # topic length, partition, batch bytes
_BATCH_BYTES = 512 * 1024  # well under max.message.bytes (1 MiB by default)
_FRAME_BYTES = 4 * 1024 * 1024  # batches per append at commit (fewer appends; see write_frames)
_CHUNK_BYTES = 4 * 1024 * 1024  # a staging file's size: the commit removes each once appended
_STALE_S = 7 * 24 * 3600  # a staging file or marker this old belongs to a driver that died
_STREAM = "stream"  # the start of a streaming write's id


@dataclass
class StagedWrite(WriterCommitMessage):
    paths: list[str]  # a task's staging files, in the order it wrote them
    rows: int


class _Encoder:
    """A task's side: Arrow batches into record batches, grouped by topic and partition.

    The work is columnar: pyarrow splits the rows by topic and partition, and the C
    encoder (``build_batches_from_columns``) writes records straight from the Arrow
    buffers. Only rows with headers take the per-record path.
    """

    def __init__(self, topic: str | None, partitions: dict[str, int], compression: Compression) -> None:
        self.topic = topic
        self.partitions = partitions
        self.compression = compression
        self.choosers = {t: StickyPartitioner(n) for t, n in partitions.items()}

    def encode(self, batch: pa.RecordBatch) -> Iterator[tuple[str, int, list[bytearray]]]:
        """The rows of ``batch`` as record batches: (topic, partition, batches), in row order
        within each partition."""
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
        if topic not in self.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}: create it before writing to it")
        targets = self._partitions(topic, rows)
        chosen = pc.unique(targets)
        if len(chosen) == 1:  # the usual case: a task's rows of one partition, or keyless rows
            yield topic, chosen[0].as_py(), self._batches(rows)
        else:
            for p in chosen:  # typed scalars: pc.equal converts a Python int with imports each call
                yield topic, p.as_py(), self._batches(rows.filter(pc.equal(targets, p)))
        self.choosers[topic].batch_done()

    def _partitions(self, topic: str, rows: pa.RecordBatch) -> pa.Array:
        """Each row's partition: its ``partition`` column, else Kafka's default partitioner."""
        count = self.partitions[topic]
        given = rows.column("partition").cast(pa.int32()) if "partition" in rows.schema.names else None
        if given is not None and given.null_count == 0:
            chosen = given
        else:
            key = _binary(rows, "key")
            by_key = pa.Array.from_buffers(
                pa.int32(), len(rows), [None, pa.py_buffer(_codec.partitions_for_keys(len(rows), key, count))]
            )
            sticky = pa.scalar(self.choosers[topic].partition(None), pa.int32())
            chosen = pc.if_else(pc.equal(by_key, -1), sticky, by_key)
            if given is not None:
                chosen = pc.coalesce(given, chosen)
        low, high = pc.min_max(chosen).values()
        if len(chosen) and (low.as_py() < 0 or high.as_py() >= count):
            bad = high.as_py() if high.as_py() >= count else low.as_py()
            raise UnknownTopicOrPartitionError(f"topic {topic!r} has no partition {bad}")
        return chosen

    def _batches(self, rows: pa.RecordBatch) -> list[bytearray]:
        names = rows.schema.names
        if "headers" in names and pc.sum(pc.list_value_length(rows.column("headers"))).as_py():
            return self._batches_with_headers(rows)
        return build_batches_from_columns(
            len(rows),
            _binary(rows, "key"),
            _binary(rows, "value"),
            _timestamps(rows),
            compression=self.compression,
            max_bytes=_BATCH_BYTES,
        )

    def _batches_with_headers(self, rows: pa.RecordBatch) -> list[bytearray]:
        names = rows.schema.names
        n = len(rows)
        keys = rows.column("key").to_pylist() if "key" in names else [None] * n
        values = rows.column("value").to_pylist()
        headers = rows.column("headers").to_pylist()
        stamps = rows.column("timestamp").cast(pa.int64()).to_pylist() if "timestamp" in names else [None] * n
        records = [
            (_bytes(k), _bytes(v), None if ts is None else ts // 1000, [(h["key"], h["value"]) for h in hs or ()])
            for k, v, hs, ts in zip(keys, values, headers, stamps, strict=True)
        ]
        out, size, start = [], 0, 0
        for i, r in enumerate(records):
            size += 24 + len(r[0] or b"") + len(r[1] or b"")
            if size >= _BATCH_BYTES or i == n - 1:
                out.append(build_batch(records[start : i + 1], compression=self.compression))
                size, start = 0, i + 1
        return out


def write_frames(out: BinaryIO, topic: str, partition: int, batches: list[bytearray], limit: int) -> None:
    """Staging frames of the record batches of one partition, written without copying them.

    A frame holds consecutive batches up to ``limit`` bytes (a larger batch goes alone):
    the commit appends a frame at a time, and the log refuses an append larger than a
    segment."""
    name = topic.encode()
    start = 0
    while start < len(batches):
        end, size = start + 1, len(batches[start])
        while end < len(batches) and size + len(batches[end]) <= limit:
            size += len(batches[end])
            end += 1
        out.write(_FRAME.pack(len(name), partition, size) + name)
        for data in batches[start:end]:
            out.write(data)
        start = end


def _binary(rows: pa.RecordBatch, name: str) -> tuple | None:
    """A binary (or string) column as the C encoder takes it: Arrow's buffers."""
    if name not in rows.schema.names:
        return None
    column = rows.column(name)
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


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def read_staged(path: str) -> Iterator[tuple[str, int, bytearray]]:
    """The frames of a staging file: (topic, partition, record batches).

    Each frame's batches are read into a bytearray of their own, which the log's
    append takes as it is (it rewrites base offsets in place): one copy, from the
    file to the log."""
    with open(path, "rb", buffering=0) as f:
        while head := f.read(_FRAME.size):
            if len(head) < _FRAME.size:
                raise KafkaStorageError(f"staging file {path} is cut short", file=path)
            topic_len, partition, size = _FRAME.unpack(head)
            topic = f.read(topic_len).decode()
            data = bytearray(size)
            if f.readinto(data) != size:
                raise KafkaStorageError(f"staging file {path} is cut short", file=path)
            yield topic, partition, data


# the column types Spark's Kafka sink takes (other columns are ignored, as there)
_COLUMN_TYPES = {
    "key": ("binary", "string"),
    "value": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
    "timestamp": ("timestamp",),
}


def _check_types(schema: StructType) -> None:
    for f in schema.fields:
        allowed = _COLUMN_TYPES.get(f.name)
        if allowed is not None and f.dataType.simpleString() not in allowed:
            raise opt.OptionError(
                f"column {f.name} must be of type {' or '.join(allowed)}, not {f.dataType.simpleString()}"
            )


def _roll_back(logs: LogManager, ends: dict[tuple[str, int], int], cause: BaseException) -> None:
    """Truncate every partition a failed commit touched back to where it ended before."""
    for (topic, partition), end in ends.items():
        try:
            logs.partition(topic, partition).truncate_to(end)
        except Exception as e:  # the others are still rolled back; the note says which failed
            cause.add_note(f"rolling back {topic}-{partition} to offset {end} failed too: {e}")


def remove_dead_staging(log_dir: str) -> list[str]:
    """Remove the staging files of writes whose driver is gone: a batch write's files
    without its marker (the driver died committing) and any staging file or marker a
    week old. The caller holds the dir's lock, so no commit is reading them. Returns the
    names removed."""
    now = time.time()
    ages: dict[str, float] = {}
    for name in os.listdir(log_dir):
        if name.startswith(STAGING_PREFIX):
            with contextlib.suppress(FileNotFoundError):
                ages[name] = now - os.stat(os.path.join(log_dir, name)).st_mtime
    ids = {name: name[len(STAGING_PREFIX) :].split("-", 1)[0] for name in ages}
    open_writes = {ids[n] for n, age in ages.items() if n == STAGING_PREFIX + ids[n] and age < _STALE_S}
    dead = [
        n for n, age in ages.items()
        if age >= _STALE_S or not (ids[n] in open_writes or ids[n].startswith(_STREAM))
    ]  # fmt: skip
    for name in dead:
        with contextlib.suppress(FileNotFoundError):  # a late task removing its own file
            os.unlink(os.path.join(log_dir, name))
    return dead


class WriteAbortedError(SeglogError):
    """A task of a write that the driver has already committed or aborted."""


class _StagingFiles:
    """A task's staging files: a new one each time the last holds _CHUNK_BYTES.

    Small files let the commit remove each as soon as its records are in the log, so
    a write's bytes sit in the page cache about once rather than twice (staging, then
    log), and the log's new pages are ones just freed. Taking fresh pages instead cost
    the commit several times the copy itself where memory is scarce, or, as on the VMs
    the benchmarks run on, where the kernel hands free memory back to the host."""

    def __init__(self, prefix: str, write_id: str, marker: str | None) -> None:
        self.prefix = prefix
        self.write_id = write_id
        self.marker = marker  # the write's open marker (batch writes), checked for each new file
        self.paths: list[str] = []
        self._out: BinaryIO | None = None

    def file(self) -> BinaryIO:
        """The file to write the next frames to."""
        if self._out is None or self._out.tell() >= _CHUNK_BYTES:
            self.close()
            path = f"{self.prefix}{len(self.paths):06d}"
            self._out = open(path, "xb")  # noqa: SIM115 (open across calls; close() and remove() end it)
            self.paths.append(path)
            # after creating the file: a driver that closed the write before it could not see it
            if self.marker is not None and not os.path.exists(self.marker):
                when = "while this task ran" if len(self.paths) > 1 else "before this task began"
                raise WriteAbortedError(f"write {self.write_id} was closed {when}", file=path)
        return self._out

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None

    def remove(self) -> None:
        self.close()
        for path in self.paths:
            with contextlib.suppress(FileNotFoundError):  # the driver's abort may have been first
                os.unlink(path)


class _SinkBase:
    """Driver-side setup shared by the batch and the streaming writer."""

    # a streaming writer serves every micro-batch of its query, so it has no marker to close
    uses_marker = True

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.dirs = opt.log_dirs(options)
        self.topic = next((v for k, v in options.items() if k.lower() == "topic"), None)
        names = {f.name for f in schema.fields}
        if "value" not in names:
            raise opt.OptionError('writing to seglog needs a "value" column')
        _check_types(schema)
        if self.topic is None and "topic" not in names:
            raise opt.OptionError('writing to seglog needs a "topic" column or the "topic" option')
        codec = next((v for k, v in options.items() if k.lower() == "compression"), None)
        self.compression = Compression.parse(codec) if codec else Compression.NONE
        self.write_id = uuid.uuid4().hex
        # take the lock once now: a dir another process owns is refused before any task runs
        with open_logs(self.dirs, background=False) as logs:
            self.partitions = {t: len(logs.partitions(t)) for t in logs.topics()}
            self.frame_bytes = {t: min(_FRAME_BYTES, logs.topic_config(t).segment_bytes) for t in self.partitions}
            remove_dead_staging(self.dirs[0])  # under the lock: no commit is reading them
        if self.topic is not None and self.topic not in self.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {self.topic!r}: create it before writing to it")
        if self.uses_marker:
            self.marker: str | None = os.path.join(self.dirs[0], f"{STAGING_PREFIX}{self.write_id}")
            open(self.marker, "xb").close()
        else:
            self.write_id, self.marker = _STREAM + self.write_id, None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        encoder = _Encoder(self.topic, self.partitions, self.compression)
        prefix = os.path.join(self.dirs[0], f"{STAGING_PREFIX}{self.write_id}-{uuid.uuid4().hex}-")
        staging = _StagingFiles(prefix, self.write_id, self.marker)
        rows = 0
        try:
            for batch in iterator:
                rows += batch.num_rows
                for topic, partition, batches in encoder.encode(batch):
                    write_frames(staging.file(), topic, partition, batches, self.frame_bytes[topic])
            staging.close()
        except BaseException:
            staging.remove()  # a failed task leaves nothing behind
            raise
        return StagedWrite(staging.paths, rows)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [m for m in messages if isinstance(m, StagedWrite)]
        self._close_marker()  # from here on, a late task (a speculative copy) stages nothing
        try:
            with ThreadPoolExecutor(1) as unlinker, open_logs(self.dirs, background=False) as logs:
                ends: dict[tuple[str, int], int] = {}  # where each partition the commit touches ended
                try:
                    for message in staged:
                        for path in message.paths:
                            for topic, partition, data in read_staged(path):
                                log = logs.partition(topic, partition)
                                ends.setdefault((topic, partition), log.log_end_offset)
                                log.append_batches(data)
                            # its records are in the log: its pages go now, and the next file's
                            # appends take them up (see _StagingFiles); freeing 4 MiB of page
                            # cache takes ~0.5 ms, which a thread does beside the next appends
                            unlinker.submit(os.unlink, path)
                except BaseException as e:
                    _roll_back(logs, ends, e)
                    raise
        finally:
            self._discard(staged)

    def _close_marker(self) -> None:
        if self.marker is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.marker)

    def _discard(self, messages: list[Any]) -> None:
        """Remove this write's staging files, those of tasks that died without a word too."""
        self._close_marker()  # first: a task that creates its file after this removes it itself
        paths = {p for m in messages if isinstance(m, StagedWrite) for p in m.paths}
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
    uses_marker = False

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        self._discard(messages)
