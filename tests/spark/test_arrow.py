"""Segment bytes to Arrow (seglog.spark._columns + seglog.spark.arrow) against RecordBatch.records().

Every Arrow batch must be valid Arrow, have exactly the schema Spark's Python
data source demands, and hold row for row what ``records()`` decodes: offsets,
timestamps (ms -> µs), timestamp types, keys, values, headers (a null list
when a record has none, header keys not in UTF-8 read as Java reads them).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from seglog.errors import CorruptRecordError
from seglog.records import (
    HEADER_SIZE,
    BatchIterator,
    Compression,
    RecordBatch,
    build_batch,
    end_transaction_marker,
)
from seglog.records import TimestampType as KafkaTimestampType
from seglog.records._codec import decode_records
from seglog.records.record import Record
from seglog.spark import arrow
from seglog.spark._columns import ColumnBuilder
from seglog.spark.arrow import END_OF_LOG, to_arrow_batches

from ..conftest import KAFKA_DATA

# as a broker stores them: *.stored.bin, the v2 files, and the uncompressed legacy ones
GOLDEN = sorted(
    {
        *KAFKA_DATA.glob("golden/*.stored.bin"),
        *KAFKA_DATA.glob("golden/v2_*.bin"),
        *KAFKA_DATA.glob("golden/v[01]_none.bin"),
    }
)
REAL = sorted(KAFKA_DATA.glob("real_segments/**/*.log"))
WIRE = sorted(KAFKA_DATA.glob("wire_captures/*/extracted_records/*.bin"))  # some end in a partial batch
MS = 1_700_000_000_000


def _spark_schema(include_headers: bool) -> pa.Schema:
    """What Spark's Python data source compares the first Arrow batch with (plan_data_source_read.py)."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return to_arrow_schema(StructType(fields), timezone="UTC")


SPARK_SCHEMA = {h: _spark_schema(h) for h in (False, True)}


def _java_text(key: str) -> str:
    """A header key as Java's UTF-8 decoder reads its bytes (records() keeps them via surrogateescape)."""
    return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def expected_rows(batches, start=0, end=END_OF_LOG, include_headers=True):
    rows = []
    for batch in batches:
        if batch.is_control:
            continue
        ts_type = int(batch.timestamp_type)
        for r in batch.records():
            if start <= r.offset < end:
                headers = [(_java_text(k), v) for k, v in r.headers] or None
                rows.append((r.offset, r.timestamp * 1000, ts_type, r.key, r.value, headers))
    return rows if include_headers else [row[:5] for row in rows]


def arrow_rows(record_batches, topic="t", partition=7, include_headers=True):
    rows = []
    for rb in record_batches:
        rb.validate(full=True)
        assert rb.schema.equals(SPARK_SCHEMA[include_headers])
        assert rb.column("topic").to_pylist() == [topic] * rb.num_rows
        assert rb.column("partition").to_pylist() == [partition] * rb.num_rows
        cols = [
            rb.column("offset").to_pylist(),
            rb.column("timestamp").cast(pa.int64()).to_pylist(),
            rb.column("timestampType").to_pylist(),
            rb.column("key").to_pylist(),
            rb.column("value").to_pylist(),
        ]
        if include_headers:
            lists = rb.column("headers").to_pylist()
            cols.append([None if h is None else [(e["key"], e["value"]) for e in h] for h in lists])
        rows += zip(*cols, strict=True)
    return rows


def read(data, start=0, end=END_OF_LOG, include_headers=True, max_rows=arrow.MAX_ROWS, origin=0):
    """Arrow batches from the batches of ``data``."""
    batches = BatchIterator(data, origin=origin)
    return to_arrow_batches(batches, "t", 7, start, end, include_headers=include_headers, max_rows=max_rows)


def decode(data, start=0, end=END_OF_LOG, include_headers=True, max_rows=arrow.MAX_ROWS):
    out = read(data, start, end, include_headers, max_rows)
    return arrow_rows(out, include_headers=include_headers)


def _id(path):
    return str(path.relative_to(KAFKA_DATA))


# --- Kafka's own bytes -------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN + REAL + WIRE, ids=_id)
def test_decodes_as_records_does(path):
    data = path.read_bytes()
    assert decode(data) == expected_rows(BatchIterator(data))


