"""Keeping a linked folder inside itself: the person confirmed ONE folder, so DocChat reads only what is really in it.

A folder is pinned when it is linked (`pin`): its real path (links and ".." resolved) and its identity (st_dev,
st_ino). Every check and every apply resolves it again (`verify`): a folder whose real path is not the one confirmed
(the folder replaced by a link to /etc, say) is refused with one sentence (FolderReplaced), and so is one under a
system tree (/proc, /sys, /dev) whatever was confirmed (SystemFolderRefused). The real path decides; the identity
closes the window inside one check or apply: a folder re-created at the same place is accepted at the next check, but
not between a check and its apply.

Inside the folder a link is followed only when its real path stays inside the folder's real path (`inside`), and a
file is read through `open_inside`: its real path resolved and checked, then opened from the folder one path
component at a time without following any link (POSIX `openat` with O_NOFOLLOW), and the open descriptor must be
the regular file that was checked, so a link swapped in between the check and the read is refused, not followed.
Where the system has no `dir_fd` opening (Windows) the file is opened by its real path and that path checked again.
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from rag_core.core.errors import FolderReplaced, NotARegularFile, SystemFolderRefused
from rag_core.core.safe_files import describe_mode

#: Kernel and device trees: never walked, never read, whatever was confirmed (POSIX: Linux, macOS, the BSDs).
SYSTEM_FOLDERS = tuple(Path(p) for p in ("/proc", "/sys", "/dev") if os.name == "posix")
_NOFOLLOW: int = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY: int = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK: int = getattr(os, "O_NONBLOCK", 0)
FILE_FLAGS = os.O_RDONLY | _NONBLOCK | _NOFOLLOW | getattr(os, "O_BINARY", 0)
DIR_FLAGS = os.O_RDONLY | _NONBLOCK | _NOFOLLOW | _DIRECTORY
#: Open component by component from the folder (openat): Linux, macOS and the BSDs; not Windows.
WALKS_FROM_FOLDER = bool(_NOFOLLOW and _DIRECTORY) and os.open in os.supports_dir_fd
#: What open() says when a component it must not follow is a link (or a folder became something else).
_SWAPPED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})


@dataclass(frozen=True)
class FolderPin:
    """The folder the person confirmed: its real path and identity (st_dev, st_ino)."""

    real: str
    dev: int
    ino: int

    def as_json(self) -> list[object]:
        """How linked_folders.json keeps it."""
        return [self.real, self.dev, self.ino]


class LinkLeadsOut(OSError):
    """A file of the folder is (now) a link that leads outside it, or was swapped while it was opened."""


def system_folder(real: str | Path) -> Path | None:
    """The system tree (/proc, /sys, /dev) `real` is in, or None."""
    path = Path(real)
    return next((f for f in SYSTEM_FOLDERS if path == f or path.is_relative_to(f)), None)


def inside(real: str, root: str) -> bool:
    """True when the real path `real` is the folder `root` (a real path) or in it."""
    return real == root or Path(real).is_relative_to(root)


def pin(folder: str | Path) -> FolderPin:
    """The folder's real path and identity now (OSError when it cannot be looked at)."""
    real = os.path.realpath(folder, strict=True)
    st = os.stat(real)
    return FolderPin(real, st.st_dev, st.st_ino)


def verify(folder: str | Path, confirmed: FolderPin | None, same_identity: bool = False) -> FolderPin:
    """The folder's pin now, refused with one sentence when it is (under) a system tree or is no longer the folder
    confirmed: another real path, or (`same_identity`, between a check and its apply) another folder at the same
    place. OSError (FileNotFoundError…) when it cannot be looked at."""
    now = pin(folder)
    system = system_folder(now.real)
    if system is not None:
        raise SystemFolderRefused(str(folder), str(system))
    if confirmed is None:
        return now
    if os.path.normcase(now.real) != os.path.normcase(confirmed.real) or (
            same_identity and (now.dev, now.ino) != (confirmed.dev, confirmed.ino)):
        raise FolderReplaced(str(folder), now.real, confirmed.real)
    return now


def open_inside(root: FolderPin, rel: str) -> tuple[int, os.stat_result]:
    """A read-only, non-blocking descriptor of the regular file `rel` of the folder, and its stat, opened only when its
    real path is inside the folder (LinkLeadsOut otherwise, or when it changed while it was opened); NotARegularFile
    for a FIFO, device or folder; OSError when it cannot be opened. The caller closes the descriptor."""
    real = os.path.realpath(os.path.join(root.real, rel), strict=True)
    if not inside(real, root.real) or real == root.real or system_folder(real) is not None:
        raise LinkLeadsOut(errno.EXDEV, "it leads outside the folder")
    checked = os.lstat(real)  # a real path has no link left in it: one there now loops or was just swapped in
    if stat.S_ISLNK(checked.st_mode):
        raise LinkLeadsOut(errno.ELOOP, "it changed while it was opened")
    if not stat.S_ISREG(checked.st_mode):
        raise NotARegularFile(Path(rel).name, describe_mode(checked.st_mode))
    try:
        fd = _open_real(root, real)
    except OSError as e:
        if e.errno in _SWAPPED:
            raise LinkLeadsOut(e.errno, "it changed while it was opened") from e
        raise
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
        os.close(fd)
        raise LinkLeadsOut(errno.ESTALE, "it changed while it was opened")
    return fd, st


def _open_real(root: FolderPin, real: str) -> int:
    """Open `real` (inside the folder) from the folder pinned, no link followed on the way."""
    return open_from_folder(root.real, real, identity=(root.dev, root.ino))


def open_from_folder(folder: str | Path, real: str | Path, identity: tuple[int, int] | None = None) -> int:
    """A read-only, non-blocking descriptor of `real`, a real path inside `folder` (a real path), opened from the
    folder one component at a time without following any link (`openat` with O_NOFOLLOW; with `identity`, the
    folder's descriptor must be that st_dev/st_ino); where the system has no `dir_fd` opening (Windows), opened by
    path and its real path checked again. LinkLeadsOut when something on the way changed; OSError (ELOOP, ENOTDIR…)
    when a component became a link; the caller closes the descriptor. Shared by linked folders and the MCP server."""
    if not WALKS_FROM_FOLDER:
        fd = os.open(real, FILE_FLAGS)
        if os.path.realpath(real) != str(real):
            os.close(fd)
            raise LinkLeadsOut(errno.ESTALE, "it changed while it was opened")
        return fd
    parts = Path(real).relative_to(folder).parts
    if not parts:  # the folder itself, become a file since it was checked
        raise LinkLeadsOut(errno.ESTALE, "the folder changed while it was opened")
    *folders, name = parts
    current = os.open(folder, DIR_FLAGS)
    try:
        st = os.fstat(current)
        if identity is not None and (st.st_dev, st.st_ino) != identity:
            raise LinkLeadsOut(errno.ESTALE, "the folder changed while it was opened")
        for part in folders:
            parent, current = current, -1
            try:
                current = os.open(part, DIR_FLAGS, dir_fd=parent)
            finally:
                os.close(parent)
        return os.open(name, FILE_FLAGS, dir_fd=current)
    finally:
        if current >= 0:
            os.close(current)
