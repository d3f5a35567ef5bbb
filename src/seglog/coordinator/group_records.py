"""The records of ``__consumer_offsets``: Kafka's key and value schemas, encoded and decoded.

Every key and value starts with an int16 version; the key's version says what the
record is (Kafka's ``group-coordinator/src/main/resources/common/message/``)::

    key v0, v1  OffsetCommitKey     group string, topic string, partition int32
    key v2      GroupMetadataKey    group string
    key v3+     the KIP-848 consumer group records: skipped by a classic coordinator

    OffsetCommitValue (null value: the commit was deleted, a tombstone)
      v0  offset int64, metadata string, commitTimestamp int64
      v1  v0 + expireTimestamp int64                  (OffsetCommit v1, before 2.1)
      v2  as v0
      v3  offset, leaderEpoch int32, metadata, commitTimestamp
      v4  as v3, flexible (compact strings, tagged fields)

    GroupMetadataValue (null value: the group was deleted)
      protocolType string, generation int32, protocol string?, leader string?,
      currentStateTimestamp int64 (v2+), members [MemberMetadata]
      MemberMetadata: memberId string, groupInstanceId string? (v3+),
        clientId string, clientHost string, rebalanceTimeout int32 (v1+),
        sessionTimeout int32, subscription bytes, assignment bytes
      v4 is v3, flexible

Kafka 3.x writes key v1, OffsetCommitValue v3 (v1 when a commit carried its
own expiry) and GroupMetadataValue v3; seglog writes the same by default.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from ..errors import CorruptRecordError, InvalidRecordError
from ._wire import Reader, Writer

OFFSET_COMMIT_KEY_VERSIONS = (0, 1)
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSIONS = range(5)
GROUP_METADATA_VALUE_VERSIONS = range(5)
_FLEXIBLE = 4  # both values are flexible from v4 on


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int
    version: int = 1


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str
    version: int = GROUP_METADATA_KEY_VERSION


@dataclass(frozen=True)
class UnknownKey:
    """A key of a version the classic coordinator does not read (KIP-848 records)."""

    version: int


GroupKey = OffsetCommitKey | GroupMetadataKey | UnknownKey


class OffsetCommitValue(NamedTuple):
    """A tuple, not a frozen dataclass: one is made per commit (a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``)."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = -1
    expire_timestamp: int = -1  # v1 only
    version: int = 3


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    subscription: bytes  # the consumer protocol's bytes, opaque to the coordinator
    assignment: bytes
    rebalance_timeout: int = -1
    group_instance_id: str | None = None  # static membership (KIP-345)


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = field(default=())
    current_state_timestamp: int = -1
    version: int = 3


# --- keys ----------------------------------------------------------------------------------------


# every commit encodes a key and a value: packed whole, not through ``Writer`` field by field
_I16 = struct.Struct(">h")
_I16_I16 = struct.Struct(">hh")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I64_I64 = struct.Struct(">qq")
_I16_I64 = struct.Struct(">hq")
_I16_I64_I32 = struct.Struct(">hqi")


def encode_key(key: OffsetCommitKey | GroupMetadataKey) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return encode_offset_commit_key(key.group, key.topic, key.partition, key.version)
    group = key.group.encode("utf-8")
    if key.version != GROUP_METADATA_KEY_VERSION:
        raise InvalidRecordError(f"GroupMetadataKey has no version {key.version}")
    return _I16_I16.pack(key.version, len(group)) + group


def encode_offset_commit_key(group: str, topic: str, partition: int, version: int = 1) -> bytes:
    """``encode_key(OffsetCommitKey(group, topic, partition, version))``, without the key
    object: every commit writes one."""
    if version not in OFFSET_COMMIT_KEY_VERSIONS:
        raise InvalidRecordError(f"OffsetCommitKey has no version {version}")
    g, t = group.encode("utf-8"), topic.encode("utf-8")
    return b"".join((_I16_I16.pack(version, len(g)), g, _I16.pack(len(t)), t, _I32.pack(partition)))


def decode_key(data: bytes | bytearray | memoryview) -> GroupKey:
    r = Reader(data, "__consumer_offsets key")
    version = r.int16()
    if version in OFFSET_COMMIT_KEY_VERSIONS:
        return OffsetCommitKey(r.string(False), r.string(False), r.int32(), version)
    if version == GROUP_METADATA_KEY_VERSION:
        return GroupMetadataKey(r.string(False), version)
    if version < 0:
        raise CorruptRecordError(f"__consumer_offsets key: version {version}", position=0)
    return UnknownKey(version)


