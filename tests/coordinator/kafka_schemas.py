"""The coordinators' record schemas spelled in kafka-python's protocol types: an encoder and
decoder seglog did not write, to check seglog's codecs against (fields as Kafka's
group-coordinator and transaction-coordinator message JSON lists them)."""

from __future__ import annotations

import io

from kafka.protocol.old.types import (
    Array,
    Bytes,
    CompactArray,
    CompactBytes,
    CompactString,
    Int8,
    Int16,
    Int32,
    Int64,
    Schema,
    String,
    TaggedFields,
)


def _string(flexible: bool):
    return CompactString("utf-8") if flexible else String("utf-8")


def offset_commit_key() -> Schema:
    return Schema(("version", Int16), ("group", String("utf-8")), ("topic", String("utf-8")), ("partition", Int32))


def group_metadata_key() -> Schema:
    return Schema(("version", Int16), ("group", String("utf-8")))


def offset_commit_value(v: int) -> Schema:
    fl = v >= 4
    fields = [("version", Int16), ("offset", Int64)]
    if v >= 3:
        fields.append(("leader_epoch", Int32))
    fields += [("metadata", _string(fl)), ("commit_timestamp", Int64)]
    if v == 1:
        fields.append(("expire_timestamp", Int64))
    if fl:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def member_metadata(v: int) -> Schema:
    fl = v >= 4
    fields = [("member_id", _string(fl))]
    if v >= 3:
        fields.append(("group_instance_id", _string(fl)))
    fields += [("client_id", _string(fl)), ("client_host", _string(fl))]
    if v >= 1:
        fields.append(("rebalance_timeout", Int32))
    fields += [("session_timeout", Int32)]
    fields += [("subscription", CompactBytes if fl else Bytes), ("assignment", CompactBytes if fl else Bytes)]
    if fl:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def group_metadata_value(v: int) -> Schema:
    fl = v >= 4
    fields = [
        ("version", Int16),
        ("protocol_type", _string(fl)),
        ("generation", Int32),
        ("protocol", _string(fl)),
        ("leader", _string(fl)),
    ]
    if v >= 2:
        fields.append(("current_state_timestamp", Int64))
    fields.append(("members", (CompactArray if fl else Array)(member_metadata(v))))
    if fl:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def transaction_log_key() -> Schema:
    return Schema(("version", Int16), ("transactional_id", String("utf-8")))


def transaction_log_value(v: int) -> Schema:
    fl = v >= 1
    partition = [("topic", _string(fl)), ("partition_ids", (CompactArray if fl else Array)(Int32))]
    if fl:
        partition.append(("tags", TaggedFields))
    fields = [
        ("version", Int16),
        ("producer_id", Int64),
        ("producer_epoch", Int16),
        ("timeout", Int32),
        ("status", Int8),
        ("partitions", (CompactArray if fl else Array)(Schema(*partition))),
        ("last_update", Int64),
        ("start", Int64),
    ]
    if fl:
        fields.append(("tags", TaggedFields))
    return Schema(*fields)


def decode(schema: Schema, data: bytes) -> tuple:
    buffer = io.BytesIO(data)
    out = schema.decode(buffer)
    assert buffer.read() == b"", "bytes left after the schema"
    return tuple(out)
