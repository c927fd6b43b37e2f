"""Looking through a linked folder: every file DocChat reads in it and its subfolders, bounded.

Recursive, only the extensions of rag_core.core.formats, hidden files and folders (".name") and Office lock files
("~$name") skipped. The folder stays inside itself (rag_core.ingest.folder_confine): it is resolved again and refused
when it is no longer the folder confirmed or is a system folder; a link (to a file or a folder) is followed only when
its real path is inside the folder's, links leading out are left out (one sentence each, or one for many), and /proc,
/sys and /dev are never entered. A link back into a folder already read (a loop), a link that loops on itself, and
subfolders and files that cannot be read are skipped with a sentence. The walk stops with one sentence past `max_files` files
or `time_limit_s` seconds; a folder that is not there (any more) is FolderNotFound. Only size and modification time
are read here; `hash_file` reads a file's content, and says when the file changed while it was read.
"""
from __future__ import annotations

import errno
import hashlib
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from rag_core.core.errors import FolderNotFound, FolderScanTooSlow, FolderTooLarge, FolderUnreadable, NotAFolder
from rag_core.core.formats import ACCEPTED_EXTENSIONS
from rag_core.ingest.folder_confine import FolderPin, inside, open_inside, system_folder, verify

log = logging.getLogger(__name__)

MAX_FILES = 100_000  # files DocChat reads, in one linked folder
MAX_ENTRIES = 1_000_000  # names of any kind looked at (other files, folders) before giving up
SCAN_TIME_S = 60.0  # seconds for one walk of a folder (10k files: ~0.1 s on a laptop)
_BLOCK = 1 << 20
_CHECK_EVERY = 512  # entries between two looks at the clock


@dataclass(frozen=True)
class FoundFile:
    """One file of a linked folder: its path inside the folder (with "/"), size and modification time."""

    rel: str
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class FolderScan:
    """What a walk of a folder found: its files (sorted by path) and a sentence for each thing it skipped."""

    folder: Path
    files: tuple[FoundFile, ...]
    notes: tuple[str, ...] = ()
    pin: FolderPin | None = None  # the folder's real path and identity while it was walked


def _skipped(name: str) -> bool:
    return name.startswith((".", "~$"))


def _root(folder: Path, confirmed: FolderPin | None, same_identity: bool) -> FolderPin:
    """The folder's real path and identity, checked: there, a folder, readable, the folder confirmed, no system
    folder."""
    shown = str(folder)
    try:
        st = os.stat(folder)
        if not stat.S_ISDIR(st.st_mode):
            raise NotAFolder(shown)
        return verify(folder, confirmed, same_identity)
    except FileNotFoundError as e:
        raise FolderNotFound(shown) from e
    except PermissionError as e:
        raise FolderUnreadable(shown, "permission denied") from e
    except OSError as e:
        raise FolderUnreadable(shown, e.strerror or str(e)) from e


class _Outside:
    """The links of one walk that lead outside the folder (or loop): one sentence each, or one for many."""

    SHOWN = 3

    def __init__(self) -> None:
        self.out: list[str] = []
        self.loops: list[str] = []

    def notes(self) -> list[str]:
        found: list[str] = []
        self.out.sort()
        if len(self.out) > self.SHOWN:
            names = ", ".join(f"“{r}”" for r in self.out[:self.SHOWN])
            found.append(f"{len(self.out)} links lead outside the folder and were left out ({names}, …).")
        else:
            found.extend(f"“{r}” is a link that leads outside the folder; it was left out." for r in self.out)
        found.extend(f"“{r}” is a link that loops back on itself; it was skipped." for r in sorted(self.loops))
        return found


def _is_link(entry: os.DirEntry[str]) -> bool:
    is_junction = getattr(entry, "is_junction", None)  # Windows junctions (Python 3.12+)
    return entry.is_symlink() or bool(is_junction and is_junction())