def test_without_headers_and_in_small_arrow_batches():
    data = KAFKA_DATA / "real_segments/rjmfernandes_flink-on-prem__cp7.6_kraft/data/orders-0/00000000000000000000.log"
    data = data.read_bytes()
    expected = expected_rows(BatchIterator(data), include_headers=False)
    assert len(expected) > 10_000
    out = list(read(data, include_headers=False, max_rows=1000))
    assert arrow_rows(out, include_headers=False) == expected
    assert all(1000 <= rb.num_rows <= 1100 for rb in out[:-1])


def test_the_data_was_found():
    assert len(GOLDEN) > 20 and len(REAL) > 30
    kinds = {(b.magic, int(b.compression), int(b.timestamp_type)) for p in REAL for b in BatchIterator(p.read_bytes())}
    assert {(1, 0, 0), (2, 0, 0), (2, 3, 1)} <= kinds  # v1, v2, lz4 with LogAppendTime
    golden_kinds = {(b.magic, int(b.compression)) for p in GOLDEN for b in BatchIterator(p.read_bytes())}
    assert {(0, 0), (0, 1), (1, 2), (1, 3), *((2, c) for c in range(5))} <= golden_kinds


def test_legacy_rows_keep_their_timestamp_type():
    rows = decode((KAFKA_DATA / "golden/v0_gzip.stored.bin").read_bytes())
    assert rows and {r[1:3] for r in rows} == {(-1000, -1)}  # no timestamp: -1 ms, type -1, as Spark shows v0


# --- offset ranges -----------------------------------------------------------------


def test_every_range_of_a_segment_of_mixed_codecs():
    data = (KAFKA_DATA / "golden/v2_mixed_codecs_segment.bin").read_bytes()
    everything = expected_rows(BatchIterator(data))
    assert len(everything) == 17
    for start in range(-1, 19):
        for end in range(start, 19):
            want = [r for r in everything if start <= r[0] < end]
            for max_rows in (1, 4, 100):
                assert decode(data, start, end, max_rows=max_rows) == want, (start, end, max_rows)


def test_control_batches_are_skipped():
    data = (
        build_batch([(b"a", b"1", MS, ())], base_offset=0, producer_id=5, transactional=True)
        + build_batch([end_transaction_marker(True, timestamp=MS)], base_offset=1, producer_id=5, control=True)
        + build_batch([(b"b", b"2", MS, ())], base_offset=2)
    )
    assert [r[0] for r in decode(data)] == [0, 2]


def test_arrow_batches_split_on_data_bytes(monkeypatch):
    monkeypatch.setattr(arrow, "MAX_DATA_BYTES", 20_000)
    value = b"v" * 3000
    data = b"".join(build_batch([(None, value, MS, ())] * 2, base_offset=2 * i) for i in range(10))
    out = list(read(data, include_headers=False))
    assert [rb.num_rows for rb in out] == [6, 6, 6, 2]
    assert arrow_rows(out, include_headers=False) == expected_rows(BatchIterator(data), include_headers=False)


# --- generated batches -------------------------------------------------------------

header_keys = st.one_of(st.text(max_size=8), st.binary(max_size=4).map(lambda b: b.decode("utf-8", "surrogateescape")))
optional_bytes = st.none() | st.binary(max_size=40)
records = st.lists(
    st.tuples(
        optional_bytes,
        optional_bytes,
        st.integers(0, 2**41),
        st.lists(st.tuples(header_keys, optional_bytes), max_size=3),
    ),
    min_size=1,
    max_size=20,
)
batch_specs = st.lists(
    st.tuples(records, st.sampled_from(list(Compression)), st.booleans(), st.integers(1, 3)),
    min_size=1,
    max_size=5,
)


def _log(specs, base=1000):
    data = bytearray()
    for recs, codec, log_append_time, gap in specs:
        ts_type = KafkaTimestampType.LOG_APPEND_TIME if log_append_time else KafkaTimestampType.CREATE_TIME
        data += build_batch(recs, base_offset=base, compression=codec, timestamp_type=ts_type, log_append_time=MS + 7)
        base += len(recs) + gap  # gaps, as compaction and transactions leave
    return bytes(data), base


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch_specs, st.data())
def test_generated_batches(specs, data):
    log, end_of_log = _log(specs)
    start = data.draw(st.integers(990, end_of_log + 1))
    end = data.draw(st.integers(start, end_of_log + 2))
    include_headers = data.draw(st.booleans())
    max_rows = data.draw(st.integers(1, 50))
    want = expected_rows(BatchIterator(log), start, end, include_headers)
    out = list(read(log, start, end, include_headers, max_rows))
    assert arrow_rows(out, include_headers=include_headers) == want
    batch_rows = [len(recs) for recs, *_ in specs]
    assert all(rb.num_rows < max_rows + max(batch_rows) for rb in out)


