"""Opening a partition's directory (Kafka's LogLoader): leftovers, recovery, the segments.

At start-up the files a crash left are resolved by Kafka's rules: ``.deleted``
files were on their way out and go; ``.cleaned`` files are a cleaning that did
not finish and go; a ``.swap`` log is a cleaning that finished writing and
replaces the segments whose offsets it covers; index files without a log are
orphans. Then either only the active segment's tail is framed again (after a
clean shutdown) or every segment from the recovery point on is recovered (CRCs,
framing, offsets; indexes rebuilt; the log cut at the first invalid byte, later
segments deleted).

A read-only opener (a reader in another process) touches no file: it lists the
segments and takes them as they are, listing again when one goes under it.
A listing is no snapshot: a ``readdir`` running while the owner rolls may return a
segment without the one made just before it (``reader_segment_bases``).
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..errors import CorruptRecordError, KafkaStorageError
from . import fileio
from .leader_epoch import LeaderEpochCache
from .naming import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
    parse_offset_file,
)
from .segment import LogSegment
from .vanishing import retry_while_vanishing

log = logging.getLogger(__name__)

_READ_ONLY_LOAD_ATTEMPTS = 5
_LEFTOVERS = (DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX)
_INDEXES = (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)  # Kafka's isIndexFile


class LoadedLog(NamedTuple):
    """What loading found (Kafka's LoadedLogOffsets, with the segments): the segments,
    the last one active, and the log end offset after them; and the offsets of the
    producer state snapshots listed beside them (so that their loading lists no more)."""

    segments: list[LogSegment]
    next_offset: int
    snapshot_offsets: list[int] | None


class LogLoader:
    """Loads the segments of one partition directory. ``segment_args`` gives the keyword
    arguments of a ``LogSegment`` of this log (index sizes, jitter, clock, read-only)."""

    def __init__(
        self,
        dir: str,
        name: str,
        segment_args: Callable[[], dict],
        leader_epoch_cache: LeaderEpochCache,
        *,
        read_only: bool,
    ) -> None:
        self.dir = dir
        self.name = name
        self.read_only = read_only
        self._segment_args = segment_args
        self.leader_epoch_cache = leader_epoch_cache
        self._segments: list[LogSegment] = []

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment.create(self.dir, base_offset, **self._segment_args())

    def _set_segments(self, segments: Sequence[LogSegment]) -> None:
        for s in segments[:-1]:
            s.active = False
        self._segments = list(segments)

    def load(self, recovery_point: int, log_start_offset: int, clean: bool) -> LoadedLog:
        """The segments and log end offset of the directory, recovered unless ``clean``
        (a clean shutdown, and a recovery point for this log)."""
        if not self.read_only:
            return self._load_files(recovery_point, log_start_offset, clean)
        # a reader races the process that owns the dir: a segment it lists may be gone by
        # the time it opens it (retention, a truncation, a cleaning's swap): list again
        for attempt in retry_while_vanishing(_READ_ONLY_LOAD_ATTEMPTS):
            with attempt:
                return self._load_files(recovery_point, log_start_offset, clean)
            log.info("%s: a file went while loading the log read-only (%s): listing again", self.name, attempt.error)
            for segment in self._segments:
                segment.close_handlers()
        raise AssertionError("unreachable: the last attempt raises")

    def _load_files(self, recovery_point: int, log_start_offset: int, clean: bool) -> LoadedLog:
        names = fileio.list_dir(self.dir)
        bases = reader_segment_bases(self.dir, names) if self.read_only else self._resolve_leftovers(names)
        args = self._segment_args()  # (one roll jitter drawn: only the active segment's counts)
        segments = [LogSegment(self.dir, b, **args) for b in bases]
        if not segments:
            if self.read_only:
                # (the owner truncating it fully, between its old segments and its new one)
                error = KafkaStorageError("partition directory holds no segment", file=self.dir)
                error.errno = errno.ENOENT  # type: ignore[attr-defined]
                raise error
            segments = [self._new_segment(max(log_start_offset, 0))]
        self._set_segments(segments)
        active = self._segments[-1]
        active.active = True
        if self.read_only:
            pass  # a reader takes the files as they are: whole batches are what it reads
        elif clean and recovery_point >= 0:
            self._load_active_tail()
        else:
            self._recover(recovery_point)
            active = self._segments[-1]
            active.active = True
        if not self.read_only:
            active.ensure_writable_indexes()
        snapshots = sorted(_offsets(names, SNAPSHOT_SUFFIX))  # (a recovery deletes none)
        return LoadedLog(self._segments, active.read_next_offset(), snapshots)

    def _resolve_leftovers(self, names: list[str]) -> list[int]:
        """Kafka's start-up rules for files a crash left, then the base offsets of the segments.

        ``.deleted`` files were on their way out; ``.cleaned`` files are a cleaning that
        did not finish; ``.swap`` files are a cleaning that finished writing: a log swap
        replaces the segments whose offsets it covers (unless a ``.cleaned`` file at or
        below it shows that the cleaning that made it was itself unfinished), with its
        transaction index (renamed before the log: ``LogSegment.change_suffix``); the
        offset and time index swaps are rebuilt. Index files (``.index``, ``.timeindex``,
        ``.txnindex``) without a log are orphans.

        A dir may hold tens of thousands of files: the names are sorted out by suffix
        (C string calls), and only the few of a crash parsed one by one.
        """
        files = [(n, *p) for n in names if n.endswith(_LEFTOVERS) and (p := parse_offset_file(n)) is not None]
        cleaned = [b for _, b, s in files if s.endswith(CLEANED_SUFFIX)]
        min_cleaned = min(cleaned, default=None)
        swaps = [
            b
            for _, b, s in files
            if s == LOG_SUFFIX + SWAP_SUFFIX and not (min_cleaned is not None and b >= min_cleaned)
        ]
        for name, base, suffix in files:
            path = os.path.join(self.dir, name)
            if suffix.endswith((DELETED_SUFFIX, CLEANED_SUFFIX)):
                log.info("%s: removing leftover %s", self.name, name)
                fileio.unlink(path)
            elif suffix.endswith(SWAP_SUFFIX):
                if suffix == LOG_SUFFIX + SWAP_SUFFIX and base in swaps:
                    continue
                if suffix == TXN_INDEX_SUFFIX + SWAP_SUFFIX and base in swaps:
                    continue  # goes with its log (or, the swap discarded, with it)
                fileio.unlink(path)
        stems = {n[:20] for n in names if n.endswith(LOG_SUFFIX) and len(n) == 24 and n[:20].isdigit()}
        logs = {int(stem) for stem in stems}
        for base in sorted(swaps):
            self._complete_swap(base, logs)
        if swaps:
            stems = {offset_file_name(b, "") for b in logs}
        for name in [n for n in names if n.endswith(_INDEXES) and n[:20] not in stems]:
            parsed = parse_offset_file(name)
            if parsed is not None and parsed[1] in _INDEXES:
                log.warning("%s: removing orphaned index file %s", self.name, name)
                fileio.unlink(os.path.join(self.dir, name))
        return sorted(logs)

    def _complete_swap(self, base: int, logs: set[int]) -> None:
        swap = LogSegment(self.dir, base, suffix=SWAP_SUFFIX, **self._segment_args())
        truncated = swap.recover()
        end = swap.read_next_offset()
        if end == base or (truncated and base in logs):
            # Nothing valid says which segments it was to replace (renamed, it would take
            # the place of the segment of its base offset); or it was damaged while the
            # segments it replaces are all still there (they are renamed oldest first, and
            # the first has its base offset): the cleaning is done again instead.
            log.warning("%s: discarding the damaged swap file of segment %d", self.name, base)
            swap.delete()
            return
        for old in sorted(b for b in logs if base <= b < end):
            log.info("%s: completing an interrupted swap: segment %d replaces %d", self.name, base, old)
            LogSegment(self.dir, old).delete()
            logs.discard(old)
        swap.change_suffix("")
        swap.close()
        logs.add(base)

    def _load_active_tail(self) -> None:
        """After a clean shutdown only the active segment's tail needs a look:
        a tail that does not frame as batches is recovered after all."""
        active = self._segments[-1]
        active.active = True
        try:
            active.read_next_offset()
        except CorruptRecordError as e:
            log.warning("%s: the active segment's tail is corrupt despite a clean shutdown (%s)", self.name, e)
            active.recover()

    def _recover(self, recovery_point: int) -> None:
        """Recover every segment from the one holding the recovery point; a segment
        that had invalid bytes ends the log: the segments after it are deleted."""
        segments = list(self._segments)
        bases = [s.base_offset for s in segments]
        start = max(0, bisect.bisect_right(bases, max(recovery_point, 0)) - 1)
        for i in range(start, len(segments)):
            segment = segments[i]
            log.info("%s: recovering segment %d", self.name, segment.base_offset)
            truncated = segment.recover(on_epoch=self.leader_epoch_cache.assign)
            if truncated and i + 1 < len(segments):
                for later in segments[i + 1 :]:
                    log.warning("%s: deleting segment %d after a truncated one", self.name, later.base_offset)
                    later.delete()
                segments = segments[: i + 1]
                break
        self._set_segments(segments)


def reader_segment_bases(dir: str, names: list[str], known_up_to: int = -1) -> list[int]:
    """The base offsets of the segments in ``dir``, sorted, as a reader beside the owning
    process may take them from ``names``, a listing of ``dir``.

    A listing is no snapshot: a file made while ``readdir`` runs may be named or not,
    whatever its place (ext4 returns names in hash order), so a listing taken while the
    owner rolls may hold a segment without the one rolled just before it, and a reader
    taking it would skip that segment's batches for good. Names present all through a
    listing are all in it, though, and the owner makes segments in the order of their
    offsets: when ``names`` holds segments above ``known_up_to`` (the newest the reader
    knows), ``dir`` is listed again, and every segment made before the newest of the first
    listing is in the second. Segments the second names above that are left for the next
    listing."""
    first = _offsets(names, LOG_SUFFIX)
    newest = max(first, default=known_up_to)
    if newest <= known_up_to:
        return sorted(first)
    return sorted(b for b in _offsets(fileio.list_dir(dir), LOG_SUFFIX) if b <= newest)


def _offsets(names: list[str], suffix: str) -> list[int]:
    """The offsets of the names that are an offset and ``suffix`` (``parse_offset_file``'s
    rule: 20 digits, then the suffix), by C string calls."""
    size = 20 + len(suffix)
    return [int(n[:20]) for n in names if n.endswith(suffix) and len(n) == size and n[:20].isdigit()]
