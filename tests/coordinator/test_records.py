"""The __consumer_offsets and __transaction_state codecs, every version, against an
encoder seglog did not write (kafka-python's protocol types), and against bad bytes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.coordinator import group_records as g
from seglog.coordinator import transaction_records as t
from seglog.coordinator.transaction_state import TransactionState
from seglog.errors import CorruptRecordError, InvalidRecordError

from . import kafka_schemas as k

MEMBERS = (
    g.MemberMetadata("m-1", "client-1", "/10.0.0.1", 45000, b"\x00\x01sub", b"\x00\x01asg", 300000, "instance-1"),
    g.MemberMetadata("m-2", "client-2", "/10.0.0.2", 10000, b"", b"", 60000, None),
)


def _group_value(v: int) -> g.GroupMetadataValue:
    # fields a version does not hold keep their defaults, so the round trip is exact
    members = tuple(
        g.MemberMetadata(
            m.member_id,
            m.client_id,
            m.client_host,
            m.session_timeout,
            m.subscription,
            m.assignment,
            m.rebalance_timeout if v >= 1 else -1,
            m.group_instance_id if v >= 3 else None,
        )
        for m in MEMBERS
    )
    return g.GroupMetadataValue("consumer", 7, "range", "m-1", members, 1_700_000_000_000 if v >= 2 else -1, v)


def _kafka_group_fields(value: g.GroupMetadataValue) -> list:
    v = value.version
    fields: list = [v, value.protocol_type, value.generation, value.protocol, value.leader]
    if v >= 2:
        fields.append(value.current_state_timestamp)
    members = []
    for m in value.members:
        member: list = [m.member_id]
        if v >= 3:
            member.append(m.group_instance_id)
        member += [m.client_id, m.client_host]
        if v >= 1:
            member.append(m.rebalance_timeout)
        member += [m.session_timeout, m.subscription, m.assignment]
        members.append(member)
    fields.append(members)
    return fields


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_every_version_matches_kafka_python(version):
    value = _group_value(version)
    raw = g.encode_group_metadata_value(value)
    assert raw == k.group_metadata_value(version).encode(_kafka_group_fields(value))
    assert g.decode_group_metadata_value(raw) == value


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_every_version_matches_kafka_python(version):
    value = g.OffsetCommitValue(
        1234, "meta", 1_700_000_000_000, 9 if version >= 3 else -1, 1_800_000_000_000 if version == 1 else -1, version
    )
    raw = g.encode_offset_commit_value(value)
    fields: list = [version, 1234]
    if version >= 3:
        fields.append(9)
    fields += ["meta", 1_700_000_000_000]
    if version == 1:
        fields.append(1_800_000_000_000)
    assert raw == k.offset_commit_value(version).encode(fields)
    assert g.decode_offset_commit_value(raw) == value


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_keys_match_kafka_python(version):
    key = g.OffsetCommitKey("group-\u00e9t\u00e9", "orders", 3, version)
    raw = g.encode_key(key)
    assert raw == k.offset_commit_key().encode([version, "group-\u00e9t\u00e9", "orders", 3])
    assert g.decode_key(raw) == key


def test_group_metadata_key_matches_kafka_python():
    raw = g.encode_key(g.GroupMetadataKey("g"))
    assert raw == k.group_metadata_key().encode([2, "g"])
    assert g.decode_key(raw) == g.GroupMetadataKey("g")


def test_keys_of_newer_versions_are_skipped_not_refused():
    # KIP-848's consumer group records use key versions 3 and up
    assert g.decode_key(b"\x00\x03\x00\x01g") == g.UnknownKey(3)
    with pytest.raises(CorruptRecordError):
        g.decode_key(b"\xff\xff")


@pytest.mark.parametrize("version", [0, 1])
def test_transaction_log_every_version_matches_kafka_python(version):
    key = t.TransactionLogKey("txn-1")
    assert t.encode_key(key) == k.transaction_log_key().encode([0, "txn-1"])
    assert t.decode_key(t.encode_key(key)) == key
    value = t.TransactionLogValue(
        4000, 3, 60000, TransactionState.ONGOING, (("orders", (0, 2)), ("__consumer_offsets", (7,))), 111, 100,
        version=version,
    )  # fmt: skip
    raw = t.encode_value(value)
    fields = [version, 4000, 3, 60000, 1, [["orders", [0, 2]], ["__consumer_offsets", [7]]], 111, 100]
    assert raw == k.transaction_log_value(version).encode(fields)
    assert t.decode_value(raw) == value


def test_transaction_log_value_v1_tagged_fields_and_null_partitions():
    value = t.TransactionLogValue(
        5, 0, 1000, TransactionState.COMPLETE_COMMIT, None, 2, 1, previous_producer_id=4, next_producer_id=6,
        client_transaction_version=2, version=1,
    )  # fmt: skip
    raw = t.encode_value(value)
    decoded = k.decode(k.transaction_log_value(1), raw)
    assert decoded[5] is None
    assert decoded[-1] == {0: (4).to_bytes(8, "big"), 1: (6).to_bytes(8, "big"), 2: (2).to_bytes(2, "big")}
    assert t.decode_value(raw) == value


def test_unknown_versions_and_states_are_refused():
    with pytest.raises(CorruptRecordError, match="unknown version 5"):
        g.decode_offset_commit_value(b"\x00\x05" + bytes(30))
    with pytest.raises(CorruptRecordError, match="unknown version 9"):
        g.decode_group_metadata_value(b"\x00\x09")
    with pytest.raises(CorruptRecordError, match="unknown transaction status 8"):
        t.decode_value(k.transaction_log_value(0).encode([0, 1, 0, 1, 8, [], 0, 0]))
    with pytest.raises(InvalidRecordError):
        g.encode_offset_commit_value(g.OffsetCommitValue(1, "", 0, version=5))
    with pytest.raises(InvalidRecordError):
        t.encode_key(t.TransactionLogKey("x", version=1))


@pytest.mark.parametrize(
    ("decode", "raw"),
    [
        (g.decode_group_metadata_value, g.encode_group_metadata_value(_group_value(3))),
        (g.decode_group_metadata_value, g.encode_group_metadata_value(_group_value(4))),
        (g.decode_offset_commit_value, g.encode_offset_commit_value(g.OffsetCommitValue(1, "meta", 2))),
        (g.decode_key, g.encode_key(g.OffsetCommitKey("group", "topic", 1))),
        (t.decode_value, t.encode_value(t.TransactionLogValue(1, 0, 1, TransactionState.EMPTY, (("a", (1,)),), 0, 0))),
        (t.decode_value, t.encode_value(t.TransactionLogValue(1, 0, 1, TransactionState.EMPTY, None, 0, 0, version=1))),
    ],
)
def test_every_truncation_is_a_clear_error(decode, raw):
    decode(raw)
    for cut in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode(raw[:cut])


def test_a_length_larger_than_the_record_allocates_nothing():
    # a members count of 2^31 - 1 in a 20-byte value
    raw = b"\x00\x00" + b"\x00\x01c" + b"\x00\x00\x00\x01" + b"\xff\xff" + b"\xff\xff" + b"\x7f\xff\xff\xff"
    with pytest.raises(CorruptRecordError, match="array count"):
        g.decode_group_metadata_value(raw)


_text = st.text(max_size=20)
_member = st.builds(
    g.MemberMetadata,
    _text,
    _text,
    _text,
    st.integers(-(2**31), 2**31 - 1),
    st.binary(max_size=30),
    st.binary(max_size=30),
    st.integers(-(2**31), 2**31 - 1),
    st.none() | _text,
)


@given(
    st.builds(
        g.GroupMetadataValue,
        _text,
        st.integers(-(2**31), 2**31 - 1),
        st.none() | _text,
        st.none() | _text,
        st.lists(_member, max_size=4).map(tuple),
        st.integers(-(2**63), 2**63 - 1),
        st.just(4),
    )
)
def test_group_metadata_value_v4_round_trips(value):
    raw = g.encode_group_metadata_value(value)
    assert g.decode_group_metadata_value(raw) == value
    assert k.decode(k.group_metadata_value(4), raw)[1] == value.protocol_type
