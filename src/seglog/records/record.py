"""A record as applications see it: key, value, timestamp, headers, offset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

Header = tuple[str, bytes | None]


class Record(NamedTuple):
    """One record. To append, give key/value/timestamp/headers; reading fills in the offset.

    ``key`` and ``value`` are ``bytes`` or ``None`` (a ``None`` value is a tombstone);
    ``timestamp`` is milliseconds since the epoch (``None``: now, when appended);
    ``headers`` is a sequence of ``(str, bytes | None)``. Header keys that are not
    valid UTF-8 on disk read back through ``surrogateescape``, so they write back
    byte for byte.
    """

    key: bytes | None = None
    value: bytes | None = None
    timestamp: int | None = None
    headers: Sequence[Header] = ()
    offset: int = -1
