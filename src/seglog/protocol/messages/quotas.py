"""Client quotas (KIP-546): DescribeClientQuotas and AlterClientQuotas, over entities of
``user`` and ``client-id`` names (null: the default one)."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import BOOL, FLOAT64, INT8, INT16, INT32, STRING, Api, Field, Struct, array_of


def _entity() -> Field:
    return Field(
        "entity",
        array_of("EntityData", Field("entity_type", STRING), Field("entity_name", STRING, null="0+")),
    )


DESCRIBE_CLIENT_QUOTAS = Api(
    ApiKey.DESCRIBE_CLIENT_QUOTAS,
    "0-1",
    flexible="1+",
    request=Struct(
        Field(
            "components",
            array_of(
                "ComponentData",
                Field("entity_type", STRING),
                Field("match_type", INT8),  # 0 exact name, 1 the default, 2 any specified name
                Field("match", STRING, null="0+"),
            ),
        ),
        Field("strict", BOOL),  # leave out entities with types the filter does not name
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, null="0+", default=None),
        Field(
            "entries",
            array_of(
                "EntryData",
                _entity(),
                Field("values", array_of("ValueData", Field("key", STRING), Field("value", FLOAT64))),
            ),
            null="0+",
        ),
    ),
)

ALTER_CLIENT_QUOTAS = Api(
    ApiKey.ALTER_CLIENT_QUOTAS,
    "0-1",
    flexible="1+",
    request=Struct(
        Field(
            "entries",
            array_of(
                "EntryData",
                _entity(),
                Field(
                    "ops",
                    array_of("OpData", Field("key", STRING), Field("value", FLOAT64), Field("remove", BOOL)),
                ),
            ),
        ),
        Field("validate_only", BOOL),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field(
            "entries",
            array_of(
                "EntryData",
                Field("error_code", INT16),
                Field("error_message", STRING, null="0+", default=None),
                _entity(),
            ),
        ),
    ),
)
