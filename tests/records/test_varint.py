"""Zigzag varints (seglog.records.varint) against Kafka's rules and kafka-python's codec."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import decode_varint as kp_decode
from kafka.record.util import encode_varint as kp_encode

from seglog.errors import CorruptRecordError
from seglog.records import Record, RecordBatch, build_batch
from seglog.records.varint import (
    decode_unsigned_varint,
    decode_varint,
    decode_varlong,
    encode_unsigned_varint,
    encode_varint,
    encode_varlong,
    unzigzag,
    zigzag,
)

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


def kafka_python_bytes(value: int) -> bytes:
    out = bytearray()
    kp_encode(value, out.append)  # kafka-python's varint is the 64-bit zigzag one
    return bytes(out)


@given(INT32)
def test_varint_round_trip_and_agrees_with_kafka_python(n):
    data = encode_varint(n)
    assert decode_varint(data) == (n, len(data))
    assert decode_varlong(data) == (n, len(data))  # zigzag of an int32 is the same in 64 bits
    assert data == kafka_python_bytes(n)


@given(INT64)
def test_varlong_round_trip_and_agrees_with_kafka_python(n):
    data = encode_varlong(n)
    assert decode_varlong(data) == (n, len(data))
    assert data == kafka_python_bytes(n)
    assert kp_decode(data, 0) == (n, len(data))


@given(INT64)
def test_zigzag_is_a_bijection(n):
    z = zigzag(n)
    assert 0 <= z < 2**64 and unzigzag(z) == n


def _length_boundaries() -> list[tuple[int, int]]:
    """(value, encoded length) on both sides of every length change, positive and negative."""
    cases = []
    for k in range(1, 10):
        edge = 1 << (7 * k - 1)  # zigzag(edge - 1) is the largest k-byte value
        cases += [(edge - 1, k), (edge, k + 1), (-edge, k), (-edge - 1, k + 1)]
    return [(v, n) for v, n in cases if -(2**63) <= v < 2**63]


@pytest.mark.parametrize(("value", "length"), _length_boundaries())
def test_length_changes_at_every_seven_bits(value, length):
    data = encode_varlong(value)
    assert len(data) == length
    assert decode_varlong(data) == (value, length)
    assert data == kafka_python_bytes(value)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
    ],
)
def test_known_encodings(value, encoded):
    assert encode_varint(value).hex() == encoded


def test_int64_extremes_take_ten_bytes():
    assert encode_varlong(2**63 - 1).hex() == "fe" + "ff" * 8 + "01"
    assert encode_varlong(-(2**63)).hex() == "ff" * 9 + "01"


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_varint_refuses_values_outside_int32(value):
    with pytest.raises(ValueError):
        encode_varint(value)


@pytest.mark.parametrize(
    ("data", "decode", "fault"),
    [
        (b"\xff" * 5 + b"\x01", decode_varint, "longer than 5"),
        (b"\x80" * 5 + b"\x00", decode_varint, "longer than 5"),
        (b"\xff" * 10 + b"\x01", decode_varlong, "longer than 10"),
        (b"", decode_varint, "truncated"),
        (b"\x80", decode_varint, "truncated"),
        (b"\xff\xff", decode_varlong, "truncated"),
    ],
)
def test_too_long_and_truncated(data, decode, fault):
    with pytest.raises(CorruptRecordError, match=fault):
        decode(data)


def test_position_of_a_bad_varint_is_where_it_starts():
    with pytest.raises(CorruptRecordError) as e:
        decode_varint(b"\x02\x04" + b"\xff" * 6, 2)
    assert e.value.position == 2


def test_bits_past_32_in_a_fifth_byte_are_dropped_as_java_does():
    # Java's ByteUtils.readVarint shifts the fifth byte into an int: its high bits fall off
    assert decode_varint(b"\x80\x80\x80\x80\x70") == (0, 5)
    assert decode_varint(b"\xfe\xff\xff\xff\x7f") == (2**31 - 1, 5)


def test_c_codec_reads_a_padded_record_length_as_java_does():
    # the same rule in the C record decoder: a record length written in five bytes
    data = build_batch([Record(b"k", b"v", 7)])
    body = bytes(data[61:])
    length = body[0]  # one byte: zigzag(record length)
    padded = bytes([length | 0x80, 0x80, 0x80, 0x80, 0x70]) + body[1:]
    rebuilt = bytearray(data[:61]) + padded
    rebuilt[8:12] = (len(rebuilt) - 12).to_bytes(4, "big")
    assert [(r.key, r.value, r.timestamp) for r in RecordBatch(rebuilt).records()] == [(b"k", b"v", 7)]


@given(st.integers(0, 2**64 - 1))
def test_unsigned_varint_round_trip(n):
    data = encode_unsigned_varint(n)
    assert decode_unsigned_varint(data) == (n, len(data))


def test_unsigned_varint_refuses_negative_values():
    with pytest.raises(ValueError):
        encode_unsigned_varint(-1)
