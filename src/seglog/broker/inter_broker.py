"""How this broker's clients reach the other brokers of its cluster (replica fetchers, the
controller's channel, AlterPartition, transaction markers, ControlledShutdown): over the
inter-broker listener, with its protocol, as Kafka's brokers do.

TLS trusts the listener's truststore (``ssl.truststore.*``) and presents the listener's
keystore (for a listener with ``ssl.client.auth``); SASL authenticates with
``sasl.mechanism.inter.broker.protocol`` as the user of the listener's JAAS config for that
mechanism (``listener.name.<listener>.<mechanism>.sasl.jaas.config``'s ``username`` and
``password``, Kafka's place for them). A broker without ZooKeeper reaches no other broker: it
needs none of this.
"""

from __future__ import annotations

from ..client import PLAINTEXT, ClientSecurity, client_security
from ..config import BrokerConfig
from ..errors import InvalidConfigurationError
from .endpoint import broker_listeners

# the listener's keys a client of it takes, under the names client_security reads
_TLS_KEYS = ("ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.location", "ssl.key.password")


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """The security of this broker's connections to the others; checked at startup."""
    if not config["zookeeper.connect"]:
        return PLAINTEXT
    return listener_security(config, broker_listeners(config).inter_broker)


def listener_security(config: BrokerConfig, name: str) -> ClientSecurity:
    """The security of this broker's own client of its listener ``name``, with the broker's
    credentials as above: the inter-broker listener's for the other brokers, and for the console
    a broker serves (``seglog broker --http-port``), which reaches its cluster the same way."""
    protocol = broker_listeners(config).named(name).protocol
    if protocol == "PLAINTEXT":
        return PLAINTEXT
    properties: dict[str, str] = {"security.protocol": protocol}
    for key in _TLS_KEYS:
        value = config.for_listener(name, key)
        if value is not None:
            properties[key] = str(value)
    if protocol.startswith("SASL_"):
        mechanism = config["sasl.mechanism.inter.broker.protocol"].strip().upper()
        enabled = [m.strip().upper() for m in config.for_listener(name, "sasl.enabled.mechanisms")]
        if mechanism not in enabled:
            raise InvalidConfigurationError(
                f"sasl.mechanism.inter.broker.protocol is {mechanism}, which the inter-broker listener {name} "
                f"does not enable (sasl.enabled.mechanisms: {', '.join(enabled)})"
            )
        jaas_key = config.listener_key(f"{name}.{mechanism.lower()}", "sasl.jaas.config")
        jaas = config[jaas_key]
        if jaas is None:
            raise InvalidConfigurationError(
                f"the inter-broker listener {name} uses SASL {mechanism}: set {jaas_key} with the broker's "
                'username="..." password="..."'
            )
        properties.update({"sasl.mechanism": mechanism, "sasl.jaas.config": jaas})
    try:
        return client_security(properties)
    except InvalidConfigurationError as e:
        raise InvalidConfigurationError(f"the inter-broker listener {name}: {e.message}") from None
