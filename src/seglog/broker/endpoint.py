"""Listener addresses: Kafka's ``NAME://host:port`` strings (``listeners``, ``advertised.listeners``)."""

from __future__ import annotations

import re
from typing import NamedTuple

from ..errors import InvalidConfigurationError

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>-?\d+)$")


class EndPoint(NamedTuple):
    listener: str  # the listener's name, PLAINTEXT: seglog speaks plaintext only
    host: str  # "" binds every interface, as in Kafka
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def parse_endpoint(text: str) -> EndPoint:
    m = _LISTENER.match(text.strip())
    if m is None:
        raise InvalidConfigurationError(f"listener {text!r} is not of the form PLAINTEXT://host:port")
    port = int(m["port"])
    if not 0 <= port <= 65535:
        raise InvalidConfigurationError(f"listener {text!r}: port {port} is not between 0 and 65535")
    listener = m["name"].upper()
    if listener != "PLAINTEXT":
        raise InvalidConfigurationError(f"listener {text!r}: seglog serves PLAINTEXT only, not {listener}")
    return EndPoint(listener, m["host"].strip("[]"), port)


def parse_endpoints(values: tuple[str, ...]) -> list[EndPoint]:
    endpoints = [parse_endpoint(v) for v in values]
    if not endpoints:
        raise InvalidConfigurationError("listeners is empty: the broker needs one address to serve")
    if len(endpoints) > 1:
        raise InvalidConfigurationError(f"seglog serves one PLAINTEXT listener, not {len(endpoints)}: {values}")
    return endpoints
