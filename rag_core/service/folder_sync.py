"""Folder sync: compare a linked folder with the library (a reviewed diff), then apply what the person chose.

`diff_folder` looks through the folder (rag_core.ingest.folder_scan) and sorts every file into one bucket: new (its
content is not in the library), changed (its content differs from the version in the library), removed (it was in
the folder, its document still is in the library), unchanged. A file whose size and modification time match its
record is unchanged without being read; only the others are hashed. Nothing in the library changes here.

`apply_change` applies one entry: a new file is added like an upload, a changed one replaces its old version in one
step (Store.replace_document: a question sees the old version or the new one), a removed one is soft-deleted (Undo:
`Library.restore`). The folder's records are written after each file, so a kill -9 part-way loses nothing: what was
applied is in the library, the rest shows up again at the next check.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_core.core.errors import DocChatError, DocumentNotFound, FolderSyncError, NotARegularFile
from rag_core.core.models import DocumentInfo, IngestStatus, Progress
from rag_core.core.names import display_name, printable_text
from rag_core.core.safe_files import read_up_to
from rag_core.ingest.folder_confine import FolderPin, LinkLeadsOut, open_inside, verify
from rag_core.ingest.folder_scan import FoundFile, hash_file, scan_folder
from rag_core.service.linked_folders import FileRecord, FolderLinks, LinkedFolder, folder_key, now_iso

if TYPE_CHECKING:
    from rag_core.service.library import IngestResult, Library

log = logging.getLogger(__name__)


class Bucket(StrEnum):
    """Where a file of a linked folder stands against the library."""

    NEW = "new"
    CHANGED = "changed"
    REMOVED = "removed"
    UNCHANGED = "unchanged"
    WIKIPEDIA = "wikipedia"  # an imported article with a newer revision (rag_core.service.wiki_changes)


@dataclass(frozen=True)
class FileChange:
    """One file of the diff: its bucket, its path inside the folder, and the documents involved."""

    bucket: Bucket
    rel: str
    doc_id: str | None = None  # the document of its content now (None: removed)
    old_doc_id: str | None = None  # the document of its earlier version (changed, removed)
    size: int = 0
    mtime_ns: int = 0
    title: str = ""  # the old document's title (removed)

    @property
    def shown(self) -> str:
        """Its path inside the folder as it is shown (`display_name`); `rel` stays the exact one that opens it."""
        return display_name(self.rel)

    def as_json(self) -> dict[str, Any]:
        """The CLI's and MCP's shape."""
        return {"path": self.shown, "bucket": str(self.bucket), "doc_id": self.doc_id, "old_doc_id": self.old_doc_id}


@dataclass(frozen=True)
class FolderDiff:
    """A linked folder compared with the library: every file in its bucket, and sentences about what was skipped."""

    folder: str
    changes: tuple[FileChange, ...]
    notes: tuple[str, ...] = ()
    checked_at: str = field(default_factory=now_iso)

    @property
    def name(self) -> str:
        """The folder's own name as it is shown ("Reports")."""
        return display_name(Path(self.folder).name or self.folder)

    def bucket(self, kind: Bucket) -> tuple[FileChange, ...]:
        """The files of one bucket, by path."""
        return tuple(c for c in self.changes if c.bucket == kind)

    def counts(self) -> dict[Bucket, int]:
        """How many files each bucket holds."""
        return {b: len(self.bucket(b)) for b in Bucket}

    @property
    def pending(self) -> tuple[FileChange, ...]:
        """Every file that applying would change (all but the unchanged ones)."""
        return tuple(c for c in self.changes if c.bucket != Bucket.UNCHANGED)

    def summary(self) -> str:
        """One sentence: "3 files changed in Reports" or "Reports is up to date"."""
        n = len(self.pending)
        if not n:
            return f"{self.name} is up to date"
        if self.bucket(Bucket.WIKIPEDIA) == self.pending:
            return f"{n} article{'s' if n != 1 else ''} changed on Wikipedia"
        return f"{n} file{'s' if n != 1 else ''} changed in {self.name}"

    def as_json(self) -> dict[str, Any]:
        """The CLI's and MCP's shape: counts, the files of each bucket (unchanged ones counted only), the notes."""
        return {"folder": display_name(self.folder), "checked_at": self.checked_at,
                "counts": {str(b): n for b, n in self.counts().items()},
                **{str(b): [c.shown for c in self.bucket(b)] for b in Bucket if b != Bucket.UNCHANGED},
                "notes": list(self.notes)}


