"""The entry points' contract: headers by version, defaults, tagged fields, records as parts."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import InvalidRequestError, InvalidResponseError, SeglogError, UnsupportedVersionError
from seglog.protocol import (
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    primitives,
    supported_versions,
)
from seglog.protocol.compiler import COPY_LIMIT
from seglog.protocol.message_data import (
    ApiVersionsResponseData,
    FetchRequestData,
    FetchResponseData,
    MetadataRequestData,
    MetadataResponseData,
    ProduceRequestData,
    ProduceResponseData,
)


class FileSlice:
    """What the encoder needs of storage's FileSlice: an int ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size


def _joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def _fetch_response(records: object) -> FetchResponseData:
    partition = FetchResponseData.PartitionData(partition_index=0, records=records)
    return FetchResponseData(responses=[FetchResponseData.FetchableTopicResponse(topic="t", partitions=[partition])])


def test_a_file_slice_is_a_part_of_its_own_after_its_length() -> None:
    piece = FileSlice(1 << 20)
    parts = encode_response(ApiKey.FETCH, 12, 5, _fetch_response(piece))
    at = next(i for i, p in enumerate(parts) if p is piece)
    before, after = _joined(parts[:at]), _joined(parts[at + 1 :])
    assert struct.unpack(">i", before[:4])[0] == len(before) + piece.size + len(after) - 4
    assert before.endswith(primitives.uvarint(piece.size + 1))  # the records' compact length
    assert after == b"\x00\x00\x00"  # the tagged fields of the partition, the topic, the response


def test_small_records_are_copied_large_ones_kept() -> None:
    small, large = b"s" * COPY_LIMIT, memoryview(b"l" * (COPY_LIMIT + 1))
    assert all(p is not small for p in encode_response(ApiKey.FETCH, 13, 5, _fetch_response(small)))
    parts = encode_response(ApiKey.FETCH, 13, 5, _fetch_response(large))
    assert any(p is large for p in parts)
    body = decode_response(ApiKey.FETCH, 13, _joined(parts)[4:])
    assert bytes(body.responses[0].partitions[0].records) == bytes(large)


def test_decoded_records_are_slices_of_the_frame() -> None:
    body = ProduceRequestData(
        acks=-1,
        timeout_ms=5,
        topic_data=[
            ProduceRequestData.TopicProduceData(
                name="t", partition_data=[ProduceRequestData.PartitionProduceData(index=1, records=b"r" * 9)]
            )
        ],
    )
    frame = bytearray(_joined(encode_request(ApiKey.PRODUCE, 9, 1, "c", body))[4:])
    request = decode_request(frame)
    records = request.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and bytes(records) == b"r" * 9
    assert request.size == len(frame)  # header and body, no length prefix: Kafka's sizeInBytes


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_answers_with_response_header_v0(version: int) -> None:
    raw = _joined(encode_response(ApiKey.API_VERSIONS, version, 0x01020304, ApiVersionsResponseData(api_keys=[])))
    # size, correlation id, then the body at once: error_code int16 (no tagged-field byte before it)
    assert raw[4:10] == b"\x01\x02\x03\x04\x00\x00"


def test_flexible_responses_have_header_v1_and_requests_header_v2() -> None:
    raw = _joined(encode_response(ApiKey.METADATA, 9, 7, MetadataResponseData()))
    assert raw[4:9] == b"\x00\x00\x00\x07\x00"
    raw = _joined(encode_request(ApiKey.METADATA, 9, 7, "ab", MetadataRequestData()))
    # key, version, correlation id, client id with an int16 length even here, tagged fields
    assert raw[4:17] == struct.pack(">hhih", 3, 9, 7, 2) + b"ab" + b"\x00"


def test_missing_fields_take_the_spec_defaults() -> None:
    raw = _joined(encode_response(ApiKey.FETCH, 5, 1, _fetch_response(None)))
    partition = decode_response(ApiKey.FETCH, 5, raw[4:]).responses[0].partitions[0]
    assert (partition.last_stable_offset, partition.log_start_offset) == (-1, -1)
    # a version without a field decodes it as its default
    request = decode_request(_joined(encode_request(ApiKey.FETCH, 4, 1, None, FetchRequestData(topics=[])))[4:]).body
    assert (request.session_epoch, request.replica_id, request.topics) == (-1, -1, [])
    assert request.replica_state == FetchRequestData.ReplicaState(replica_id=-1, replica_epoch=-1)


