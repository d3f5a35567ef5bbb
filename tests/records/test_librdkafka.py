"""Round trips with librdkafka (through confluent-kafka), by way of its own mock broker.

librdkafka's consumer cannot read a file, but it can read a broker, and
confluent-kafka starts one in process (``test.mock.num.brokers``): a real TCP
listener that stores the record batches a Produce request carries as they are
(rewriting only the base offset) and serves them back in Fetch responses. So:

- librdkafka's producer writes batches to the mock broker; a raw Fetch request
  takes their bytes back out, and seglog decodes them;
- seglog builds batches; a raw Produce request puts them into the mock broker,
  and librdkafka's consumer (``check.crcs=true``) decodes them.

The two requests are written here by hand (Produce v3, Fetch v4: the first
versions that carry v2 batches), so no third Kafka client sits in between.
"""

from __future__ import annotations

import logging
import socket
import struct
import time
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.records import (
    BatchIterator,
    Compression,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    end_transaction_marker,
)

confluent_kafka = pytest.importorskip("confluent_kafka")

CODECS = list(Compression)
MS = 1_700_000_000_000


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


class MockBroker:
    """librdkafka's mock cluster of one broker, and a raw connection to it."""

    def __init__(self) -> None:
        messages: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                messages.append(record.getMessage())

        logger = logging.getLogger(f"seglog.tests.librdkafka.{uuid.uuid4().hex}")
        logger.addHandler(Collect())
        logger.setLevel(logging.INFO)
        logger.propagate = False
        # the client that owns the mock cluster; it lives as long as this object
        self.owner = confluent_kafka.Producer(
            {"bootstrap.servers": "unused:9092", "test.mock.num.brokers": 1, "logger": logger}
        )
        deadline = time.monotonic() + 10
        while not any("replaced with" in m for m in messages) and time.monotonic() < deadline:
            self.owner.poll(0.05)
        (line,) = [m for m in messages if "replaced with" in m]
        self.address = line.rsplit(" ", 1)[1]  # "... replaced with 127.0.0.1:PORT"
        host, port = self.address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()
        self.owner.flush(1)

    def create_topic(self, topic: str, partitions: int) -> None:
        """The mock creates a topic when a client first asks for it (4 partitions by default)."""
        producer = confluent_kafka.Producer({"bootstrap.servers": self.address})
        producer.list_topics(topic, timeout=10)
        assert len(producer.list_topics(topic, timeout=10).topics[topic].partitions) >= partitions

    def _call(self, api_key: int, version: int, body: bytes) -> bytes:
        self.correlation += 1
        request = struct.pack(">hhi", api_key, version, self.correlation) + _string("seglog-tests") + body
        self.sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", self._read(4))
        response = self._read(size)
        assert struct.unpack_from(">i", response)[0] == self.correlation
        return response[4:]

    def _read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("the mock broker closed the connection")
            out += chunk
        return bytes(out)

    def produce(self, topic: str, partition: int, batches: bytes) -> int:
        """Produce v3 of raw batches; returns the base offset the broker gave them."""
        body = struct.pack(">hhi", -1, -1, 10_000)  # no transactional id, acks=all, timeout
        body += struct.pack(">i", 1) + _string(topic) + struct.pack(">ii", 1, partition)
        body += struct.pack(">i", len(batches)) + batches
        response = self._call(0, 3, body)
        pos = 4 + 2 + struct.unpack_from(">h", response, 4)[0] + 4  # topics, topic name, partitions
        _, error, base_offset = struct.unpack_from(">ihq", response, pos)
        assert error == 0, f"the mock broker refused the produce: error {error}"
        return base_offset

    def fetch(self, topic: str, partition: int, offset: int = 0) -> bytes:
        """Fetch v4 from ``offset``: the records field, the log's bytes as they are."""
        body = struct.pack(">iiiib", -1, 100, 1, 64 << 20, 0)  # replica, max wait, min bytes, max bytes, isolation
        body += struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1)
        body += struct.pack(">iqi", partition, offset, 64 << 20)
        response = self._call(1, 4, body)
        pos = 4 + 4  # throttle time, topics
        pos += 2 + struct.unpack_from(">h", response, pos)[0] + 4  # topic name, partitions
        _, error, _high_watermark, _lso = struct.unpack_from(">ihqq", response, pos)
        assert error == 0, f"fetch error {error}"
        pos += 22
        aborted = struct.unpack_from(">i", response, pos)[0]
        pos += 4 + max(aborted, 0) * 16
        (size,) = struct.unpack_from(">i", response, pos)
        return response[pos + 4 : pos + 4 + max(size, 0)]


