"""Kafka's message format, sans-IO: bytes in, values out.

Record batch v2 (``RecordBatch``, ``build_batch``), legacy v0/v1 message sets
(``LegacyBatch``), control records, the four codecs, and ``BatchIterator``
to walk any buffer of batches (a segment, an mmap, a fetch response).
``layout`` is the v2 batch header's field offsets and sizes, ``crc32c`` its
checksum, ``check_records`` the walk of a batch's records an append's
validation makes (no record object built).
"""

from . import layout
from ._codec import check_records, crc32c
from .batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RecordBatch,
    TimestampType,
    build_batch,
    build_batches_from_columns,
)
from .batches import AnyBatch, BatchIterator, iter_batches, peek_frame
from .compression import Compression
from .control import (
    ControlRecord,
    ControlRecordType,
    EndTransactionMarker,
    LeaderChange,
    SnapshotFooter,
    SnapshotHeader,
    UnknownControlRecord,
    end_transaction_marker,
    parse_control_record,
)
from .legacy import LegacyBatch, build_message, build_message_set
from .record import Header, Record

__all__ = [
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "AnyBatch",
    "BatchIterator",
    "Compression",
    "ControlRecord",
    "ControlRecordType",
    "EndTransactionMarker",
    "Header",
    "LeaderChange",
    "LegacyBatch",
    "Record",
    "RecordBatch",
    "SnapshotFooter",
    "SnapshotHeader",
    "TimestampType",
    "UnknownControlRecord",
    "build_batch",
    "build_batches_from_columns",
    "build_message",
    "build_message_set",
    "check_records",
    "crc32c",
    "end_transaction_marker",
    "iter_batches",
    "layout",
    "parse_control_record",
    "peek_frame",
]
