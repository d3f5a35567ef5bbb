"""Everything around compaction but the cleaning itself (Kafka's LogCleaner and
LogCleanerManager): which log to clean next, the cleaner threads, the
``cleaner-offset-checkpoint`` of each log dir, and what a describe shows.

Each log dir's ``cleaner-offset-checkpoint`` (a text checkpoint, see
checkpoint.py) holds, per compacted partition, its first dirty offset: where
the next round starts.

Choosing a log (``grab_filthiest``): among the logs whose ``cleanup.policy``
has ``compact``, that no cleaner or retention pass holds, the one with the
largest dirty ratio — dirty bytes (first dirty offset to first uncleanable
offset) over all bytes to the first uncleanable offset — above its
``min.cleanable.dirty.ratio``; or any with dirty bytes whose oldest dirty
segment started more than ``max.compaction.lag.ms`` ago. The first uncleanable
offset is the lowest of the active segment's base offset, the high watermark
(lowered further to the last stable offset by the cleaner), and the base of
the first dirty segment younger than ``min.compaction.lag.ms`` (a segment
dated in the future counts by its file's mtime, as in retention.py).

One log is held by one party at a time: a cleaning round, or a retention
pass. A retention pass that finds its log being cleaned leaves it to the
cleaner, which runs it when the round ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..common import TopicPartition
from ..config import BrokerConfig
from . import checkpoint, fileio
from .checkpoint import CLEANER_OFFSET_CHECKPOINT
from .cleaner import Cleaner, CleanerStats, LogCleaningAbortedError, LogToClean
from .log import PartitionLog
from .retention import segment_timestamp
from .throttler import Throttler

log = logging.getLogger(__name__)

_MAX_BUFFER_PER_THREAD = (1 << 31) - 1  # Kafka's cap: 2 GiB of dedupe buffer a thread


@dataclass(frozen=True)
class CleaningState:
    """A partition's compaction at a glance (for ``seglog topics --describe``)."""

    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int  # cleanable: from the first dirty to the first uncleanable offset
    dirty_ratio: float
    compacted: bool  # cleanup.policy has compact
    in_progress: bool
    uncleanable: str | None  # why the background cleaner gave up on it, if it did
    last: CleanerStats | None  # the last round's stats


