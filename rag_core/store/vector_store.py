"""The library store: chunk vectors (dense + lexical) and a registry of complete documents; atomic add/delete.

Chunks cross this boundary as LangChain Documents (chunk_to_document / document_to_chunk), stored in
langchain-qdrant's payload layout {page_content, metadata} (plus metadata.status, see rag_core.store.backends): the
collection reads as a langchain-qdrant one. The engine is a rag_core.store.backends.Backend: Qdrant Edge embedded under
the data dir (default) or a Qdrant server (QDRANT_URL); both store the same ids, vectors and payloads.

A document is visible only once complete: its registry entry is written "pending" (and flushed), its chunk points
"pending", then its points are marked "complete" (one set-payload-by-filter) and so is its entry. Searches filter
on that flag inside the engine. A delete marks the entry "deleting" (flushed) before any point goes. A failure rolls
the document back; a crash (or a full disk that stops the roll-back) leaves a "pending" or "deleting" entry that
cleanup_pending removes the next time the library is opened or written (rag_core.store.backends.journal). Re-adding a
document whose points are not all there stores it again. Engine failures leave as one sentence: DiskFull or
StorageError (a full disk still lists and searches). Writes are serialised by one lock; reads take none.

Folder sync's writes (the "folder sync" section of Store). Replacing: the new version of a changed file is stored
"pending" (invisible) with `replaces` naming the old one, then, with the store's SwapGate held alone, its points
become "complete" and the old version's "superseded" (hidden): two quick engine calls no search runs between, so a
question sees the old version or the new one, never both or neither. The old version is then deleted. Every step is
journalled in the registry (rag_core.store.backends.journal), so a kill -9 anywhere leaves exactly one version.
Removing: a file gone from a linked folder has its document's entry and points marked "removed": hidden from the
listing and from every search, its passages kept, so Undo (`restore`) makes it complete again at once; `purge`
deletes it for good.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, Settings
from rag_core.core.errors import DiskFull, DocChatError, DocumentNotFound, EmbeddingModelMismatch
from rag_core.core.models import Chunk, DocumentInfo, Passage, Progress, SourceMeta
from rag_core.store.backends import (
    COMPLETE,
    DELETING,
    METADATA_KEY,
    PENDING,
    REMOVED,
    STATUS_KEY,
    SUPERSEDED,
    Backend,
    RawPoint,
    RegistryEntry,
    Scope,
    Search,
    closed_on_error,
    journal,
    open_backend,
    translated,
    upsert_batched,
)
from rag_core.store.backends import DENSE as DENSE  # re-exported: the vector names, as before
from rag_core.store.backends import LEXICAL as LEXICAL
from rag_core.store.backends.layout import (  # noqa: F401 - chunk_from_payload, chunk_metadata, ... re-exported, as before
    chunk_from_payload,
    chunk_metadata,
    chunk_to_document,
    document_payload,
    document_to_chunk,
    info_from_entry,
    passage_from_hit,
    payload_document,
)
from rag_core.store.embeddings import LEXICAL_VERSION, Embedder
from rag_core.store.server_embeddings import ServerEmbedder
from rag_core.store.swap import SwapGate

if TYPE_CHECKING:  # pragma: no cover - loaded when first used: langchain-qdrant takes seconds to import (issue 28)
    from rag_core.store.lexical import LexicalEncoder, SparseVector

log = logging.getLogger(__name__)

UPSERT_BATCH = 256
# One model batch of an upload: the longest step between two progress reports (each checks the file's deadline and
# Stop) and the longest a question waits for the embedder during an upload. Measured on 2 cores, 64 chunks of 180
# words: batches of 8 take 4.4 s in all (32: 5.5-6.3 s) and hold the model 0.6 s at most (32: ~3 s);
# benchmarks/ask_during_upload.py times a question asked during a 117-page upload.
EMBED_BATCH = 8
# ...at most: busy, a batch of 8 took 2.2-3 s and Stop is only seen between batches, so an upload's steps are sized
# to take about this long (down to one passage; issue 24). Idle, a batch of 8 takes ~0.45 s: nothing changes then.
EMBED_STEP_S = 0.5
PENDING_GRACE_S = 3600  # server mode: a pending document older than this is a crashed ingest
OPTIMIZE_AT_OPEN = 20_000  # Edge: build the HNSW index on open when this many points are searched exhaustively

def now_iso() -> str:
    """Current UTC time, ISO-8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def _pending(source: SourceMeta, chunks: list[Chunk], pages: int | None, owner: str | None, vectors: tuple,
             replaces: str | None = None) -> tuple[RegistryEntry, list[RawPoint]]:
    """A new document's registry entry and its chunk points, both "pending" (invisible until complete)."""
    dense, sparse = vectors
    entry = RegistryEntry.pending(chunks[0].doc_id, source, pages, len(chunks), owner, source.added_at or now_iso(),
                                  replaces=replaces)
    points = []
    for i, c in enumerate(chunks):
        payload = document_payload(chunk_to_document(c, owner))
        payload[METADATA_KEY][STATUS_KEY] = PENDING
        points.append(RawPoint(c.point_id, dense[i], sparse[i], payload))
    return entry, points


