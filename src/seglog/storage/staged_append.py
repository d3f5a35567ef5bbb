"""Staged appends: record batches written beside a log dir by processes that do not
own it, appended later, all or nothing, by the one that does.

A write that many workers share (a Spark job) is a ``Staging``: an id, and the
files its workers stage at the root of the first log dir (Kafka ignores files
there)::

    .seglog-staging-<write id>                     the write's marker: empty, present while it is open
    .seglog-staging-<write id>-<writer id>-<n>     a writer's n-th file: one partition's batches

Each worker stages through a ``StagedAppend``: a partition's record batches go to
one file at a time, laid out as a segment's ``.log`` is (whole batches, their
offsets still to assign), a new file before one would pass its topic's
segment.bytes, so that the commit may make the file a segment. A thread writes the
files to disk behind the worker, so the commit, which runs alone, finds the bytes
there. ``abort`` removes a worker's files.

``commit_staged`` appends the files through the owner of the partition logs
(``PartitionLogOwner``): a large file becomes a segment as it is
(``PartitionLog.append_segment_file``: validated and given its offsets in place,
renamed over an empty active segment's log), a small one is copied into the active
segment, so that small writes leave no small segments. When an append fails part
way (a record the log refuses, a full disk), every partition the commit touched is
truncated back to where it ended before.

The marker closes the race between a failed job's abort and its late workers:
each worker checks it after creating each of its files, and ``Staging.discard``
removes the marker before the files, so a worker that comes late removes its own
files instead of leaving them behind. A write that serves several commits (a
streaming query's micro-batches) has no marker: its id starts with ``stream``.
``remove_dead_staging`` removes what writes whose driver died left: a marked
write's files without its marker (it died committing), and any staging file or
marker a week old (it died before).

Every file operation goes through ``fileio``, so tests fail any of them.
"""

from __future__ import annotations

import errno
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from ..common import TopicPartition
from ..errors import KafkaStorageError, SeglogError, UnknownTopicOrPartitionError
from . import fileio

if TYPE_CHECKING:
    from .log import PartitionLog

log = logging.getLogger(__name__)

STAGING_PREFIX = ".seglog-staging-"
_STREAM = "stream"  # the start of an unmarked write's id
# A staging file this large (or half of segment.bytes, if less) becomes a segment at commit:
# copying 16 MiB costs ~10 ms, while a segment costs three files and their maps.
_ADOPT_BYTES = 16 * 1024 * 1024
_SYNC_BYTES = 8 * 1024 * 1024  # a writer's bytes written to disk behind it, this many at a time
_OPEN_FILES = 64  # a writer's files open at once (a topic may have thousands of partitions)
_STALE_S = 7 * 24 * 3600  # a staging file or marker this old belongs to a driver that died


class WriteAbortedError(SeglogError):
    """A worker of a write that its driver has already committed or aborted."""


class StagedFile(NamedTuple):
    topic: str
    partition: int
    path: str


@dataclass(frozen=True)
class Staging:
    """One write's staging area in ``log_dir``; ``marker`` is None for an unmarked write."""

    log_dir: str
    write_id: str
    marker: str | None

    @classmethod
    def begin(cls, log_dir: str, *, marked: bool = True) -> Staging:
        """Open a new write: a marked one creates its marker."""
        write_id = uuid.uuid4().hex
        if not marked:
            return cls(log_dir, _STREAM + write_id, None)
        marker = os.path.join(log_dir, STAGING_PREFIX + write_id)
        fileio.create_file(marker).close()
        return cls(log_dir, write_id, marker)

    def writer(self, segment_bytes: Mapping[str, int]) -> StagedAppend:
        """A worker's writer; ``segment_bytes`` caps each topic's files."""
        return StagedAppend(self, segment_bytes)

    def close(self) -> None:
        """Close the write: from here on, a late worker stages nothing."""
        if self.marker is not None:
            fileio.unlink(self.marker)

    def discard(self, paths: Iterable[str] = ()) -> None:
        """Close the write and remove ``paths`` and every other file of it (those of
        workers that died without a word too). Every file is tried; the first failure
        is raised after."""
        self.close()  # first: a worker that creates its file after this removes it itself
        prefix = f"{STAGING_PREFIX}{self.write_id}-"
        names = {os.path.join(self.log_dir, n) for n in fileio.list_dir(self.log_dir) if n.startswith(prefix)}
        _remove(sorted(names.union(paths)))


