"""The message data classes: written from the declarations (the file is current), decoded into,
encoded from, with Kafka's names and every field's default."""

from __future__ import annotations

import copy
import pickle
import uuid
from pathlib import Path

import pytest

from seglog.protocol import ApiKey, decode_request, decode_response, encode_request, encode_response, message_data
from seglog.protocol.codec import message_class
from seglog.protocol.compiler import MESSAGE_DATA_MODULE, message_data_source
from seglog.protocol.message import UNSET, Message
from seglog.protocol.message_data import (
    FetchRequestData,
    FetchResponseData,
    MetadataRequestData,
    ProduceRequestData,
    ProduceResponseData,
)
from seglog.protocol.messages import SCHEMAS
from seglog.protocol.schema import ZERO_UUID, Array, Struct


def _joined(parts: list) -> bytes:
    return b"".join(bytes(p) for p in parts)


def test_the_module_is_what_the_declarations_write() -> None:
    written = (Path(message_data.__file__).parent / MESSAGE_DATA_MODULE).read_text()
    assert written == message_data_source(SCHEMAS), "run: python -m seglog.protocol"


@pytest.mark.parametrize("api_key", sorted(SCHEMAS))
def test_every_struct_of_every_message_has_its_class_with_a_slot_per_field(api_key: int) -> None:
    api = SCHEMAS[api_key]
    for response, message in ((False, api.request), (True, api.response)):
        cls = message_class(api_key, response)
        assert cls.__name__.endswith("ResponseData" if response else "RequestData")

        def check(struct: Struct, owner: type, cls: type = cls) -> None:
            made = owner()  # every argument optional
            assert made._fields() == tuple(f.name for f in struct.fields)
            for f in struct.fields:
                value = getattr(made, f.name)
                inner = f.type.item if isinstance(f.type, Array) else f.type
                if isinstance(f.type, Array):
                    assert value == []
                elif isinstance(inner, Struct):
                    assert type(value) is getattr(cls, inner.name)
                else:
                    assert value == f.default
                if isinstance(inner, Struct):
                    check(inner, getattr(cls, inner.name))

        check(message, cls)


def test_lists_and_structs_are_fresh_for_each_instance() -> None:
    a, b = FetchRequestData(), FetchRequestData()
    a.topics.append(FetchRequestData.FetchTopic(topic="t"))
    a.replica_state.replica_id = 3
    assert b.topics == [] and b.replica_state.replica_id == -1


def test_a_struct_field_is_made_at_its_default_on_first_read_and_kept() -> None:
    partition = FetchResponseData.PartitionData(partition_index=1)
    assert partition._current_leader is UNSET  # nothing made for a field left at its default
    leader = partition.current_leader
    assert leader == FetchResponseData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert partition.current_leader is leader  # made once, then kept: changes to it stay
    leader.leader_id = 4
    assert partition.current_leader.leader_id == 4
    assert FetchResponseData.PartitionData().current_leader.leader_id == -1  # fresh for each message
    given = FetchResponseData.SnapshotId(end_offset=9, epoch=2)
    partition.snapshot_id = given
    assert partition.snapshot_id is given and partition._snapshot_id is given


def test_a_struct_left_unread_equals_and_encodes_as_its_default() -> None:
    def response(partition: FetchResponseData.PartitionData) -> FetchResponseData:
        topic = FetchResponseData.FetchableTopicResponse(topic="t", partitions=[partition])
        return FetchResponseData(responses=[topic])

    lazy = FetchResponseData.PartitionData(records=b"")
    read = FetchResponseData.PartitionData(records=b"")
    assert read.diverging_epoch.epoch == -1 and read._diverging_epoch is not UNSET
    explicit = FetchResponseData.PartitionData(records=b"", current_leader=FetchResponseData.LeaderIdAndEpoch())
    assert lazy == read == explicit and repr(lazy) == repr(read)
    for version in (11, 12, 16):
        frames = {_joined(encode_response(ApiKey.FETCH, version, 1, response(p))) for p in (lazy, read, explicit)}
        assert len(frames) == 1, version  # no tagged field written for a default, made or not
        decoded = decode_response(ApiKey.FETCH, version, frames.pop()[4:]).responses[0].partitions[0]
        assert decoded._diverging_epoch is UNSET and decoded == lazy
    lazy.current_leader.leader_epoch = 7  # then changed through the property: written
    changed = decode_response(ApiKey.FETCH, 16, _joined(encode_response(ApiKey.FETCH, 16, 1, response(lazy)))[4:])
    assert changed.responses[0].partitions[0].current_leader == FetchResponseData.LeaderIdAndEpoch(-1, 7)


