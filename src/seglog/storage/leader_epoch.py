"""The leader epoch cache: which leader epoch started at which offset.

Kept in the partition's ``leader-epoch-checkpoint`` (``epoch startOffset``
lines, see checkpoint.py) and updated whenever an append carries a new epoch.
Followers use it (OffsetsForLeaderEpoch) to find where their log diverged from
the leader's and truncate there.
"""

from __future__ import annotations

import logging
import os

from ..records.limits import INT32_MAX, INT32_MIN, INT64_MAX, check_int
from . import checkpoint
from .checkpoint import LEADER_EPOCH_CHECKPOINT, CorruptCheckpointError

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1  # Kafka's: no epoch asked for, or none found
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, dir: str, read_only: bool = False) -> None:
        self.path = os.path.join(dir, LEADER_EPOCH_CHECKPOINT)
        self.read_only = read_only
        try:
            self.entries: list[tuple[int, int]] = checkpoint.read_epochs(self.path)
        except CorruptCheckpointError as e:
            # the cache is rebuilt from the batches' epochs as the log is recovered
            log.warning("ignoring corrupt leader epoch checkpoint: %s", e)
            self.entries = []

    @property
    def latest_epoch(self) -> int | None:
        return self.entries[-1][0] if self.entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (if it is new). A negative
        epoch is "none" (a batch written before epochs) and changes nothing."""
        check_int("leader epoch", epoch, INT32_MIN, INT32_MAX, file=self.path)
        check_int("epoch start offset", start_offset, 0, INT64_MAX, file=self.path)
        if epoch < 0:
            return
        if self.entries:
            last_epoch, last_start = self.entries[-1]
            if epoch < last_epoch or (epoch == last_epoch and start_offset >= last_start):
                return
        # a new epoch supersedes entries that claim the same or later offsets
        before = self.entries
        self.entries = [(e, o) for e, o in self.entries if e < epoch and o < start_offset]
        self.entries.append((epoch, start_offset))
        try:
            self._flush()
        except BaseException:
            self.entries = before  # not written (a full disk): the next append tries again
            raise

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop epochs that start at or after ``end_offset`` (the log was truncated there)."""
        kept = [(e, o) for e, o in self.entries if o < end_offset]
        if kept != self.entries:
            self.entries = kept
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch in force there starts there."""
        before = [(e, o) for e, o in self.entries if o <= start_offset]
        if not before or (before[-1][1] == start_offset and len(before) == 1):
            return
        self.entries = [(before[-1][0], start_offset)] + [(e, o) for e, o in self.entries if o > start_offset]
        self._flush()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor``, (epoch, end offset) as OffsetsForLeaderEpoch answers:
        the latest epoch ends at the log end; an older one (the largest cached epoch at most
        ``epoch``) where the next cached epoch starts; one below the first cached epoch is
        answered as itself ending where the first starts (the log before it is gone: a
        follower replicates from there). (-1, -1) for the undefined epoch (-1), an epoch
        above the latest, or an empty cache."""
        entries = self.entries
        if epoch == UNDEFINED_EPOCH or not entries or epoch > entries[-1][0]:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == entries[-1][0]:
            return epoch, log_end_offset
        higher = next(i for i, (e, _) in enumerate(entries) if e > epoch)
        return (entries[higher - 1][0] if higher else epoch), entries[higher][1]

    def clear(self) -> None:
        self.entries = []
        self._flush()

    def _flush(self) -> None:
        if not self.read_only:
            checkpoint.write_epochs(self.path, self.entries)
