"""One topic partition this broker holds: Kafka's ``Partition``.

Its log, its role (leader or follower), the leader epoch and partition epoch the controller
gave it, its replicas and ISR; as leader, what each follower has fetched (Kafka's
``Replica``: log end offset, when it was last caught up), from which it moves the high
watermark and finds the ISR changes to propose.

- **High watermark** (leader): the smallest log end offset over the ISR, counting a member
  being added (an AlterPartition in flight) and, while a removal is in flight, the member
  being removed; it never moves back. A follower takes the leader's, cut to its own log end.
- **ISR**: a follower leaves when no fetch of its has reached the leader's log end for
  ``replica.lag.time.max.ms`` (``Replica.caught_up``); it rejoins when it reaches the high watermark
  and the start of this leader's epoch. Changes go to the controller (AlterPartition) and
  count once it has written them (``commit_isr``).
- **Epochs**: a new leader starts its epoch at its log end in the epoch cache, so that a
  follower asking where an older epoch ended (OffsetForLeaderEpoch) learns where this
  leader's log stopped following it.

Threads: these fields change on the broker's event loop only. Storage calls run in the I/O
threads; ``lock`` (Kafka's ``leaderIsrUpdateLock``) is held by every append and truncation
and by a role change, so that a follower's append never lands after the partition became
leader (its batches would sit after the new epoch's start), nor a leader's after it became
follower.

This module is the broker's one adapter to ``PartitionLog`` for replication: the high
watermark, appends as leader and follower, reads, truncation and the epoch cache are
called here only, so that a change of the storage API changes this module.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from ..common import ZERO_UUID
from ..errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from ..locks import RLock
from ..protocol import ErrorCode
from ..protocol.message_data import LeaderAndIsrRequestData
from ..storage import AppendInfo, AppendOrigin, FetchDataInfo, PartitionLog, Role

# enum members as module constants where every request asks: on Python 3.11 an Enum class's
# attribute is a call through EnumType.__getattr__'s hook (~340 ns, a global ~25)
LEADER = Role.LEADER

# LeaderAndIsr's partition state, with its topic's name: what the controller gives a partition
LeaderAndIsrPartitionState = LeaderAndIsrRequestData.LeaderAndIsrPartitionState


def check_leader_epoch(current: int, leader_epoch: int) -> None:
    """A client's current leader epoch against the leader's (-1: the client does not say)."""
    if current < 0 or current == leader_epoch:
        return
    if current < leader_epoch:
        raise FencedLeaderEpochError(f"leader epoch {current} is older than the current {leader_epoch}")
    raise UnknownLeaderEpochError(f"leader epoch {current} is newer than this broker's {leader_epoch}")


@dataclass
class Replica:
    """A follower as its leader sees it (Kafka's ``Replica``); -1: not known in this epoch."""

    broker_id: int
    log_end_offset: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    log_start_offset: int = -1  # as its last fetch said: what DeleteRecords waits for

    def update_fetch_state(self, fetch_offset: int, leader_leo: int, now: int, log_start_offset: int = -1) -> None:
        """A fetch from ``fetch_offset`` read while the leader's log ended at ``leader_leo``:
        caught up now if it asked for the end, or as of its previous fetch if it asked for
        what the end was then (Kafka's ``Replica.updateFetchState``)."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now

    def caught_up(self, now: int, max_lag_ms: int) -> bool:
        """Whether a fetch reached the leader's log end within ``max_lag_ms``: what
        ``replica.lag.time.max.ms`` documents (a follower that sent no fetch, or did not reach
        the log end, for that long leaves the ISR). Kafka 3.9's ``isCaughtUp`` also keeps a
        follower whose last known log end equals the leader's, however long ago it fetched;
        that kept a paused follower in the ISR of every partition no write reached. And a
        write may be kept from its partition by another's: a connection's requests are
        served one at a time, so a producer's write queued behind an acks=all produce that
        waits for the paused follower reached the leader only once that produce was
        answered, and its partition's ISR shrank one check later: a leader of four such
        partitions dropped the follower 4.2, 5.8, 7.2 and 8.7 s into its pause, with a lag
        of 3 s. (A follower that fetches names all its partitions in every fetch, so an
        idle partition's followers that fetch stay caught up.)"""
        return now - self.last_caught_up_ms <= max_lag_ms


class Partition:
    def __init__(self, topic: str, index: int, log: PartitionLog, broker_id: int) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.broker_id = broker_id
        self.lock = RLock()
        # its log's roles (storage's ``Role``); None: not served here, until LeaderAndIsr (or
        # ``lead_alone``) says and after StopReplica
        self.role: Role | None = None
        self.leader_id = -1
        self.leader_epoch = log.leader_epoch
        self.partition_epoch = -1
        self.controller_epoch = -1
        self.topic_id = ZERO_UUID
        self.replicas: tuple[int, ...] = (broker_id,)
        self.isr: tuple[int, ...] = (broker_id,)
        self.pending_isr: tuple[int, ...] | None = None  # proposed to the controller, not yet written
        self.leader_epoch_start_offset = log.log_end_offset
        self._remote: dict[int, Replica] = {}
        # a leader's appends above the high watermark, (end offset, bytes): what consumers'
        # fetches are told when the high watermark passes them
        self._unexposed: deque[tuple[int, int]] = deque()

    def __repr__(self) -> str:
        role = self.role.value if self.role is not None else "offline"
        return (
            f"Partition({self.topic}-{self.index}, {role}, leader={self.leader_id}, epoch={self.leader_epoch}, "
            f"isr={list(self.isr)}, hw={self.high_watermark}, leo={self.log_end_offset})"
        )

    # --- offsets -------------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def min_insync_replicas(self) -> int:
        return self.log.config.min_insync_replicas

    @property
    def latest_epoch(self) -> int | None:
        return self.log.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) of the largest epoch at most ``epoch`` in this log, as
        OffsetForLeaderEpoch answers; (-1, -1) when the log knows no epoch that old."""
        return self.log.leader_epoch_cache.end_offset_for(epoch, self.log.log_end_offset)

    # --- roles ---------------------------------------------------------------------------------------

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark waits for: the committed one and any member being added
        or (until the controller agrees) removed."""
        if self.pending_isr is None:
            return self.isr
        return tuple(dict.fromkeys(self.isr + self.pending_isr))

    def lead_alone(self) -> None:
        """One broker: the partition's only replica leads it, its ISR itself."""
        self.log.become_leader(self.leader_epoch)  # the epoch it had: no controller here
        self.role = LEADER
        self.leader_id = self.broker_id
        self.maybe_increment_high_watermark()

    def make_leader(self, state: LeaderAndIsrPartitionState, topic_id: uuid.UUID | None, now: int) -> bool:
        """LeaderAndIsr made this broker the leader; True when it was not leading this epoch."""
        with self.lock:
            new_epoch = state.leader_epoch > self.leader_epoch or self.role is not LEADER
            self._assign(state, topic_id)
            self.role = LEADER
            self.leader_id = self.broker_id
            if new_epoch:
                leo = self.log.log_end_offset
                self.log.become_leader(self.leader_epoch)
                self.log.leader_epoch_cache.assign(self.leader_epoch, leo)
                self.leader_epoch_start_offset = leo
                self._remote = {
                    r: Replica(r, last_caught_up_ms=now if r in self.isr else 0)
                    for r in self.replicas
                    if r != self.broker_id
                }
                self._unexposed.clear()
            for r in self.replicas:
                if r != self.broker_id and r not in self._remote:
                    self._remote[r] = Replica(r)
            return new_epoch

    def make_follower(self, state: LeaderAndIsrPartitionState, topic_id: uuid.UUID | None) -> bool:
        """LeaderAndIsr made this broker a follower; True when the leader or its epoch changed
        (the fetcher starts again: truncation first)."""
        with self.lock:
            changed = (
                self.role is not Role.FOLLOWER
                or state.leader != self.leader_id
                or state.leader_epoch > self.leader_epoch
            )
            self._assign(state, topic_id)
            self.role = Role.FOLLOWER
            self.leader_id = state.leader
            self.log.become_follower(self.leader_epoch)
            self._remote = {}
            self._unexposed.clear()
            return changed

    def stop(self) -> None:
        """StopReplica: this broker no longer serves the partition."""
        with self.lock:
            self.role = None
            self._remote = {}
            self._unexposed.clear()

    def _assign(self, state: LeaderAndIsrPartitionState, topic_id: uuid.UUID | None) -> None:
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)
        self.pending_isr = None
        if topic_id is not None and topic_id != ZERO_UUID:
            self.topic_id = topic_id

    # --- the leader's appends -------------------------------------------------------------------------

    def append_as_leader(
        self, records: memoryview, acks: int, *, wait: bool, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> AppendInfo | None:
        """The producer's (or a coordinator's: ``origin``) batches appended (None: it would wait, ``wait`` being False).
        Refused when this broker does not lead, or when acks=all and the ISR is smaller
        than ``min.insync.replicas`` (NOT_ENOUGH_REPLICAS, nothing written)."""
        if not self.lock.acquire(wait):  # (positional: a keyword is a dict made, every append)
            return None
        try:
            if self.role is not LEADER:
                raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {self.topic}-{self.index}")
            if acks == -1 and len(self.isr) < self.min_insync_replicas:
                raise NotEnoughReplicasError(
                    f"{self.topic}-{self.index} has {len(self.isr)} in-sync replicas {list(self.isr)}, "
                    f"fewer than min.insync.replicas {self.min_insync_replicas}"
                )
            if wait:
                return self.log.append_batches(records, origin=origin)
            return self.log.try_append_batches(records, origin=origin)
        finally:
            self.lock.release()

    def appended(self, end_offset: int, size: int) -> int:
        """On the loop after a leader's append of ``size`` bytes ending at ``end_offset``: the
        bytes consumers can now read (the high watermark moved past them), or 0."""
        self._unexposed.append((end_offset, size))
        return self.maybe_increment_high_watermark()

    def maybe_increment_high_watermark(self) -> int:
        """Move the leader's high watermark to the smallest log end offset over the ISR;
        returns the bytes it newly exposes (0 when it did not move)."""
        if self.role is not LEADER:
            return 0
        candidate = self.log.log_end_offset
        for r in self.maximal_isr:
            if r != self.broker_id:
                replica = self._remote.get(r)
                candidate = min(candidate, replica.log_end_offset if replica is not None else -1)
        old = self.log.high_watermark
        if candidate <= old:
            return 0
        new = self.log.update_high_watermark(candidate)
        exposed = 0
        while self._unexposed and self._unexposed[0][0] <= new:
            exposed += self._unexposed.popleft()[1]
        return (exposed or 1) if new > old else 0  # (no max(): a builtin's call, every append)

    def replication_reached(self, required_offset: int) -> int | None:
        """For an acks=all produce whose records end at ``required_offset``: None while the
        ISR has not them all, else its error code (0, NOT_ENOUGH_REPLICAS_AFTER_APPEND when
        the ISR shrank below ``min.insync.replicas`` meanwhile, NOT_LEADER_OR_FOLLOWER)."""
        if self.role is not LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark < required_offset:
            return None
        return (
            ErrorCode.NONE if len(self.isr) >= self.min_insync_replicas else ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        )

    # --- followers' fetches, as their leader sees them ---------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        for_replica: bool,
        upper_bound: int | None,
        min_one_message: bool,
        read_committed: bool = False,
    ) -> tuple[FetchDataInfo, int]:
        """Whole batches from ``offset``: up to the log end for a replica, ``upper_bound`` (the
        high watermark when None) for a consumer, with the aborted transactions of what was
        read when ``read_committed``; with the log end offset the read saw."""
        leo = self.log.log_end_offset
        if for_replica:
            return self.log.read(offset, max_bytes, upper_bound=leo, min_one_message=min_one_message), leo
        data = self.log.read(
            offset, max_bytes, upper_bound=upper_bound, min_one_message=min_one_message, read_committed=read_committed
        )
        return data, leo

    @property
    def last_stable_offset(self) -> int:
        """Where a read_committed consumer's reads end (the log's, Kafka's)."""
        return self.log.last_stable_offset

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, leader_leo: int, now: int, log_start_offset: int = -1
    ) -> bool:
        """A follower whose log starts at ``log_start_offset`` fetched from ``fetch_offset``;
        False when it is no replica of this leader."""
        replica = self._remote.get(replica_id)
        if self.role is not LEADER or replica is None:
            return False
        replica.update_fetch_state(fetch_offset, leader_leo, now, log_start_offset)
        return True

    def low_watermark(self, alive: Callable[[int], bool]) -> int:
        """Kafka's ``lowWatermarkIfLeader``: the smallest log start offset of this leader and of
        its followers on live brokers, as their fetches said (-1 for one that has not fetched in
        this epoch): how far DeleteRecords has reached on every replica."""
        if self.role is not LEADER:
            raise NotLeaderOrFollowerError(f"broker {self.broker_id} does not lead {self.topic}-{self.index}")
        low = self.log.log_start_offset
        for replica in self._remote.values():
            if replica.log_start_offset < low and alive(replica.broker_id):
                low = replica.log_start_offset
        return low

    def isr_to_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR with ``replica_id`` added when it has caught up (Kafka's ``isFollowerInSync``:
        its log end at least the high watermark and this epoch's start offset)."""
        replica = self._remote.get(replica_id)
        if self.role is not LEADER or self.pending_isr is not None or replica is None or replica_id in self.isr:
            return None
        leo = replica.log_end_offset
        if leo >= self.log.high_watermark and leo >= self.leader_epoch_start_offset:
            return (*self.isr, replica_id)
        return None

    def isr_to_shrink(self, now: int, max_lag_ms: int) -> tuple[int, ...] | None:
        """The ISR without the followers that have not caught up for ``max_lag_ms``."""
        if self.role is not LEADER or self.pending_isr is not None:
            return None
        lagging = {
            r
            for r in self.isr
            if r != self.broker_id and not (r in self._remote and self._remote[r].caught_up(now, max_lag_ms))
        }
        return tuple(r for r in self.isr if r not in lagging) if lagging else None

    def commit_isr(self, leader_epoch: int, isr: tuple[int, ...], partition_epoch: int) -> bool:
        """The controller wrote an ISR change (AlterPartition's answer); False if stale."""
        if self.role is not LEADER or leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return False
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.pending_isr = None
        return True

    # --- the follower's side -------------------------------------------------------------------------

    def append_as_follower(
        self, records: memoryview, leader_epoch: int, leader_hw: int, leader_log_start_offset: int
    ) -> int:
        """Batches fetched from the leader of ``leader_epoch`` appended (nothing if the role
        or epoch changed meanwhile); the high watermark becomes the leader's, cut to this
        log's end, and the log start offset follows the leader's up to there (Kafka's
        maybeIncrementLogStartOffset, LeaderOffsetIncremented): what DeleteRecords or
        retention removed on the leader goes here too, and never comes back when this
        replica leads. Returns the log end offset."""
        with self.lock:
            if self.role is not Role.FOLLOWER or self.leader_epoch != leader_epoch:
                return self.log.log_end_offset
            if len(records):
                self.log.append_as_follower(records)
            hw = self.log.update_high_watermark(min(leader_hw, self.log.log_end_offset))
            if leader_log_start_offset > self.log.log_start_offset:
                # the segments wholly below it go with the next retention pass, as on the leader
                self.log.delete_records(min(leader_log_start_offset, hw))
            return self.log.log_end_offset

    def truncate(self, offset: int, leader_epoch: int) -> int:
        """Drop the records at ``offset`` and after (they diverge from the leader's);
        returns the log end offset."""
        with self.lock:
            if self.role is Role.FOLLOWER and self.leader_epoch == leader_epoch:
                self.log.truncate_to(offset)
            return self.log.log_end_offset

    def truncate_fully_and_start_at(self, offset: int, leader_epoch: int) -> int:
        """The leader's log starts after this one ends: start again, empty, at ``offset``."""
        with self.lock:
            if self.role is Role.FOLLOWER and self.leader_epoch == leader_epoch:
                self.log.truncate_fully_and_start_at(offset)
            return self.log.log_end_offset
