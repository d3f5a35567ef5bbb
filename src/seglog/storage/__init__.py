"""Kafka's storage engine: log dirs of partition logs made of segments and sparse indexes.

``open`` gives a ``LogManager`` over ``log.dirs``; ``LogManager.partition``
gives a ``PartitionLog``; a partition log is a run of ``LogSegment``s, each a
``.log`` with an ``OffsetIndex`` and a ``TimeIndex``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import BrokerConfig, LogConfig
from .index import OffsetIndex, TimeIndex
from .log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, AppendInfo, PartitionLog
from .manager import LogManager
from .segment import FetchData, FileSlice, LogSegment


def open(
    log_dirs: str | Sequence[str],
    config: Mapping[str, Any] | None = None,
    *,
    clock: Callable[[], int] | None = None,
    background: bool = True,
    read_only: bool = False,
) -> LogManager:
    """Open (creating if needed) the log dirs and every partition log in them.

    ``config`` holds broker-level keys with Kafka's names (``log.segment.bytes``,
    ``log.retention.hours``, ...). ``clock`` returns milliseconds (tests inject
    one); ``background=False`` runs no scheduler thread (tools, tests).

    ``read_only=True`` opens dirs that another process may own: no lock is taken,
    nothing is written or recovered, missing indexes are rebuilt in memory, and
    the log ends at the last whole batch on disk.
    """
    values = dict(config or {})
    values["log.dirs"] = [log_dirs] if isinstance(log_dirs, str) else list(log_dirs)
    return LogManager(BrokerConfig(values), clock=clock, background=background, read_only=read_only)


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "FetchData",
    "FileSlice",
    "LogConfig",
    "LogManager",
    "LogSegment",
    "OffsetIndex",
    "PartitionLog",
    "TimeIndex",
    "open",
]
