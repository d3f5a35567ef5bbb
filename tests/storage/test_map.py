"""storage/_map.c: memory maps of files that hold no fd (Python's mmap keeps a dup of the fd it
maps), so that a broker's active indexes cost no open file; and their indexes, mapped so."""

from __future__ import annotations

import mmap
import os

import pytest

from seglog.storage import _map, fileio
from seglog.storage.index import OffsetIndex, TimeIndex


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _mapped(path, size=8192, writable=True) -> _map.Map:
    path.write_bytes(bytes(size))
    handle = fileio.open_file(str(path), writable=writable)
    try:
        return handle.mmap(size, writable)
    finally:
        handle.close()


def test_a_map_holds_no_fd_once_its_file_is_closed(tmp_path):
    before = _open_fds()
    maps = [_mapped(tmp_path / f"f{i}") for i in range(50)]
    assert _open_fds() == before
    maps[0][0:4] = b"abcd"  # the map outlives its fd, and stores reach the file
    maps[0].flush()
    assert (tmp_path / "f0").read_bytes()[:4] == b"abcd"


def test_active_indexes_hold_no_fd(tmp_path):
    before = _open_fds()
    indexes = []
    for i in range(20):
        offsets, times = (
            OffsetIndex(str(tmp_path / f"{i}.index"), 0, 4096),
            TimeIndex(str(tmp_path / f"{i}.timeindex"), 0, 4096),
        )
        offsets.append(5, 0)
        times.maybe_append(1_000, 5)
        indexes += (offsets, times)
    assert _open_fds() == before
    for index in indexes:
        index.resize(8192)  # a roll's trim, a truncation's growth: mapped anew, still no fd
    assert _open_fds() == before
    assert indexes[0].lookup(7) == (5, 0) and indexes[1].lookup(1_500)[:2] == (1_000, 5)


def test_slices_read_as_bytes_and_store_by_equal_length(tmp_path):
    m = _mapped(tmp_path / "f", 16)
    m[2:6] = b"wxyz"
    assert m[:8] == b"\0\0wxyz\0\0" and m[3] == ord("x") and m[-1] == 0 and len(m) == 16
    assert m[2:6:2] == b"wy"
    with pytest.raises(IndexError):
        m[0:4] = b"too long"
    with pytest.raises(IndexError):
        m[16]
    with pytest.raises(TypeError):
        m[0] = 1  # by slice only


def test_a_read_only_map_refuses_stores(tmp_path):
    m = _mapped(tmp_path / "f", 16, writable=False)
    with pytest.raises(TypeError, match="read-only"):
        m[0:1] = b"x"
    assert memoryview(m).readonly


def test_a_map_past_the_file_end_is_refused_not_a_sigbus_later(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(bytes(100))
    handle = fileio.open_file(str(path))
    try:
        with pytest.raises(ValueError, match="greater than file size"):
            handle.mmap(mmap.PAGESIZE * 2, True)
    finally:
        handle.close()


def test_close_is_refused_while_a_buffer_of_it_is_held(tmp_path):
    m = _mapped(tmp_path / "f", 16)
    view = memoryview(m)
    with pytest.raises(BufferError):
        m.close()
    view.release()
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m[0:1]


def test_a_view_keeps_the_map_alive_after_its_last_other_holder_lets_go(tmp_path):
    m = _mapped(tmp_path / "f", 16)
    m[0:2] = b"ok"
    view = memoryview(m)
    del m
    assert bytes(view[:2]) == b"ok"


def test_anonymous_maps_are_zeroed_and_writable():
    m = _map.Map(-1, 4096, True)
    assert m[:] == bytes(4096)
    m[0:3] = b"abc"
    assert m[:3] == b"abc"