def test_header_keys_not_in_utf8_read_as_java_reads_them():
    bad = [b"\xff", b"a\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80x", b"\xe0\x80\xaf", b"ok\xe2\x82"]
    recs = [(b"k", b"v", MS, [(k.decode("utf-8", "surrogateescape"), b"x") for k in bad])]
    rows = decode(bytes(build_batch(recs)))
    assert [k for k, _ in rows[0][5]] == [k.decode("utf-8", "replace") for k in bad]
    assert rows[0][5][0][0] == "\ufffd"


# --- the builder's own contract ----------------------------------------------------


def _append(builder, batch, start=0, end=END_OF_LOG, section=None, count=None):
    return builder.append(
        batch.records_section() if section is None else section,
        batch.record_count if count is None else count,
        batch.base_offset,
        batch.base_timestamp,
        batch.timestamp_type == KafkaTimestampType.LOG_APPEND_TIME,
        batch.max_timestamp,
        int(batch.timestamp_type),
        batch.position,
        start,
        end,
    )


def test_finish_hands_over_buffers_and_starts_afresh():
    builder = ColumnBuilder()
    batch = RecordBatch(build_batch([(b"k", b"value", MS, ()), (None, None, MS + 1, ())], base_offset=5))
    assert _append(builder, batch, 6) == 1
    assert (builder.rows, builder.data_bytes) == (1, 0)
    cols = builder.finish()
    assert cols["rows"] == 1 and "headers" not in cols
    assert bytes(cols["offset"]) == (6).to_bytes(8, "little")
    assert bytes(cols["timestamp"]) == ((MS + 1) * 1000).to_bytes(8, "little")
    assert cols["key"][0] is not None and bytes(cols["key"][0])[0] & 1 == 0 and cols["key"][3] == 1
    assert builder.rows == 0 and builder.finish()["rows"] == 0
    view = memoryview(cols["offset"])
    assert view.readonly and len(cols["offset"]) == 8


def test_legacy_rows_appended_one_by_one():
    builder = ColumnBuilder(with_headers=True)
    builder.append_record(3, MS, 1, None, b"v", [("h", None), ("\udcff", b"x")], batch_position=12)
    builder.append_record(4, -1, -1, b"k", None)
    cols = builder.finish()
    _, _, (entries, keys, values), nulls = cols["headers"]
    assert (cols["rows"], entries, nulls) == (2, 2, 1)
    assert bytes(keys[2]) == "h\ufffd".encode() and bytes(values[2]) == b"x"
    with pytest.raises(CorruptRecordError, match="beyond") as e:
        builder.append_record(5, 2**62, 0, None, None, batch_position=12)
    assert e.value.position == 12 and builder.rows == 0


@given(st.data())
@settings(max_examples=300, deadline=None)
def test_corrupt_records_fail_as_the_codec_fails(data):
    """Same validation as _codec.decode_records: same bytes accepted, and the builder
    rewound to where it was before a batch that fails."""
    recs = data.draw(records)
    good = RecordBatch(build_batch(recs, base_offset=10), position=4096)
    section = bytearray(good.records_section())
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(section) - 1))
        action = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        if action == "flip":
            section[at] ^= data.draw(st.integers(1, 255))
        elif action == "cut":
            del section[at:]
        else:
            section[at:at] = data.draw(st.binary(min_size=1, max_size=3))
        if not section:
            section = bytearray(b"\x00")
    count = data.draw(st.sampled_from([good.record_count, good.record_count + 1, 2**31 - 1]))
    builder = ColumnBuilder(with_headers=True)
    _append(builder, good)
    before = builder.rows
    try:
        decoded = decode_records(bytes(section), count, 10, good.base_timestamp, False, 0, Record, 4096)
    except CorruptRecordError:
        decoded = None
    try:
        _append(builder, good, section=bytes(section), count=count)
    except CorruptRecordError as e:
        assert e.position == 4096
        # beyond the codec's checks, only timestamps microseconds cannot hold
        assert decoded is None or "timestamp" in str(e)
        assert builder.rows == before
        assert arrow_rows([arrow.ArrowAssembler("t", 7, True).assemble(builder.finish())]) == expected_rows([good])
    else:  # the builder keeps the rows in [start, end): a flipped offset delta may put one below 0
        assert decoded is not None and builder.rows == before + sum(r.offset >= 0 for r in decoded)


