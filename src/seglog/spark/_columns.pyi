from collections.abc import Sequence
from typing import Any

class ColumnBuffer:
    """Read-only bytes of one Arrow buffer (buffer protocol), owned by this object."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

# (validity or None, int32 offsets, data, null count)
VarColumn = tuple[ColumnBuffer | None, ColumnBuffer, ColumnBuffer, int]

class ColumnBuilder:
    rows: int
    data_bytes: int
    with_headers: bool
    def __init__(self, with_headers: bool = False) -> None: ...
    def append(
        self,
        records: Any,
        count: int,
        base_offset: int,
        base_timestamp: int,
        log_append_time: bool,
        max_timestamp: int,
        timestamp_type: int,
        batch_position: int,
        min_offset: int,
        max_offset_exclusive: int,
        batch: Any = None,
    ) -> int: ...
    def append_record(
        self,
        offset: int,
        timestamp: int,
        timestamp_type: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str | bytes, bytes | None]] | None = (),
        batch_position: int = -1,
    ) -> None: ...
    def finish(self) -> dict[str, Any]: ...
