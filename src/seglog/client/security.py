"""A client's security settings from its properties, under librdkafka's names or Java's:

    security.protocol    PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    sasl.mechanism       PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512 (librdkafka's sasl.mechanisms too)
    sasl.username, sasl.password                   librdkafka's; or Java's
    sasl.jaas.config     ...PlainLoginModule required username="u" password="p";  (or ScramLoginModule)
    ssl.ca.location      the CAs that verify the broker (Java: ssl.truststore.location, PEM;
                         ssl.truststore.certificates as text); the system's when unset
    ssl.certificate.location + ssl.key.location    a client certificate (Java: ssl.keystore.location,
                         one PEM of key and chain); ssl.key.password when the key is encrypted
    ssl.endpoint.identification.algorithm          https (the default) checks the broker's name;
                         empty does not (librdkafka: enable.ssl.certificate.verification=false
                         checks nothing)

Other keys (a producer's, a consumer's) are left for their users. A bad value is an
InvalidConfigurationError naming the key, never a secret.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import InvalidConfigurationError
from ..security.jaas import parse_jaas_config
from ..security.plain import PLAIN, PlainClient
from ..security.sasl import SaslClient
from ..security.scram import MECHANISMS, ScramClient

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str = "GSSAPI"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False)

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def sasl_client(self) -> SaslClient:
        """A fresh exchange of the configured mechanism (one per connection)."""
        assert self.username is not None and self.password is not None
        if self.mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(MECHANISMS[self.mechanism], self.username, self.password)


PLAINTEXT = ClientSecurity()


def client_security(properties: Mapping[str, str]) -> ClientSecurity:
    """The security settings of ``properties`` (a client's, as --command-config gives them)."""
    protocol = properties.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in PROTOCOLS:
        raise InvalidConfigurationError(f"security.protocol is {protocol}, not one of {', '.join(PROTOCOLS)}")
    security = ClientSecurity(protocol)
    if security.sasl:
        security = _with_sasl(security, properties)
    if security.tls:
        check = properties.get("ssl.endpoint.identification.algorithm", "https").strip().lower() == "https"
        verify = properties.get("enable.ssl.certificate.verification", "true").strip().lower() != "false"
        context = _ssl_context(properties, verify, check and verify)
        security = ClientSecurity(security.protocol, security.mechanism, security.username, security.password, context)
    return security


def _with_sasl(security: ClientSecurity, properties: Mapping[str, str]) -> ClientSecurity:
    mechanism = (properties.get("sasl.mechanism") or properties.get("sasl.mechanisms") or "GSSAPI").strip().upper()
    if mechanism != PLAIN and mechanism not in MECHANISMS:
        raise InvalidConfigurationError(
            f"sasl.mechanism is {mechanism}: seglog's client speaks {', '.join((PLAIN, *MECHANISMS))}"
        )
    username, password = properties.get("sasl.username"), properties.get("sasl.password")
    jaas = properties.get("sasl.jaas.config")
    if jaas is not None:
        options = parse_jaas_config(jaas).options
        username, password = options.get("username"), options.get("password")
    if username is None or password is None:
        raise InvalidConfigurationError(
            f"{security.protocol} with {mechanism} needs a user: set sasl.username and sasl.password, "
            'or sasl.jaas.config with username="..." password="..."'
        )
    return ClientSecurity(security.protocol, mechanism, username, password)


def _ssl_context(properties: Mapping[str, str], verify: bool, check_hostname: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    ca = properties.get("ssl.ca.location") or properties.get("ssl.truststore.location")
    cadata = properties.get("ssl.truststore.certificates")
    try:
        if ca or cadata:
            context.load_verify_locations(cafile=ca or None, cadata=cadata or None)
        else:
            context.load_default_certs()
        certificate = properties.get("ssl.certificate.location") or properties.get("ssl.keystore.location")
        if certificate:
            key = properties.get("ssl.key.location") or None
            password = properties.get("ssl.key.password") or ""
            context.load_cert_chain(certificate, key, password=password.encode())
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError
        reason = getattr(e, "strerror", None) or getattr(e, "reason", None) or "unreadable"
        raise InvalidConfigurationError(f"the client's TLS files do not load ({reason})") from None
    context.check_hostname = check_hostname
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    return context