class StagedAppend:
    """A worker's staged files: for each partition it writes to, one file at a time of
    record batches as a segment holds them, a new one before a file would pass its
    topic's segment.bytes. Used as a context manager, it closes when the block ends
    well and aborts when it raises.

    A thread writes the files' bytes to disk while the worker goes on, every
    _SYNC_BYTES: the commit then finds them there, and workers side by side overlap
    that work rather than queue for it at the end."""

    def __init__(self, staging: Staging, segment_bytes: Mapping[str, int]) -> None:
        self.staging = staging
        self.prefix = os.path.join(staging.log_dir, f"{STAGING_PREFIX}{staging.write_id}-{uuid.uuid4().hex}-")
        self.limits = segment_bytes
        self.files: list[StagedFile] = []
        self._current: dict[TopicPartition, tuple[str, int]] = {}  # a partition's file and its size
        self._open: OrderedDict[str, fileio.FileHandle] = OrderedDict()  # least recently written first
        self._dirty: set[str] = set()  # files written since their last sync
        self._unsynced = 0
        self._syncer = ThreadPoolExecutor(1)
        self._syncs: list[Future[None]] = []

    def append(self, topic: str, partition: int, batches: Iterable[bytes | bytearray | memoryview]) -> None:
        """Stage ``batches`` (whole v2 batches) for ``topic``-``partition``, after those before."""
        limit = self.limits.get(topic)
        if limit is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}: the writer has no segment.bytes for it")
        for data in batches:
            current = self._current.get(TopicPartition(topic, partition))
            if current is None or (current[1] and current[1] + len(data) > limit):
                current = (self._create(topic, partition), 0)
            path, size = current
            self._file(path).write(data)
            self._current[TopicPartition(topic, partition)] = (path, size + len(data))
            self._dirty.add(path)
            self._unsynced += len(data)
            if self._unsynced >= _SYNC_BYTES and all(f.done() for f in self._syncs):
                self._sync_dirty()

    def _create(self, topic: str, partition: int) -> str:
        path = f"{self.prefix}{len(self.files):06d}"
        self._keep_open(path, fileio.create_file(path))
        self.files.append(StagedFile(topic, partition, path))
        # after creating the file: a driver that closed the write before it could not see it
        marker = self.staging.marker
        if marker is not None and fileio.stat(marker) is None:
            when = "while this task ran" if len(self.files) > 1 else "before this task began"
            raise WriteAbortedError(f"write {self.staging.write_id} was closed {when}", file=path)
        return path

    def _file(self, path: str) -> fileio.FileHandle:
        out = self._open.get(path)
        if out is None:
            out = fileio.open_file(path, append=True)
            self._keep_open(path, out)
        else:
            self._open.move_to_end(path)
        return out

    def _keep_open(self, path: str, out: fileio.FileHandle) -> None:
        if len(self._open) >= _OPEN_FILES:
            self._open.popitem(last=False)[1].close()
        self._open[path] = out

    def _sync_dirty(self) -> None:
        for done in self._syncs:
            done.result()  # a failed write to disk fails the worker
        self._syncs = [self._syncer.submit(_sync, path) for path in self._dirty]
        self._dirty.clear()
        self._unsynced = 0

    def close(self) -> None:
        """Close every file once its bytes are on disk (``files`` lists them, in write order)."""
        try:
            while self._open:
                self._open.popitem()[1].close()
            self._sync_dirty()
            for done in self._syncs:
                done.result()
        finally:
            self._syncer.shutdown()

    def __enter__(self) -> StagedAppend:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """``close`` when the block ends well; else, or when ``close`` fails, ``abort``."""
        if kind is not None:
            self.abort()
            return
        try:
            self.close()
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Remove every file, unsynced (the worker failed: its own error is what it
        reports, so a file left behind is left to the driver's discard)."""
        while self._open:
            self._open.popitem()[1].close()
        self._syncer.shutdown()  # waits for a sync under way, which holds an fd
        try:
            _remove([f.path for f in self.files])
        except KafkaStorageError as e:
            log.warning("a failed task's staging file stays for the driver to remove: %s", e)


def _sync(path: str) -> None:
    try:
        handle = fileio.open_file(path, writable=False)
        try:
            handle.fdatasync()
        finally:
            handle.close()
    except KafkaStorageError as e:
        code = getattr(e, "errno", None)
        reason = os.strerror(code) if code else e.message
        raise KafkaStorageError(f"writing a staging file to disk failed: {reason}", file=path) from e


def _remove(paths: Iterable[str]) -> None:
    """Remove every file of ``paths`` (gone already is fine); raise the first failure after."""
    failures = []
    for path in paths:
        try:
            fileio.unlink(path)
        except KafkaStorageError as e:
            failures.append(e)
    if failures:
        for other in failures[1:]:
            failures[0].add_note(f"and: {other}")
        raise failures[0]


def remove_dead_staging(log_dir: str) -> list[str]:
    """Remove the staging files of writes whose driver is gone: a marked write's files
    without its marker (the driver died committing) and any staging file or marker a
    week old. The caller excludes commits (it holds the dir's lock, or is the broker
    that owns it), so no commit is reading them. Returns the names removed."""
    now = time.time()
    ages: dict[str, float] = {}
    for name in fileio.list_dir(log_dir):
        if name.startswith(STAGING_PREFIX):
            status = fileio.stat(os.path.join(log_dir, name))
            if status is not None:  # else a late worker removed its own file
                ages[name] = now - status.st_mtime
    ids = {name: name[len(STAGING_PREFIX) :].split("-", 1)[0] for name in ages}
    open_writes = {ids[n] for n, age in ages.items() if n == STAGING_PREFIX + ids[n] and age < _STALE_S}
    dead = [
        n for n, age in ages.items()
        if age >= _STALE_S or not (ids[n] in open_writes or ids[n].startswith(_STREAM))
    ]  # fmt: skip
    _remove(os.path.join(log_dir, n) for n in dead)
    return dead


class PartitionLogOwner(Protocol):
    """Whoever may append to the partition logs of a dir: today a ``LogManager``
    holding the dirs' lock, opened by the committer for the commit only.

    Once a broker owns the dirs the lock cannot be had, and the broker serves the
    commit instead: a request (the staged files, by topic, partition and path, in
    write order) reaches it, and it calls ``commit_staged`` with its own log manager,
    whose logs it leads; its answer is the commit's outcome. The files are in its
    log dir already, so nothing is sent but their names. What the broker must add:
    hold back the high watermark of the partitions being committed until the commit
    ends, so that a rollback never takes back records a consumer has read, and run
    ``remove_dead_staging`` itself (at start-up, say), since only it knows that no
    commit is reading the files."""

    def partition(self, topic: str, partition: int) -> PartitionLog: ...


def commit_staged(owner: PartitionLogOwner, files: Sequence[StagedFile]) -> None:
    """Append the staged ``files`` to their partitions, in order, all or nothing: a
    failure truncates every partition the commit touched back to where it ended
    before, and is raised. Each file appended is removed; the rest stay for
    ``Staging.discard``. Partitions are appended side by side, one thread a core
    (the log's append check runs without the GIL)."""
    by_partition: dict[TopicPartition, list[str]] = {}  # each partition's files, in write order
    for topic, partition, path in files:
        by_partition.setdefault(TopicPartition(topic, partition), []).append(path)
    ends: list[tuple[PartitionLog, int]] = []  # where each partition the commit touches ended
    try:
        targets = {tp: owner.partition(*tp) for tp in by_partition}
        ends.extend((target, target.log_end_offset) for target in targets.values())
        _append_partitions(targets, by_partition)
    except BaseException as e:
        _roll_back(ends, e)
        raise


def _roll_back(ends: Sequence[tuple[PartitionLog, int]], cause: BaseException) -> None:
    for target, end in ends:
        try:
            target.truncate_to(end)
        except Exception as e:  # the others are still rolled back; the note says which failed
            cause.add_note(f"rolling back {target.name} to offset {end} failed too: {e}")


def _append_partitions(
    targets: Mapping[TopicPartition, PartitionLog], files: Mapping[TopicPartition, list[str]]
) -> None:
    """Raises the first failure, once every partition has stopped."""
    threads = max(1, min(len(files), os.cpu_count() or 1))
    with ThreadPoolExecutor(threads) as pool, ThreadPoolExecutor(1) as unlinker:
        removals: list[Future[None]] = []
        jobs = [pool.submit(_append_files, targets[tp], paths, unlinker, removals) for tp, paths in files.items()]
        failures = [e for e in (job.exception() for job in jobs) if e is not None]
    failures += [e for e in (done.exception() for done in removals) if e is not None]
    if failures:
        for other in failures[1:]:
            failures[0].add_note(f"and: {other}")
        raise failures[0]


def _append_files(
    target: PartitionLog, paths: list[str], unlinker: ThreadPoolExecutor, removals: list[Future[None]]
) -> None:
    for path in paths:
        if _append_staged(target, path) == "copied":
            # removed beside the next appends: freeing its page cache takes ~0.5 ms per 4 MiB
            removals.append(unlinker.submit(fileio.unlink, path))


def _append_staged(target: PartitionLog, path: str) -> str:
    """Append one staged file: a large one becomes a segment ("adopted"), a small one
    is copied ("copied")."""
    try:
        status = fileio.stat(path)
        if status is None:
            raise KafkaStorageError("a staged file is missing", file=path)
        large = status.st_size >= min(_ADOPT_BYTES, target.config.segment_bytes // 2)
        home = fileio.stat(target.dir)
        if large and home is not None and status.st_dev == home.st_dev:  # a rename cannot cross filesystems
            try:
                target.append_segment_file(path)
                return "adopted"
            except KafkaStorageError as e:
                if getattr(e, "errno", None) != errno.EXDEV:
                    raise
                # one filesystem mounted twice (a bind mount): the file is copied after all
        data = bytearray(status.st_size)
        handle = fileio.open_file(path, writable=False)
        try:
            if handle.readinto(data, 0) != status.st_size:
                raise KafkaStorageError(f"staging file {path} is cut short", file=path)
        finally:
            handle.close()
        target.append_batches(data)  # the log rewrites the base offsets in place: one copy, file to log
    except SeglogError as e:
        e.add_note(f"appending staging file {path} to {target.name}")
        raise
    return "copied"
