"""Control records: the typed values of records in control batches (attribute bit 5).

A control record's key is ``version int16, type int16`` (Kafka's
ControlRecordType); its value depends on the type:

- 0 ABORT, 1 COMMIT: a transaction marker, ``version int16, coordinatorEpoch int32``.
- 2 LEADER_CHANGE (KRaft): LeaderChangeMessage, a flexible-version message:
  ``version int16, leaderId int32, voters [voterId int32], grantingVoters [...]``,
  arrays compact (unsigned varint length + 1), structs ending in tagged fields.
- 3 SNAPSHOT_HEADER: ``version int16, lastContainedLogTimestamp int64`` + tags.
- 4 SNAPSHOT_FOOTER: ``version int16`` + tags.
- 5 KRAFT_VERSION: ``version int16, kRaftVersion int16`` + tags.

Other types decode to ``UnknownControlRecord``: clients ignore them, and so do we.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError
from .record import Record
from .varint import decode_unsigned_varint, encode_unsigned_varint

_KEY = struct.Struct(">hh")
_MARKER = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True)
class EndTransactionMarker:
    type: ControlRecordType  # ABORT or COMMIT
    coordinator_epoch: int
    version: int = 0


@dataclass(frozen=True)
class LeaderChange:
    leader_id: int
    voters: tuple[int, ...]
    granting_voters: tuple[int, ...]
    version: int = 0


@dataclass(frozen=True)
class SnapshotHeader:
    last_contained_log_timestamp: int
    version: int = 0


@dataclass(frozen=True)
class SnapshotFooter:
    version: int = 0


@dataclass(frozen=True)
class KRaftVersion:
    kraft_version: int
    version: int = 0


@dataclass(frozen=True)
class UnknownControlRecord:
    type: int
    key: bytes | None
    value: bytes | None


ControlRecord = (
    EndTransactionMarker | LeaderChange | SnapshotHeader | SnapshotFooter | KRaftVersion | UnknownControlRecord
)


class _Reader:
    """Big-endian fields and compact arrays of Kafka's flexible message format."""

    def __init__(self, buf: bytes, position: int) -> None:
        self.buf, self.pos, self.position = buf, 0, position

    def take(self, fmt: struct.Struct) -> tuple:
        if self.pos + fmt.size > len(self.buf):
            raise CorruptRecordError("control record value is truncated", position=self.position)
        out = fmt.unpack_from(self.buf, self.pos)
        self.pos += fmt.size
        return out

    def uvarint(self) -> int:
        value, self.pos = decode_unsigned_varint(self.buf, self.pos)
        return value

    def skip_tagged_fields(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            size = self.uvarint()
            if self.pos + size > len(self.buf):
                raise CorruptRecordError("control record tagged field is truncated", position=self.position)
            self.pos += size

    def voter_ids(self) -> tuple[int, ...]:
        n = self.uvarint() - 1
        if n < 0:
            return ()
        if n > len(self.buf) - self.pos:
            raise CorruptRecordError(f"control record array length {n} out of range", position=self.position)
        ids = []
        for _ in range(n):
            ids.append(self.take(_I32)[0])
            self.skip_tagged_fields()
        return tuple(ids)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def _parse_value(kind: int, value: bytes, position: int) -> ControlRecord:
    r = _Reader(value, position)
    if kind in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        version, epoch = r.take(_MARKER)
        return EndTransactionMarker(ControlRecordType(kind), epoch, version)
    (version,) = r.take(_I16)
    result: ControlRecord
    if kind == ControlRecordType.LEADER_CHANGE:
        (leader,) = r.take(_I32)
        result = LeaderChange(leader, r.voter_ids(), r.voter_ids(), version)
    elif kind == ControlRecordType.SNAPSHOT_HEADER:
        result = SnapshotHeader(r.take(_I64)[0], version)
    elif kind == ControlRecordType.SNAPSHOT_FOOTER:
        result = SnapshotFooter(version)
    else:
        result = KRaftVersion(r.take(_I16)[0], version)
    r.skip_tagged_fields()
    return result


def parse_control_record(record: Record, position: int = 0) -> ControlRecord:
    """The typed value of a record from a control batch."""
    key = record.key
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes", position=position)
    _key_version, kind = _KEY.unpack_from(key)
    if kind > ControlRecordType.KRAFT_VERSION or kind < 0 or record.value is None:
        return UnknownControlRecord(kind, record.key, record.value)
    return _parse_value(kind, record.value, position)


def end_transaction_marker(commit: bool, coordinator_epoch: int = 0, timestamp: int | None = None) -> Record:
    """The one record of a COMMIT or ABORT control batch."""
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return Record(_KEY.pack(0, kind), _MARKER.pack(0, coordinator_epoch), timestamp)


def leader_change(leader_id: int, voters: tuple[int, ...], timestamp: int | None = None) -> Record:
    """A KRaft LeaderChange control record (tests and tools)."""

    def array(ids: tuple[int, ...]) -> bytes:
        return encode_unsigned_varint(len(ids) + 1) + b"".join(_I32.pack(i) + b"\x00" for i in ids)

    value = _I16.pack(0) + _I32.pack(leader_id) + array(voters) + array(voters) + b"\x00"
    return Record(_KEY.pack(0, ControlRecordType.LEADER_CHANGE), value, timestamp)
