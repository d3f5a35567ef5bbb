from typing import Any

def skim_batches(buffer: Any, n: int, pos: int, end: int) -> tuple[int, int, int, int]: ...
def skim_file(fd: int, pos: int, end: int, above: int) -> tuple[int, int, int, bytes | None, int]: ...
def map_put(table: bytearray, k0: int, k1: int, key: Any, offset: int, room: int) -> int: ...
def map_get(table: bytearray, k0: int, k1: int, key: Any) -> int: ...
def map_clear(table: bytearray) -> None: ...
def map_absorb(table: bytearray, other: bytearray) -> int: ...
def map_batch(
    batch: Any,
    section: Any,
    *,
    table: bytearray,
    k0: int,
    k1: int,
    room: int,
    start_offset: int,
    marks: bytearray,
    marks_first: int,
    marks_count: int,
    skip: int,
    latest: int,
    position: int,
) -> tuple[int, int, int]: ...
def map_batches(
    view: Any,
    pos: int,
    origin: int,
    *,
    table: bytearray,
    k0: int,
    k1: int,
    room: int,
    start_offset: int,
    marks: bytearray,
    marks_first: int,
    marks_count: int,
    latest: int,
    section: bytearray | None,
) -> tuple[int, int, int, int, int, int]: ...
def filter_batch(
    batch: Any,
    section: Any,
    *,
    table: bytearray,
    k0: int,
    k1: int,
    latest: int,
    marks: bytearray,
    marks_first: int,
    marks_count: int,
    now: int,
    horizon: int,
    position: int,
) -> tuple[bytearray | None, int, int, int]: ...
def filter_batches(
    view: Any,
    pos: int,
    origin: int,
    *,
    out: bytearray,
    out_len: int,
    out_limit: int,
    entries: list[tuple[int, int, int, int]],
    table: bytearray,
    k0: int,
    k1: int,
    latest: int,
    marks: bytearray,
    marks_first: int,
    marks_count: int,
    now: int,
    horizon: int,
    upper_bound: int,
    group_end: int,
    section: bytearray | None,
    rebuilt: bytearray | None,
) -> tuple[int, int, int, int, int, int, int]: ...
