"""A Kafka broker over seglog's storage: unchanged Kafka clients produce, fetch and administer.

``start(log_dir)`` runs one in this process (tests, tools); ``seglog broker --config
server.properties`` runs one as a server. See docs/architecture.md for its parts.
"""

from .embedded import EmbeddedBroker, start
from .properties import load_config
from .server import KafkaServer

__all__ = ["EmbeddedBroker", "KafkaServer", "load_config", "start"]
