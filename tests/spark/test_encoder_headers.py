"""The sink's encoder writes the headers column from Arrow's buffers in C, as it writes keys and
values: the batches are the bytes ``build_batch`` makes of the same records, for any mix of rows
without headers, with empty or null lists, null header values, a sliced batch, and several batches."""

from __future__ import annotations

import pyarrow as pa
import pytest

from seglog.records import Compression, build_batch, iter_batches
from seglog.spark.sink import Encoder

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
MS = 1_700_000_000_000


def _rows(n: int) -> tuple[pa.RecordBatch, list[tuple]]:
    keys = [None if i % 5 == 1 else b"k%d" % i for i in range(n)]
    values = [None if i % 7 == 2 else b"v%d-" % i + b"x" * (i % 50) for i in range(n)]
    headers = [
        None if i % 4 == 1 else [{"key": f"h{j}", "value": None if j == 1 else b"%d:%d" % (i, j)} for j in range(i % 3)]
        for i in range(n)
    ]
    stamps = [(MS + i) * 1000 for i in range(n)]  # Spark's microseconds
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            pa.array(headers, HEADERS),
            pa.array(stamps, pa.timestamp("us")),
        ],
        ["key", "value", "headers", "timestamp"],
    )
    records = [
        (k, v, MS + i, [(h["key"], h["value"]) for h in hs or ()])
        for i, (k, v, hs) in enumerate(zip(keys, values, headers, strict=True))
    ]
    return batch, records


def _encode(rows: pa.RecordBatch, batch_bytes: int = 1 << 20) -> list[bytearray]:
    encoder = Encoder("t", lambda topic: [0], lambda topic: batch_bytes, Compression.NONE, use_timestamps=True)
    [(_, _, batches)] = encoder.encode(rows)
    return batches


@pytest.mark.parametrize("start", [0, 3])
def test_headers_are_encoded_as_build_batch_encodes_them(start: int) -> None:
    rows, records = _rows(40)
    [batch] = _encode(rows.slice(start))
    assert bytes(batch) == bytes(build_batch(records[start:]))


def test_headers_across_several_batches_keep_their_rows() -> None:
    rows, records = _rows(300)
    batches = _encode(rows, batch_bytes=1000)
    assert len(batches) > 3
    decoded = [
        (r.key, r.value, r.timestamp, [tuple(h) for h in r.headers])
        for b in batches
        for r in next(iter_batches(bytes(b)))
    ]
    assert decoded == [(k, v, ts, [tuple(h) for h in hs]) for k, v, ts, hs in records]


def test_a_header_without_a_key_is_refused_naming_its_row() -> None:
    rows = pa.RecordBatch.from_arrays(
        [pa.array([b"v", b"w"], pa.binary()), pa.array([[], [{"key": None, "value": b"1"}]], HEADERS)],
        ["value", "headers"],
    )
    with pytest.raises(ValueError, match="row 1: a header has no key"):
        _encode(rows)
