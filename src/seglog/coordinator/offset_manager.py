"""Committed offsets, sans-IO (the offset part of Kafka's GroupCoordinator and
GroupMetadataManager): OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, the
end of a transaction's offsets on its marker, and expiry.

It works on the groups of a ``GroupCoordinator`` (their members and generation decide
who may commit) and answers as that does, with outputs:

- ``Reply(token, response)``: answer the request;
- ``StoreOffsets(store_id, group_id, partition, records, producer_id, producer_epoch)``:
  append these (key, value) records as one batch to ``__consumer_offsets-<partition>``
  (a transactional batch when ``producer_id`` is not -1; a value of None is a
  tombstone), then call ``complete_store(store_id, error, base_offset)`` with
  Kafka's error code of the append and the batch's base offset.

An offset commit (``commit_offsets``, ``txn_commit_offsets``), the broker's most frequent
group request, takes no token: it returns its answer, or the ``StoreOffsets`` whose
``complete_store`` returns the answer. The broker appends the batch at once nearly always,
and the answer is then made in the same turn with no output, token or reply in between.

Who may commit (Kafka's ``validateOffsetCommit``): a request with a generation, a
member id or an instance id must come from a current member (UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID) of the current generation (ILLEGAL_GENERATION); one without
("standalone", simple consumers) only to a group with no members, which it creates.
A group in CompletingRebalance answers REBALANCE_IN_PROGRESS. A metadata string
longer than ``offset.metadata.max.bytes`` (Java's length: UTF-16 units) is refused
with OFFSET_METADATA_TOO_LARGE and the rest of the request still commits.

Expiry, every ``offsets.retention.check.interval.ms`` (``cleanup``): Kafka 2.1+'s
rules. An Empty group's offsets expire ``offsets.retention.minutes`` after the group
became empty; a standalone group's (no protocol type) that long after each commit; a
Stable consumer group's offsets of topics no member subscribes to that long after
each commit; offsets with a commit pending never. An Empty group left with no
offsets dies: its GroupMetadata tombstone is written too (unless it never had a
generation).
"""

from __future__ import annotations

