"""Kafka's source metrics, worked out from a streaming query's progress.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``avgOffsetsBehindLatest`` in each source's ``metrics``. PySpark's Python stream
readers cannot report metrics (nor a description: Spark shows
``PythonMicroBatchStream...@hash``), but the progress holds what they are made of: the
offsets a micro-batch read up to (``endOffset``) and the latest the source reported
(``latestOffset``, from ``reportLatestOffset``).

    seglog.spark.offsets_behind(query.lastProgress["sources"][0])
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..common import TopicPartition
from .offsets import from_json


def offsets_behind(source: Any) -> dict[str, str]:
    """Kafka's metrics map for one source of a progress (a ``SourceProgress`` or its
    JSON as a dict); empty when the progress holds no offsets yet."""
    end, latest = _offsets(source, "endOffset"), _offsets(source, "latestOffset")
    behind = [offset - end.get(tp, offset) for tp, offset in latest.items()]
    if not behind:
        return {}
    return {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / len(behind)),
    }


def _offsets(source: Any, name: str) -> dict[TopicPartition, int]:
    value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
    if isinstance(value, str):
        value = json.loads(value)
    return from_json(value) if isinstance(value, Mapping) else {}
