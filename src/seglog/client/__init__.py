"""seglog's Kafka client: connections to brokers, on ``protocol``'s sans-IO connection.

Layering: uses ``protocol`` and ``errors``; the broker (its inter-broker channels), the
command-line tools and Spark use it.
"""

from seglog.client.connection import AsyncConnection, BlockingConnection, connect, parse_address

__all__ = ["AsyncConnection", "BlockingConnection", "connect", "parse_address"]
