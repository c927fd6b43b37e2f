"""Linked folders, kept in `<data dir>/linked_folders.json`: each folder's path and, per file, what DocChat last saw of
it (size, modification time, the id of the document it is in the library), and the folder confirmed: its real path
and identity when it was linked (rag_core.ingest.folder_confine), so a folder later replaced by a link is refused.

The library stays the truth: a file's record is only a cache that lets a re-check skip reading unchanged files (same
size and time) and remembers which document a changed or removed file was. Each change is written atomically (a new
file renamed over the old one, flushed), under one lock per file per process, so a kill -9 leaves the old list or the
new one, never half of one; a lost or damaged list loses the links (logged), never a document.
"""
from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rag_core.core.config import Settings
from rag_core.core.errors import FolderNotLinked
from rag_core.core.files import write_atomic
from rag_core.core.names import display_name
from rag_core.core.safe_files import read_json
from rag_core.ingest.folder_confine import FolderPin, pin
from rag_core.service.conversations import lock_for

log = logging.getLogger(__name__)


# Records kept for later, per list file (its real path) and folder: seen by every reader of this process, written by
# the next write. Lost on a crash, which costs only reading those files once more at the next check.
_PENDING: dict[str, dict[str, dict[str, FileRecord | None]]] = {}
_WRITTEN: dict[str, float] = {}


def now_iso() -> str:
    """Current UTC time, ISO-8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()

FILE_NAME = "linked_folders.json"
MAX_BYTES = 64 << 20  # 100k files at ~100 bytes each, with room
WRITE_EVERY_S = 2.0  # records of applied files are written at most this often (a 10k-file list takes ~45 ms)


@dataclass(frozen=True)
class FileRecord:
    """What DocChat last saw of one file of a linked folder."""

    size: int
    mtime_ns: int
    doc_id: str  # the document holding this content in the library


@dataclass(frozen=True)
class LinkedFolder:
    """One linked folder: its absolute path, when it was linked, its files' records by path inside it, and the
    folder confirmed (its real path and identity when linked; None for a link made before they were kept)."""

    path: str
    linked_at: str
    files: Mapping[str, FileRecord] = field(default_factory=dict, compare=False, repr=False)
    pin: FolderPin | None = field(default=None, compare=False)

    @property
    def name(self) -> str:
        """The folder's own name, for sentences ("Reports"; `display_name`: as it can be shown)."""
        return display_name(Path(self.path).name or self.path)


def folder_key(path: str | Path) -> str:
    """The absolute, normalised path a folder is linked under (links are not resolved: the user's path is kept)."""
    return os.path.normcase(os.path.abspath(os.path.expanduser(str(path))))


def needs_confirmation(path: str | Path, settings: Settings) -> bool:
    """True when a folder is outside the user's home folder and DocChat's data folder (linking it is confirmed)."""
    real = Path(os.path.realpath(folder_key(path)))
    homes = [Path(os.path.realpath(Path.home())), Path(os.path.realpath(settings.library.data_dir))]
    return not any(real == h or h in real.parents for h in homes)


def _pin_now(path: str) -> FolderPin | None:
    try:
        return pin(path)
    except (OSError, ValueError) as e:  # not there (yet): pinned at its first check
        log.info("Could not pin %s: %s", path, e)
        return None


def _folder(raw: Any) -> LinkedFolder | None:
    try:
        files = {str(rel): FileRecord(int(r[0]), int(r[1]), str(r[2])) for rel, r in dict(raw["files"]).items()}
        kept = raw.get("pin")
        pinned = FolderPin(str(kept[0]), int(kept[1]), int(kept[2])) if kept else None
        return LinkedFolder(str(raw["path"]), str(raw.get("linked_at") or ""), files, pinned)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        log.warning("Ignoring a damaged linked folder record: %s", e)
        return None


