"""Writing and locking DocChat's own files the same way on Linux, macOS and Windows.

- `exclusive_lock`: an exclusive lock on a lock file, taken at once or refused with LibraryBusy (never waited for).
  One holder at a time, across processes and inside one: a second lock of the same file in the same process is
  refused too. It is the operating system's lock (filelock: `flock` on POSIX, `LockFileEx` on Windows), so it is
  dropped when the holding process ends, a crash included: no stale lock is ever left behind.
- `write_atomic`: a file replaced so that a crash leaves either the old or the new version, flushed to the disk.
- `fsync_dir`: make a rename or a new file inside a folder durable (where the system can flush a folder).
- `free_bytes`, `allocated_bytes`, `reserve_space`: disk space, without statvfs, st_blocks or posix_fallocate where
  the system does not have them.
- `portable_name`, `reserved_on_windows`: file names that Windows accepts as well as macOS and Linux.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import secrets
import shutil
import sys
from pathlib import Path
from types import TracebackType

import filelock

from rag_core.core.errors import LibraryBusy

log = logging.getLogger(__name__)

_BINARY = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_ZEROS = 1 << 20  # bytes written per step when space is reserved by writing
# Device names Windows reserves in every folder, with any extension ("con.md", "COM¹.pdf"), in any case.
_WINDOWS_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
                              | {f"{port}{n}" for port in ("COM", "LPT") for n in "0123456789¹²³"})
# Characters Windows refuses in a file name (and the folder separators of every system), control characters included.
_WINDOWS_FORBIDDEN = re.compile(r'[<>:"/\\|?*\x00-\x1f]')
_MAX_NAME = 200  # characters: under every system's 255 (bytes on Linux, UTF-16 units on Windows) with room to spare


class ExclusiveLock:
    """A held exclusive lock on one lock file (see `exclusive_lock`); `release()` or the end of a with-block gives it
    back (a second release does nothing)."""

    def __init__(self, lock_file: Path, busy: str) -> None:
        self.lock_file = Path(lock_file)
        # thread_local=False: the hold belongs to this object, not to the thread that took it, so any thread can
        # release it (a library opened by one thread is closed by another at shutdown).
        self._lock = filelock.FileLock(self.lock_file, mode=0o644, blocking=False, thread_local=False)
        try:
            self._lock.acquire(blocking=False)
        except filelock.Timeout as e:
            raise LibraryBusy(busy) from e

    @property
    def held(self) -> bool:
        """True until released."""
        return self._lock.is_locked

    def release(self) -> None:
        """Give the lock back."""
        if self._lock.is_locked:
            self._lock.release(force=True)

    def __enter__(self) -> ExclusiveLock:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()


def exclusive_lock(lock_file: Path, busy: str | Path | None = None) -> ExclusiveLock:
    """Take the exclusive lock of `lock_file` now (it is created if missing; its folder must exist): LibraryBusy
    naming `busy` (default: the lock file's folder) when another holder, in this process or another, has it."""
    return ExclusiveLock(lock_file, str(busy if busy is not None else Path(lock_file).parent))


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file inside `folder` durable; nothing to do on Windows (it cannot open a folder) or on a
    file system that cannot flush folders."""
    if sys.platform == "win32":
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
        log.debug("The file system of %s cannot flush a folder (%s)", folder, e.strerror)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, mode: int = 0o666) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file, whole (OSError when the disk
    fails): written to a new file in the same folder, flushed to the disk, renamed over `path`, the folder flushed.
    `mode`: the new file's permissions (less the umask; 0o600 for owner-only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _BINARY, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def free_bytes(folder: Path) -> int:
    """Bytes this process may still write on the disk holding `folder` (space reserved for root not counted)."""
    return shutil.disk_usage(folder).free


def allocated_bytes(st: os.stat_result) -> int:
    """Disk space a file takes: its allocated blocks where the system reports them (a sparse file takes less than
    its size), else its size."""
    blocks: int | None = getattr(st, "st_blocks", None)
    return st.st_size if blocks is None else blocks * 512


def reserve_space(fd: int, size: int) -> None:
    """Make the file open on `fd` (for writing) take `size` bytes of the disk now, flushed: `posix_fallocate` where
    the system has it, else zeros written. OSError (ENOSPC) when the disk has no room for it."""
    fallocate = getattr(os, "posix_fallocate", None)
    if fallocate is not None:
        fallocate(fd, 0, size)
    else:  # macOS, Windows
        os.lseek(fd, 0, os.SEEK_SET)
        done = 0
        while done < size:
            done += os.write(fd, bytes(min(_ZEROS, size - done)))
    os.fsync(fd)


def reserved_on_windows(name: str) -> bool:
    """True when Windows refuses `name` as a file name whatever its extension (CON, NUL, COM1, LPT1, ...)."""
    return name.split(".")[0].rstrip(" ").upper() in _WINDOWS_RESERVED


def portable_name(name: str, fallback: str = "file") -> str:
    """`name` as a file name that Windows, macOS and Linux all accept: the characters Windows refuses (`<>:"/\\|?*`,
    control characters) become "-", no trailing dot or space, no reserved device name ("con.md" -> "con_.md"), at most
    200 characters (the extension kept); `fallback` when nothing is left."""
    name = _WINDOWS_FORBIDDEN.sub("-", name).strip(" ")
    if len(name) > _MAX_NAME:
        stem, dot, ext = name.rpartition(".")
        name = stem[:_MAX_NAME - len(ext) - 1] + dot + ext if dot and 0 < len(ext) < 16 else name[:_MAX_NAME]
    name = name.rstrip(". ") or fallback
    if reserved_on_windows(name):
        stem, dot, rest = name.partition(".")
        name = f"{stem.rstrip(' ')}_{dot}{rest}"
    return name
