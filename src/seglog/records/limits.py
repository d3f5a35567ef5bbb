"""Kafka's fixed-width integers, and the check that an argument fits one.

A value bound for a batch header or an index entry (an epoch is an int16, a
sequence an int32, an offset an int64) is checked where it enters a public
call, so that a bad argument is a seglog error naming it, not a ``struct.error``
or an ``OverflowError`` once half the work is done.
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidRequestError, SeglogError

INT16_MIN, INT16_MAX = -(1 << 15), (1 << 15) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def check_int(
    name: str,
    value: Any,
    low: int,
    high: int,
    error: type[SeglogError] = InvalidRequestError,
    **place: Any,
) -> int:
    """``value`` if it is an integer in [low, high], else ``error`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{name} must be an integer, not {value!r}", **place)
    if not low <= value <= high:
        raise error(f"{name} {value} is out of range: must be in [{low}, {high}]", **place)
    return value
