"""Hostile frames: cut short, lengths and counts past the frame, negative and huge counts,
unknown API keys and versions, oversized size prefixes. Only InvalidRequestError and
UnsupportedVersionError come out, with the byte position, and memory stays bounded; a malformed
response raises InvalidResponseError, the peer's fault, never the request's."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.errors import InvalidRequestError, InvalidResponseError, UnsupportedVersionError
from seglog.protocol import ApiKey, decode_request, decode_response, encode_request, frame_size
from seglog.protocol.message_data import (
    ApiVersionsRequestData,
    FetchRequestData,
    MetadataRequestData,
    ProduceRequestData,
)

MAX = 100 * 1024 * 1024  # socket.request.max.bytes


def _frame(api_key: ApiKey, version: int, body: dict) -> bytes:
    return b"".join(bytes(p) for p in encode_request(api_key, version, 9, "client", body))[4:]


PRODUCE = ProduceRequestData(
    acks=1,
    timeout_ms=100,
    topic_data=[
        ProduceRequestData.TopicProduceData(
            name="t", partition_data=[ProduceRequestData.PartitionProduceData(index=0, records=b"x" * 70)]
        )
    ],
)
FETCH = FetchRequestData(
    max_wait_ms=500,
    min_bytes=1,
    topics=[
        FetchRequestData.FetchTopic(
            topic="t",
            partitions=[FetchRequestData.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=1 << 20)],
        )
    ],
    forgotten_topics_data=[FetchRequestData.ForgottenTopic(topic="u", partitions=[1, 2])],
    cluster_id="c",
)
METADATA = MetadataRequestData(
    topics=[MetadataRequestData.MetadataRequestTopic(name="a"), MetadataRequestData.MetadataRequestTopic(name=None)]
)
VALID = [
    _frame(ApiKey.PRODUCE, 3, PRODUCE),
    _frame(ApiKey.PRODUCE, 9, PRODUCE),
    _frame(ApiKey.FETCH, 4, FETCH),
    _frame(ApiKey.FETCH, 12, FETCH),
    _frame(ApiKey.METADATA, 12, METADATA),
    _frame(ApiKey.API_VERSIONS, 3, ApiVersionsRequestData(client_software_name="x", client_software_version="1")),
]


@pytest.mark.parametrize("frame", VALID, ids=range(len(VALID)))
def test_every_cut_of_a_frame_is_refused_with_its_position(frame: bytes) -> None:
    decode_request(frame)
    for cut in range(len(frame)):
        with pytest.raises(InvalidRequestError) as info:
            decode_request(frame[:cut])
        assert info.value.error_code == 42
        assert info.value.position is not None and 0 <= info.value.position <= cut


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_corrupted_frames_raise_only_protocol_errors(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 4))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(InvalidRequestError, UnsupportedVersionError):
        decode_request(bytes(mutated))


def _header(api_key: int, version: int) -> bytes:
    return struct.pack(">hhih", api_key, version, 77, 1) + b"c"


@pytest.mark.parametrize("count", [0x7FFFFFFF, 2**31 - 2, 1 << 20, -2, -(2**31)])
def test_huge_and_negative_array_counts_are_refused_before_allocating(count: int) -> None:
    frame = _header(ApiKey.PRODUCE, 3) + b"\xff\xff" + struct.pack(">hii", 1, 100, count) + b"\0" * 16
    tracemalloc.start()
    try:
        with pytest.raises(InvalidRequestError, match=str(count)) as info:
            decode_request(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert info.value.position == len(_header(ApiKey.PRODUCE, 3)) + 2 + 6
    assert peak < 64 * 1024


def test_null_in_a_non_nullable_array_is_refused() -> None:
    frame = _header(ApiKey.PRODUCE, 3) + b"\xff\xff" + struct.pack(">hii", 1, 100, -1)
    with pytest.raises(InvalidRequestError, match="topic_data"):
        decode_request(frame)


def test_compact_counts_and_lengths_past_the_frame() -> None:
    head = struct.pack(">hhih", ApiKey.PRODUCE, 9, 5, -1) + b"\0"  # header v2, null client id
    huge = b"\xff\xff\xff\xff\x0f"  # uvarint 2**32 - 1
    for body in (
        b"\x00" + struct.pack(">hi", 1, 0) + huge,  # topic count
        b"\x00" + struct.pack(">hi", 1, 0) + b"\x02\x50a",  # topic name of 79 bytes, 1 left
        huge,  # transactional id length
        b"\xff\xff\xff\xff\xff\x01",  # a uvarint of 6 bytes
    ):
        with pytest.raises(InvalidRequestError):
            decode_request(head + body)


def test_records_length_past_the_frame() -> None:
    frame = bytearray(VALID[0])
    at = bytes(frame).index(b"x" * 70) - 4
    frame[at : at + 4] = struct.pack(">i", 71)
    with pytest.raises(InvalidRequestError, match="71 bytes needed, 70 left") as info:
        decode_request(bytes(frame))
    assert info.value.position == at + 4


def test_unknown_api_keys_and_versions_keep_the_correlation_id() -> None:
    for api_key, version in (
        (999, 0),
        (-1, 0),
        (ApiKey.EXPIRE_DELEGATION_TOKEN, 0),
        (ApiKey.PRODUCE, 12),
        (ApiKey.FETCH, -1),
    ):
        with pytest.raises(UnsupportedVersionError) as info:
            decode_request(_header(api_key, version) + b"\0" * 40)
        error = info.value
        assert (error.api_key, error.api_version, error.correlation_id, error.error_code) == (api_key, version, 77, 35)


def test_a_too_new_api_versions_request_gives_its_correlation_id() -> None:
    # a client newer than the broker sends ApiVersions v5 with header v2 and a body we cannot know
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 5, 4242, 3) + b"lib\x00" + b"\x07whatever\x00"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (18, 5, 4242)


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (b"\x7f\xff\xff\xff", "frame size 2147483647 is larger than the limit of 104857600"),
        (struct.pack(">i", MAX + 1), "frame size 104857601 is larger than the limit of 104857600"),
        (b"\x80\x00\x00\x00", "invalid frame size -2147483648"),
        (b"\xff\xff\xff\xff", "invalid frame size -1"),
        (b"\x00\x01", "size prefix of 2 bytes"),
    ],
)
def test_size_prefix_checked_against_the_limit(prefix: bytes, message: str) -> None:
    with pytest.raises(InvalidRequestError, match=message):
        frame_size(prefix, MAX)


def test_size_prefix_within_the_limit() -> None:
    assert frame_size(struct.pack(">i", MAX), MAX) == MAX
    assert frame_size(memoryview(b"\x00\x00\x01\x00rest"), MAX) == 256


def test_malformed_responses_raise_invalid_response() -> None:
    for cut, position in ((b"", 0), (b"\0\0", 0), (b"\0\0\0\0", 4), (b"\0\0\0\0\0\0\0\0\x7f\xff\xff\xff", 8)):
        with pytest.raises(InvalidResponseError, match="malformed FETCH v4 response") as info:
            decode_response(ApiKey.FETCH, 4, cut)
        assert info.value.position == position and not isinstance(info.value, InvalidRequestError)
