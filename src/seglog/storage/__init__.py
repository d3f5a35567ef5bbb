"""Kafka's storage engine: log dirs of partition logs made of segments and sparse indexes.

``open`` gives a ``LogManager`` over ``log.dirs``; ``LogManager.partition``
gives a ``PartitionLog``; a partition log is a run of ``LogSegment``s, each a
``.log`` with an ``OffsetIndex`` and a ``TimeIndex``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..config import BrokerConfig, LogConfig
from ..errors import InvalidConfigurationError
from .file_records import FetchDataInfo, FileSlice, LogOffsetMetadata
from .index import OffsetIndex, TimeIndex
from .log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, AppendInfo, LogState, PartitionLog, Role
from .manager import LogManager
from .producer_entry import AppendOrigin
from .segment import LogSegment
from .vanishing import retry_while_vanishing, vanished


def open(
    log_dirs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
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

    Without a broker, this process is every partition's only replica and owns its
    high watermark: each log's is its log end offset (``standalone``).
    """
    if config is not None and not isinstance(config, Mapping):
        raise InvalidConfigurationError(f"config must be a mapping of Kafka's keys, not {config!r}")
    values = dict(config or {})
    if isinstance(log_dirs, str | bytes | os.PathLike):
        values["log.dirs"] = [os.fsdecode(log_dirs)]
    elif isinstance(log_dirs, Sequence):
        values["log.dirs"] = [os.fsdecode(d) if isinstance(d, str | bytes | os.PathLike) else d for d in log_dirs]
    else:
        raise InvalidConfigurationError(f"log_dirs must be a path or a list of paths, not {log_dirs!r}")
    return LogManager(BrokerConfig(values), clock=clock, background=background, read_only=read_only, standalone=True)


__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "AppendInfo",
    "AppendOrigin",
    "FetchDataInfo",
    "FileSlice",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "LogSegment",
    "LogState",
    "OffsetIndex",
    "PartitionLog",
    "Role",
    "TimeIndex",
    "open",
    "retry_while_vanishing",
    "vanished",
]