def test_copies_and_pickles_keep_a_struct_left_unread() -> None:
    partition = FetchResponseData.PartitionData(partition_index=3)
    for copied in (copy.copy(partition), copy.deepcopy(partition), pickle.loads(pickle.dumps(partition))):
        assert copied._current_leader is UNSET and copied == partition
        assert copied.current_leader.leader_id == -1


def test_decoding_makes_the_classes_and_fills_what_a_version_lacks() -> None:
    body = ProduceRequestData(
        acks=-1,
        timeout_ms=5,
        topic_data=[
            ProduceRequestData.TopicProduceData(
                name="t", partition_data=[ProduceRequestData.PartitionProduceData(index=2, records=b"r")]
            )
        ],
    )
    decoded = decode_request(_joined(encode_request(ApiKey.PRODUCE, 3, 1, "c", body))[4:]).body
    assert isinstance(decoded, ProduceRequestData)
    assert isinstance(decoded.topic_data[0], ProduceRequestData.TopicProduceData)
    partition = decoded.topic_data[0].partition_data[0]
    assert (partition.index, bytes(partition.records)) == (2, b"r")
    assert decoded.transactional_id is None  # nullable from v3: sent as null
    old = decode_request(_joined(encode_request(ApiKey.PRODUCE, 3, 1, "c", body))[4:]).body
    assert old.acks == -1


def test_a_field_a_version_lacks_keeps_its_default_on_the_way_back() -> None:
    body = FetchResponseData(
        throttle_time_ms=7,
        responses=[
            FetchResponseData.FetchableTopicResponse(
                topic="t",
                topic_id=uuid.uuid4(),
                partitions=[FetchResponseData.PartitionData(partition_index=1, high_watermark=9, records=b"")],
            )
        ],
    )
    v4 = decode_response(ApiKey.FETCH, 4, _joined(encode_response(ApiKey.FETCH, 4, 1, body))[4:])
    assert v4.responses[0].topic == "t" and v4.responses[0].topic_id == ZERO_UUID  # ids from v13
    assert v4.responses[0].partitions[0].high_watermark == 9
    assert v4.responses[0].partitions[0].log_start_offset == -1  # from v5: the default


def test_equality_is_by_class_and_fields() -> None:
    assert MetadataRequestData(topics=None) == MetadataRequestData(topics=None)
    assert MetadataRequestData(topics=None) != MetadataRequestData()
    assert ProduceResponseData.NodeEndpoint(node_id=1) != FetchResponseData.NodeEndpoint(node_id=1)
    with pytest.raises(TypeError):
        hash(MetadataRequestData())


def test_repr_names_the_class_and_every_field() -> None:
    text = repr(ProduceResponseData.LeaderIdAndEpoch(leader_id=3))
    assert text == "ProduceResponseData.LeaderIdAndEpoch(leader_id=3, leader_epoch=-1)"


def test_a_field_that_is_no_field_is_refused() -> None:
    with pytest.raises(TypeError):
        MetadataRequestData(topic=[])  # type: ignore[call-arg]
    with pytest.raises(AttributeError):
        MetadataRequestData().topic = []  # type: ignore[attr-defined]


def test_every_class_is_a_message() -> None:
    for name in message_data.__all__:
        cls = getattr(message_data, name)
        assert isinstance(cls, type) and issubclass(cls, Message)