def _classify(link: LinkedFolder, root: FolderPin | None, found: FoundFile, docs: set[str], max_bytes: int,
              notes: list[str]) -> str | None:
    """The id of the file's content (its record's when size and time match it), or None when it cannot be told now
    (a sentence in `notes` says why)."""
    rec = link.files.get(found.rel)
    if rec is not None and (rec.size, rec.mtime_ns) == (found.size, found.mtime_ns) and rec.doc_id in docs:
        return rec.doc_id
    if found.size > max_bytes:
        notes.append(f"“{display_name(found.rel)}” is larger than the upload limit ({max_bytes >> 20} MB); it is left out.")
        return None
    try:
        digest = hash_file(Path(found.rel), found.size, found.mtime_ns, root)
    except LinkLeadsOut:
        notes.append(f"“{display_name(found.rel)}” became a link that leads outside the folder while DocChat read it; it is left "
                     "out.")
        return None
    except OSError as e:
        notes.append(f"“{display_name(found.rel)}” could not be read ({e.strerror or e}); it is left out for now.")
        return None
    except NotARegularFile:
        notes.append(f"“{display_name(found.rel)}” is no longer a regular file; it is left out.")
        return None
    if digest is None:
        notes.append(f"“{display_name(found.rel)}” changed while DocChat read it; it will be compared at the next check.")
        return None
    return digest[:16]


def diff_folder(library: Library, links: FolderLinks, path: str | Path, remember: bool = True) -> FolderDiff:
    """Compare a folder with the library (FolderSyncError when the folder cannot be looked through); a folder not
    linked yet is compared as if just linked. `remember`: save the records of unchanged files of a linked folder
    whose time changed, not to read them again next time."""
    link = links.find(path) or LinkedFolder(folder_key(path), "", {})
    scan = scan_folder(Path(link.path), confirmed=link.pin)  # FolderReplaced: no longer the folder confirmed
    if remember and scan.pin is not None and scan.pin != link.pin:
        _pin(links, link.path, scan.pin)  # linked before pins were kept, or re-created at the same place
    docs = {d.doc_id: d for d in library.documents()}
    known = set(docs)
    notes = [printable_text(n) for n in scan.notes]  # sentences quoting names: shown, so UTF-8
    max_bytes = library.settings.ingest.max_upload_mb << 20
    ids = {f.rel: _classify(link, scan.pin, f, known, max_bytes, notes) for f in scan.files}
    in_use = {d for d in ids.values() if d}
    changes: list[FileChange] = []
    refreshed: dict[str, FileRecord | None] = {}
    for f in scan.files:
        doc_id, rec = ids[f.rel], link.files.get(f.rel)
        if doc_id is None:
            continue
        # its earlier version, when that is still in the library and no file of the folder has that content now
        old = rec.doc_id if rec is not None and rec.doc_id in known and rec.doc_id not in in_use else None
        bucket = Bucket.CHANGED if old else Bucket.UNCHANGED if doc_id in known else Bucket.NEW
        changes.append(FileChange(bucket, f.rel, doc_id, old, f.size, f.mtime_ns))
        if bucket == Bucket.UNCHANGED and rec != FileRecord(f.size, f.mtime_ns, doc_id):
            refreshed[f.rel] = FileRecord(f.size, f.mtime_ns, doc_id)  # touched, or in the library already
    present = {f.rel for f in scan.files}
    for rel, rec in link.files.items():
        if rel in present:
            continue
        if rec.doc_id in known and rec.doc_id not in in_use:
            changes.append(FileChange(Bucket.REMOVED, rel, None, rec.doc_id, title=docs[rec.doc_id].title))
        else:
            refreshed[rel] = None  # gone from the folder, and its content is not in the library (or is another's)
    if remember:
        _remember(links, link.path, refreshed)
    return FolderDiff(link.path, tuple(sorted(changes, key=lambda c: c.rel)), tuple(notes))