def test_tagged_fields_written_only_when_not_default() -> None:
    def produce_response(**partition: object) -> bytes:
        response = ProduceResponseData.PartitionProduceResponse(index=0, **partition)
        body = ProduceResponseData(
            responses=[ProduceResponseData.TopicProduceResponse(name="t", partition_responses=[response])]
        )
        return _joined(encode_response(ApiKey.PRODUCE, 10, 1, body))

    leader = ProduceResponseData.LeaderIdAndEpoch
    assert produce_response(current_leader=leader(leader_id=-1, leader_epoch=-1)) == produce_response()
    with_leader = produce_response(current_leader=leader(leader_id=3))
    assert len(with_leader) == len(produce_response()) + 1 + 1 + 8 + 1  # tag, size, two int32, its own tags
    decoded = decode_response(ApiKey.PRODUCE, 10, with_leader[4:])
    assert decoded.responses[0].partition_responses[0].current_leader == leader(leader_id=3, leader_epoch=-1)


def test_unknown_tagged_fields_are_skipped_known_ones_read() -> None:
    head = struct.pack(">hhih", ApiKey.FETCH, 12, 1, -1) + b"\x00"
    fixed = struct.pack(">iiiibii", -1, 500, 1, 1 << 20, 0, 0, -1)
    # topics [], forgotten [], rack "", then tags: 0 cluster id "cl", 9 unknown 3 bytes
    tail = b"\x01\x01\x01" + b"\x02" + b"\x00\x03\x03cl" + b"\x09\x03xyz"
    body = decode_request(head + fixed + tail).body
    assert body.cluster_id == "cl" and body.max_wait_ms == 500


def test_topic_ids_are_uuids() -> None:
    topic_id = uuid.uuid4()
    body = FetchRequestData(
        topics=[
            FetchRequestData.FetchTopic(
                topic_id=topic_id, partitions=[FetchRequestData.FetchPartition(partition=2, fetch_offset=9)]
            )
        ]
    )
    decoded = decode_request(_joined(encode_request(ApiKey.FETCH, 13, 1, None, body))[4:]).body
    assert decoded.topics[0].topic_id == topic_id and decoded.topics[0].topic == ""


def test_bad_bodies_are_refused_when_encoding() -> None:
    with pytest.raises(SeglogError, match="topic_data"):
        encode_request(ApiKey.PRODUCE, 3, 1, None, ProduceRequestData(topic_data=None))
    with pytest.raises(SeglogError, match="PRODUCE v3 request"):
        encode_request(ApiKey.PRODUCE, 3, 1, None, ProduceRequestData(acks="one"))
    with pytest.raises(SeglogError, match="records"):
        encode_response(ApiKey.FETCH, 4, 1, _fetch_response(object()))
    with pytest.raises(UnsupportedVersionError):
        encode_response(ApiKey.FETCH, 18, 1, FetchResponseData())
    with pytest.raises(SeglogError, match="client id of 40000 bytes"):
        encode_request(ApiKey.METADATA, 1, 1, "c" * 40000, MetadataRequestData())


def test_a_frame_that_is_not_bytes_is_refused() -> None:
    with pytest.raises(InvalidRequestError, match="bytes-like, not str"):
        decode_request("not bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidResponseError, match="bytes-like, not NoneType"):
        decode_response(ApiKey.FETCH, 4, None)  # type: ignore[arg-type]


def test_supported_versions() -> None:
    assert supported_versions(ApiKey.API_VERSIONS) == (0, 4)
    assert supported_versions(ApiKey.FETCH) == (0, 17)
    with pytest.raises(UnsupportedVersionError):
        supported_versions(ApiKey.CREATE_DELEGATION_TOKEN)


@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    raw = primitives.uvarint(value)
    assert primitives.read_uvarint(raw, 0, len(raw)) == (value, len(raw))


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_varint_varlong_round_trip(small: int, large: int) -> None:
    raw = primitives.varint(small)
    assert primitives.read_varint(raw, 0, len(raw)) == (small, len(raw)) and len(raw) <= 5
    raw = primitives.varlong(large)
    assert primitives.read_varlong(raw, 0, len(raw)) == (large, len(raw)) and len(raw) <= 10


def test_varint_bytes_are_kafkas() -> None:
    assert primitives.varint(0) == b"\x00" and primitives.varint(-1) == b"\x01" and primitives.varint(1) == b"\x02"
    assert primitives.varint(-64) == b"\x7f" and primitives.varint(64) == b"\x80\x01"
    assert primitives.uvarint(300) == b"\xac\x02"
    with pytest.raises(InvalidRequestError):
        primitives.read_varint(b"\xff\xff\xff\xff\xff\x01", 0, 6)
    with pytest.raises(ValueError):
        primitives.varint(2**31)
