"""Keeping an eye on linked folders while the app runs: the last check of each folder, for the Library page's badge
("3 files changed in Reports — review"), made on demand or on a quiet interval. A check only compares (the same
`diff_folder` as the page's review); nothing is ever applied here.

One FolderWatch per library per process (`watch_for`): a page builds a new workspace on every run, and every
session shares what the last check found.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_core.core.errors import DocChatError
from rag_core.service.folder_sync import FolderDiff, diff_folder
from rag_core.service.linked_folders import FolderLinks, folder_key

if TYPE_CHECKING:
    from rag_core.service.library import Library

log = logging.getLogger(__name__)

_WATCHES: dict[str, FolderWatch] = {}
_WATCHES_GUARD = threading.Lock()


@dataclass(frozen=True)
class FolderCheck:
    """The last check of one linked folder: its diff, or the sentence saying why it could not be looked through."""

    folder: str
    diff: FolderDiff | None = None
    error: str | None = None

    @property
    def name(self) -> str:
        """The folder's own name."""
        return Path(self.folder).name or self.folder

    @property
    def needs_review(self) -> bool:
        """True when it found changes (or the folder could not be read)."""
        return self.error is not None or bool(self.diff and self.diff.pending)


class FolderWatch:
    """The last check of every linked folder of one library; thread-safe."""

    def __init__(self, library: Library) -> None:
        self.library = library
        self.links = FolderLinks(library.settings)
        self._lock = threading.Lock()
        self._checks: dict[str, FolderCheck] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self, path: str | Path) -> FolderCheck:
        """Compare one folder with the library now and remember what was found."""
        key = folder_key(path)
        try:
            found = FolderCheck(key, diff=diff_folder(self.library, self.links, key))
        except DocChatError as e:  # the folder (FolderSyncError) or the library (StorageError)
            found = FolderCheck(key, error=str(e))
        with self._lock:
            self._checks[key] = found
        return found

    def check_all(self) -> list[FolderCheck]:
        """Check every linked folder now."""
        return [self.check(link.path) for link in self.links.all()]

    def check_wikipedia(self) -> FolderCheck:
        """Ask Wikipedia which imported articles have a newer revision now (on demand only: it uses the network)."""
        from rag_core.service.wiki_changes import ARTICLES, wikipedia_changes

        try:
            found = FolderCheck(ARTICLES, diff=wikipedia_changes(self.library))
        except DocChatError as e:
            found = FolderCheck(ARTICLES, error=str(e))
        with self._lock:
            self._checks[ARTICLES] = found
        return found

    def last(self) -> list[FolderCheck]:
        """The last check of each folder still linked, in the order linked (unchecked folders are left out), then
        the last check of the Wikipedia articles, if any."""
        from rag_core.service.wiki_changes import ARTICLES

        with self._lock:
            checks = dict(self._checks)
        found = [checks[folder_key(link.path)] for link in self.links.all() if folder_key(link.path) in checks]
        return found + ([checks[ARTICLES]] if ARTICLES in checks else [])

    def forget(self, path: str | Path) -> None:
        """Drop the last check of a folder (after applying its changes, or unlinking it)."""
        with self._lock:
            self._checks.pop(str(path), None)
            self._checks.pop(folder_key(path), None)

    def start(self, every_s: float) -> None:
        """Re-check every linked folder every `every_s` seconds on a background thread (0: never)."""
        if every_s <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, args=(every_s,), name="docchat-folder-watch", daemon=True)
        self._thread.start()

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.check_all()
            except Exception:  # a background check must never end the thread; the next one retries
                log.exception("Checking the linked folders failed")

    def stop(self) -> None:
        """End the background re-checks and write the records kept for later."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        try:
            self.links.flush()
        except OSError as e:  # they are only a cache: the files are read once more at the next check
            log.warning("Could not save the linked folders' records: %s", e)


def watch_for(library: Library) -> FolderWatch:
    """The one FolderWatch of this process for `library`'s data folder."""
    key = os.path.realpath(library.settings.library.data_dir)
    with _WATCHES_GUARD:
        watch = _WATCHES.get(key)
        if watch is None or watch.library is not library:
            watch = _WATCHES[key] = FolderWatch(library)
        return watch