# --- offset commits ------------------------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    v = value.version
    if v not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise InvalidRecordError(f"OffsetCommitValue has no version {v}")
    if v >= _FLEXIBLE:
        w = Writer()
        w.int16(v)
        w.int64(value.offset)
        w.int32(value.leader_epoch)
        w.string(value.metadata, True)
        w.int64(value.commit_timestamp)
        w.tagged_fields({})
        return bytes(w.out)
    head = _I16_I64_I32.pack(v, value.offset, value.leader_epoch) if v == 3 else _I16_I64.pack(v, value.offset)
    metadata = value.metadata.encode("utf-8")
    if v == 1:
        tail = _I64_I64.pack(value.commit_timestamp, value.expire_timestamp)
    else:
        tail = _I64.pack(value.commit_timestamp)
    return b"".join((head, _I16.pack(len(metadata)), metadata, tail))


def decode_offset_commit_value(data: bytes | bytearray | memoryview) -> OffsetCommitValue:
    r = Reader(data, "OffsetCommitValue")
    v = r.int16()
    if v not in OFFSET_COMMIT_VALUE_VERSIONS:
        raise CorruptRecordError(f"OffsetCommitValue: unknown version {v}", position=0)
    flexible = v >= _FLEXIBLE
    offset = r.int64()
    leader_epoch = r.int32() if v >= 3 else -1
    metadata = r.string(flexible)
    commit_timestamp = r.int64()
    expire_timestamp = r.int64() if v == 1 else -1
    if flexible:
        r.tagged_fields()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp, v)


# --- group metadata ------------------------------------------------------------------------------


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    v = value.version
    if v not in GROUP_METADATA_VALUE_VERSIONS:
        raise InvalidRecordError(f"GroupMetadataValue has no version {v}")
    flexible = v >= _FLEXIBLE
    w = Writer()
    w.int16(v)
    w.string(value.protocol_type, flexible)
    w.int32(value.generation)
    w.nullable_string(value.protocol, flexible)
    w.nullable_string(value.leader, flexible)
    if v >= 2:
        w.int64(value.current_state_timestamp)

    def member(m: MemberMetadata) -> None:
        w.string(m.member_id, flexible)
        if v >= 3:
            w.nullable_string(m.group_instance_id, flexible)
        w.string(m.client_id, flexible)
        w.string(m.client_host, flexible)
        if v >= 1:
            w.int32(m.rebalance_timeout)
        w.int32(m.session_timeout)
        w.bytes_(m.subscription, flexible)
        w.bytes_(m.assignment, flexible)
        if flexible:
            w.tagged_fields({})

    w.array(value.members, flexible, member)
    if flexible:
        w.tagged_fields({})
    return bytes(w.out)


def decode_group_metadata_value(data: bytes | bytearray | memoryview) -> GroupMetadataValue:
    r = Reader(data, "GroupMetadataValue")
    v = r.int16()
    if v not in GROUP_METADATA_VALUE_VERSIONS:
        raise CorruptRecordError(f"GroupMetadataValue: unknown version {v}", position=0)
    flexible = v >= _FLEXIBLE
    protocol_type = r.string(flexible)
    generation = r.int32()
    protocol = r.nullable_string(flexible)
    leader = r.nullable_string(flexible)
    current_state_timestamp = r.int64() if v >= 2 else -1

    def member() -> MemberMetadata:
        member_id = r.string(flexible)
        instance_id = r.nullable_string(flexible) if v >= 3 else None
        client_id = r.string(flexible)
        client_host = r.string(flexible)
        rebalance_timeout = r.int32() if v >= 1 else -1
        session_timeout = r.int32()
        subscription = r.bytes_(flexible)
        assignment = r.bytes_(flexible)
        if flexible:
            r.tagged_fields()
        return MemberMetadata(
            member_id, client_id, client_host, session_timeout, subscription, assignment, rebalance_timeout, instance_id
        )

    members = r.array(flexible, member) or []
    if flexible:
        r.tagged_fields()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, tuple(members), current_state_timestamp, v)