import struct
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ..common import TopicPartition
from ..protocol import ErrorCode
from .classic_group import ClassicGroup
from .group_coordinator import GroupCoordinator, Reply
from .group_records import (
    GroupMetadataKey,
    OffsetCommitValue,
    encode_key,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from .group_state import GroupState
from .partitioning import partition_for
from .stores import Outputs, PendingStores, append_error

INVALID_OFFSET = -1
_new = tuple.__new__
NO_METADATA = ""
CONSUMER_PROTOCOL_TYPE = "consumer"
_S = GroupState
# enum members as module constants where every commit asks: on Python 3.11 an Enum class's
# attribute is a call through EnumType.__getattr__'s hook (~340 ns, a global ~25)
_DEAD, _EMPTY, _STABLE, _PREPARING = _S.DEAD, _S.EMPTY, _S.STABLE, _S.PREPARING_REBALANCE
_COMPLETING, _NONE = _S.COMPLETING_REBALANCE, ErrorCode.NONE


_E = ErrorCode
# a batch too large is the commit's fault (its metadata): the client is told so, as Kafka's
# GroupMetadataManager.storeOffsets answers; the other append errors are stores.append_error's
_TOO_LARGE: dict[int, ErrorCode] = {
    _E.MESSAGE_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.RECORD_LIST_TOO_LARGE: _E.INVALID_COMMIT_OFFSET_SIZE,
    _E.INVALID_FETCH_SIZE: _E.INVALID_COMMIT_OFFSET_SIZE,
}


# --- requests and responses ---------------------------------------------------------------------
# what every offset commit makes (its request, the partitions', the store, the answer) are
# tuples: a frozen dataclass's __init__ sets each field through object.__setattr__


class PartitionCommit(NamedTuple):
    offset: int
    metadata: str | None = NO_METADATA  # null is stored as ""
    leader_epoch: int = -1
    commit_timestamp: int = -1  # OffsetCommit v1 only; -1: the coordinator's time


class OffsetCommitRequest(NamedTuple):
    group_id: str
    offsets: dict[TopicPartition, PartitionCommit]
    generation_id: int = -1  # -1, "" and None: a standalone commit
    member_id: str = ""
    group_instance_id: str | None = None
    retention_time_ms: int = -1  # v2-v4; -1: the broker's offsets.retention.minutes


class TxnOffsetCommitRequest(NamedTuple):
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: dict[TopicPartition, PartitionCommit]
    generation_id: int = -1  # v3+
    member_id: str = ""
    group_instance_id: str | None = None


class OffsetCommitResponse(NamedTuple):
    errors: dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetFetchRequest:
    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None  # None: every committed partition
    require_stable: bool = False


@dataclass(frozen=True)
class FetchedOffset:
    offset: int = INVALID_OFFSET
    leader_epoch: int = -1
    metadata: str = NO_METADATA
    error_code: int = ErrorCode.NONE


@dataclass(frozen=True)
class OffsetFetchResponse:
    group_id: str
    error_code: int
    partitions: dict[TopicPartition, FetchedOffset]


@dataclass(frozen=True)
class OffsetDeleteRequest:
    group_id: str
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class OffsetDeleteResponse:
    error_code: int
    errors: dict[TopicPartition, int]


class StoreOffsets(NamedTuple):
    store_id: int
    group_id: str
    partition: int  # of __consumer_offsets
    records: tuple[tuple[bytes, bytes | None], ...]
    producer_id: int = -1
    producer_epoch: int = -1


Output = Reply | StoreOffsets


def metadata_length(metadata: str) -> int:
    """The length Kafka compares with offset.metadata.max.bytes: Java's String.length."""
    if metadata.isascii():  # nearly always (empty, most often): one UTF-16 unit a character
        return len(metadata)
    return len(metadata.encode("utf-16-le")) // 2


def subscribed_topics(group: ClassicGroup) -> frozenset[str] | None:
    """The topics a consumer group's members subscribe to, from their ConsumerProtocol
    subscriptions (int16 version, [topic string], ...); None when unknown (not a consumer
    group, no protocol chosen, or a subscription that does not parse)."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE or group.protocol_name is None or not group.members:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            data = member.metadata(group.protocol_name)
        except KeyError:
            return None
        parsed = _subscription_topics(data)
        if parsed is None:
            return None
        topics.update(parsed)
    return frozenset(topics)


def _subscription_topics(data: bytes) -> list[str] | None:
    try:
        version, count = struct.unpack_from(">hi", data, 0)
        if version < 0 or count < 0 or count > len(data):
            return None
        pos, topics = 6, []
        for _ in range(count):
            (size,) = struct.unpack_from(">h", data, pos)
            if size < 0 or pos + 2 + size > len(data):
                return None
            topics.append(data[pos + 2 : pos + 2 + size].decode("utf-8"))
            pos += 2 + size
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


class OffsetManager:
    """The committed offsets of the groups a ``GroupCoordinator`` holds."""

    def __init__(self, groups: GroupCoordinator) -> None:
        self.coordinator = groups
        self.config = groups.config
        self._out: Outputs[Output] = Outputs()
        self._stores: PendingStores[_Store] = PendingStores("offset")
        self.next_cleanup_ms: int | None = None

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    # --- OffsetCommit ----------------------------------------------------------------------------

    def commit_offsets(self, request: OffsetCommitRequest, now_ms: int) -> OffsetCommitResponse | StoreOffsets:
        """The answer, or the store to append (``complete_store`` answers)."""
        req = request
        group = self.coordinator.groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:  # a member of a generation this coordinator does not know
                return OffsetCommitResponse(dict.fromkeys(req.offsets, ErrorCode.ILLEGAL_GENERATION))
            group = self.coordinator.groups[req.group_id] = ClassicGroup(req.group_id)
        error = self._validate(group, req.generation_id, req.member_id, req.group_instance_id, transactional=False)
        if error is None and group.state is _COMPLETING:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not None:
            return OffsetCommitResponse(dict.fromkeys(req.offsets, error))
        if group.state is _STABLE or group.state is _PREPARING:
            # a commit is a sign of life: the member's session restarts
            member = group.members[req.member_id]
            member.heartbeat_deadline = now_ms + member.session_timeout_ms
            self.coordinator.update_deadline(group.group_id)
        return self._store(group, req.offsets, req.retention_time_ms, now_ms)

    def txn_commit_offsets(self, request: TxnOffsetCommitRequest, now_ms: int) -> OffsetCommitResponse | StoreOffsets:
        """The answer, or the store to append (``complete_store`` answers)."""
        req = request
        if not req.group_id:
            return OffsetCommitResponse(dict.fromkeys(req.offsets, ErrorCode.INVALID_GROUP_ID))
        group = self.coordinator.groups.get(req.group_id)
        if group is None:
            group = self.coordinator.groups[req.group_id] = ClassicGroup(req.group_id)
        error = self._validate(group, req.generation_id, req.member_id, req.group_instance_id, transactional=True)
        if error is not None:
            return OffsetCommitResponse(dict.fromkeys(req.offsets, error))
        return self._store(group, req.offsets, -1, now_ms, (req.producer_id, req.producer_epoch))

    def _validate(
        self, group: ClassicGroup, generation_id: int, member_id: str, instance_id: str | None, *, transactional: bool
    ) -> ErrorCode | None:
        if group.state is _DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id or instance_id is not None:
            if instance_id is not None:
                current = group.static_members.get(instance_id)
                if current is None:
                    return ErrorCode.UNKNOWN_MEMBER_ID
                if current != member_id:
                    return ErrorCode.FENCED_INSTANCE_ID
            elif member_id not in group.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            return ErrorCode.ILLEGAL_GENERATION if generation_id != group.generation_id else None
        # a commit from outside the group: only to a group with no members (transactional
        # commits of old clients carry no member either)
        if not transactional and group.state is not _EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _store(
        self,
        group: ClassicGroup,
        offsets: dict[TopicPartition, PartitionCommit],
        retention_time_ms: int,
        now: int,
        producer: tuple[int, int] | None = None,
    ) -> OffsetCommitResponse | StoreOffsets:
        """The commit's records to store, or its answer when every metadata is too large."""
        limit = self.config.offset_metadata_max_bytes
        values: dict[TopicPartition, OffsetCommitValue] = {}
        for tp, (offset, metadata, leader_epoch, commit_timestamp) in offsets.items():
            if metadata is None:
                metadata = NO_METADATA
            if (len(metadata) if metadata.isascii() else metadata_length(metadata)) > limit:  # ASCII: no call
                continue
            timestamp = now if commit_timestamp == -1 else commit_timestamp
            if retention_time_ms == -1:
                values[tp] = OffsetCommitValue(offset, metadata, timestamp, leader_epoch)
            else:  # Kafka writes value v1 only for a commit with its own expiry
                expire = timestamp + retention_time_ms
                values[tp] = OffsetCommitValue(offset, metadata, timestamp, leader_epoch, expire, 1)
        if not values:
            return OffsetCommitResponse(dict.fromkeys(offsets, ErrorCode.OFFSET_METADATA_TOO_LARGE))
        if producer is None:
            group.offsets.prepare_commit(values)
        else:
            group.offsets.prepare_txn_commit(producer[0], values)
        group_id = group.group_id
        key, value = encode_offset_commit_key, encode_offset_commit_value
        records = []  # (a loop: a comprehension is a function made and called, every commit)
        for (topic, partition), v in values.items():
            records.append((key(group_id, topic, partition), value(v)))
        # (tuple.__new__: the named tuples' own constructors cost as much again, on every commit)
        store_id = self._stores.add(_new(_Store, (group, tuple(offsets), values, producer)))
        pid, epoch = producer if producer is not None else (-1, -1)
        return _new(StoreOffsets, (store_id, group_id, self.partition_for(group_id), tuple(records), pid, epoch))

    def complete_store(self, store_id: int, error_code: int, base_offset: int = -1) -> OffsetCommitResponse | None:
        """The append of a ``StoreOffsets`` ended with ``error_code`` (0: written at
        ``base_offset``): the answer of the commit it stored (None: tombstones)."""
        store = self._stores.pop(store_id)
        if store.requested is None:
            return None  # tombstones: nothing waits on them
        offsets = store.group.offsets
        if error_code == _NONE:
            if store.group.state is not _DEAD:
                for tp, value in store.values.items():
                    if store.producer is None:
                        offsets.commit_appended(tp, value, base_offset)
                    else:
                        offsets.txn_commit_appended(store.producer[0], tp, base_offset)
        elif store.producer is None:
            for tp, value in store.values.items():
                offsets.commit_failed(tp, value)
        else:
            offsets.txn_commit_failed(store.producer[0], store.values)
        error = append_error(error_code, _TOO_LARGE) if error_code else _NONE
        if len(store.values) == len(store.requested):  # no metadata was too large (nearly always)
            errors = dict.fromkeys(store.requested, error)
        else:
            too_large = ErrorCode.OFFSET_METADATA_TOO_LARGE
            errors = {tp: error if tp in store.values else too_large for tp in store.requested}
        return _new(OffsetCommitResponse, (errors,))

    # --- transactions' markers ---------------------------------------------------------------------

    def complete_transaction(self, producer_id: int, committed: bool, partition: int) -> None:
        """The transaction's marker was written to ``__consumer_offsets-<partition>``: the
        offsets its producer committed to groups there become visible, or are dropped."""
        for group in self.coordinator.groups.values():
            if producer_id in group.offsets.pending_txn and self.partition_for(group.group_id) == partition:
                group.offsets.complete_txn(producer_id, committed)

    # --- OffsetFetch -------------------------------------------------------------------------------

    def fetch_offsets(self, request: OffsetFetchRequest) -> OffsetFetchResponse:
        req = request
        group = self.coordinator.groups.get(req.group_id)
        if group is None or group.state is _S.DEAD:
            none = dict.fromkeys(req.partitions or (), FetchedOffset())
            return OffsetFetchResponse(req.group_id, ErrorCode.NONE, none)
        offsets = group.offsets
        wanted = req.partitions if req.partitions is not None else tuple(offsets.offsets)
        out = {}
        for tp in wanted:
            committed = offsets.offsets.get(tp)
            if req.require_stable and offsets.has_pending(tp):
                out[tp] = FetchedOffset(error_code=ErrorCode.UNSTABLE_OFFSET_COMMIT)
            elif committed is None:
                out[tp] = FetchedOffset()
            else:
                v = committed.value
                out[tp] = FetchedOffset(v.offset, v.leader_epoch, v.metadata)
        return OffsetFetchResponse(req.group_id, ErrorCode.NONE, out)

    def fetch_offsets_of_groups(self, requests: tuple[OffsetFetchRequest, ...]) -> tuple[OffsetFetchResponse, ...]:
        """OffsetFetch v8+: several groups in one request, each answered on its own."""
        return tuple(self.fetch_offsets(r) for r in requests)

    # --- OffsetDelete ------------------------------------------------------------------------------

    def delete_offsets(self, token: Hashable, request: OffsetDeleteRequest, now_ms: int) -> list[Output]:
        req = request
        group = self.coordinator.groups.get(req.group_id)
        if not req.group_id:
            return self._reply(token, OffsetDeleteResponse(ErrorCode.INVALID_GROUP_ID, {}))
        if group is None or group.state is _S.DEAD:
            return self._reply(token, OffsetDeleteResponse(ErrorCode.GROUP_ID_NOT_FOUND, {}))
        errors: dict[TopicPartition, int] = {}
        if group.state is _S.EMPTY:
            eligible = list(req.partitions)
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = subscribed_topics(group)  # unknown: every topic counts as subscribed
            eligible = [tp for tp in req.partitions if topics is not None and tp[0] not in topics]
            errors = {tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in req.partitions if tp not in eligible}
        else:
            return self._reply(token, OffsetDeleteResponse(ErrorCode.NON_EMPTY_GROUP, {}))
        if eligible:
            self._cleanup_group(group, group.offsets.remove(eligible), now_ms)
            errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        return self._reply(token, OffsetDeleteResponse(ErrorCode.NONE, errors))

    def delete_group(self, group: ClassicGroup, now_ms: int) -> None:
        """DeleteGroups of an Empty group: it dies, its offsets' and its metadata's tombstones
        go out with the next outputs (``take_outputs``)."""
        group.transition_to(_S.DEAD, now_ms)
        self._cleanup_group(group, group.offsets.remove(list(group.offsets.offsets)), now_ms)
        group.offsets.pending_txn.clear()

    def take_outputs(self) -> list[Output]:
        """The outputs made by calls that return none (``delete_group``)."""
        return self._out.drain()

    # --- expiry ------------------------------------------------------------------------------------

    def cleanup(self, now_ms: int) -> list[Output]:
        """Expire offsets (run at ``next_cleanup_ms``, every offsets.retention.check.interval.ms)."""
        for group in list(self.coordinator.groups.values()):
            self._cleanup_group(group, group.offsets.remove(self._expired(group, now_ms)), now_ms)
        self.next_cleanup_ms = now_ms + self.config.offsets_retention_check_interval_ms
        return self._out.drain()

    def remove_partitions(self, partitions: Iterable[TopicPartition], now_ms: int) -> list[Output]:
        """These partitions' topics were deleted: every group's offsets of them go, with
        their tombstones, as expired ones do (Kafka's ``handleDeletedPartitions``)."""
        deleted = set(partitions)
        for group in list(self.coordinator.groups.values()):
            removed = group.offsets.remove([tp for tp in group.offsets.offsets if tp in deleted])
            self._cleanup_group(group, removed, now_ms)
        return self._out.drain()

    def _expired(self, group: ClassicGroup, now: int) -> list[TopicPartition]:
        retention, offsets = self.config.offsets_retention_ms, group.offsets
        if group.protocol_type is None:  # standalone: from each commit
            return offsets.expired(now, retention, lambda v: v.commit_timestamp)
        if group.state is _S.EMPTY:  # from when the group became empty (older records: the commit)
            since = group.current_state_timestamp
            return offsets.expired(now, retention, lambda v: since if since != -1 else v.commit_timestamp)
        topics = subscribed_topics(group)
        if group.state is _S.STABLE and topics is not None:
            return offsets.expired(now, retention, lambda v: v.commit_timestamp, topics)
        return []

    def _cleanup_group(self, group: ClassicGroup, removed: list[TopicPartition], now: int) -> None:
        """Write tombstones of removed offsets; an Empty group with no offsets left dies."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group.group_id, tp[0], tp[1]), None) for tp in removed
        ]
        if group.state is _S.EMPTY and not group.offsets.has_offsets:
            group.transition_to(_S.DEAD, now)
        if group.state is _S.DEAD:
            self.coordinator.remove_group(group.group_id)
            if group.generation_id > 0:  # a group that only stored offsets never wrote its metadata
                records.append((encode_key(GroupMetadataKey(group.group_id)), None))
        if records:
            store_id = self._stores.add(_Store(group, None, {}, None))
            self._out.append(StoreOffsets(store_id, group.group_id, self.partition_for(group.group_id), tuple(records)))

    # --- small pieces ------------------------------------------------------------------------------

    def _reply(self, token: Hashable, response: object) -> list[Output]:
        """Answer ``token``; what is due now goes out with it."""
        out = self._out.drain()
        out.append(Reply(token, response))
        return out


class _Store(NamedTuple):
    group: ClassicGroup
    requested: tuple[TopicPartition, ...] | None  # None: tombstones nobody waits for
    values: dict[TopicPartition, OffsetCommitValue]
    producer: tuple[int, int] | None
