"""ACL administration: DescribeAcls, CreateAcls and DeleteAcls (Kafka 3.9's specs, versions 0-3,
flexible from 2). Version 0 knows LITERAL patterns only: its pattern fields default to 3 (LITERAL)."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import INT8, INT16, INT32, STRING, Api, Field, Struct, array_of

LITERAL = 3  # PatternType.LITERAL: what version 0 means


def _error_message() -> Field:
    return Field("error_message", STRING, null="0+", default=None)


def _filter_fields() -> tuple[Field, ...]:
    return (
        Field("resource_type_filter", INT8),
        Field("resource_name_filter", STRING, null="0+", default=None),
        Field("pattern_type_filter", INT8, "1+", default=LITERAL),
        Field("principal_filter", STRING, null="0+", default=None),
        Field("host_filter", STRING, null="0+", default=None),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


DESCRIBE_ACLS = Api(
    ApiKey.DESCRIBE_ACLS,
    "0-3",
    flexible="2+",
    request=Struct(*_filter_fields()),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        _error_message(),
        Field(
            "resources",
            array_of(
                "DescribeAclsResource",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("pattern_type", INT8, "1+", default=LITERAL),
                Field(
                    "acls",
                    array_of(
                        "AclDescription",
                        Field("principal", STRING),
                        Field("host", STRING),
                        Field("operation", INT8),
                        Field("permission_type", INT8),
                    ),
                ),
            ),
        ),
    ),
)

CREATE_ACLS = Api(
    ApiKey.CREATE_ACLS,
    "0-3",
    flexible="2+",
    request=Struct(
        Field(
            "creations",
            array_of(
                "AclCreation",
                Field("resource_type", INT8),
                Field("resource_name", STRING),
                Field("resource_pattern_type", INT8, "1+", default=LITERAL),
                Field("principal", STRING),
                Field("host", STRING),
                Field("operation", INT8),
                Field("permission_type", INT8),
            ),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("results", array_of("AclCreationResult", Field("error_code", INT16), _error_message())),
    ),
)

DELETE_ACLS = Api(
    ApiKey.DELETE_ACLS,
    "0-3",
    flexible="2+",
    request=Struct(Field("filters", array_of("DeleteAclsFilter", *_filter_fields()))),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field(
            "filter_results",
            array_of(
                "DeleteAclsFilterResult",
                Field("error_code", INT16),
                _error_message(),
                Field(
                    "matching_acls",
                    array_of(
                        "DeleteAclsMatchingAcl",
                        Field("error_code", INT16),
                        _error_message(),
                        Field("resource_type", INT8),
                        Field("resource_name", STRING),
                        Field("pattern_type", INT8, "1+", default=LITERAL),
                        Field("principal", STRING),
                        Field("host", STRING),
                        Field("operation", INT8),
                        Field("permission_type", INT8),
                    ),
                ),
            ),
        ),
    ),
)
