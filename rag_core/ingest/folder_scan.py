"""Looking through a linked folder: every file DocChat reads in it and its subfolders, bounded.

Recursive, only the extensions of rag_core.core.formats, hidden files and folders (".name") and Office lock files
("~$name") skipped. Symbolic links are followed, but a link back into a folder already read (a loop) is skipped with
a sentence, as are subfolders and files that cannot be read. The walk stops with one sentence past `max_files` files
or `time_limit_s` seconds; a folder that is not there (any more) is FolderNotFound. Only size and modification time
are read here; `hash_file` reads a file's content, and says when the file changed while it was read.
"""
from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from rag_core.core.errors import FolderNotFound, FolderScanTooSlow, FolderTooLarge, FolderUnreadable, NotAFolder
from rag_core.core.formats import ACCEPTED_EXTENSIONS

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


def _skipped(name: str) -> bool:
    return name.startswith((".", "~$"))


def _root(folder: Path) -> Path:
    """The folder as an absolute path, checked: there, a folder, readable."""
    shown = str(folder)
    try:
        st = os.stat(folder)
    except FileNotFoundError as e:
        raise FolderNotFound(shown) from e
    except PermissionError as e:
        raise FolderUnreadable(shown, "permission denied") from e
    except OSError as e:
        raise FolderUnreadable(shown, e.strerror or str(e)) from e
    if not stat.S_ISDIR(st.st_mode):
        raise NotAFolder(shown)
    return Path(os.path.abspath(folder))


def scan_folder(folder: Path, max_files: int = MAX_FILES, time_limit_s: float = SCAN_TIME_S,
                max_entries: int = MAX_ENTRIES) -> FolderScan:
    """Every file DocChat reads under `folder` (recursively), with size and modification time; bounded."""
    root = _root(folder)
    started = time.monotonic()
    files: list[FoundFile] = []
    notes: list[str] = []
    seen = {os.path.realpath(root)}
    stack: list[tuple[Path, str]] = [(root, "")]
    looked = 0
    while stack:
        here, prefix = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = list(it)
        except FileNotFoundError as e:
            if here == root:
                raise FolderNotFound(str(folder)) from e
            notes.append(f"The subfolder “{prefix.rstrip('/')}” disappeared while DocChat looked through it.")
            continue
        except OSError as e:
            if here == root:
                raise FolderUnreadable(str(folder), e.strerror or str(e)) from e
            notes.append(f"The subfolder “{prefix.rstrip('/')}” could not be read ({e.strerror or e}); its files "
                         "are left out.")
            continue
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
                is_dir = entry.is_dir()  # follows links
                if is_dir:
                    real = os.path.realpath(entry.path)
                    if real in seen:
                        notes.append(f"“{rel}” links back to a folder DocChat has already looked through, so it was "
                                     "skipped (a loop of links).")
                        continue
                    seen.add(real)
                    stack.append((Path(entry.path), rel + "/"))
                    continue
                if os.path.splitext(entry.name)[1].lower() not in ACCEPTED_EXTENSIONS:
                    continue
                st = entry.stat()  # follows links
            except FileNotFoundError:  # gone between listing and looking, or a broken link
                if entry.is_symlink():
                    notes.append(f"“{rel}” is a link to a file that is not there; it was skipped.")
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
    return FolderScan(root, tuple(sorted(files, key=lambda f: f.rel)), tuple(notes))


def hash_file(path: Path, size: int, mtime_ns: int) -> str | None:
    """The SHA-256 of a file's content, or None when it changed while it was read (or since it was listed); the
    OSError of opening or reading it otherwise."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        before = os.fstat(f.fileno())
        if (before.st_size, before.st_mtime_ns) != (size, mtime_ns):
            return None
        while block := f.read(_BLOCK):
            digest.update(block)
        after = os.fstat(f.fileno())
    if (after.st_size, after.st_mtime_ns) != (size, mtime_ns) or os.stat(path).st_mtime_ns != mtime_ns:
        return None
    return digest.hexdigest()