def test_hostile_count_and_trailing_bytes():
    batch = RecordBatch(build_batch([(b"k", b"v", MS, ())]), position=99)
    builder = ColumnBuilder()
    with pytest.raises(CorruptRecordError, match="does not fit") as e:
        _append(builder, batch, count=2**31 - 1)
    assert e.value.position == 99
    with pytest.raises(CorruptRecordError, match="follow the last record"):
        _append(builder, batch, section=bytes(batch.records_section()) + b"\x00")
    with pytest.raises(CorruptRecordError, match="truncated"):
        _append(builder, batch, section=bytes(batch.records_section())[:-1])
    three = RecordBatch(build_batch([(b"k", b"v" * 20, MS, ())] * 3), position=99)
    with pytest.raises(CorruptRecordError, match=r"^record count 4 disagrees with the batch: its records end after 3"):
        _append(builder, three, count=4)
    assert builder.rows == 0


def test_timestamps_microseconds_cannot_hold():
    batch = RecordBatch(build_batch([(b"a", b"1", MS, ()), (b"b", b"2", 2**62, ())], base_offset=0), position=7)
    builder = ColumnBuilder()
    assert _append(builder, batch, end=1) == 1  # the row out of range is not converted
    with pytest.raises(CorruptRecordError, match="beyond") as e:
        _append(builder, batch)
    assert (e.value.position, e.value.offset, builder.rows) == (7, 1, 1)


def test_corrupt_batch_in_a_log_names_its_position():
    first = build_batch([(b"a", b"1", MS, ())] * 3)
    second = bytearray(build_batch([(b"b", b"2", MS, ())] * 3, base_offset=3))
    second[HEADER_SIZE] = 0x7F  # the first record's length: past the batch's end
    with pytest.raises(CorruptRecordError) as e:
        list(read(bytes(first + second), origin=1000))
    assert e.value.position == 1000 + len(first)


@pytest.mark.parametrize(("at", "damage", "message"), [(16, b"\x07", "bad magic 7"), (8, b"\0\0\0\x0a", "minimum")])
def test_bad_framing_raises_as_batch_iterator_does(at, damage, message):
    good = build_batch([(b"a", b"1", MS, ())], base_offset=0)
    bad = bytearray(build_batch([(b"b", b"2", MS, ())], base_offset=1))
    bad[at : at + len(damage)] = damage  # the magic, or the batch length
    with pytest.raises(CorruptRecordError, match=message) as e:
        list(read(bytes(good + bad), origin=50))
    assert (e.value.position, e.value.offset) == (50 + len(good), 1)


# --- through Spark -----------------------------------------------------------------


def _tiny_source(data: bytes, include_headers: bool):
    """A Python data source over ``data`` (defined here, so it is pickled by value to the workers)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Reader(DataSourceReader):
        def partitions(self):
            return [InputPartition(data)]

        def read(self, partition):
            return to_arrow_batches(BatchIterator(partition.value), "t", 7, include_headers=include_headers)

    class Source(DataSource):
        @classmethod
        def name(cls):
            return "seglog_arrow_test"

        def schema(self):
            return arrow.spark_schema_ddl(include_headers)

        def reader(self, schema):
            return Reader()

    return Source


@pytest.mark.slow
def test_spark_reads_the_arrow_batches(spark):
    names = ["v2_none_headers.bin", "v2_lz4_nulls_fill.bin", "v1_snappy.stored.bin", "v2_zstd_headers_fill.bin"]
    log = b"".join((KAFKA_DATA / "golden" / name).read_bytes() for name in names)  # offsets repeat: no matter
    log += build_batch(
        [(b"x", None, MS, ())],
        base_offset=9000,
        timestamp_type=KafkaTimestampType.LOG_APPEND_TIME,
        log_append_time=MS + 5,
    )
    spark.dataSource.register(_tiny_source(log, True))
    df = spark.read.format("seglog_arrow_test").load()
    got = df.selectExpr("*", "unix_micros(timestamp) AS micros").collect()
    rows = [
        (
            r.offset,
            r.micros,
            r.timestampType,
            r.key,
            r.value,
            None if r.headers is None else [(h.key, h.value) for h in r.headers],
        )
        for r in got
    ]
    assert {(r.topic, r.partition) for r in got} == {("t", 7)}
    assert rows == expected_rows(BatchIterator(log))
    assert rows[-1][:3] == (9000, (MS + 5) * 1000, 1)
    assert {r[2] for r in rows} == {0, 1}