def _reads(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in ACCEPTED_EXTENSIONS


def _link_target(entry: os.DirEntry[str], rel: str, root: str, outside: _Outside, notes: list[str]) -> str | None:
    """The real path of a link inside the folder, or None when it is left out (a sentence says why)."""
    try:
        real = os.path.realpath(entry.path, strict=True)
    except FileNotFoundError:
        if _reads(entry.name):
            notes.append(f"“{rel}” is a link to a file that is not there; it was skipped.")
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            outside.loops.append(rel)
        else:
            notes.append(f"“{rel}” could not be read ({e.strerror or e}); it was skipped.")
        return None
    if not inside(real, root) or system_folder(real) is not None:
        if _reads(entry.name) or os.path.isdir(real):  # a link DocChat would have read
            outside.out.append(rel)
        return None
    return real


def _enter(real: str, rel: str, seen: set[str], notes: list[str]) -> bool:
    """True when the subfolder `rel` (real path `real`) is to be looked through: not a system folder, not one looked
    through already (a sentence says why not)."""
    if system_folder(real) is not None:
        notes.append(f"“{rel}” is a system folder, not one of documents; it was left out.")
        return False
    if real in seen:
        notes.append(f"“{rel}” links back to a folder DocChat has already looked through, so it was skipped (a loop "
                     "of links).")
        return False
    seen.add(real)
    return True


def scan_folder(folder: Path, max_files: int = MAX_FILES, time_limit_s: float = SCAN_TIME_S,
                max_entries: int = MAX_ENTRIES, confirmed: FolderPin | None = None,
                same_identity: bool = False) -> FolderScan:
    """Every file DocChat reads under `folder` (recursively), with size and modification time; bounded, and kept
    inside the folder (`confirmed`: the folder the person confirmed, refused when it is no longer that folder)."""
    pin = _root(folder, confirmed, same_identity)
    root = Path(pin.real)
    started = time.monotonic()
    files: list[FoundFile] = []
    notes: list[str] = []
    outside = _Outside()
    seen = {pin.real}
    stack: list[tuple[Path, str]] = [(root, "")]
    looked = 0
    while stack:
        here, prefix = stack.pop()
        entries = _list_folder(here, prefix, here == root, folder, notes)
        for entry in entries:
            looked += 1
            if looked % _CHECK_EVERY == 0 and time.monotonic() - started > time_limit_s:
                raise FolderScanTooSlow(str(folder), time_limit_s)
            if looked > max_entries:
                raise FolderTooLarge(str(folder), max_entries)
            if _skipped(entry.name):
                continue
            rel = prefix + entry.name
            try:
                real = _link_target(entry, rel, pin.real, outside, notes) if _is_link(entry) else entry.path
                if real is None:
                    continue
                if entry.is_dir():  # follows links (checked above to stay inside)
                    real = os.path.realpath(real)
                    if _enter(real, rel, seen, notes):
                        stack.append((Path(real), rel + "/"))  # the real path: no link left to swap
                    continue
                if not _reads(entry.name):
                    continue
                st = entry.stat()  # follows links
            except FileNotFoundError:  # gone between listing and looking
                continue
            except OSError as e:
                notes.append(f"“{rel}” could not be read ({e.strerror or e}); it was skipped.")
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            files.append(FoundFile(rel, st.st_size, st.st_mtime_ns))
            if len(files) > max_files:
                raise FolderTooLarge(str(folder), max_files)
    log.info("Looked through %s: %d files in %.2f s", root, len(files), time.monotonic() - started)
    return FolderScan(Path(os.path.abspath(folder)), tuple(sorted(files, key=lambda f: f.rel)),
                      tuple(notes + outside.notes()), pin)


def _list_folder(here: Path, prefix: str, is_root: bool, folder: Path, notes: list[str]) -> list[os.DirEntry]:
    """The entries of one folder of the scan; the linked folder itself unreadable is an error, a subfolder a note
    (and no entries)."""
    try:
        with os.scandir(here) as it:
            return list(it)
    except FileNotFoundError as e:
        if is_root:
            raise FolderNotFound(str(folder)) from e
        notes.append(f"The subfolder “{prefix.rstrip('/')}” disappeared while DocChat looked through it.")
    except OSError as e:
        if is_root:
            raise FolderUnreadable(str(folder), e.strerror or str(e)) from e
        notes.append(f"The subfolder “{prefix.rstrip('/')}” could not be read ({e.strerror or e}); its files "
                     "are left out.")
    return []


def hash_file(path: Path, size: int, mtime_ns: int, root: FolderPin | None = None) -> str | None:
    """The SHA-256 of a file's content, or None when it changed while it was read (or since it was listed); the
    OSError of opening or reading it otherwise. With `root`, `path` is the file's path inside that folder, opened
    only when it really is in it (rag_core.ingest.folder_confine.open_inside: LinkLeadsOut otherwise)."""
    digest = hashlib.sha256()
    if root is None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    else:
        fd, _ = open_inside(root, str(path))
        path = Path(root.real) / path
    with os.fdopen(fd, "rb") as f:
        before = os.fstat(f.fileno())
        if (before.st_size, before.st_mtime_ns) != (size, mtime_ns):
            return None
        while block := f.read(_BLOCK):
            digest.update(block)
        after = os.fstat(f.fileno())
    if (after.st_size, after.st_mtime_ns) != (size, mtime_ns) or os.stat(path).st_mtime_ns != mtime_ns:
        return None
    return digest.hexdigest()
