"""seglog: Kafka's storage engine in Python.

import seglog
with seglog.open("data") as logs:
    logs.create_topic("events", partitions=3)
    log = logs.partition("events", 0)
    first, last = log.append([seglog.Record(key=b"k", value=b"v")])
    for record in log.records(first):
        ...
"""

from .records import Compression, Record, TimestampType
from .storage import LogManager, PartitionLog, open

__all__ = ["Compression", "LogManager", "PartitionLog", "Record", "TimestampType", "open"]
__version__ = "0.1.0"
