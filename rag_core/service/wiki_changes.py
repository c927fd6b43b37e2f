"""Imported Wikipedia articles in the folder review: the ones with a newer revision form the diff's "wikipedia"
bucket (asked of Wikipedia in one batched request per language, nothing fetched or written), and applying one
re-imports it, replacing the old revision in one step (rag_core.sources.wikipedia.refresh).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from rag_core.core.models import IngestStatus, Progress
from rag_core.service.folder_sync import Bucket, FileChange, FolderDiff, apply_change
from rag_core.service.linked_folders import FolderLinks

if TYPE_CHECKING:
    from rag_core.service.library import IngestResult, Library

ARTICLES = "Wikipedia"  # the diff's "folder" for articles


def wikipedia_changes(library: Library, owner: str | None = None) -> FolderDiff:
    """The owner's imported articles with a newer revision on Wikipedia (dry run); a sentence per article that could
    not be checked, or that Wikipedia no longer has."""
    from rag_core.service.wiki_sync import refresh

    report = refresh(library, library.settings, dry_run=True, owners=[owner])
    changes = [FileChange(Bucket.WIKIPEDIA, i.title, None, i.doc_id, title=i.title) for i in report.changed]
    changes += [FileChange(Bucket.UNCHANGED, i.title, i.doc_id, title=i.title) for i in report.unchanged]
    notes = [f"“{i.title}” could not be checked: {i.message}" for i in report.failed]
    notes += [f"“{i.title}” is no longer on Wikipedia ({i.message}); your copy is kept." for i in
              report.removed_upstream]
    return FolderDiff(ARTICLES, tuple(sorted(changes, key=lambda c: c.rel)), tuple(notes))


def apply_article(library: Library, change: FileChange, progress: Progress | None = None) -> IngestResult:
    """Re-import one changed article (the old revision replaced in one step); the result says what happened."""
    from rag_core.service.library import IngestResult
    from rag_core.service.wiki_sync import refresh

    assert change.old_doc_id is not None
    report = refresh(library, library.settings, progress=progress, doc_ids=[change.old_doc_id])
    for item in report.changed:
        return IngestResult(change.rel, IngestStatus.ADDED, item.new_doc_id, title=item.title)
    for item in report.unchanged:
        return IngestResult(change.rel, IngestStatus.UNCHANGED, item.doc_id, title=item.title)
    for item in report.failed + report.removed_upstream:
        return IngestResult(change.rel, IngestStatus.FAILED, error=f"“{item.title}” was not updated: {item.message}")
    return IngestResult(change.rel, IngestStatus.FAILED, error=f"“{change.rel}” is no longer in your library.")


def apply_any(library: Library, links: FolderLinks, folder: str, change: FileChange,
              progress: Progress | None = None) -> IngestResult:
    """Apply one entry of a review: a file of a linked folder, or an article."""
    if change.bucket == Bucket.WIKIPEDIA:
        return apply_article(library, change, progress)
    return apply_change(library, links, folder, change, progress)
