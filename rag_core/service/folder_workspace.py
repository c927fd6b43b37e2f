"""What a page can do with linked folders: link one, review its diff, apply all or ticked files, undo a removal, see
what the last checks found. `LinkedFolders` is the part every Workspace has (linking refused: the hosted demo);
`LocalLinkedFolders` is the local one, over the library on this computer.

Applying: each new or changed file is one ingest job of the person's queue (stages, Stop, kept across a reload),
a changed file's job replacing its old version in one step; removed files are hidden at once (soft delete), each
with Undo.
"""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_core.core.errors import DocChatError, DocumentNotFound, LinkingRefused, LinkNeedsConfirmation
from rag_core.core.models import DocumentInfo
from rag_core.ingest.folder_confine import verify
from rag_core.ingest.folder_scan import scan_folder
from rag_core.service.folder_sync import Bucket, FolderDiff, remove_change
from rag_core.service.folder_watch import FolderCheck, watch_for
from rag_core.service.jobs import JobKind
from rag_core.service.linked_folders import LinkedFolder, needs_confirmation
from rag_core.service.wiki_changes import apply_any

if TYPE_CHECKING:
    from rag_core.core.config import Settings
    from rag_core.service.jobs import Work
    from rag_core.service.library import Library


log = logging.getLogger(__name__)

REMOVED_KEPT_S = 30 * 86_400  # a removed file's document can be brought back for 30 days, then it is deleted


@dataclass(frozen=True)
class Applied:
    """What applying a diff started: the jobs of new and changed files, the documents of removed files (hidden now,
    each can be restored), and a sentence for each removal that failed."""

    job_ids: tuple[str, ...] = ()
    removed: tuple[DocumentInfo, ...] = ()
    failed: tuple[str, ...] = ()


class LinkedFolders:
    """Linked folders as a page sees them; here: none, and linking is refused (the hosted demo)."""

    settings: Settings

    def submit_job(self, label: str, work: Work, kind: JobKind) -> str:
        raise NotImplementedError  # Workspace's: a job of this person's queue

    def linked_folders(self) -> list[LinkedFolder]:
        """The folders linked to this library, in the order linked."""
        return []

    def link_folder(self, path: str, confirmed: bool = False) -> LinkedFolder:
        """Link a folder (LinkNeedsConfirmation outside home and the data folder unless `confirmed`)."""
        raise LinkingRefused()

    def unlink_folder(self, path: str) -> None:
        """Forget a linked folder; its documents stay in the library."""
        raise LinkingRefused()

    def check_folder(self, path: str) -> FolderCheck:
        """Compare a linked folder with the library now (the review), remembered for the badge."""
        raise LinkingRefused()

    def folder_checks(self) -> list[FolderCheck]:
        """What the last check of each linked folder (and of the Wikipedia articles) found (for the badge)."""
        return []

    def check_wikipedia_articles(self) -> FolderCheck:
        """Ask Wikipedia which imported articles have a newer revision (the review's "wikipedia" bucket)."""
        raise LinkingRefused()

    def apply_folder_changes(self, diff: FolderDiff, paths: Iterable[str] | None = None) -> Applied:
        """Apply a reviewed diff: every change, or only the files ticked (`paths`)."""
        raise LinkingRefused()

    def removed_documents(self) -> list[DocumentInfo]:
        """Documents of files removed from linked folders that can still be restored, newest first."""
        return []

    def restore_document(self, doc_id: str) -> DocumentInfo:
        """Undo a removal: the document is in the library again."""
        raise DocumentNotFound(doc_id)


class LocalLinkedFolders(LinkedFolders):
    """Linked folders of the library on this computer."""

    library: Library

    def linked_folders(self) -> list[LinkedFolder]:
        """The folders linked to this library, in the order linked."""
        return watch_for(self.library).links.all()

    def link_folder(self, path: str, confirmed: bool = False) -> LinkedFolder:
        """Link a folder after checking it can be looked through (FolderSyncError otherwise)."""
        watch = watch_for(self.library)
        if watch.links.find(path) is not None:
            return watch.links.get(path)
        if not os.path.isdir(path):
            scan_folder(Path(path))  # says why, in one sentence: not there, not a folder, not readable
        try:
            verify(path, None)  # SystemFolderRefused: /proc, /sys, /dev (or a link to them) are never linked
        except OSError:
            scan_folder(Path(path))
        if not confirmed and needs_confirmation(path, self.settings):
            raise LinkNeedsConfirmation(path)
        link = watch.links.link(path)
        watch.check(link.path)
        return link

    def unlink_folder(self, path: str) -> None:
        """Forget a linked folder and its last check; its documents stay in the library."""
        watch = watch_for(self.library)
        watch.links.unlink(path)
        watch.forget(path)

    def check_folder(self, path: str) -> FolderCheck:
        """Compare a linked folder with the library now."""
        return watch_for(self.library).check(path)

    def folder_checks(self) -> list[FolderCheck]:
        """What the last check of each linked folder found."""
        return watch_for(self.library).last()

    def check_wikipedia_articles(self) -> FolderCheck:
        """Ask Wikipedia which imported articles have a newer revision."""
        return watch_for(self.library).check_wikipedia()

    def apply_folder_changes(self, diff: FolderDiff, paths: Iterable[str] | None = None) -> Applied:
        """Queue a job for each new or changed file; hide each removed file's document now (Undo: restore)."""
        watch = watch_for(self.library)
        wanted = None if paths is None else set(paths)
        library, links = self.library, watch.links
        jobs: list[str] = []
        removed: list[DocumentInfo] = []
        failed: list[str] = []
        for change in diff.pending:
            if wanted is not None and change.rel not in wanted and change.shown not in wanted:
                continue
            if change.bucket == Bucket.REMOVED:
                try:
                    info = remove_change(library, links, diff.folder, change)
                except DocChatError as e:
                    failed.append(str(e))
                    continue
                removed.extend([info] if info else [])
                continue

            def work(progress: Any, change: Any = change) -> Any:
                return apply_any(library, links, diff.folder, change, progress)

            jobs.append(self.submit_job(change.shown, work, JobKind.FILE))
        watch.forget(diff.folder)
        return Applied(tuple(jobs), tuple(removed), tuple(failed))

    def removed_documents(self) -> list[DocumentInfo]:
        """Removed documents that can be restored, newest first; those removed over REMOVED_KEPT_S ago are deleted
        for good now."""
        kept: list[DocumentInfo] = []
        for doc, when in self.library.removed():
            if time.time() - when > REMOVED_KEPT_S:
                try:
                    self.library.purge(doc.doc_id)
                except DocChatError as e:  # tried again the next time the list is shown
                    log.warning("Could not purge removed document %s: %s", doc.doc_id, e)
                continue
            kept.append(doc)
        return kept

    def restore_document(self, doc_id: str) -> DocumentInfo:
        """Undo a removal."""
        return self.library.restore(doc_id)
