"""The sans-IO connection: framing, limits, correlation, order and version negotiation, both
sides, bytes in and events out with no socket."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.errors import InvalidRequestError, InvalidResponseError, LocalProtocolError, UnsupportedVersionError
from seglog.protocol import (
    CLOSED,
    NEED_DATA,
    ApiKey,
    ClientConnection,
    ErrorCode,
    Request,
    Response,
    ServerConnection,
    encode_request,
    encode_response,
)
from seglog.protocol.connection import FIRST_FRAME_ROOM, RECEIVE_CHUNK, State
from seglog.protocol.message_data import (
    ApiVersionsRequestData,
    ApiVersionsResponseData,
    MetadataRequestData,
    MetadataResponseData,
    ProduceRequestData,
)

SERVED = {ApiKey.API_VERSIONS: (0, 4), ApiKey.METADATA: (0, 12), ApiKey.PRODUCE: (3, 11)}


def _joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def _request(api_key: ApiKey, version: int, correlation_id: int, body: object) -> bytes:
    return _joined(encode_request(api_key, version, correlation_id, "c", body))


def _server(max_size: int = 1 << 20) -> ServerConnection:
    return ServerConnection(SERVED, max_size)


def _client(versions: dict[int, tuple[int, int]] | None = None) -> ClientConnection:
    client = ClientConnection("me")
    client.versions = versions
    return client


def _events(conn: ServerConnection | ClientConnection) -> list:
    out = []
    while (event := conn.next_event()) not in (NEED_DATA, CLOSED):
        out.append(event)
    return out


# --- framing, both sides -------------------------------------------------------------------------


@given(st.lists(st.integers(1, 40), max_size=30))
def test_frames_cut_anywhere_come_out_whole_and_in_order(cuts: list[int]) -> None:
    server = _server()
    wire = b"".join(_request(ApiKey.METADATA, 9, i, MetadataRequestData(topics=None)) for i in range(5))
    got, at = [], 0
    for cut in [*cuts, len(wire)]:
        server.receive_data(wire[at : at + cut])
        at += cut
        got += _events(server)
        if at >= len(wire):
            break
    assert [r.header.correlation_id for r in got] == list(range(5))
    assert all(r.body == MetadataRequestData(topics=None) for r in got)


def test_a_large_frame_is_received_into_its_own_buffer_that_grows_as_bytes_come() -> None:
    server = _server(max_size=1 << 24)
    records = b"r" * (3 * FIRST_FRAME_ROOM)
    body = ProduceRequestData(acks=1, timeout_ms=5, topic_data=[_topic("t", records)])
    wire = _request(ApiKey.PRODUCE, 9, 7, body)
    server.receive_data(wire[:100])
    assert server.next_event() is NEED_DATA
    view = server.frame_buffer()
    assert view is not None and len(view) == FIRST_FRAME_ROOM - 96  # the first room, not the whole frame
    at = 100
    while (view := server.frame_buffer()) is not None:
        n = min(len(view), 50_000, len(wire) - at)
        view[:n] = wire[at : at + n]
        server.frame_received(n)
        at += n
    request = server.next_event()
    assert isinstance(request, Request)
    assert bytes(request.body.topic_data[0].partition_data[0].records) == records


def test_a_large_response_is_received_into_one_buffer_of_its_size() -> None:
    """A client asked for it: its size prefix is trusted (up to the limit), so a large fetch's
    bytes go into one buffer, never copied into a larger one."""
    client = _client(SERVED)
    correlation, _ = client.send_request(ApiKey.METADATA, MetadataRequestData(), 12)
    body = MetadataResponseData(cluster_id="c" * (3 * RECEIVE_CHUNK))
    wire = _joined(encode_response(ApiKey.METADATA, 12, correlation, body))
    client.receive_data(wire[:100])
    first = client.frame_buffer()
    assert first is not None and len(first) == len(wire) - 100  # the whole frame's room at once
    at = 100
    while (view := client.frame_buffer()) is not None:
        assert view.obj is first.obj  # the same buffer throughout
        n = min(len(view), 5000)
        view[:n] = wire[at : at + n]
        client.frame_received(n)
        at += n
    (response,) = _events(client)
    assert response.body.cluster_id == body.cluster_id


def _topic(name: str, records: bytes) -> ProduceRequestData.TopicProduceData:
    return ProduceRequestData.TopicProduceData(
        name=name, partition_data=[ProduceRequestData.PartitionProduceData(index=0, records=records)]
    )


@pytest.mark.parametrize("size", [-1, -(2**31), 1025, 2**31 - 1])
def test_a_size_prefix_out_of_range_is_refused_before_its_body_and_breaks_the_connection(size: int) -> None:
    server = _server(max_size=1024)
    with pytest.raises(InvalidRequestError, match="frame size") as e:
        server.receive_data(struct.pack(">i", size))
    assert e.value.position == 0
    assert server.state is State.BROKEN
    with pytest.raises(LocalProtocolError):
        server.next_event()


def test_a_response_larger_than_the_limit_is_the_peers_error() -> None:
    client = ClientConnection("me", max_frame_size=100)
    client.send_request(ApiKey.API_VERSIONS, ApiVersionsRequestData(), 0)
    with pytest.raises(InvalidResponseError, match="larger than the limit"):
        client.receive_data(struct.pack(">i", 101))


def test_the_end_of_the_stream_comes_after_the_frames_before_it() -> None:
    server = _server()
    server.receive_data(_request(ApiKey.METADATA, 9, 1, MetadataRequestData()))
    server.receive_data(b"")
    assert isinstance(server.next_event(), Request)
    assert server.next_event() is CLOSED
    assert server.state is State.CLOSED
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"more")


def test_bytes_into_a_frame_buffer_that_is_not_there_are_our_fault() -> None:
    server = _server()
    with pytest.raises(LocalProtocolError):
        server.frame_received(4)


# --- the server side -----------------------------------------------------------------------------


def test_a_malformed_request_names_its_position_and_breaks_the_connection() -> None:
    server = _server()
    frame = _request(ApiKey.METADATA, 9, 1, MetadataRequestData())
    cut = frame[:-3]
    server.receive_data(struct.pack(">i", len(cut) - 4) + cut[4:])
    with pytest.raises(InvalidRequestError) as e:
        server.next_event()
    assert e.value.position is not None
    assert server.state is State.BROKEN


@pytest.mark.parametrize(("api_key", "version"), [(ApiKey.PRODUCE, 2), (ApiKey.FETCH, 12), (ApiKey.METADATA, 13)])
def test_a_request_not_served_breaks_the_connection(api_key: ApiKey, version: int) -> None:
    server = _server()
    header = struct.pack(">hhih", api_key, version, 5, 1) + b"c"
    server.receive_data(struct.pack(">i", len(header) + 10) + header + bytes(10))
    with pytest.raises(UnsupportedVersionError) as e:
        server.next_event()
    assert (e.value.api_key, e.value.api_version, e.value.correlation_id) == (api_key, version, 5)
    assert server.state is State.BROKEN


@pytest.mark.parametrize("version", [5, 99, 0x7FFF])
def test_api_versions_at_a_version_not_served_is_answered_at_v0_with_the_ranges(version: int) -> None:
    server = _server()
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, version, 77, 1) + b"c" + b"\x00garbage of a future version"
    server.receive_data(struct.pack(">i", len(header)) + header)
    request = server.next_event()
    assert isinstance(request, Request) and request.header.api_version == version
    raw = _joined(server.send_response(request, server.api_versions_body(request)))
    client = _client()
    client.send_request(ApiKey.API_VERSIONS, ApiVersionsRequestData(), 3)
    client._correlation = 76  # the answer is read as the one to correlation id 77
    client._in_flight[0] = client._in_flight[0]._replace(correlation_id=77)
    client.receive_data(raw)
    response = client.next_event()
    assert isinstance(response, Response) and response.api_version == 0
    assert response.body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert {k.api_key: (k.min_version, k.max_version) for k in response.body.api_keys} == SERVED
    assert client.versions is None  # a refusal teaches nothing: ask again at a served version


def test_responses_leave_in_the_order_requests_came() -> None:
    server = _server()
    for i in range(3):
        server.receive_data(_request(ApiKey.METADATA, 9, i, MetadataRequestData()))
    first, second, third = _events(server)
    with pytest.raises(LocalProtocolError, match="not the oldest"):
        server.send_response(second, MetadataResponseData())
    server.send_response(first, MetadataResponseData())
    server.forget(second)  # answered by nobody (a request Kafka leaves unanswered)
    server.send_response(third, MetadataResponseData())
    assert server.unanswered == 0


def test_an_acks_0_produce_expects_no_response() -> None:
    server = _server()
    body = ProduceRequestData(acks=0, timeout_ms=5, topic_data=[_topic("t", b"x")])
    server.receive_data(_request(ApiKey.PRODUCE, 9, 1, body))
    server.receive_data(_request(ApiKey.METADATA, 9, 2, MetadataRequestData()))
    produce, metadata = _events(server)
    assert server.unanswered == 1
    with pytest.raises(LocalProtocolError):
        server.send_response(produce, MetadataResponseData())
    server.send_response(metadata, MetadataResponseData())


# --- the client side -----------------------------------------------------------------------------


def test_a_client_and_a_server_talk() -> None:
    server, client = _server(), _client()
    correlation, parts = client.api_versions_request()
    server.receive_data(_joined(parts))
    (request,) = _events(server)
    assert request.header.correlation_id == correlation and request.header.client_id == "me"
    assert request.body.client_software_name == "seglog"
    client.receive_data(_joined(server.send_response(request, server.api_versions_body(request))))
    (response,) = _events(client)
    assert response.correlation_id == correlation and response.api_version == 3
    assert client.versions == SERVED
    assert client.version_for(ApiKey.METADATA) == 12
    assert client.version_for(ApiKey.METADATA, highest=4) == 4
    assert client.version_for(ApiKey.PRODUCE) == 11


def test_no_version_in_common_is_an_unsupported_version() -> None:
    client = _client({ApiKey.METADATA: (30, 40)})
    with pytest.raises(UnsupportedVersionError, match="no version of METADATA in common"):
        client.version_for(ApiKey.METADATA)
    with pytest.raises(UnsupportedVersionError, match="does not serve FETCH"):
        client.version_for(ApiKey.FETCH)
    with pytest.raises(LocalProtocolError):
        _client().version_for(ApiKey.METADATA)


def test_a_response_with_another_correlation_id_is_the_peers_error() -> None:
    client = _client(SERVED)
    correlation, _ = client.send_request(ApiKey.METADATA, MetadataRequestData(), 9)
    client.receive_data(_joined(encode_response(ApiKey.METADATA, 9, correlation + 1, MetadataResponseData())))
    with pytest.raises(InvalidResponseError, match="came with correlation id"):
        client.next_event()
    assert client.state is State.BROKEN


def test_a_response_nobody_asked_for_is_the_peers_error() -> None:
    client = _client(SERVED)
    client.receive_data(_joined(encode_response(ApiKey.METADATA, 9, 1, MetadataResponseData())))
    with pytest.raises(InvalidResponseError, match="no request in flight"):
        client.next_event()


def test_a_malformed_response_is_the_peers_error_not_a_bad_request() -> None:
    client = _client(SERVED)
    correlation, _ = client.send_request(ApiKey.METADATA, MetadataRequestData(), 9)
    client.receive_data(struct.pack(">ii", 6, correlation) + b"\x00\x05")
    with pytest.raises(InvalidResponseError) as e:
        client.next_event()
    assert not isinstance(e.value, InvalidRequestError)


def test_an_acks_0_produce_waits_for_no_response() -> None:
    client = _client(SERVED)
    client.send_request(ApiKey.PRODUCE, ProduceRequestData(acks=0), 9, expects_response=False)
    assert client.in_flight == 0
    correlation, _ = client.send_request(ApiKey.METADATA, MetadataRequestData(), 9)
    client.receive_data(_joined(encode_response(ApiKey.METADATA, 9, correlation, MetadataResponseData())))
    (response,) = _events(client)
    assert response.correlation_id == correlation


def test_responses_are_decoded_at_the_version_of_their_request() -> None:
    client = _client(SERVED)
    first, _ = client.send_request(ApiKey.METADATA, MetadataRequestData(), 0)
    second, _ = client.send_request(ApiKey.METADATA, MetadataRequestData(), 12)
    body = MetadataResponseData(cluster_id="c1")
    client.receive_data(_joined(encode_response(ApiKey.METADATA, 0, first, body)))
    client.receive_data(_joined(encode_response(ApiKey.METADATA, 12, second, body)))
    old, new = _events(client)
    assert (old.api_version, old.body.cluster_id) == (0, None)  # v0 has no cluster id
    assert (new.api_version, new.body.cluster_id) == (12, "c1")


def test_correlation_ids_stay_int32() -> None:
    client = _client(SERVED)
    client._correlation = 2**31 - 1
    assert client.send_request(ApiKey.METADATA, MetadataRequestData(), 9)[0] == 0


def test_api_versions_body_lists_every_served_range() -> None:
    server = _server()
    server.receive_data(_request(ApiKey.API_VERSIONS, 3, 1, ApiVersionsRequestData()))
    (request,) = _events(server)
    body = server.api_versions_body(request)
    assert isinstance(body, ApiVersionsResponseData) and body.error_code == ErrorCode.NONE
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == sorted(
        (int(k), lo, hi) for k, (lo, hi) in SERVED.items()
    )
