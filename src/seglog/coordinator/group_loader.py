"""A partition of ``__consumer_offsets`` replayed into groups and committed offsets.

Kafka's ``GroupMetadataManager.loadGroupsAndOffsets``: the coordinator of a
partition reads it from the log start to the log end, the later record of a key
winning (the topic is compacted, so an old key may still have older values
before it):

- an OffsetCommit record sets a group's committed offset for a partition; its
  tombstone (null value) removes it;
- a GroupMetadata record sets the group's protocol, generation, leader and
  members; its tombstone removes the group;
- offsets committed inside a transaction (TxnOffsetCommit) wait, per producer,
  for the transaction's marker: COMMIT makes them committed offsets unless a
  later plain commit is already there, ABORT drops them;
- keys of newer versions (KIP-848 consumer groups) are skipped, as a classic
  coordinator does.

A group with members loads Stable, one without Empty; groups that only have
offsets load as Empty groups with no protocol.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from ..common import TopicPartition
from ..errors import CorruptRecordError
from ..records.batches import AnyBatch
from ..records.control import ControlRecordType
from ..storage import PartitionLog
from .group_records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from .group_state import GroupState

_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type


class CommittedOffset(NamedTuple):
    """A committed offset and the base offset of the batch that committed it (a tuple:
    one is made per commit)."""

    value: OffsetCommitValue
    batch_offset: int


@dataclass
class LoadedGroup:
    group_id: str
    metadata: GroupMetadataValue | None = None  # None: a group that only commits offsets
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    # offsets of transactions with no marker yet, per producer id
    pending_offsets: dict[int, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)

    @property
    def state(self) -> GroupState:
        return GroupState.STABLE if self.metadata is not None and self.metadata.members else GroupState.EMPTY


@dataclass
class _Replay:
    offsets: dict[tuple[str, str, int], CommittedOffset] = field(default_factory=dict)
    pending: dict[int, dict[tuple[str, str, int], CommittedOffset]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)

    def batch(self, batch: AnyBatch) -> None:
        if batch.is_control:
            self._marker(batch)
            return
        for record in batch.records():
            if record.key is None:
                raise CorruptRecordError(
                    "__consumer_offsets record without a key", position=batch.position, offset=record.offset
                )
            try:
                key = decode_key(record.key)
                if isinstance(key, OffsetCommitKey):
                    self._offset(batch, record.offset, key, record.value)
                elif isinstance(key, GroupMetadataKey):
                    if record.value is None:
                        self.groups.pop(key.group, None)
                    else:
                        self.groups[key.group] = decode_group_metadata_value(record.value)
            except CorruptRecordError as e:
                raise e.at(offset=record.offset) from None

    def _offset(self, batch: AnyBatch, offset: int, key: OffsetCommitKey, value: bytes | None) -> None:
        slot = (key.group, key.topic, key.partition)
        # a later commit wins by the offset of the batch that carried it (Kafka's olderThan)
        committed = None if value is None else CommittedOffset(decode_offset_commit_value(value), batch.base_offset)
        if batch.is_transactional:
            pending = self.pending.setdefault(batch.producer_id, {})
            if committed is None:
                pending.pop(slot, None)  # a tombstone in a transaction takes back its own commit only
            else:
                pending[slot] = committed
        elif committed is None:
            self.offsets.pop(slot, None)
        else:
            self.offsets[slot] = committed

    def _marker(self, batch: AnyBatch) -> None:
        records = batch.records()
        if not records:
            return  # the cleaner emptied it: its transaction's offsets stay pending, as in Kafka
        pending = self.pending.pop(batch.producer_id, {})
        key = records[0].key
        if key is None or len(key) < _CONTROL_KEY.size or _CONTROL_KEY.unpack_from(key)[1] != ControlRecordType.COMMIT:
            return
        for slot, committed in pending.items():
            if slot not in self.offsets or self.offsets[slot].batch_offset < committed.batch_offset:
                self.offsets[slot] = committed


class GroupLoader:
    """``__consumer_offsets``' loader (the broker's ``CoordinatorLoader``): a partition's groups."""

    def replay(self, log: PartitionLog) -> dict[str, LoadedGroup]:
        return load_groups(log)

    def empty(self) -> dict[str, LoadedGroup]:
        return {}


def load_groups(log: PartitionLog) -> dict[str, LoadedGroup]:
    """The groups of one ``__consumer_offsets`` partition, by group id."""
    replay = _Replay()
    try:
        for batch in log.batches(log.log_start_offset, log.log_end_offset):
            replay.batch(batch)
    except CorruptRecordError as e:
        raise e.at(file=log.dir) from None
    groups = {gid: LoadedGroup(gid, metadata) for gid, metadata in replay.groups.items()}
    for (gid, topic, partition), committed in replay.offsets.items():
        groups.setdefault(gid, LoadedGroup(gid)).offsets[TopicPartition(topic, partition)] = committed
    for pid, slots in replay.pending.items():
        for (gid, topic, partition), pending in slots.items():
            group = groups.setdefault(gid, LoadedGroup(gid))
            group.pending_offsets.setdefault(pid, {})[TopicPartition(topic, partition)] = pending
    return groups
