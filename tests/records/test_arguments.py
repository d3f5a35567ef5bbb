"""build_batch's arguments checked against the header fields they fill (Kafka's widths):
a value that does not fit is a seglog error naming it, never a struct.error or an
OverflowError from the packing."""

from __future__ import annotations

import pytest

from seglog.errors import InvalidRecordError, InvalidRequestError, InvalidTimestampError, SeglogError
from seglog.records import Compression, Record, RecordBatch, build_batch, build_batches_from_columns


@pytest.mark.parametrize(
    ("field", "bad", "good"),
    [
        ("producer_epoch", 2**15, 2**15 - 1),
        ("producer_epoch", -(2**15) - 1, -(2**15)),
        ("base_sequence", 2**40, 2**31 - 1),
        ("partition_leader_epoch", 2**31, 2**31 - 1),
        ("producer_id", 2**63, 2**63 - 1),
        ("base_offset", -5, 0),
        ("base_offset", 2**63, 2**63 - 1),
        ("last_offset_delta", 2**31, 0),
    ],
)
def test_a_header_field_that_does_not_fit(field, bad, good):
    with pytest.raises(InvalidRequestError, match=field) as e:
        build_batch([Record(b"k", b"v", 1)], **{field: bad})
    assert e.value.error_code == 42
    batch = RecordBatch(build_batch([Record(b"k", b"v", 1)], **{field: good}))
    batch.validate()


@pytest.mark.parametrize("timestamp", [2**63, -(2**63) - 1])
def test_a_record_timestamp_past_int64(timestamp):
    with pytest.raises(InvalidTimestampError, match=f"record 1: timestamp {timestamp}"):
        build_batch([Record(b"k", b"v", 1), (b"k", b"v", timestamp)])
    with pytest.raises(InvalidTimestampError, match="log_append_time"):
        build_batch([Record(b"k", b"v", 1)], log_append_time=timestamp)


def test_a_kept_offset_past_int64():
    with pytest.raises(InvalidRecordError, match="offset"):
        build_batch([(b"k", b"v", 1, [], 2**64)], keep_offsets=True)


@pytest.mark.parametrize("compression", [7, -1, "brotli", None, 2.0])
def test_an_unknown_codec(compression):
    for build in (
        lambda: build_batch([Record(b"k", b"v", 1)], compression=compression),
        lambda: build_batches_from_columns(1, None, None, compression=compression),
    ):
        with pytest.raises(SeglogError, match="compression type") as e:
            build()
        assert e.value.error_code == 76
    assert Compression.parse(4) is Compression.ZSTD and Compression.parse("lz4") is Compression.LZ4
