"""Kafka's default partitioner: seglog's murmur2 (Python and the C column path) against the Java
client's test vectors, kafka-python's DefaultPartitioner and librdkafka's murmur2_random."""

from __future__ import annotations

import random

import confluent_kafka
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from seglog.partitioner import StickyPartitioner, murmur2, partition_for_key, partitions_for_keys

# Kafka's UtilsTest.testMurmur2: the signed 32-bit hashes the Java client computes
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def _c_partitions(keys: list[bytes | None], partitions: int) -> list[int]:
    """The sink's path: partitions_for_keys over an Arrow binary column (-1 for a null key)."""
    column = pa.array(keys, pa.binary())
    validity, offsets, data = column.buffers()
    spec = (validity, offsets, data if data is not None else b"", column.offset)
    out = partitions_for_keys(len(keys), spec, partitions)
    return list(memoryview(out).cast("i"))


class _Cluster:
    """The three questions kafka-python's DefaultPartitioner asks of its cluster metadata."""

    def __init__(self, partitions: int) -> None:
        self.ids = set(range(partitions))

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.ids

    available_partitions_for_topic = partitions_for_topic


def _kafka_python_partition(key: bytes, partitions: int) -> int:
    return DefaultPartitioner().partition("t", None, key, None, None, _Cluster(partitions))


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_VECTORS.items()))
def test_murmur2_of_the_java_client(key, expected):
    assert murmur2(key) == expected
    assert kafka_python_murmur2(key) & 0xFFFFFFFF == expected & 0xFFFFFFFF
    assert _c_partitions([key], 2**31 - 1) == [(expected & 0x7FFFFFFF) % (2**31 - 1)]


@settings(max_examples=500, deadline=None)
@given(key=st.binary(max_size=64), partitions=st.integers(1, 1000))
def test_partition_of_a_key_agrees_with_kafka_python_and_librdkafka(key, partitions):
    expected = _kafka_python_partition(key, partitions)
    assert partition_for_key(key, partitions) == expected
    assert _c_partitions([key], partitions) == [expected]
    # librdkafka's murmur2 partitioner is the Java client's (toPositive(murmur2) % partitions)
    assert confluent_kafka.murmur2(key, partitions) == expected


def test_many_keys_of_every_length_in_one_column():
    rng = random.Random(5)
    keys: list[bytes | None] = [rng.randbytes(n % 40) for n in range(4000)]
    keys[::97] = [None] * len(keys[::97])
    for partitions in (1, 3, 6, 50):
        expected = [-1 if k is None else _kafka_python_partition(k, partitions) for k in keys]
        assert _c_partitions(keys, partitions) == expected
        assert [-1 if k is None else partition_for_key(k, partitions) for k in keys] == expected


def test_a_sliced_column_hashes_its_own_rows():
    column = pa.array([b"x", b"foobar", None, b"21"], pa.binary()).slice(1)
    validity, offsets, data = column.buffers()
    out = partitions_for_keys(3, (validity, offsets, data, column.offset), 7)
    assert list(memoryview(out).cast("i")) == [partition_for_key(b"foobar", 7), -1, partition_for_key(b"21", 7)]


def test_null_keys_stick_to_one_partition_until_a_batch_is_done():
    chooser = StickyPartitioner(6, random.Random(1))
    seen = []
    for _ in range(200):
        first = chooser.partition(None)
        assert {chooser.partition(None) for _ in range(50)} == {first}  # sticky within a batch
        assert chooser.partition(b"foobar") == partition_for_key(b"foobar", 6)  # keys are not
        chooser.batch_done()
        assert chooser.partition(None) != first  # a new batch moves on, as KIP-480's partitioner does
        seen.append(first)
    assert set(seen) == set(range(6))  # and in time uses every partition
    one = StickyPartitioner(1)
    one.batch_done()
    assert one.partition(None) == 0
    with pytest.raises(ValueError):
        StickyPartitioner(0)