def _scope(doc_ids: Iterable[str] | None, owners: Iterable[str | None] | None,
           point_ids: Iterable[str] | None = None) -> Scope:
    return Scope(None if doc_ids is None else tuple(doc_ids), None if owners is None else tuple(owners),
                 point_ids=None if point_ids is None else tuple(point_ids))


class Store:
    """One library: chunk points plus the document registry in a Backend; safe to use from many threads."""

    def __init__(self, backend: Backend, settings: Settings, embedder: Embedder) -> None:
        self.backend = backend
        self.settings = settings
        self.embedder = embedder
        self.collection = settings.library.collection
        self._lock = threading.RLock()  # writes only: add/delete are multi-step sequences
        self._unfinished: set[str] = set()  # adds / deletes not finished or undone (a full disk): retried on writes
        self.gate = SwapGate()  # searches share it; replacing a changed file's passages holds it alone
        with self._engine("be opened"), closed_on_error(backend):  # issue 46: a refused library is let go
            self._ensure_collections()
        self.cleanup_pending()
        if backend.kind == "edge" and not self._unfinished:  # one process owns it: what no journal explains is damage
            try:
                self.repair()
            except DiskFull as e:  # reading still works; the check is made at a later open
                log.warning("Not checking the library for damage now: %s", e)
        with self._engine("be opened"):
            if backend.unindexed_points() >= OPTIMIZE_AT_OPEN:
                log.warning("Indexing %d chunks for fast search (once; this can take a few minutes)",
                            backend.unindexed_points())
                self.optimize()

    @cached_property
    def lexical(self) -> LexicalEncoder:
        """The BM25 encoder, loaded when first needed (listing and deleting never need it)."""
        from rag_core.store.lexical import LexicalEncoder

        return LexicalEncoder()

    def _engine(self, action: str, outcome: str | None = None) -> AbstractContextManager[None]:
        return translated(self.backend, action, outcome)

    # -- setup ---------------------------------------------------------------
    def _ensure_collections(self) -> None:
        with self._lock:
            meta = self.backend.read_meta()
            if meta is None:
                self.backend.create(self.embedder.dim, {"embedding_model": self.embedder.name, "dim": self.embedder.dim,
                                                        "created_at": now_iso(), "lexical": LEXICAL_VERSION})
                return
            built_with = meta.get("embedding_model") or DEFAULT_EMBEDDING_MODEL  # issue 46: no record = MiniLM's
            if built_with != self.embedder.name:
                raise EmbeddingModelMismatch(self.collection, built_with, self.embedder.name)
            if isinstance(self.embedder, ServerEmbedder) and isinstance(meta.get("dim"), int):
                self.embedder.adopt_dim(meta["dim"])  # issue 46: opened without asking the (maybe absent) server
            if meta.get("dim") not in (None, self.embedder.dim):
                raise EmbeddingModelMismatch(self.collection, f"{built_with} ({meta.get('dim')} dims)", self.embedder.name)
            if meta.get("lexical") != LEXICAL_VERSION:
                from rag_core.store.lexical import reencode_stored

                reencode_stored(self.backend, self.lexical, meta, UPSERT_BATCH)

    def cleanup_pending(self) -> int:
        """Remove documents whose adding (or deleting) never finished, e.g. after a crash; returns how many. On a
        full disk what cannot be removed yet stays invisible and is retried on the next write."""
        removed = 0
        with self._lock:
            with self._engine("be read"):
                left = journal.unfinished(self.backend, PENDING_GRACE_S, self._unfinished)
            self._unfinished &= set(left)
            for doc_id, p in left.items():
                half = "indexed" if p.status == PENDING else "deleted"
                log.warning("Removing half-%s document %s (%s)", half, doc_id, p.title or None)
                try:
                    with self._engine("finish removing a document"):
                        journal.finish(self.backend, doc_id)
                except DocChatError as e:
                    log.warning("Could not remove %s yet: %s", doc_id, e)
                    self._unfinished.add(doc_id)
                else:
                    self._unfinished.discard(doc_id)
                    removed += 1
            if removed:
                self._flush()
        return removed

    def repair(self) -> int:
        """Remove what no journal explains (complete documents missing points, points of no document), e.g. after
        the library's files were damaged; returns how many documents were removed (each can be added again)."""
        with self._lock, self._engine("be checked"):
            return journal.repair(self.backend)

    def _finish_leftovers(self) -> None:
        if self._unfinished:
            self.cleanup_pending()

    def _flush(self) -> None:
        with self._engine("be saved"):
            self.backend.flush()

    # -- registry ------------------------------------------------------------
    def get(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo | None:
        """The complete document with this id (visible to `owners`), or None."""
        with self._engine("be read"):
            p = self.backend.get_entry(doc_id)
        if not p or p.status != COMPLETE:
            return None
        if owners is not None and p.owner not in list(owners):
            return None
        return info_from_entry(p)

    def intact(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo | None:
        """Like `get`, but None also when not every chunk of the document is stored (adding it again repairs it)."""
        info = self.get(doc_id, owners)
        if info is None:
            return None
        with self._engine("be read"):
            stored = self.backend.count(Scope(doc_ids=(doc_id,)))
        if stored != info.chunks:
            log.warning("Document %s (%s) has %d of its %d passages", doc_id, info.title, stored, info.chunks)
            return None
        return info

    def list_documents(self, owners: Iterable[str | None] | None = None) -> list[DocumentInfo]:
        """Every complete document, newest first."""
        with self._engine("be read"):
            entries = self.backend.entries(COMPLETE, None if owners is None else list(owners))
        return sorted((info_from_entry(p) for p in entries), key=lambda d: d.added_at, reverse=True)

    def count_chunks(self) -> int:
        """Number of stored chunk points (complete or not)."""
        with self._engine("be read"):
            return self.backend.count()

    # -- writes --------------------------------------------------------------
    def add_chunks(self, source: SourceMeta, chunks: list[Chunk], pages: int | None, owner: str | None = None,
                   progress: Progress | None = None, vectors: tuple | None = None) -> DocumentInfo:
        """Embed and store all chunks of one document; it becomes visible only when every chunk is stored."""
        doc_id = chunks[0].doc_id
        if vectors is None:
            vectors = self.embed_chunks(chunks, progress)
        entry, points = _pending(source, chunks, pages, owner, vectors)
        name = source.file_name or source.title
        action, outcome = f"save “{name}”", f"“{name}” was not added and your library was not changed"
        with self._lock:
            self._finish_leftovers()
            with self._engine(action, outcome):
                old = self.backend.get_entry(doc_id)
                if old and journal.intact(self.backend, old):
                    return info_from_entry(old)
                self.backend.check_room(points)
                self.backend.put_entry(entry)
                self.backend.flush()  # the journal entry is on disk before any point is
            try:
                with self._engine(action, outcome):
                    if old:  # what an unfinished or damaged earlier copy left
                        self.backend.delete_document(doc_id)
                    upsert_batched(self.backend, points, UPSERT_BATCH, progress)
                    self.backend.set_status(doc_id, COMPLETE)
                    entry = entry.with_status(COMPLETE)
                    self.backend.put_entry(entry)
                    self.backend.flush()
            except BaseException as e:
                log.warning("Storing %s failed (%s); rolling back", name, e)
                self._undo(doc_id)
                raise
        return info_from_entry(entry)

    def _undo(self, doc_id: str) -> None:
        """Roll back a failed add; when even that fails (a full disk), the pending entry is removed later."""
        try:
            with self._engine("undo a failed add"):
                journal.finish(self.backend, doc_id)
                self.backend.flush()
        except DocChatError as e:
            log.warning("Could not roll back %s yet (%s); it stays invisible and is removed later", doc_id, e)
            self._unfinished.add(doc_id)

    def embed_chunks(self, chunks: list[Chunk], progress: Progress | None = None) -> tuple:
        """Dense and lexical vectors for chunks (outside the store lock: the slow part)."""
        import numpy as np

        from rag_core.store.context import indexed_text  # the chunk's own text unless contextual passages are on
        texts = [indexed_text(c) for c in chunks]
        dense = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        # Length-sorted groups pad as little as one big encode() call would, yet still report progress.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        if progress:
            progress("embedding", 0, len(texts))  # the slow stage starts now: say so before the first batch
        done, step, slow = 0, 2, 0.0  # a small first step measures the machine's speed now
        while done < len(order):
            idx = order[done:done + step]
            started = time.monotonic()
            dense[idx] = self.embedder.encode([texts[i] for i in idx], background=True)  # questions go first
            done += len(idx)
            if progress:
                progress("embedding", done, len(texts))
            # seconds per passage, forgetting a slow batch only gradually: on a busy machine one batch may run 3x
            # faster than the next, and sizing the next by it alone overshot EMBED_STEP_S as much
            slow = max((time.monotonic() - started) / len(idx), 0.8 * slow)
            step = max(1, min(EMBED_BATCH, int(EMBED_STEP_S / max(slow, 1e-6))))
        return dense, self.lexical.embed_documents(texts)

    def set_flags(self, doc_id: str, flags: list[str]) -> None:
        """Replace a document's flags (e.g. "removed upstream")."""
        with self._lock, self._engine("save a document's flags"):
            p = self.backend.get_entry(doc_id)
            if not p:
                raise DocumentNotFound(doc_id)
            self.backend.put_entry(replace(p, flags=tuple(flags)))
            self.backend.flush()

    def delete(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
        """Delete a document and all its chunks: journalled ("deleting", flushed) first, so a crash or a full disk
        half-way leaves it invisible and cleanup_pending finishes it."""
        with self._lock:
            self._finish_leftovers()
            info = self.get(doc_id, owners)
            with self._engine("be read"):
                p = self.backend.get_entry(doc_id)
            if info is None or p is None:
                raise DocumentNotFound(doc_id)
            with self._engine(f"remove “{info.title}”", f"“{info.title}” was not removed"):
                self.backend.put_entry(p.with_status(DELETING))
                self.backend.flush()
            try:
                with self._engine(f"remove “{info.title}”"):
                    journal.finish(self.backend, doc_id)
                    self.backend.flush()
            except DocChatError as e:  # journalled: gone from the library now, its passages are removed later
                log.warning("Could not finish removing %s yet (%s)", doc_id, e)
                self._unfinished.add(doc_id)
        return info

    def import_points(self, points: Iterable[RawPoint], status: str | None = COMPLETE,
                      batch: int = UPSERT_BATCH) -> int:
        """Write chunk points as given (ids, vectors, payloads in the {page_content, metadata} layout), in batches,
        then flush; for migrating a library. `status` (unless None) is set as metadata.status of every point - only
        "complete" points are searchable - and each document also needs its registry entry (import_entry).
        Returns how many points were written."""
        done, pending = 0, []
        with self._lock:
            for p in points:
                if status is not None:
                    p = replace(p, payload={**p.payload, METADATA_KEY: {**p.payload[METADATA_KEY], STATUS_KEY: status}})
                pending.append(p)
                if len(pending) >= batch:
                    self.backend.upsert(pending)
                    done, pending = done + len(pending), []
            if pending:
                self.backend.upsert(pending)
                done += len(pending)
            self.backend.flush()
        return done

    @contextmanager
    def writes_paused(self) -> Iterator[None]:
        """Hold every write (add, delete, replace) for the block; reads go on (issue 46: a re-embedding's last pass
        and switch, so no upload lands between them)."""
        with self._lock:
            yield

    def import_entry(self, entry: RegistryEntry) -> None:
        """Write one registry entry as given (what add_chunks writes: doc_id, title, ..., status), flushed."""
        with self._lock:
            self.backend.put_entry(entry)
            self.backend.flush()

    # -- folder sync: replace a changed file in one step, soft delete and undo ------------------------------------
    def replace_document(self, old_id: str, source: SourceMeta, chunks: list[Chunk], pages: int | None,
                         vectors: tuple, progress: Progress | None = None) -> DocumentInfo:
        """Store `chunks` as the new version of document `old_id` and remove the old one, visible in one step; when
        the old one is gone already, a plain add."""
        doc_id = chunks[0].doc_id
        old = self.backend.get_entry(old_id)
        if old is None or old.status != COMPLETE or old_id == doc_id:
            return self.add_chunks(source, chunks, pages, progress=progress, vectors=vectors)
        entry, points = _pending(source, chunks, pages, old.owner, vectors, replaces=old_id)
        name = source.file_name or source.title
        action, outcome = f"save the new version of “{name}”", f"“{name}” was not updated and your library was not changed"
        with self._lock:
            self._finish_leftovers()
            with self._engine(action, outcome):
                existing = self.backend.get_entry(doc_id)
                if existing and journal.intact(self.backend, existing):  # the new version is there already
                    self.retire(old_id)
                    return info_from_entry(existing)
                self.backend.check_room(points)
                self.backend.put_entry(entry)
                self.backend.flush()  # the journal entry (with `replaces`) is on disk before any point is
            try:
                with self._engine(action, outcome):
                    entry = self._swap_in(doc_id, old_id, entry, points, bool(existing), progress)
            except BaseException as e:
                log.warning("Replacing %s failed (%s); rolling back", name, e)
                self._undo(doc_id)  # journal.finish shows the old version again...
                self._show_again(old_id)  # ...unless the new one's entry said "complete" already (a flush failed)
                raise
            self._drop_old(old, entry)
        return info_from_entry(entry)

    def _swap_in(self, doc_id: str, old_id: str, entry: RegistryEntry, points: list[RawPoint], existing: bool,
                 progress: Progress | None) -> RegistryEntry:
        """Write the new version's points, then make it complete and the old one superseded with no search between."""
        if existing:
            self.backend.delete_document(doc_id)
        upsert_batched(self.backend, points, UPSERT_BATCH, progress)
        with self.gate.swapping():  # no search between these two calls
            self.backend.set_status(doc_id, COMPLETE)
            self.backend.set_status(old_id, SUPERSEDED)
        entry = entry.with_status(COMPLETE)
        self.backend.put_entry(entry)
        self.backend.flush()
        return entry

    def _show_again(self, old_id: str) -> None:
        """Make a replaced version searchable again after a failed replacement (when its entry is still complete)."""
        try:
            with self._engine("undo a failed update"):
                old = self.backend.get_entry(old_id)
                if old is not None and old.status == COMPLETE:
                    with self.gate.swapping():
                        self.backend.set_status(old_id, COMPLETE)
                    self.backend.flush()
        except DocChatError as e:  # a full disk: the next open finds it complete with hidden passages (`repair`)
            log.warning("Could not show the old version %s again yet (%s)", old_id, e)

    def _drop_old(self, old: RegistryEntry, entry: RegistryEntry | None) -> None:
        """Delete the replaced version, then forget `replaces` (`entry`: the new version's, whose `replaces` already
        journals the deletion; None: marked "deleting" first); a failure is finished at the next write."""
        try:
            with self._engine("remove the old version of a file"):
                if entry is None:
                    self.backend.put_entry(old.with_status(DELETING))
                    self.backend.flush()
                journal.finish(self.backend, old.doc_id)
                if entry is None:
                    self.backend.flush()
                else:  # not flushed now (the next write or closing does it): until then `replaces` journals this step
                    self.backend.put_entry(replace(entry, replaces=None))
        except Exception as e:  # noqa: BLE001 - the new version is in; the old one is hidden and removed later
            log.warning("Could not remove the old version %s yet (%s)", old.doc_id, e)
            self._unfinished.add(old.doc_id)

    def retire(self, old_id: str) -> None:
        """Remove the old version of a file whose new version is in the library already (hidden first, then
        deleted)."""
        with self._lock:
            old = self.backend.get_entry(old_id)
            if old is None or old.status != COMPLETE:
                return
            with self._engine("remove the old version of a file"), self.gate.swapping():
                self.backend.set_status(old_id, SUPERSEDED)
            self._drop_old(old, None)

    def remove(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
        """Hide a document from the listing and every search, keeping its passages for `restore` (soft delete)."""
        with self._lock:
            info = self.get(doc_id, owners)
            entry = self.backend.get_entry(doc_id)
            if info is None or entry is None:
                raise DocumentNotFound(doc_id)
            with self._engine(f"remove “{info.title}”", f"“{info.title}” was not removed"):
                self.backend.set_status(doc_id, REMOVED)
                self.backend.put_entry(entry.with_status(REMOVED, removed_at=time.time()))
                self.backend.flush()
        return info

    def restore(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
        """Undo `remove`: the document is in the listing and searched again (DocumentNotFound when not removed)."""
        with self._lock:
            entry = self.backend.get_entry(doc_id)
            if entry is None or entry.status != REMOVED or (owners is not None and entry.owner not in list(owners)):
                raise DocumentNotFound(doc_id)
            with self._engine(f"restore “{entry.title}”"):
                self.backend.set_status(doc_id, COMPLETE)
                self.backend.put_entry(entry.with_status(COMPLETE, removed_at=None))
                self.backend.flush()
        return info_from_entry(entry)

    def removed(self, owners: Iterable[str | None] | None = None) -> list[tuple[DocumentInfo, float]]:
        """Removed documents that can still be restored, with when they were removed (epoch seconds), newest first."""
        with self._engine("be read"):
            entries = self.backend.entries(REMOVED, None if owners is None else list(owners))
        found = [(info_from_entry(e), float(e.removed_at or 0)) for e in entries]
        return sorted(found, key=lambda d: d[1], reverse=True)

    def purge(self, doc_id: str) -> None:
        """Delete a removed document for good (journalled like any delete)."""
        with self._lock, self._engine("empty the removed documents"):
            entry = self.backend.get_entry(doc_id)
            if entry is None or entry.status != REMOVED:
                return
            self.backend.put_entry(entry.with_status(DELETING))
            self.backend.flush()
            journal.finish(self.backend, doc_id)
            self.backend.flush()

    # -- reads ---------------------------------------------------------------
    def run(self, searches: Sequence[Search], doc_ids: Iterable[str] | None = None,
            owners: Iterable[str | None] | None = None, point_ids: Iterable[str] | None = None) -> list[list[Passage]]:
        """Several ranked lists of complete chunks in scope (doc_ids / owners / point ids), from one engine request."""
        scope = _scope(doc_ids, owners, point_ids)
        if scope.doc_ids == () or scope.owners == ():
            return [[] for _ in searches]
        with self.gate.reading(), self._engine("be searched"):
            found = self.backend.search(searches, scope)
        return [[passage_from_hit(h) for h in hits] for hits in found]

    def query(self, dense: Sequence[float] | None, sparse: SparseVector | None, limit: int,
              doc_ids: Iterable[str] | None = None, owners: Iterable[str | None] | None = None,
              fusion: str | None = None, prefetch_limit: int | None = None) -> list[Passage]:
        """A dense, lexical or fused ("rrf" / "dbsf", default dbsf) ranking of complete chunks in scope."""
        if dense is not None and sparse is not None:
            fusion = fusion or "dbsf"
        return self.run([Search(limit, dense, sparse, fusion, prefetch_limit)], doc_ids, owners)[0]

    def document_chunks(self, doc_id: str, owners: Iterable[str | None] | None = None, with_vectors: bool = False
                        ) -> list[tuple[Chunk, Sequence[float]]]:
        """Every chunk of one complete document (visible to `owners`) in document order, each with its dense vector
        (empty unless `with_vectors`): read by one scan filtered inside the engine."""
        with self._engine("be read"):
            found = [(chunk_from_payload(p.payload), p.dense) for batch in
                     self.backend.points(with_vectors, UPSERT_BATCH, _scope([doc_id], owners)) for p in batch]
        return sorted(found, key=lambda cv: cv[0].index)

    def optimize(self) -> bool:
        """Build the engine's search indexes now (Edge: blocks the whole process for ~2 s per 1,000 new chunks)."""
        with self._lock, self._engine("build its search index"):
            return self.backend.optimize()

    def close(self) -> None:
        """Flush and release the engine (and the data-folder lock when embedded)."""
        with self._lock, self._engine("be saved"):
            self.backend.close()


def open_store(settings: Settings, embedder: Embedder) -> Store:
    """Open (creating if needed) the library's store: Qdrant Edge under the data dir, or the server at QDRANT_URL."""
    return Store(open_backend(settings), settings, embedder)


def stamp(source: SourceMeta) -> SourceMeta:
    """A copy of `source` with added_at set to now."""
    return replace(source, added_at=now_iso())
