"""Every nested struct of the declared schemas carries the name Kafka's spec gives it: the name of
the class generated for it (``ProduceRequestData.TopicProduceData``). A request's or a response's
own struct is unnamed (its class is named after the API), and within one message a name always
denotes the same struct."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from seglog.protocol import SCHEMAS
from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import INT32, Api, Array, Field, Struct, array_of, by_topic

CAMEL_CASE = r"[A-Z][A-Za-z0-9]*"

MESSAGES = [
    (f"{api.key.name}-{kind}", struct)
    for api in SCHEMAS.values()
    for kind, struct in (("request", api.request), ("response", api.response))
]


def nested(struct: Struct, path: str = "") -> Iterator[tuple[str, Struct]]:
    """Every struct below ``struct`` (array items and fields of struct type), with its path."""
    for f in struct.fields:
        inner = f.type.item if isinstance(f.type, Array) else f.type
        if isinstance(inner, Struct):
            where = f"{path}.{f.name}"
            yield where, inner
            yield from nested(inner, where)


@pytest.mark.parametrize(("message", "struct"), MESSAGES, ids=[m for m, _ in MESSAGES])
def test_nested_structs_are_named_once(message: str, struct: Struct) -> None:
    assert struct.name == "", f"{message}: the top-level struct is named {struct.name!r}"
    seen: dict[str, tuple[str, Struct]] = {}
    for path, inner in nested(struct):
        assert inner.name, f"{message}{path}: a nested struct without a name"
        assert re.fullmatch(CAMEL_CASE, inner.name), f"{message}{path}: {inner.name!r} is not CamelCase"
        first_path, first = seen.setdefault(inner.name, (path, inner))
        assert inner == first, f"{message}: {inner.name} at {path} differs from {inner.name} at {first_path}"


def test_every_api_has_nested_structs_to_name() -> None:
    # a walk that found nothing would pass the test above for every message
    assert sum(1 for _, struct in MESSAGES for _ in nested(struct)) > 100


def test_declarations_refuse_unnamed_nested_structs() -> None:
    with pytest.raises(ValueError, match="no name"):
        Field("state", Struct(Field("epoch", INT32)))
    with pytest.raises(ValueError, match="no name"):
        Field("states", Array(Struct(Field("epoch", INT32))))
    with pytest.raises(ValueError, match="CamelCase"):
        array_of("topic_data", Field("name", INT32))
    with pytest.raises(TypeError):
        array_of(Field("name", INT32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unnamed"):
        Api(ApiKey.HEARTBEAT, "0", flexible="none", request=Struct(name="HeartbeatRequestData"), response=Struct())


def test_by_topic_names_both_levels() -> None:
    topics = by_topic("OffsetDeleteRequestTopic", "OffsetDeleteRequestPartition", Field("partition_index", INT32))
    assert isinstance(topics.type, Array) and isinstance(topics.type.item, Struct)
    assert topics.type.item.name == "OffsetDeleteRequestTopic"
    partitions = topics.type.item.fields[1].type
    assert isinstance(partitions, Array) and isinstance(partitions.item, Struct)
    assert partitions.item.name == "OffsetDeleteRequestPartition"


def test_names_take_part_in_equality() -> None:
    fields = (Field("epoch", INT32),)
    assert Struct(*fields, name="A") == Struct(*fields, name="A")
    assert hash(Struct(*fields, name="A")) == hash(Struct(*fields, name="A"))
    assert Struct(*fields, name="A") != Struct(*fields, name="B")
