"""Crash recovery over any Backend: the registry entries are the journal of adds and deletes.

An add writes its entry "pending" (flushed) before any of its points and marks it "complete" after the last; a delete
marks the entry "deleting" (flushed) before any point goes and removes the entry after the last. So whatever
moment a process dies at (kill -9, a full disk, a power cut after the flush), the entries say which documents are
half there: `unfinished` lists them and `finish` removes them. `damage` finds what no journal explains (a complete
document missing points, points of no document), for when the library's files were damaged some other way, and
`repair` removes it.

Replacing a changed file (Store.replace_document, rag_core.store.vector_store) writes the new version "pending" with `replaces` naming the old one;
its points become "complete" in the same step the old version's become "superseded". A crash before that step leaves
the new version pending: `finish` removes it and shows the old one again. A crash after it leaves the old version
complete with no visible points: `unfinished` lists it, so it is removed. A removed file's document ("removed") keeps
its points for Undo; it is neither unfinished nor damage.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Set as AbstractSet

from rag_core.store.backends.base import (
    COMPLETE,
    DELETING,
    METADATA_KEY,
    PENDING,
    REMOVED,
    Backend,
    Scope,
)
from rag_core.store.backends.entry import RegistryEntry

log = logging.getLogger(__name__)


def unfinished(backend: Backend, grace_s: float, ours: AbstractSet[str] = frozenset()) -> dict[str, RegistryEntry]:
    """Entries by doc id of adds that never finished (on a server only those older than `grace_s`, as another process
    may still be writing, or in `ours`), of every delete that never finished, and of `ours` not complete by now."""
    now = time.time()
    left = {p.doc_id: p for p in backend.entries(PENDING)
            if backend.kind != "server" or now - float(p.started or 0) >= grace_s or p.doc_id in ours}
    left.update((p.doc_id, p) for p in backend.entries(DELETING))
    for p in backend.entries(COMPLETE):  # a replaced version whose successor is complete: only its deletion is left
        old = backend.get_entry(p.replaces) if p.replaces else None
        if old and old.status == COMPLETE and not backend.count(Scope(doc_ids=(old.doc_id,))):
            left[old.doc_id] = old
    for doc_id in set(ours) - set(left):
        entry = backend.get_entry(doc_id)
        if entry is None or entry.status != COMPLETE:  # points with no entry, say
            left[doc_id] = entry or RegistryEntry(doc_id, status=PENDING)
    return left


def finish(backend: Backend, doc_id: str) -> None:
    """Remove a document's points, then its entry (the entry last: a crash half-way leaves it to try again); an
    unfinished replacement shows the version it was to replace again."""
    entry = backend.get_entry(doc_id)
    backend.delete_document(doc_id)
    backend.delete_entry(doc_id)
    replaced = entry.replaces if entry is not None and entry.status == PENDING else None
    old = backend.get_entry(replaced) if replaced else None
    if old and old.status == COMPLETE:
        backend.set_status(old.doc_id, COMPLETE)


def intact(backend: Backend, entry: RegistryEntry) -> bool:
    """True when the entry is complete and exactly its recorded number of complete points is stored."""
    if entry.status != COMPLETE:
        return False
    return backend.count(Scope(doc_ids=(entry.doc_id,))) == entry.chunks


def damage(backend: Backend) -> tuple[list[RegistryEntry], set[str]]:
    """Complete documents whose stored points are not exactly their recorded ones, and ids of documents whose points
    have no entry at all. Cheap when nothing is wrong (one count against the registry's totals)."""
    complete = backend.entries(COMPLETE)
    if backend.count() == sum(int(e.chunks or 0) for e in complete):
        return [], set()
    broken = [e for e in complete if not intact(backend, e)]
    known = {e.doc_id for e in complete}
    known.update(e.doc_id for status in (PENDING, DELETING, REMOVED) for e in backend.entries(status))
    orphans: set[str] = set()
    for batch in backend.points(with_vectors=False):
        for p in batch:
            doc_id = (p.payload.get(METADATA_KEY) or {}).get("doc_id")
            if isinstance(doc_id, str) and doc_id not in known:
                orphans.add(doc_id)
    return broken, orphans


def repair(backend: Backend) -> int:
    """Remove what `damage` finds, each complete document as a journalled delete; returns how many documents."""
    broken, orphans = damage(backend)
    for entry in broken:
        log.warning("Removing damaged document %s (%s): %d passages were recorded, others are stored",
                    entry.doc_id, entry.title, entry.chunks)
        backend.put_entry(entry.with_status(DELETING))
        backend.flush()
        finish(backend, entry.doc_id)
    for doc_id in orphans:
        log.warning("Removing passages of document %s, which is not in the library", doc_id)
        backend.delete_document(doc_id)
    if broken or orphans:
        backend.flush()
    return len(broken) + len(orphans)
