"""Writing DataFrames to seglog topics, with the columns of Spark's Kafka sink.

    df.write.format("seglog").option("path", LOG_DIR).option("topic", "events").mode("append").save()

Columns: ``value`` (required), ``key``, ``topic`` (the ``topic`` option, when given, overrides it),
``partition``, ``headers`` (array<struct<key: string, value: binary>>). A ``timestamp``
column is ignored, as Spark's Kafka sink ignores it (records get the write's time), unless
the option ``useTimestampColumn`` is true: a copied topic would otherwise carry its old
times into the next retention pass. A row without a partition goes where Kafka's default
partitioner puts it. The ``kafka.*`` producer options that mean something here are
honoured (``options.producer_options``); the save mode is append only.

Nothing a task writes is visible until the whole write commits: tasks encode
record batches into staging files at the log dir's root (Kafka ignores files
there), one file per partition at a time, laid out as a segment's ``.log`` is;
the driver, holding the dir's lock for the commit only, appends them; an
aborted write deletes them. So a failed task leaves no record behind, and a dir
that another process owns is refused when the write starts.

A large staging file is not copied at commit: it becomes a segment of its own
(``PartitionLog.append_segment_file``: validated and given its offsets in place,
then renamed into the partition's directory). A small one is copied into the
active segment, so that small writes do not leave small segments behind. Tasks
write their files to disk as they go, so the flush that ends a commit finds the
bytes there, and the commit appends partitions side by side.

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
import errno
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..errors import KafkaStorageError, RecordTooLargeError, SeglogError, UnknownTopicOrPartitionError
from ..partitioner import StickyPartitioner, partitions_for_keys
from ..records import HEADER_SIZE, Compression, build_batch, build_batches_from_columns
from ..storage import LogManager, PartitionLog
from ..storage import open as open_logs
from . import options as opt

STAGING_PREFIX = ".seglog-staging-"
_BATCH_BYTES = 512 * 1024  # half of max.message.bytes by default (a batch may pass it by a record)
# A staging file this large (or half of segment.bytes, if less) becomes a segment at commit:
# copying 16 MiB costs ~10 ms, while a segment costs three files and their maps.
_ADOPT_BYTES = 16 * 1024 * 1024
_SYNC_BYTES = 8 * 1024 * 1024  # a task's bytes written to disk behind it, this many at a time
_OPEN_FILES = 64  # a task's staging files open at once (a topic may have thousands of partitions)
_STALE_S = 7 * 24 * 3600  # a staging file or marker this old belongs to a driver that died
_STREAM = "stream"  # the start of a streaming write's id
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


@dataclass
class StagedWrite(WriterCommitMessage):
    files: list[tuple[str, int, str]]  # (topic, partition, path) of a task's staging files, in write order
    rows: int


class _Encoder:
    """A task's side: Arrow batches into record batches, grouped by topic and partition.

    The work is columnar: pyarrow splits the rows by topic and partition, and the C
    encoder (``build_batches_from_columns``) writes records straight from the Arrow
    buffers. Only rows with headers take the per-record path.
    """

    def __init__(
        self,
        topic: str | None,
        partitions: dict[str, int],
        batch_bytes: dict[str, int],
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
        self.choosers = {t: StickyPartitioner(n) for t, n in partitions.items()}

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
        if topic not in self.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}: create it before writing to it")
        targets = self._partitions(topic, rows)
        chosen = pc.unique(targets)
        limit = self.batch_bytes[topic]
        if len(chosen) == 1:  # the usual case: a task's rows of one partition, or keyless rows
            yield topic, chosen[0].as_py(), self._batches(rows, limit)
        else:
            for p in chosen:  # typed scalars: pc.equal converts a Python int with imports each call
                yield topic, p.as_py(), self._batches(rows.filter(pc.equal(targets, p)), limit)
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
                pa.int32(), len(rows), [None, pa.py_buffer(partitions_for_keys(len(rows), key, count))]
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

    def _batches(self, rows: pa.RecordBatch, limit: int) -> list[bytearray]:
        names = rows.schema.names
        if "headers" in names and pc.sum(pc.list_value_length(rows.column("headers"))).as_py():
            return self._batches_with_headers(rows, limit)
        return build_batches_from_columns(
            len(rows),
            _binary(rows, "key"),
            _binary(rows, "value"),
            _timestamps(rows),
            compression=self.compression,
            max_bytes=limit,
        )

    def _batches_with_headers(self, rows: pa.RecordBatch, limit: int) -> list[bytearray]:
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
            if size >= limit or i == n - 1:
                out.append(build_batch(records[start : i + 1], compression=self.compression))
                size, start = 0, i + 1
        return out


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


# the column types Spark's Kafka sink takes (other columns are ignored, as there)
_COLUMN_TYPES = {
    "key": ("binary", "string"),
    "value": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": ("array<struct<key:string,value:binary>>",),
    "timestamp": ("timestamp",),
}


def _check_types(schema: StructType, use_timestamps: bool) -> None:
    for f in schema.fields:
        allowed = _COLUMN_TYPES.get(f.name) if f.name != "timestamp" or use_timestamps else None
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
    """A task's staging files: for each partition it writes to, one file at a time of
    record batches as a segment holds them, a new one before a file would pass its
    topic's segment.bytes (so that the commit may make it a segment).

    A thread writes the files' bytes to disk while the task goes on encoding, every
    _SYNC_BYTES: the commit, which runs alone on the driver, then finds them there,
    and the writes of tasks side by side overlap their work rather than queue at the end."""

    def __init__(self, prefix: str, write_id: str, marker: str | None, limits: dict[str, int]) -> None:
        self.prefix = prefix
        self.write_id = write_id
        self.marker = marker  # the write's open marker (batch writes), checked for each new file
        self.limits = limits
        self.files: list[tuple[str, int, str]] = []
        self._current: dict[tuple[str, int], tuple[str, int]] = {}  # a partition's file and its size
        self._open: OrderedDict[str, BinaryIO] = OrderedDict()  # least recently written first
        self._dirty: set[str] = set()  # files written since their last sync
        self._unsynced = 0
        self._syncer = ThreadPoolExecutor(1)
        self._syncs: list[Future[None]] = []

    def write(self, topic: str, partition: int, batches: list[bytearray]) -> None:
        limit = self.limits[topic]
        for data in batches:
            current = self._current.get((topic, partition))
            if current is None or (current[1] and current[1] + len(data) > limit):
                current = (self._create(topic, partition), 0)
            path, size = current
            self._file(path).write(data)
            self._current[(topic, partition)] = (path, size + len(data))
            self._dirty.add(path)
            self._unsynced += len(data)
            if self._unsynced >= _SYNC_BYTES and all(f.done() for f in self._syncs):
                self._sync_dirty()

    def _create(self, topic: str, partition: int) -> str:
        path = f"{self.prefix}{len(self.files):06d}"
        self._keep_open(path, open(path, "xb"))  # noqa: SIM115 (open across calls; close() ends it)
        self.files.append((topic, partition, path))
        # after creating the file: a driver that closed the write before it could not see it
        if self.marker is not None and not os.path.exists(self.marker):
            when = "while this task ran" if len(self.files) > 1 else "before this task began"
            raise WriteAbortedError(f"write {self.write_id} was closed {when}", file=path)
        return path

    def _file(self, path: str) -> BinaryIO:
        out = self._open.get(path)
        if out is None:
            out = open(path, "ab")  # noqa: SIM115 (closed when evicted or by close())
            self._keep_open(path, out)
        else:
            self._open.move_to_end(path)
        return out

    def _keep_open(self, path: str, out: BinaryIO) -> None:
        if len(self._open) >= _OPEN_FILES:
            self._open.popitem(last=False)[1].close()
        self._open[path] = out

    def _sync_dirty(self) -> None:
        for done in self._syncs:
            done.result()  # a failed write to disk fails the task
        for path, out in self._open.items():
            if path in self._dirty:
                out.flush()
        self._syncs = [self._syncer.submit(_sync, path) for path in self._dirty]
        self._dirty.clear()
        self._unsynced = 0

    def close(self) -> None:
        """Close every file once its bytes are on disk."""
        try:
            while self._open:
                self._open.popitem()[1].close()
            self._sync_dirty()
            for done in self._syncs:
                done.result()
        finally:
            self._syncer.shutdown()

    def remove(self) -> None:
        """Remove every file, unsynced (the task failed: its own error is what it reports)."""
        while self._open:
            with contextlib.suppress(OSError):  # a full disk refusing the buffered tail
                self._open.popitem()[1].close()
        self._syncer.shutdown()
        for _, _, path in self.files:
            with contextlib.suppress(FileNotFoundError):  # the driver's abort may have been first
                os.unlink(path)


def _sync(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            _fdatasync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise KafkaStorageError(f"writing a staging file to disk failed: {e.strerror}", file=path) from e


def _append_partitions(targets: dict[tuple[str, int], PartitionLog], files: dict[tuple[str, int], list[str]]) -> None:
    """Append each partition's staging files, in order; partitions side by side, one
    thread a core (the log's append check runs without the GIL). Raises the first
    failure, once every partition has stopped."""
    threads = max(1, min(len(files), os.cpu_count() or 1))
    with ThreadPoolExecutor(threads) as pool, ThreadPoolExecutor(1) as unlinker:
        jobs = [pool.submit(_append_files, targets[tp], paths, unlinker) for tp, paths in files.items()]
        failures = [e for e in (job.exception() for job in jobs) if e is not None]
    if failures:
        for other in failures[1:]:
            failures[0].add_note(f"and: {other}")
        raise failures[0]


def _append_files(log: PartitionLog, paths: list[str], unlinker: ThreadPoolExecutor) -> None:
    for path in paths:
        _append_staged(log, path, unlinker)


def _append_staged(log: PartitionLog, path: str, unlinker: ThreadPoolExecutor) -> None:
    """Append one staging file to ``log``: a large one becomes a segment, a small one is
    copied (and removed by ``unlinker`` beside the next appends: freeing its page cache
    takes ~0.5 ms per 4 MiB)."""
    try:
        stat = os.stat(path)
        large = stat.st_size >= min(_ADOPT_BYTES, log.config.segment_bytes // 2)
        if large and stat.st_dev == os.stat(log.dir).st_dev:  # a rename cannot cross filesystems
            try:
                log.append_segment_file(path)
                return
            except KafkaStorageError as e:
                if getattr(e, "errno", None) != errno.EXDEV:
                    raise
                # one filesystem mounted twice (a bind mount): the file is copied after all
        with open(path, "rb", buffering=0) as f:
            data = bytearray(stat.st_size)
            if f.readinto(data) != stat.st_size:
                raise KafkaStorageError(f"staging file {path} is cut short", file=path)
        log.append_batches(data)  # the log rewrites the base offsets in place: one copy, file to log
    except SeglogError as e:
        e.add_note(f"appending staging file {path} to {log.name}")
        raise
    unlinker.submit(os.unlink, path)


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
        self.producer = opt.producer_options(options)
        self.use_timestamps = opt.parse_bool(options, "useTimestampColumn", False)
        _check_types(schema, self.use_timestamps)
        if self.topic is None and "topic" not in names:
            raise opt.OptionError('writing to seglog needs a "topic" column or the "topic" option')
        self.write_id = uuid.uuid4().hex
        # take the lock once now: a dir another process owns is refused before any task runs
        with open_logs(self.dirs, background=False) as logs:
            self.partitions = {t: len(logs.partitions(t)) for t in logs.topics()}
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
        if self.uses_marker:
            self.marker: str | None = os.path.join(self.dirs[0], f"{STAGING_PREFIX}{self.write_id}")
            open(self.marker, "xb").close()
        else:
            self.write_id, self.marker = _STREAM + self.write_id, None

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedWrite:
        encoder = _Encoder(
            self.topic,
            self.partitions,
            self.batch_bytes,
            self.producer.compression,
            use_timestamps=self.use_timestamps,
            max_record_bytes=self.producer.max_request_size,
        )
        prefix = os.path.join(self.dirs[0], f"{STAGING_PREFIX}{self.write_id}-{uuid.uuid4().hex}-")
        staging = _StagingFiles(prefix, self.write_id, self.marker, self.file_bytes)
        rows = 0
        try:
            for batch in iterator:
                rows += batch.num_rows
                for topic, partition, batches in encoder.encode(batch):
                    staging.write(topic, partition, batches)
            staging.close()
        except BaseException:
            staging.remove()  # a failed task leaves nothing behind
            raise
        return StagedWrite(staging.files, rows)

    def _commit(self, messages: list[WriterCommitMessage | None]) -> None:
        staged = [m for m in messages if isinstance(m, StagedWrite)]
        self._close_marker()  # from here on, a late task (a speculative copy) stages nothing
        by_partition: dict[tuple[str, int], list[str]] = {}  # each partition's files, in write order
        for message in staged:
            for topic, partition, path in message.files:
                by_partition.setdefault((topic, partition), []).append(path)
        try:
            with open_logs(self.dirs, background=False) as logs:
                ends: dict[tuple[str, int], int] = {}  # where each partition the commit touches ended
                try:
                    targets = {tp: logs.partition(*tp) for tp in by_partition}
                    ends.update((tp, log.log_end_offset) for tp, log in targets.items())
                    _append_partitions(targets, by_partition)
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
        paths = {p for m in messages if isinstance(m, StagedWrite) for _, _, p in m.files}
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
