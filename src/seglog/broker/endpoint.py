"""Listeners: Kafka's ``NAME://host:port`` strings and the keys that name their protocols.

A broker listens on each of ``listeners``; a listener's name maps to its security protocol
through ``listener.security.protocol.map`` (by default each protocol's name to itself), and
clients are told the address ``advertised.listeners`` gives under the same name (the
listener's own when it gives none). Brokers reach each other on
``inter.broker.listener.name`` (``security.inter.broker.protocol``'s name when unset). The
checks are Kafka's (``KafkaConfig.validateValues``, ``CoreUtils.listenerListToEndPoints``):
every name mapped, no name or port twice, advertised names among the listeners', the
inter-broker listener among the advertised ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from ..config import SECURITY_PROTOCOLS, BrokerConfig
from ..errors import InvalidConfigurationError

_LISTENER = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>-?\d+)$")


class EndPoint(NamedTuple):
    listener: str  # the listener's name, upper case (Kafka's ListenerName.normalised)
    host: str  # "" binds every interface, as in Kafka
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def parse_endpoint(text: str, key: str = "listeners") -> EndPoint:
    m = _LISTENER.match(text.strip())
    if m is None:
        raise InvalidConfigurationError(f"{key}: {text!r} is not of the form NAME://host:port")
    port = int(m["port"])
    if not 0 <= port <= 65535:
        raise InvalidConfigurationError(f"{key}: {text!r}: port {port} is not between 0 and 65535")
    return EndPoint(m["name"].upper(), m["host"].strip("[]"), port)


def parse_endpoints(values: tuple[str, ...], key: str = "listeners") -> list[EndPoint]:
    """Each listener of ``key``'s list, no name twice and no port twice (but 0, any free one)."""
    endpoints = [parse_endpoint(v, key) for v in values]
    names = [e.listener for e in endpoints]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidConfigurationError(f"{key}: each listener must have a different name, not {twice[0]} twice")
    ports = [e.port for e in endpoints if e.port != 0]
    taken = sorted({p for p in ports if ports.count(p) > 1})
    if taken:
        raise InvalidConfigurationError(f"{key}: each listener must have a different port, not {taken[0]} twice")
    return endpoints


def protocol_map(values: tuple[str, ...]) -> dict[str, str]:
    """``listener.security.protocol.map``'s NAME:PROTOCOL pairs, names upper case."""
    protocols: dict[str, str] = {}
    for item in values:
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name:
            raise InvalidConfigurationError(
                f"listener.security.protocol.map: {item!r} is not of the form NAME:PROTOCOL"
            )
        if protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigurationError(
                f"listener.security.protocol.map: {item!r} maps {name} to {protocol or 'nothing'}, "
                f"not a security protocol ({', '.join(SECURITY_PROTOCOLS)})"
            )
        if name in protocols:
            raise InvalidConfigurationError(f"listener.security.protocol.map maps {name} twice")
        protocols[name] = protocol
    return protocols


@dataclass(frozen=True)
class Listener:
    """One listener: where it binds, what it advertises, and its security protocol."""

    name: str
    protocol: str
    bound: EndPoint
    advertised: EndPoint


@dataclass(frozen=True)
class Listeners:
    listeners: tuple[Listener, ...]
    inter_broker: str  # the name of the listener brokers reach each other on

    def named(self, name: str) -> Listener:
        return next(x for x in self.listeners if x.name == name)


def broker_listeners(config: BrokerConfig) -> Listeners:
    """The broker's listeners from its config, checked as Kafka checks them."""
    protocols = protocol_map(config["listener.security.protocol.map"])
    bound = parse_endpoints(config["listeners"])
    if not bound:
        raise InvalidConfigurationError("listeners is empty: the broker needs one address to serve")
    for endpoint in bound:
        protocol = protocols.get(endpoint.listener)
        if protocol is None:
            raise InvalidConfigurationError(
                f"listeners: listener {endpoint.listener} has no security protocol in listener.security.protocol.map "
                f"(which names {', '.join(protocols)})"
            )
    advertised = {e.listener: e for e in parse_endpoints(config["advertised.listeners"] or (), "advertised.listeners")}
    names = [e.listener for e in bound]
    stray = [n for n in advertised if n not in names]
    if stray:
        raise InvalidConfigurationError(
            f"advertised.listeners: listener {stray[0]} is not among the listeners' names ({', '.join(names)})"
        )
    if any(e.host == "0.0.0.0" for e in advertised.values()):
        raise InvalidConfigurationError("advertised.listeners cannot use the nonroutable meta-address 0.0.0.0")
    found = tuple(Listener(e.listener, protocols[e.listener], e, advertised.get(e.listener, e)) for e in bound)
    inter_broker = _inter_broker_listener(config, protocols, names)
    if config["zookeeper.connect"] and protocols[inter_broker] != "PLAINTEXT":
        # the replica fetchers, the controller's channel and the transaction markers speak plaintext only
        raise InvalidConfigurationError(
            f"the inter-broker listener {inter_broker} uses {protocols[inter_broker]}, which brokers do not "
            "speak to each other yet: set inter.broker.listener.name to a PLAINTEXT listener"
        )
    return Listeners(found, inter_broker)


def _inter_broker_listener(config: BrokerConfig, protocols: dict[str, str], names: list[str]) -> str:
    if config.is_set("inter.broker.listener.name"):
        if config.is_set("security.inter.broker.protocol"):
            raise InvalidConfigurationError(
                "only one of inter.broker.listener.name and security.inter.broker.protocol may be set"
            )
        key, name = "inter.broker.listener.name", config["inter.broker.listener.name"].strip().upper()
        if name not in protocols:
            raise InvalidConfigurationError(
                f"inter.broker.listener.name: listener {name} is not in listener.security.protocol.map"
            )
    else:
        key, name = "security.inter.broker.protocol", config["security.inter.broker.protocol"]
    if name not in names:
        raise InvalidConfigurationError(
            f"{key} is {name}, which must name a listener of advertised.listeners; "
            f"set inter.broker.listener.name to one of {', '.join(names)}"
        )
    return name