def _remember(links: FolderLinks, path: str, records: dict[str, FileRecord | None], later: bool = False) -> None:
    """Save files' records (`later`: with the next write); a failure only means they are read again next time."""
    try:
        links.record(path, records, later)
    except OSError as e:
        log.warning("Could not update the records of %s: %s", path, e)


def _pin(links: FolderLinks, path: str, pinned: FolderPin) -> None:
    try:
        links.pin(path, pinned)
    except OSError as e:  # kept at the next check
        log.warning("Could not keep the real path of %s: %s", path, e)


def chosen(diff: FolderDiff, paths: set[str] | None = None) -> list[FileChange]:
    """The entries to apply: every pending one, or (`paths`) the ticked ones (by path, or by path as shown)."""
    return [c for c in diff.pending if paths is None or c.rel in paths or c.shown in paths]


def remove_change(library: Library, links: FolderLinks, folder: str, change: FileChange) -> DocumentInfo | None:
    """Soft-delete the document of a removed file (None when it is gone already) and forget the file's record."""
    assert change.old_doc_id is not None
    try:
        info: DocumentInfo | None = library.remove(change.old_doc_id)
    except DocumentNotFound:
        info = None
    _remember(links, folder, {change.rel: None}, later=True)
    return info


def apply_change(library: Library, links: FolderLinks, folder: str, change: FileChange,
                 progress: Progress | None = None) -> IngestResult:
    """Apply one entry of a diff (never raises for a bad file: the result says what happened)."""
    from rag_core.service.library import IngestResult

    path = Path(folder) / change.rel
    if change.bucket == Bucket.REMOVED:
        try:
            info = remove_change(library, links, folder, change)
        except DocChatError as e:
            return IngestResult(change.rel, IngestStatus.FAILED, error=str(e), details=e.details)
        return IngestResult(change.rel, IngestStatus.ADDED, change.old_doc_id, title=info.title if info else None)
    try:
        data, st = _read_inside(links, folder, change.rel, library.settings.max_upload_bytes + 1)
    except (FolderSyncError, NotARegularFile) as e:
        return IngestResult(change.rel, IngestStatus.FAILED, error=str(e), details=e.details)
    except LinkLeadsOut:
        return IngestResult(change.rel, IngestStatus.FAILED, error=(
            f"“{change.shown}” is now a link that leads outside the folder (or was swapped while DocChat opened it), so "
            "it was not read; nothing was changed."))
    except OSError as e:
        return IngestResult(change.rel, IngestStatus.FAILED,
                            error=f"“{change.shown}” could not be opened ({e.strerror or e}); nothing was changed.")
    result = library.ingest_bytes(data, path.name, progress=progress, label=str(path), replaces=change.old_doc_id)
    if result.doc_id and result.status in (IngestStatus.ADDED, IngestStatus.UNCHANGED):
        _remember(links, folder, {change.rel: FileRecord(st.st_size, st.st_mtime_ns, result.doc_id)}, later=True)
    return IngestResult(change.rel, result.status, result.doc_id, result.chunks, result.pages, result.title,
                        result.error, result.details)


def _read_inside(links: FolderLinks, folder: str, rel: str, limit: int) -> tuple[bytes, os.stat_result]:
    """The bytes (up to `limit`) and stat of a file of a linked folder, read only when the folder is still the one
    checked (FolderReplaced, SystemFolderRefused) and the file really is in it (LinkLeadsOut)."""
    link = links.find(folder)
    root = verify(folder, link.pin if link else None, same_identity=True)
    fd, st = open_inside(root, rel)
    try:
        return read_up_to(fd, limit), st
    finally:
        os.close(fd)
