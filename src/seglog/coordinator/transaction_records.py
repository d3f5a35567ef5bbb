"""The records of ``__transaction_state``: Kafka's key and value schemas, encoded and decoded.

Key and value start with an int16 version (Kafka's
``transaction-coordinator/src/main/resources/common/message/``)::

    TransactionLogKey v0     transactionalId string
    TransactionLogValue      (null value: the transactional id expired)
      producerId int64, producerEpoch int16, transactionTimeoutMs int32,
      transactionStatus int8 (TransactionState), transactionPartitions
      [topic string, partitionIds [int32]] (nullable),
      transactionLastUpdateTimestampMs int64, transactionStartTimestampMs int64
      v0 classic; v1 flexible (compact strings and arrays, tagged fields), with
      tagged fields 0 previousProducerId int64, 1 nextProducerId int64,
      2 clientTransactionVersion int16 (KIP-890; written only when not default)

Kafka 3.x writes v0 values (v1 became readable in 3.5, KIP-915).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError, InvalidRecordError
from ._wire import Reader, Writer
from .transaction_state import TransactionState

TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSIONS = (0, 1)
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


@dataclass(frozen=True)
class TransactionLogKey:
    transactional_id: str
    version: int = TRANSACTION_LOG_KEY_VERSION


@dataclass(frozen=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None  # (topic, partition ids); None: null
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1  # v1 tagged fields
    next_producer_id: int = -1
    client_transaction_version: int = 0
    version: int = 0


def encode_key(key: TransactionLogKey) -> bytes:
    if key.version != TRANSACTION_LOG_KEY_VERSION:
        raise InvalidRecordError(f"TransactionLogKey has no version {key.version}")
    w = Writer()
    w.int16(key.version)
    w.string(key.transactional_id, False)
    return bytes(w.out)


def decode_key(data: bytes | bytearray | memoryview) -> TransactionLogKey:
    r = Reader(data, "TransactionLogKey")
    version = r.int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        raise CorruptRecordError(f"TransactionLogKey: unknown version {version}", position=0)
    return TransactionLogKey(r.string(False), version)


def encode_value(value: TransactionLogValue) -> bytes:
    v = value.version
    if v not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise InvalidRecordError(f"TransactionLogValue has no version {v}")
    flexible = v >= 1
    w = Writer()
    w.int16(v)
    w.int64(value.producer_id)
    w.int16(value.producer_epoch)
    w.int32(value.transaction_timeout_ms)
    w.int8(value.state)

    def partitions(entry: tuple[str, tuple[int, ...]]) -> None:
        w.string(entry[0], flexible)
        w.array(entry[1], flexible, w.int32)
        if flexible:
            w.tagged_fields({})

    w.array(value.partitions, flexible, partitions)
    w.int64(value.last_update_timestamp_ms)
    w.int64(value.start_timestamp_ms)
    if flexible:
        tags = {}
        if value.previous_producer_id != -1:
            tags[_TAG_PREVIOUS_PRODUCER_ID] = _I64.pack(value.previous_producer_id)
        if value.next_producer_id != -1:
            tags[_TAG_NEXT_PRODUCER_ID] = _I64.pack(value.next_producer_id)
        if value.client_transaction_version != 0:
            tags[_TAG_CLIENT_TRANSACTION_VERSION] = _I16.pack(value.client_transaction_version)
        w.tagged_fields(tags)
    return bytes(w.out)


def decode_value(data: bytes | bytearray | memoryview) -> TransactionLogValue:
    r = Reader(data, "TransactionLogValue")
    v = r.int16()
    if v not in TRANSACTION_LOG_VALUE_VERSIONS:
        raise CorruptRecordError(f"TransactionLogValue: unknown version {v}", position=0)
    flexible = v >= 1
    producer_id = r.int64()
    producer_epoch = r.int16()
    timeout = r.int32()
    state = TransactionState.from_status(r.int8())

    def partitions() -> tuple[str, tuple[int, ...]]:
        topic = r.string(flexible)
        ids = tuple(r.array(flexible, r.int32) or ())
        if flexible:
            r.tagged_fields()
        return topic, ids

    entries = r.array(flexible, partitions, nullable=True)
    last_update = r.int64()
    start = r.int64()
    tags = r.tagged_fields() if flexible else {}
    return TransactionLogValue(
        producer_id,
        producer_epoch,
        timeout,
        state,
        None if entries is None else tuple(entries),
        last_update,
        start,
        _tag(tags, _TAG_PREVIOUS_PRODUCER_ID, _I64, -1),
        _tag(tags, _TAG_NEXT_PRODUCER_ID, _I64, -1),
        _tag(tags, _TAG_CLIENT_TRANSACTION_VERSION, _I16, 0),
        v,
    )


def _tag(tags: dict[int, bytes], tag: int, fmt: struct.Struct, default: int) -> int:
    raw = tags.get(tag)
    if raw is None:
        return default
    if len(raw) != fmt.size:
        raise CorruptRecordError(f"TransactionLogValue: tagged field {tag} of {len(raw)} bytes, not {fmt.size}")
    return int(fmt.unpack(raw)[0])
