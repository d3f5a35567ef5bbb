"""A client's security properties, under librdkafka's names and Java's."""

from __future__ import annotations

import pytest

from seglog.client import client_security
from seglog.errors import InvalidConfigurationError
from seglog.security.plain import PlainClient
from seglog.security.scram import ScramClient


def test_librdkafka_and_java_names_give_the_same_settings() -> None:
    librdkafka = client_security(
        {
            "security.protocol": "sasl_plaintext",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": "s3cret-1",
        }
    )
    java = client_security(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
            'password="s3cret-1";',
        }
    )
    assert librdkafka == java
    assert (java.protocol, java.mechanism, java.username, java.sasl, java.tls) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        "alice",
        True,
        False,
    )
    assert isinstance(java.sasl_client(), ScramClient)
    assert "s3cret-1" not in repr(java)
    plain = client_security(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a", "sasl.password": "b"}
    )
    assert isinstance(plain.sasl_client(), PlainClient)
    assert client_security({}).protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("properties", "error"),
    [
        ({"security.protocol": "TLS"}, "security.protocol is TLS"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "speaks PLAIN, SCRAM-SHA-256"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "needs a user"),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.jaas.config": 'X required p="s3cret-1"',
            },
            "must end with ';'",
        ),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "TLS files do not load"),
    ],
)
def test_bad_properties_are_refused_without_their_secrets(properties, error) -> None:
    with pytest.raises(InvalidConfigurationError, match=error) as e:
        client_security(properties)
    assert "s3cret-1" not in str(e.value)