class FolderLinks:
    """The linked folders of this computer's library (local mode only)."""

    def __init__(self, settings: Settings, path: Path | None = None) -> None:
        self.path = path or settings.library.data_dir / FILE_NAME
        self._lock = lock_for(self.path)
        self._file = os.path.realpath(self.path)

    def all(self) -> list[LinkedFolder]:
        """Every linked folder, in the order linked (empty when none, or when the list is unreadable)."""
        with self._lock:
            return list(self._read().values())

    def get(self, path: str | Path) -> LinkedFolder:
        """The linked folder at `path` (FolderNotLinked when it is not linked)."""
        found = self._read().get(folder_key(path))
        if found is None:
            raise FolderNotLinked(str(path))
        return found

    def find(self, path: str | Path) -> LinkedFolder | None:
        """The linked folder at `path`, or None."""
        return self._read().get(folder_key(path))

    def link(self, path: str | Path) -> LinkedFolder:
        """Link a folder (kept as it is when linked already); OSError when the list cannot be saved."""
        key = folder_key(path)
        with self._lock:
            folders = self._read()
            if key not in folders:
                folders[key] = LinkedFolder(key, now_iso(), {}, _pin_now(key))
                self._write(folders)
            return folders[key]

    def pin(self, path: str | Path, pinned: FolderPin) -> None:
        """Keep the real path and identity of a linked folder (one linked before they were kept, or re-created at
        the same place); nothing when it is not linked."""
        key = folder_key(path)
        with self._lock:
            folders = self._read()
            old = folders.get(key)
            if old is not None and old.pin != pinned:
                folders[key] = LinkedFolder(old.path, old.linked_at, old.files, pinned)
                self._write(folders)

    def unlink(self, path: str | Path) -> bool:
        """Forget a linked folder (its documents stay in the library); False when it was not linked."""
        key = folder_key(path)
        with self._lock:
            folders = self._read()
            if folders.pop(key, None) is None:
                return False
            self._write(folders)
            return True

    def record(self, path: str | Path, changes: Mapping[str, FileRecord | None], later: bool = False) -> None:
        """Update files' records of a linked folder (None: forget that file); nothing when it is not linked. `later`:
        written with the next write at most WRITE_EVERY_S from now (each applied file of a 10k-file folder would
        otherwise rewrite the whole list), and seen at once by every reader in this process."""
        if not changes:
            return
        with self._lock:
            _PENDING.setdefault(self._file, {}).setdefault(folder_key(path), {}).update(changes)
            if later and time.monotonic() - _WRITTEN.get(self._file, 0.0) < WRITE_EVERY_S:
                return
            self._write(self._read())

    def flush(self) -> None:
        """Write the records kept for later now (OSError when the disk fails)."""
        with self._lock:
            if _PENDING.get(self._file):
                self._write(self._read())

    def _read(self) -> dict[str, LinkedFolder]:
        with self._lock:
            out = self._read_file()
            for key, changes in _PENDING.get(self._file, {}).items():
                old = out.get(key)
                if old is not None:
                    files = dict(old.files)
                    for rel, rec in changes.items():
                        if rec is None:
                            files.pop(rel, None)
                        else:
                            files[rel] = rec
                    out[key] = LinkedFolder(old.path, old.linked_at, files, old.pin)
            return out

    def _read_file(self) -> dict[str, LinkedFolder]:
        try:
            data = read_json(self.path, MAX_BYTES)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError, MemoryError) as e:
            log.warning("Ignoring unreadable %s: %s", self.path, e)
            return {}
        raws = data.get("folders") if isinstance(data, dict) else None
        out: dict[str, LinkedFolder] = {}
        for raw in raws if isinstance(raws, list) else []:
            folder = _folder(raw)
            if folder is not None:
                out[folder_key(folder.path)] = folder
        return out

    def _write(self, folders: Mapping[str, LinkedFolder]) -> None:
        """Write every folder (records kept for later included) atomically."""
        data = {"version": 1, "folders": [
            {"path": f.path, "linked_at": f.linked_at, **({"pin": f.pin.as_json()} if f.pin else {}),
             "files": {rel: [r.size, r.mtime_ns, r.doc_id] for rel, r in sorted(f.files.items())}}
            for f in folders.values()]}
        write_atomic(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"))
        _PENDING.pop(self._file, None)
        _WRITTEN[self._file] = time.monotonic()
