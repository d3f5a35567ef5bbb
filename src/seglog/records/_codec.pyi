from collections.abc import Sequence
from typing import Any

def decode_records(
    records: Any,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: bool,
    max_timestamp: int,
    record_type: type,
    batch_position: int,
) -> list[Any]: ...
def encode_records(
    records: Sequence[Any],
    base_offset: int,
    base_timestamp: int | None,
    default_timestamp: int,
    keep_offsets: bool,
    header_room: int,
) -> tuple[bytearray, int, int, int, int]: ...
def check_records(records: Any, count: int, batch_position: int) -> tuple[int, int, int, int]: ...
def encode_columns(
    rows: int,
    key: Any,
    value: Any,
    timestamps: Any,
    default_timestamp: int,
    max_bytes: int,
    header_room: int,
    headers: Any = None,
) -> list[tuple[bytearray, int, int, int, int]]: ...
def crc32c(data: Any, hardware: bool = True) -> int: ...
def lz4_frame(data: Any) -> bytes: ...

HARDWARE_CRC: int
