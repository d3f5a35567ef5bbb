from collections.abc import Callable
from typing import Any, TypeVar

_Info = TypeVar("_Info", bound=tuple[int, ...])
_End = TypeVar("_End", bound=tuple[int, ...])
_Facts = tuple[int, int, int, int, int, int, int]
_Assigned = tuple[list[tuple[int, int, int, int]], int, int, int, int]

def check_append(
    buffer: Any,
    leader: bool,
    allow_control: bool,
    compact: bool,
    max_bytes: int,
    timestamp_bounds: tuple[int, int] | None,
    decompress: Callable[[int, memoryview], Any],
    file: str | None,
) -> list[_Facts] | None: ...
def check_and_assign(
    buffer: Any,
    allow_control: bool,
    compact: bool,
    max_bytes: int,
    timestamp_bounds: tuple[int, int] | None,
    decompress: Callable[[int, memoryview], Any],
    file: str | None,
    assignment: tuple[int, int, int | None, int],
    /,
) -> _Assigned | None: ...
def append_batch(
    buffer: bytearray,
    segment: Any,
    rules: tuple[bytes, Callable[[], int], Callable[..., Any], str, type[_Info], type[_End]],
    next_offset: int,
    epoch: int,
    producers: dict[int, Any] | None = None,
    /,
) -> tuple[_Info, _End, int, Any] | int | None: ...
def bind_segment(segment_type: type, offset_index_type: type, time_index_type: type, handle_type: type, /) -> None: ...
def now_ms() -> int: ...
def recover_batches(
    chunk: Any,
    start: int,
    origin: int,
    segment_base: int,
    max_batch_size: int,
    interval: int,
    state: tuple[int, int | None, int, int, int, int],
) -> tuple[
    int,
    tuple[int, int | None, int, int, int, int],
    bytes,
    bytes,
    list[tuple[int, int]],
    BaseException | bool | None,
]: ...
def find_timestamp(
    batch: Any, target: int, start_offset: int, batch_position: int, decompress: Callable[[int, memoryview], Any]
) -> tuple[int, int] | None: ...
def floor_entry(buffer: Any, entries: int, entry_size: int, key_size: int, target: int, warm_bytes: int) -> int: ...
