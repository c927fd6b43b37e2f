"""Folder sync's writes to the store: replace a changed file's passages in one step, soft-delete and undo.

Replacing: the new version is stored "pending" (invisible) with `replaces` naming the old one, then, with the store's
SwapGate held alone, its points become "complete" and the old version's "superseded" (hidden): two quick engine calls
no search runs between, so a question sees the old version or the new one, never both or neither. The old version is
then deleted. Every step is journalled in the registry (rag_core.store.backends.journal), so a kill -9 anywhere leaves
exactly one version.

Removing: a file gone from a linked folder has its document's entry and points marked "removed": hidden from the
listing and from every search, its passages kept, so Undo (`restore`) makes it complete again at once; `purge`
deletes it for good.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import replace

from rag_core.core.errors import DocChatError, DocumentNotFound
from rag_core.core.models import Chunk, DocumentInfo, Progress, SourceMeta
from rag_core.store.backends import (
    COMPLETE,
    DELETING,
    METADATA_KEY,
    PENDING,
    REMOVED,
    STATUS_KEY,
    SUPERSEDED,
    RawPoint,
    RegistryEntry,
    journal,
    upsert_batched,
)
from rag_core.store.backends.layout import chunk_to_document, document_payload, info_from_entry
from rag_core.store.vector_store import UPSERT_BATCH, Store, now_iso

log = logging.getLogger(__name__)


def replace_document(store: Store, old_id: str, source: SourceMeta, chunks: list[Chunk], pages: int | None,
                     vectors: tuple, progress: Progress | None = None) -> DocumentInfo:
    """Store `chunks` as the new version of document `old_id` and remove the old one, visible in one step; when the
    old one is gone already, a plain add."""
    doc_id = chunks[0].doc_id
    old = store.backend.get_entry(old_id)
    if old is None or old.status != COMPLETE or old_id == doc_id:
        return store.add_chunks(source, chunks, pages, progress=progress, vectors=vectors)
    dense, sparse = vectors
    entry = RegistryEntry.pending(doc_id, source, pages, len(chunks), old.owner, source.added_at or now_iso(),
                                  replaces=old_id)
    points = []
    for i, c in enumerate(chunks):
        payload = document_payload(chunk_to_document(c, old.owner))
        payload[METADATA_KEY][STATUS_KEY] = PENDING
        points.append(RawPoint(c.point_id, dense[i], sparse[i], payload))
    name = source.file_name or source.title
    action, outcome = f"save the new version of “{name}”", f"“{name}” was not updated and your library was not changed"
    with store._lock:  # the store's write lock: this is one of its writes, kept out of its module
        store._finish_leftovers()
        with store._engine(action, outcome):
            existing = store.backend.get_entry(doc_id)
            if existing and journal.intact(store.backend, existing):  # the new version is there already
                retire(store, old_id)
                return info_from_entry(existing)
            store.backend.check_room(points)
            store.backend.put_entry(entry)
            store.backend.flush()  # the journal entry (with `replaces`) is on disk before any point is
        try:
            with store._engine(action, outcome):
                if existing:
                    store.backend.delete_document(doc_id)
                upsert_batched(store.backend, points, UPSERT_BATCH, progress)
                with store.gate.swapping():  # no search between these two calls
                    store.backend.set_status(doc_id, COMPLETE)
                    store.backend.set_status(old_id, SUPERSEDED)
                entry = entry.with_status(COMPLETE)
                store.backend.put_entry(entry)
                store.backend.flush()
        except BaseException as e:
            log.warning("Replacing %s failed (%s); rolling back", name, e)
            store._undo(doc_id)  # journal.finish shows the old version again...
            _show_again(store, old_id)  # ...unless the new one's entry said "complete" already (a flush failed)
            raise
        _drop_old(store, old, entry)
    return info_from_entry(entry)


def _show_again(store: Store, old_id: str) -> None:
    """Make a replaced version searchable again after a failed replacement (when its entry is still complete)."""
    try:
        with store._engine("undo a failed update"):
            old = store.backend.get_entry(old_id)
            if old is not None and old.status == COMPLETE:
                with store.gate.swapping():
                    store.backend.set_status(old_id, COMPLETE)
                store.backend.flush()
    except DocChatError as e:  # a full disk: the next open finds it complete with hidden passages (`repair`)
        log.warning("Could not show the old version %s again yet (%s)", old_id, e)


def _drop_old(store: Store, old: RegistryEntry, entry: RegistryEntry | None) -> None:
    """Delete the replaced version, then forget `replaces` (`entry`: the new version's, whose `replaces` already
    journals the deletion; None: marked "deleting" first); a failure is finished at the next write."""
    try:
        with store._engine("remove the old version of a file"):
            if entry is None:
                store.backend.put_entry(old.with_status(DELETING))
                store.backend.flush()
            journal.finish(store.backend, old.doc_id)
            if entry is None:
                store.backend.flush()
            else:  # not flushed now (the next write or closing does it): until then `replaces` journals this step
                store.backend.put_entry(replace(entry, replaces=None))
    except Exception as e:  # noqa: BLE001 - the new version is in; the old one is hidden and removed later
        log.warning("Could not remove the old version %s yet (%s)", old.doc_id, e)
        store._unfinished.add(old.doc_id)


def retire(store: Store, old_id: str) -> None:
    """Remove the old version of a file whose new version is in the library already (hidden first, then deleted)."""
    with store._lock:  # the store's write lock
        old = store.backend.get_entry(old_id)
        if old is None or old.status != COMPLETE:
            return
        with store._engine("remove the old version of a file"), store.gate.swapping():
            store.backend.set_status(old_id, SUPERSEDED)
        _drop_old(store, old, None)


def remove(store: Store, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
    """Hide a document from the listing and every search, keeping its passages for `restore` (soft delete)."""
    with store._lock:
        info = store.get(doc_id, owners)
        entry = store.backend.get_entry(doc_id)
        if info is None or entry is None:
            raise DocumentNotFound(doc_id)
        with store._engine(f"remove “{info.title}”", f"“{info.title}” was not removed"):
            store.backend.set_status(doc_id, REMOVED)
            store.backend.put_entry(entry.with_status(REMOVED, removed_at=time.time()))
            store.backend.flush()
    return info


def restore(store: Store, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
    """Undo `remove`: the document is in the listing and searched again (DocumentNotFound when not removed)."""
    with store._lock:
        entry = store.backend.get_entry(doc_id)
        if entry is None or entry.status != REMOVED or (owners is not None and entry.owner not in list(owners)):
            raise DocumentNotFound(doc_id)
        with store._engine(f"restore “{entry.title}”"):
            store.backend.set_status(doc_id, COMPLETE)
            store.backend.put_entry(entry.with_status(COMPLETE, removed_at=None))
            store.backend.flush()
    return info_from_entry(entry)


def removed(store: Store, owners: Iterable[str | None] | None = None) -> list[tuple[DocumentInfo, float]]:
    """Removed documents that can still be restored, with when they were removed (epoch seconds), newest first."""
    with store._engine("be read"):
        entries = store.backend.entries(REMOVED, None if owners is None else list(owners))
    found = [(info_from_entry(e), float(e.removed_at or 0)) for e in entries]
    return sorted(found, key=lambda d: d[1], reverse=True)


def purge(store: Store, doc_id: str) -> None:
    """Delete a removed document for good (journalled like any delete)."""
    with store._lock, store._engine("empty the removed documents"):
        entry = store.backend.get_entry(doc_id)
        if entry is None or entry.status != REMOVED:
            return
        store.backend.put_entry(entry.with_status(DELETING))
        store.backend.flush()
        journal.finish(store.backend, doc_id)
        store.backend.flush()
