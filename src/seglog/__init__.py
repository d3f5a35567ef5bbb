"""seglog: Kafka's storage engine in Python."""

from .records import Compression, Record, TimestampType

__all__ = ["Compression", "Record", "TimestampType"]
__version__ = "0.1.0"
