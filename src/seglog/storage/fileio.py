"""The one layer through which the storage engine touches files.

Every open, write, read, fsync, truncate, rename and delete of the storage
layer goes through here, for two reasons: an OS error becomes a
``KafkaStorageError`` naming the file and the operation, and tests can make
any operation fail at a chosen point (``faults.inject``), as Redpanda's
``file_sanitizer`` does, so the error paths of a full disk or a failed fsync
are exercised as often as the happy path.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import KafkaStorageError
from . import _map


@dataclass
class _Fault:
    op: str
    matches: Callable[[str], bool]
    error: int
    after: int  # let this many matching calls through first
    times: int  # then fail this many (-1: forever)


class FaultInjector:
    """Test hook: make chosen file operations fail with a chosen errno."""

    def __init__(self) -> None:
        self._faults: list[_Fault] = []
        self._lock = threading.Lock()

    def inject(
        self,
        op: str,
        error: int = errno.EIO,
        *,
        path: Callable[[str], bool] | str | None = None,
        after: int = 0,
        times: int = 1,
    ) -> None:
        """Fail the operation ``op`` (``open``, ``create``, ``write``, ``fsync``, ``rename``,
        ``unlink``, ``stat``, ``list``, ...)
        on files whose path contains ``path`` (or satisfies it)."""
        if path is None:
            matches: Callable[[str], bool] = lambda _p: True  # noqa: E731
        elif isinstance(path, str):
            needle = path
            matches = lambda p: needle in p  # noqa: E731
        else:
            matches = path
        with self._lock:
            self._faults.append(_Fault(op, matches, error, after, times))

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def check(self, op: str, path: str) -> None:
        if not self._faults:  # the fast path: no fault is ever set outside tests
            return
        with self._lock:
            for fault in self._faults:
                if fault.op != op or not fault.matches(path):
                    continue
                if fault.after > 0:
                    fault.after -= 1
                    continue
                if fault.times == 0:
                    continue
                fault.times -= 1
                raise OSError(fault.error, f"injected {os.strerror(fault.error)}", path)


faults = FaultInjector()
_fdatasync = getattr(os, "fdatasync", os.fsync)  # macOS has no fdatasync


def storage_error(op: str, path: str, e: OSError) -> KafkaStorageError:
    err = KafkaStorageError(f"{op} failed: {e.strerror or e}", file=path)
    err.errno = e.errno  # type: ignore[attr-defined]
    return err


class FileHandle:
    """An open file of a log directory: a raw fd plus its path, for errors and faults.

    The fd is closed by ``close``, or when the last holder of the handle lets go of
    it: a segment that is deleted drops its handle rather than close it, so that a
    ``FileSlice`` a reader still holds (the broker hands its fd to ``sendfile``) reads
    on from the unlinked file, and its fd number cannot meanwhile name another file."""

    __slots__ = ("fd", "path")

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Append all of ``data`` (the fd is opened with O_APPEND or positioned)."""
        view = memoryview(data)
        try:
            faults.check("write", self.path)
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError as e:
            raise storage_error("write", self.path, e) from None

    def pwrite(self, data: bytes | bytearray | memoryview, position: int) -> None:
        try:
            if faults._faults:  # (the hot paths skip the call when no fault is set)
                faults.check("write", self.path)
            n = os.pwrite(self.fd, data, position)
            if n < (data.nbytes if isinstance(data, memoryview) else len(data)):
                # a short write (a signal, a full disk): write the rest
                view = memoryview(data)[n:]
                position += n
                while view:
                    n = os.pwrite(self.fd, view, position)
                    view, position = view[n:], position + n
        except OSError as e:
            raise storage_error("write", self.path, e) from None

    def pread(self, size: int, position: int) -> bytes:
        try:
            if faults._faults:
                faults.check("read", self.path)
            return os.pread(self.fd, size, position)
        except OSError as e:
            raise storage_error("read", self.path, e) from None

    def readinto(self, buffer: bytearray | memoryview, position: int) -> int:
        """Fill ``buffer`` from ``position``; returns the bytes read (short at EOF)."""
        view = memoryview(buffer)
        total = 0
        try:
            faults.check("read", self.path)
            while total < len(view):
                n = os.preadv(self.fd, [view[total:]], position + total)
                if n == 0:
                    break
                total += n
        except OSError as e:
            raise storage_error("read", self.path, e) from None
        return total

    def size(self) -> int:
        try:
            return os.fstat(self.fd).st_size
        except OSError as e:
            raise storage_error("stat", self.path, e) from None

    def truncate(self, size: int) -> None:
        try:
            faults.check("truncate", self.path)
            os.ftruncate(self.fd, size)
        except OSError as e:
            raise storage_error("truncate", self.path, e) from None

    def fsync(self) -> None:
        try:
            faults.check("fsync", self.path)
            os.fsync(self.fd)
        except OSError as e:
            raise storage_error("fsync", self.path, e) from None

    def fdatasync(self) -> None:
        """``fsync`` without the metadata a later read does not need (mtime); a fault
        injected for ``fsync`` fails it too."""
        try:
            faults.check("fsync", self.path)
            _fdatasync(self.fd)
        except OSError as e:
            raise storage_error("fsync", self.path, e) from None

    def reserve(self, offset: int, length: int) -> None:
        """Give bytes ``offset`` to ``offset + length`` real blocks (the file grows if it
        ends before), so that a later store through an mmap into them cannot meet a full
        disk: that would be a SIGBUS, not an error. A full disk fails here, with ENOSPC."""
        try:
            faults.check("allocate", self.path)
            os.posix_fallocate(self.fd, offset, length)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise storage_error("allocate", self.path, e) from None
            # a filesystem without fallocate: zeros written take the blocks (or fail cleanly)
            self.pwrite(bytes(length), offset)

    def mmap(self, length: int, writable: bool) -> _map.Map:
        """The file's first ``length`` bytes mapped (shared). The map holds no fd (Python's
        mmap keeps a dup until 3.13's trackfd; see ``_map.c``): closing the handle after
        mapping leaves no file open, which a broker's 10,000 active indexes need."""
        try:
            faults.check("mmap", self.path)
            return _map.Map(self.fd, length, writable)
        except OSError as e:
            raise storage_error("mmap", self.path, e) from None

    def close(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileHandle({self.path!r}, fd={self.fd})"


def open_file(
    path: str, *, create: bool = False, writable: bool = True, append: bool = False, mode: int = 0o644
) -> FileHandle:
    flags = os.O_RDWR if writable else os.O_RDONLY
    if create:
        flags |= os.O_CREAT
    if append:
        flags |= os.O_APPEND
    try:
        faults.check("open", path)
        return FileHandle(path, _open_noatime(path, flags | os.O_CLOEXEC, mode))
    except OSError as e:
        raise storage_error("open", path, e) from None


# Reads leave the file's access time alone: with it, every read of a file not read
# lately writes its inode's atime (relatime), a cache miss in a log of 10,000 segments
# (bench/storage.py lookups: a header's pread 0.3-0.4 µs of ~2.8). Only the file's owner
# may ask (else EPERM): a reader of another user's log opens without it.
_NOATIME = getattr(os, "O_NOATIME", 0)


def _open_noatime(path: str, flags: int, mode: int) -> int:
    try:
        return os.open(path, flags | _NOATIME, mode)
    except PermissionError as e:
        if not _NOATIME or e.errno != errno.EPERM:
            raise
        return os.open(path, flags, mode)


def create_file(path: str) -> FileHandle:
    """Create ``path``, which must not exist, for appending (fault: ``create``)."""
    try:
        faults.check("create", path)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
        return FileHandle(path, os.open(path, flags, 0o644))
    except OSError as e:
        raise storage_error("create", path, e) from None


def stat(path: str) -> os.stat_result | None:
    """``path``'s status, or None when it does not exist (fault: ``stat``)."""
    try:
        faults.check("stat", path)
        return os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise storage_error("stat", path, e) from None


def list_dir(path: str) -> list[str]:
    """The names in the directory ``path`` (fault: ``list``)."""
    try:
        faults.check("list", path)
        return os.listdir(path)
    except OSError as e:
        raise storage_error("list", path, e) from None


def rename(src: str, dst: str) -> None:
    try:
        faults.check("rename", src)
        os.replace(src, dst)
    except OSError as e:
        raise storage_error(f"rename to {dst}", src, e) from None


def unlink(path: str, *, missing_ok: bool = True) -> None:
    try:
        faults.check("unlink", path)
        os.unlink(path)
    except FileNotFoundError:
        if not missing_ok:
            raise
    except OSError as e:
        raise storage_error("unlink", path, e) from None


def remove_tree(path: str) -> None:
    try:
        faults.check("unlink", path)
        shutil.rmtree(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise storage_error("remove", path, e) from None


def make_dirs(path: str) -> None:
    try:
        faults.check("mkdir", path)
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise storage_error("mkdir", path, e) from None


def fsync_dir(path: str) -> None:
    """Make a rename or create in ``path`` durable."""
    try:
        faults.check("fsync", path)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as e:
        raise storage_error("fsync", path, e) from None


def read_json_file(path: str, key: str, kind: type, what: str) -> Any:
    """The ``key`` member (a ``kind``) of a ``{"version": 1, key: ...}`` JSON file a broker keeps
    in its log dir (ACLs, quotas, dynamic configs); None when there is no such file. A damaged
    file is refused whole, naming the file: ``not <what> file: <why>``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise storage_error("read", path, e) from None
    try:
        obj = json.loads(data)
        member = obj[key]
        if obj.get("version") != 1 or not isinstance(member, kind):
            raise ValueError(f"not version 1 with {key!r} a JSON {'object' if kind is dict else 'array'}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise KafkaStorageError(f"not {what} file: {e}", file=path) from None
    return member


def write_atomically(path: str, data: bytes, mode: int = 0o644) -> None:
    """Kafka's checkpoint recipe: write a temp file, fsync it, rename it over, fsync the dir
    (``mode``: a new file's permissions, 0o600 for one that holds credentials)."""
    tmp = path + ".tmp"
    handle = open_file(tmp, create=True, mode=mode)
    try:
        try:
            handle.truncate(0)
            handle.pwrite(data, 0)
            handle.fsync()
        finally:
            handle.close()
        rename(tmp, path)
    except BaseException:
        unlink(tmp)  # a failed write (a full disk) leaves no temp file, and frees its blocks
        raise
    fsync_dir(os.path.dirname(path) or ".")
