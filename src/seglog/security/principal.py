"""Who a connection authenticated as: Kafka's ``KafkaPrincipal``."""

from __future__ import annotations

from typing import NamedTuple


class KafkaPrincipal(NamedTuple):
    """A principal as Kafka writes it, ``type:name`` (``User:alice``): ``User:ANONYMOUS`` on a
    plaintext listener or a TLS one without a client certificate."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")
