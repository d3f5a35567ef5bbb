"""SASL on the wire: SaslHandshake and SaslAuthenticate (KIP-152, KIP-368's session lifetime), and
KIP-554's SCRAM credential administration (DescribeUserScramCredentials,
AlterUserScramCredentials), from Kafka's message specs."""

from __future__ import annotations

from seglog.protocol.api_key import ApiKey
from seglog.protocol.schema import BYTES, INT8, INT16, INT32, INT64, STRING, Api, Array, Field, Struct, array_of

SASL_HANDSHAKE = Api(
    ApiKey.SASL_HANDSHAKE,
    "0-1",  # v1: the tokens follow in SaslAuthenticate requests; v0: raw, size-prefixed
    flexible="none",
    request=Struct(Field("mechanism", STRING)),
    response=Struct(Field("error_code", INT16), Field("mechanisms", Array(STRING))),
)

SASL_AUTHENTICATE = Api(
    ApiKey.SASL_AUTHENTICATE,
    "0-2",
    flexible="2+",
    request=Struct(Field("auth_bytes", BYTES)),
    response=Struct(
        Field("error_code", INT16),
        Field("error_message", STRING, null="0+"),
        Field("auth_bytes", BYTES),
        Field("session_lifetime_ms", INT64, "1+"),
    ),
)

DESCRIBE_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
    "0",
    flexible="0+",
    request=Struct(Field("users", array_of("UserName", Field("name", STRING)), null="0+")),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field("error_code", INT16),
        Field("error_message", STRING, null="0+"),
        Field(
            "results",
            array_of(
                "DescribeUserScramCredentialsResult",
                Field("user", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, null="0+"),
                Field(
                    "credential_infos",
                    array_of("CredentialInfo", Field("mechanism", INT8), Field("iterations", INT32)),
                ),
            ),
        ),
    ),
)

ALTER_USER_SCRAM_CREDENTIALS = Api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
    "0",
    flexible="0+",
    request=Struct(
        Field("deletions", array_of("ScramCredentialDeletion", Field("name", STRING), Field("mechanism", INT8))),
        Field(
            "upsertions",
            array_of(
                "ScramCredentialUpsertion",
                Field("name", STRING),
                Field("mechanism", INT8),
                Field("iterations", INT32),
                Field("salt", BYTES),
                Field("salted_password", BYTES),
            ),
        ),
    ),
    response=Struct(
        Field("throttle_time_ms", INT32),
        Field(
            "results",
            array_of(
                "AlterUserScramCredentialsResult",
                Field("user", STRING),
                Field("error_code", INT16),
                Field("error_message", STRING, null="0+"),
            ),
        ),
    ),
)