@pytest.fixture(scope="module")
def broker():
    mock = MockBroker()
    yield mock
    mock.close()


def _topic(broker: MockBroker, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:12]}"
    broker.create_topic(name, partitions)
    return name


def _consume(broker: MockBroker, topic: str, partition: int, count: int) -> list[tuple]:
    """(offset, key, value, headers, timestamp type, timestamp) of ``count`` messages, as librdkafka reads them."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.address,
            "group.id": f"g-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "check.crcs": True,
            "isolation.level": "read_uncommitted",
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        consumer.assign([confluent_kafka.TopicPartition(topic, partition, 0)])
        out: list[tuple] = []
        deadline = time.monotonic() + 20
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            assert message.error() is None, message.error()
            ts_type, ts = message.timestamp()
            headers = [(k, v) for k, v in (message.headers() or [])]
            out.append((message.offset(), message.key(), message.value(), headers, ts_type, ts))
        assert len(out) == count, f"librdkafka read {len(out)} of {count} messages"
        assert consumer.poll(0.3) is None  # and nothing more
        return out
    finally:
        consumer.close()


# the records both directions carry: nulls and empties, varint-boundary sizes,
# headers with null values, duplicate and non-ASCII keys, timestamps out of order
SIZES = [0, 1, 63, 64, 127, 128, 8191, 8192, 16383, 16384, 70_000]


def _variety(n: int = 120) -> list[Record]:
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else b"" if i % 11 == 0 else b"key-%d" % i
        size = SIZES[i % len(SIZES)]
        value = None if i % 13 == 5 else (b"record %d; " % i * (size // 10 + 1))[:size]
        headers = [("trace", b"%d" % i), ("dup", b"1"), ("dup", None), ("ключ-☃", b"")][: i % 5]
        out.append(Record(key, value, MS + (i * 37) % 101 - 50, headers))
    return out


# --- librdkafka writes, seglog reads ------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
def test_librdkafka_batches_decode_the_same_in_seglog(broker, codec, idempotent):
    topic = _topic(broker)
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": broker.address,
            "compression.codec": codec.name.lower(),
            "linger.ms": 200,
            "enable.idempotence": idempotent,
        }
    )
    sent = _variety()
    for r in sent:
        producer.produce(topic, key=r.key, value=r.value, partition=0, timestamp=r.timestamp, headers=list(r.headers))
    assert producer.flush(20) == 0
    got, batches = [], []
    while len(got) < len(sent):  # the mock broker answers a fetch with a few batches at a time
        scan = BatchIterator(broker.fetch(topic, 0, len(got)))
        for batch in scan:
            assert isinstance(batch, RecordBatch)
            batch.validate()
            batches.append(batch)
            got += [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch.records()]
        assert scan.remaining == 0 and batches
    assert got == [(i, r.key, r.value, list(r.headers), r.timestamp) for i, r in enumerate(sent)]
    # librdkafka writes the codec it was asked for, but sends a batch that would not shrink
    # uncompressed (a batch of a few small records, split off when the machine is slow)
    largest = max(batches, key=lambda b: len(b.records()))
    assert largest.compression == codec
    assert {b.compression for b in batches} <= {codec, Compression.NONE}
    assert all(b.timestamp_type == TimestampType.CREATE_TIME for b in batches)
    for b in batches:
        records = b.records()
        assert (b.base_timestamp, b.max_timestamp) == (records[0].timestamp, max(r.timestamp for r in records))
    if idempotent:
        assert all(b.producer_id >= 0 for b in batches)
        sequences = [(b.base_sequence, b.last_sequence) for b in batches]
        assert sequences[0][0] == 0 and sequences[-1][1] == len(sent) - 1
        assert all(b.last_sequence - b.base_sequence == b.last_offset_delta for b in batches)
    else:
        assert {(b.producer_id, b.base_sequence) for b in batches} == {(-1, -1)}


# --- seglog writes, librdkafka reads ------------------------------------------------------


def _expected(records: list[Record], first: int, ts_type: int = 1, stamp: int | None = None) -> list[tuple]:
    return [
        (first + i, r.key, r.value, list(r.headers), ts_type, r.timestamp if stamp is None else stamp)
        for i, r in enumerate(records)
    ]


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_seglog_batches_decode_the_same_in_librdkafka(broker, codec):
    topic = _topic(broker)
    records = _variety()
    first, second = records[:70], records[70:]
    data = build_batch(first, compression=codec, producer_id=4242, producer_epoch=3, base_sequence=0)
    data += build_batch(second, compression=codec, base_offset=70)
    assert broker.produce(topic, 0, bytes(data)) == 0
    assert _consume(broker, topic, 0, len(records)) == _expected(records, 0)


@pytest.mark.parametrize("codec", CODECS, ids=[c.name.lower() for c in CODECS])
def test_log_append_time_batches_read_as_librdkafka_reads_them(broker, codec):
    # 2 is librdkafka's TIMESTAMP_LOG_APPEND_TIME: every record takes the batch's max timestamp
    topic = _topic(broker)
    records = _variety(20)
    data = build_batch(
        records, compression=codec, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=MS + 10**6
    )
    broker.produce(topic, 0, bytes(data))
    assert _consume(broker, topic, 0, 20) == _expected(records, 0, ts_type=2, stamp=MS + 10**6)


def test_in_place_edits_read_as_librdkafka_reads_them(broker):
    # a LogAppendTime stamp (the CRC recomputed) and a new leader epoch (outside the CRC) on a built batch
    topic = _topic(broker)
    records = _variety(10)
    data = build_batch(records, compression=Compression.LZ4)
    batch = RecordBatch(data)
    batch.set_partition_leader_epoch(17)
    batch.set_max_timestamp(TimestampType.LOG_APPEND_TIME, MS + 5)
    broker.produce(topic, 0, bytes(data))
    assert _consume(broker, topic, 0, 10) == _expected(records, 0, ts_type=2, stamp=MS + 5)


def test_control_batches_are_skipped_by_librdkafka_too(broker):
    topic = _topic(broker)
    data = build_batch([Record(b"a", b"1", MS)], producer_id=9, producer_epoch=0, base_sequence=0, transactional=True)
    data += build_batch(
        [end_transaction_marker(True, coordinator_epoch=4, timestamp=MS)],
        base_offset=1,
        control=True,
        transactional=True,
        producer_id=9,
        producer_epoch=0,
    )
    data += build_batch([Record(b"b", b"2", MS + 1)], base_offset=2)
    broker.produce(topic, 0, bytes(data))
    assert [(o, k, v) for o, k, v, *_ in _consume(broker, topic, 0, 2)] == [(0, b"a", b"1"), (2, b"b", b"2")]
    assert [b.is_control for b in BatchIterator(broker.fetch(topic, 0))] == [False, True, False]


keys = st.none() | st.binary(max_size=30)
values = st.none() | st.binary(max_size=400)
# confluent-kafka hands header keys to librdkafka as C strings: a NUL would end one early
header_keys = st.text(st.characters(exclude_characters="\x00", exclude_categories=("Cs",)), max_size=8)
headers = st.lists(st.tuples(header_keys, st.none() | st.binary(max_size=10)), max_size=3)
timestamps = st.integers(min_value=0, max_value=2**42)
records_strategy = st.lists(st.builds(Record, keys, values, timestamps, headers), min_size=1, max_size=25)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=records_strategy, codec=st.sampled_from(CODECS))
def test_arbitrary_records_through_librdkafka(broker, records, codec):
    topic = _topic(broker)
    broker.produce(topic, 0, bytes(build_batch(records, compression=codec)))
    assert _consume(broker, topic, 0, len(records)) == _expected(records, 0)