class LogCleanerManager:
    def __init__(
        self,
        config: BrokerConfig,
        log_dirs: Sequence[str],
        logs: Callable[[], list[PartitionLog]],
        clock: Callable[[], int],
        *,
        on_retention: Callable[[PartitionLog], object] | None = None,
    ) -> None:
        self.config = config
        self._logs = logs
        self._clock = clock
        self._on_retention = on_retention
        self._cond = threading.Condition()
        self._busy: dict[TopicPartition, str] = {}  # "cleaning" | "retention"
        self._aborting: set[TopicPartition] = set()
        self._retention_pending: set[TopicPartition] = set()
        self._uncleanable: dict[TopicPartition, str] = {}
        self._last: dict[TopicPartition, CleanerStats] = {}
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}
        for d in log_dirs:
            path = os.path.abspath(d)
            self._checkpoints[path] = checkpoint.read_offsets_or_empty(os.path.join(path, CLEANER_OFFSET_CHECKPOINT))
            self._last.update(_read_results(path))
        self.throttler = Throttler(config["log.cleaner.io.max.bytes.per.second"])
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._sync_cleaner: Cleaner | None = None

    # --- cleaners and threads --------------------------------------------------------------------

    def new_cleaner(self, id: int = 0) -> Cleaner:
        c = self.config
        threads = max(1, c["log.cleaner.threads"])
        return Cleaner(
            id,
            memory=min(c["log.cleaner.dedupe.buffer.size"] // threads, _MAX_BUFFER_PER_THREAD),
            load_factor=c["log.cleaner.io.buffer.load.factor"],
            io_buffer_size=c["log.cleaner.io.buffer.size"] // threads // 2,
            throttler=self.throttler,
            check_done=self._check_done,
        )

    def start(self) -> None:
        """Start ``log.cleaner.threads`` background cleaners."""
        for i in range(self.config["log.cleaner.threads"]):
            thread = threading.Thread(target=self._run, args=(i,), name=f"seglog-cleaner-{i}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def shutdown(self) -> None:
        """Stop the cleaner threads; a round in progress is abandoned (its ``.cleaned``
        files removed), and redone after a restart."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _run(self, id: int) -> None:
        cleaner = self.new_cleaner(id)
        backoff = self.config["log.cleaner.backoff.ms"] / 1000
        while not self._stop.is_set():
            try:
                stats = self.clean_filthiest(cleaner, background=True)
            except Exception:  # a cleaner thread must outlive a bad log
                log.exception("cleaner thread %d failed", id)
                stats = None
            if stats is None:
                self._stop.wait(backoff)

    def _check_done(self, partition_log: PartitionLog) -> None:
        tp = (partition_log.topic, partition_log.partition)
        if tp in self._aborting or (self._stop.is_set() and threading.current_thread() in self._threads):
            raise LogCleaningAbortedError(f"cleaning of {partition_log.name} aborted", file=partition_log.dir)
        if partition_log.closed:
            raise LogCleaningAbortedError(f"{partition_log.name} was closed", file=partition_log.dir)

    # --- one party per log ---------------------------------------------------------------------------

    @staticmethod
    def _tp(partition_log: PartitionLog) -> TopicPartition:
        return TopicPartition(partition_log.topic, partition_log.partition)

    def _acquire(self, partition_log: PartitionLog, purpose: str, wait: bool) -> bool:
        tp = self._tp(partition_log)
        with self._cond:
            while tp in self._busy:
                if not wait:
                    return False
                self._cond.wait()
            self._busy[tp] = purpose
            return True

    def _release(self, partition_log: PartitionLog) -> None:
        tp = self._tp(partition_log)
        with self._cond:
            pending = tp in self._retention_pending and self._busy.get(tp) == "cleaning"
            self._retention_pending.discard(tp)
        if pending and self._on_retention is not None and not partition_log.closed:
            try:
                self._on_retention(partition_log)
            except Exception:
                log.exception("%s: deferred retention failed", partition_log.name)
        with self._cond:
            self._busy.pop(tp, None)
            self._cond.notify_all()

    @contextlib.contextmanager
    def holding(self, partition_log: PartitionLog, purpose: str, *, wait: bool = True) -> Iterator[bool]:
        """Hold the log for ``purpose``; yields False (holding nothing) if it is busy and
        ``wait`` is False."""
        if not self._acquire(partition_log, purpose, wait):
            yield False
            return
        try:
            yield True
        finally:
            self._release(partition_log)

    def retain(self, partition_log: PartitionLog, run: Callable[[], object]) -> object:
        """Run a retention pass on the log, unless it is being cleaned: then the cleaner
        runs ``on_retention`` for it when its round ends. Returns ``run()``'s result or None."""
        with self.holding(partition_log, "retention", wait=False) as held:
            if held:
                return run()
        with self._cond:
            if self._busy.get(self._tp(partition_log)) == "cleaning":
                self._retention_pending.add(self._tp(partition_log))
        return None

    def abort(self, partition_log: PartitionLog) -> None:
        """Stop any cleaning of the log, wait for it, and forget the partition (before its
        deletion)."""
        tp = self._tp(partition_log)
        with self._cond:
            self._aborting.add(tp)
            while tp in self._busy:
                self._cond.wait()
            self._aborting.discard(tp)
            self._uncleanable.pop(tp, None)
            self._last.pop(tp, None)
            entries = self._checkpoints.get(self._dir_of(partition_log))
            if entries is not None and entries.pop(tp, None) is not None:
                self._write_checkpoint(self._dir_of(partition_log))

    # --- checkpoints ------------------------------------------------------------------------------------

    @staticmethod
    def _dir_of(partition_log: PartitionLog) -> str:
        return os.path.dirname(os.path.abspath(partition_log.dir))

    def checkpointed_offset(self, partition_log: PartitionLog) -> int | None:
        with self._cond:
            return self._checkpoints.get(self._dir_of(partition_log), {}).get(self._tp(partition_log))

    def _update_checkpoint(self, partition_log: PartitionLog, offset: int) -> None:
        d = self._dir_of(partition_log)
        with self._cond:
            self._checkpoints.setdefault(d, {})[self._tp(partition_log)] = offset
            self._write_checkpoint(d)

    def _write_checkpoint(self, d: str) -> None:
        live = {self._tp(pl) for pl in self._logs() if self._dir_of(pl) == d}
        entries = self._checkpoints.get(d, {})
        for tp in [tp for tp in entries if tp not in live]:
            del entries[tp]  # partitions that are gone
        checkpoint.write_offsets(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), entries)

    def _write_results(self, d: str) -> None:
        """The last round's stats per partition, so a later process (``seglog topics
        --describe``) can show them; Kafka keeps them only in its log-cleaner.log."""
        live = {self._tp(pl) for pl in self._logs() if self._dir_of(pl) == d}
        body = {f"{t} {p}": dataclasses.asdict(s) for (t, p), s in sorted(self._last.items()) if (t, p) in live}
        fileio.write_atomically(os.path.join(d, CLEANER_RESULTS), json.dumps(body, indent=1).encode())

    # --- what is cleanable --------------------------------------------------------------------------------

    def cleanable(self, partition_log: PartitionLog, now: int) -> LogToClean:
        """The part of the log a round may clean now (Kafka's cleanableOffsets and
        calculateCleanableBytes)."""
        config = partition_log.config
        segments = partition_log.segments
        start, end = partition_log.log_start_offset, partition_log.log_end_offset
        first_dirty = self.checkpointed_offset(partition_log)
        if first_dirty is None or first_dirty < start or first_dirty > end:
            first_dirty = start  # a checkpoint from before a truncation or a deletion of records
        uncleanable = min(partition_log.high_watermark, segments[-1].base_offset)
        lag = config.min_compaction_lag_ms
        if lag > 0:
            for i, s in enumerate(segments[:-1]):
                if segments[i + 1].base_offset <= first_dirty:
                    continue
                if segment_timestamp(s, now) > now - lag:
                    uncleanable = min(uncleanable, s.base_offset)
                    break
        uncleanable = max(uncleanable, first_dirty)
        # round down to a segment base: a round cleans whole segments
        first_uncleanable = segments[0].base_offset
        for s in segments:
            if s.base_offset > uncleanable:
                break
            first_uncleanable = s.base_offset
        clean_bytes = dirty_bytes = 0
        dirty_from = min(first_dirty, first_uncleanable)
        for i, s in enumerate(segments):
            following = segments[i + 1].base_offset if i + 1 < len(segments) else None
            if s.base_offset < first_dirty:
                clean_bytes += s.size_without_opening
            if s.base_offset < first_uncleanable and (following is None or following > dirty_from):
                dirty_bytes += s.size_without_opening
        need_now = dirty_bytes > 0 and self._compaction_delay(partition_log, segments, first_dirty, now) > 0
        return LogToClean(partition_log, first_dirty, first_uncleanable, clean_bytes, dirty_bytes, need_now)

    @staticmethod
    def _compaction_delay(partition_log: PartitionLog, segments: Sequence, first_dirty: int, now: int) -> int:
        """How long past max.compaction.lag.ms the oldest dirty segment is (0: not)."""
        clean_until = now - max(partition_log.config.max_compaction_lag_ms, 0)
        if clean_until <= 0:
            return 0
        earliest = None
        for i, s in enumerate(segments[:-1]):
            if segments[i + 1].base_offset <= first_dirty:
                continue
            ts = s.rolling_based_timestamp
            if ts is not None and ts > 0 and (earliest is None or ts < earliest):
                earliest = ts
        return clean_until - earliest if earliest is not None and earliest < clean_until else 0

    def cleaning_state(self, partition_log: PartitionLog) -> CleaningState:
        ltc = self.cleanable(partition_log, self._clock())
        tp = self._tp(partition_log)
        with self._cond:
            busy = self._busy.get(tp) == "cleaning"
            uncleanable, last = self._uncleanable.get(tp), self._last.get(tp)
        return CleaningState(
            partition_log.log_start_offset,
            ltc.first_dirty_offset,
            ltc.first_uncleanable_offset,
            ltc.clean_bytes,
            ltc.cleanable_bytes,
            ltc.cleanable_ratio,
            partition_log.config.compact,
            busy,
            uncleanable,
            last,
        )

    def _candidates(self, only: Callable[[PartitionLog], bool] | None) -> list[PartitionLog]:
        return [
            pl
            for pl in self._logs()
            if pl.config.compact and not pl.closed and not pl.read_only and (only is None or only(pl))
        ]

    def grab_filthiest(
        self, now: int, only: Callable[[PartitionLog], bool] | None = None, *, background: bool = False
    ) -> LogToClean | None:
        """Choose the dirtiest log worth cleaning and hold it for cleaning."""
        with self._cond:
            best: LogToClean | None = None
            for pl in self._candidates(only):
                tp = self._tp(pl)
                if tp in self._busy or (background and tp in self._uncleanable):
                    continue
                ltc = self.cleanable(pl, now)
                if ltc.total_bytes == 0:
                    continue
                worth = (ltc.need_compaction_now and ltc.cleanable_bytes > 0) or (
                    ltc.cleanable_ratio > pl.config.min_cleanable_dirty_ratio
                )
                if worth and (best is None or ltc.cleanable_ratio > best.cleanable_ratio):
                    best = ltc
            if best is not None:
                self._busy[self._tp(best.log)] = "cleaning"
            return best

    # --- cleaning ----------------------------------------------------------------------------------------------

    def _round(self, cleaner: Cleaner, ltc: LogToClean, now: int) -> CleanerStats:
        end, stats = cleaner.clean(ltc, now)
        self._update_checkpoint(ltc.log, end)
        with self._cond:
            self._last[self._tp(ltc.log)] = stats
            self._write_results(self._dir_of(ltc.log))
        log.info(
            "%s: cleaned offsets [%d, %d): %d of %d bytes kept, %d records removed, in %.3f s",
            ltc.log.name,
            stats.first_dirty_offset,
            end,
            stats.bytes_written,
            stats.bytes_read,
            stats.records_removed,
            stats.seconds,
        )
        return stats

    def clean_filthiest(
        self,
        cleaner: Cleaner,
        only: Callable[[PartitionLog], bool] | None = None,
        *,
        background: bool = False,
    ) -> CleanerStats | None:
        """One round on the dirtiest log; None if no log is worth cleaning (or the round
        was aborted). A background cleaner marks a log whose round fails uncleanable."""
        now = self._clock()
        ltc = self.grab_filthiest(now, only, background=background)
        if ltc is None:
            return None
        try:
            return self._round(cleaner, ltc, now)
        except LogCleaningAbortedError:
            return None
        except Exception as e:
            if not background:
                raise
            log.exception("%s: cleaning failed; the cleaner leaves this partition alone", ltc.log.name)
            with self._cond:
                self._uncleanable[self._tp(ltc.log)] = str(e)
            return None
        finally:
            self._release(ltc.log)

    def clean(self, only: Callable[[PartitionLog], bool] | None = None, *, force: bool = False) -> list[CleanerStats]:
        """Clean now, in the caller's thread, until no log is worth cleaning (the
        background threads work the same way, a round at a time). ``force`` cleans every
        compacted log whatever its dirty ratio, all of its dirty section, and re-cleans its
        clean section even with nothing dirty (tombstones whose horizon passed go)."""
        if self._sync_cleaner is None:
            self._sync_cleaner = self.new_cleaner(0)
        cleaner = self._sync_cleaner
        results: list[CleanerStats] = []
        if not force:
            while True:
                stats = self.clean_filthiest(cleaner, only)
                if stats is None:
                    return results
                results.append(stats)
        for pl in self._candidates(only):
            with self.holding(pl, "cleaning") as _:
                first = True
                while not pl.closed:
                    now = self._clock()
                    ltc = self.cleanable(pl, now)
                    if not first and ltc.first_dirty_offset >= ltc.first_uncleanable_offset:
                        break
                    try:
                        stats = self._round(cleaner, ltc, now)
                    except LogCleaningAbortedError:
                        break
                    results.append(stats)
                    if stats.end_offset <= ltc.first_dirty_offset and not first:
                        break  # no progress: do not loop
                    first = False
        return results


CLEANER_RESULTS = "cleaner-results.json"  # seglog's own; Kafka ignores files at a log dir's root


def _read_results(d: str) -> dict[TopicPartition, CleanerStats]:
    try:
        with open(os.path.join(d, CLEANER_RESULTS), encoding="utf-8") as f:
            stored = json.load(f)
    except (OSError, ValueError):
        return {}  # absent or unreadable: only a report is lost
    out = {}
    for name, fields in stored.items():
        topic, _, partition = name.rpartition(" ")
        try:
            out[TopicPartition(topic, int(partition))] = CleanerStats(**fields)
        except (TypeError, ValueError):
            continue
    return out
