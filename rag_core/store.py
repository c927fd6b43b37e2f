"""The library store: chunk vectors (dense + lexical) and a registry of complete documents; atomic add/delete.

Chunks cross this boundary as LangChain Documents (chunk_to_document / document_to_chunk), stored in
langchain-qdrant's payload layout {page_content, metadata} (plus metadata.status, see rag_core.backends): the
collection reads as a langchain-qdrant one. The engine is a rag_core.backends.Backend: Qdrant Edge embedded under
the data dir (default) or a Qdrant server (QDRANT_URL); both store the same ids, vectors and payloads.

A document is visible only once complete: its registry entry and its chunk points are written "pending", every
chunk is stored, then its points are marked "complete" (one set-payload-by-filter) and so is its entry. Searches
filter on that flag inside the engine. A failure rolls the document back; a crash leaves a "pending" entry that
cleanup_pending removes the next time the library is opened. Writes are serialised by one lock; reads take none.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from langchain_core.documents import Document
from langchain_qdrant import SparseVector

from .backends import (
    COMPLETE,
    CONTENT_KEY,
    DELETING,
    METADATA_KEY,
    PENDING,
    STATUS_KEY,
    Backend,
    Hit,
    RawPoint,
    Scope,
    Search,
    open_backend,
)
from .backends import DENSE as DENSE  # re-exported: the vector names, as before
from .backends import LEXICAL as LEXICAL
from .config import Settings
from .embeddings import LEXICAL_VERSION, Embedder, LexicalEncoder
from .errors import DocumentNotFound, EmbeddingModelMismatch
from .models import Chunk, DocumentInfo, Passage, SourceMeta

log = logging.getLogger(__name__)

UPSERT_BATCH = 256
PENDING_GRACE_S = 3600  # server mode: a pending document older than this is a crashed ingest
OPTIMIZE_AT_OPEN = 20_000  # Edge: build the HNSW index on open when this many points are searched exhaustively

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def now_iso() -> str:
    """Current UTC time, ISO-8601, seconds precision."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def chunk_metadata(chunk: Chunk) -> dict[str, Any]:
    """Everything needed to cite a chunk: where it sits in its document, where the document came from."""
    src = chunk.source
    return {
        "doc_id": chunk.doc_id,
        "index": chunk.index,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "heading_path": list(chunk.heading_path),
        "anchor": chunk.anchor,
        "source": asdict(src),
        # Flat copies for LangChain users and prompts (document_to_chunk reads the fields above).
        "title": src.title,
        "section": chunk.section,
        "page": chunk.page_start,
        "url": src.url,
        "license": src.license,
    }


def chunk_to_document(chunk: Chunk, owner: str | None) -> Document:
    """A chunk as the LangChain Document DocChat stores (id = its Qdrant point id; owner None = no owner)."""
    return Document(page_content=chunk.text, metadata={**chunk_metadata(chunk), "owner": owner}, id=chunk.point_id)


def document_to_chunk(doc: Document) -> Chunk:
    """Rebuild a Chunk from a Document made by chunk_to_document (stored, retrieved or returned by lc)."""
    return _chunk(doc.page_content, doc.metadata)


def _chunk(text: str, meta: dict[str, Any]) -> Chunk:
    return Chunk(
        doc_id=meta["doc_id"],
        index=meta["index"],
        text=text,
        char_start=meta["char_start"],
        char_end=meta["char_end"],
        page_start=meta.get("page_start"),
        page_end=meta.get("page_end"),
        heading_path=tuple(meta.get("heading_path") or ()),
        source=SourceMeta(**meta["source"]),
        anchor=meta.get("anchor"),
    )


def document_payload(doc: Document) -> dict[str, Any]:
    """A Document as a Qdrant point payload, in langchain-qdrant's layout {page_content, metadata}."""
    return {CONTENT_KEY: doc.page_content, METADATA_KEY: doc.metadata}


def payload_document(payload: dict[str, Any], point_id: str | int | UUID | None = None) -> Document:
    """The Document stored in a Qdrant point payload (langchain-qdrant's layout)."""
    return Document(page_content=payload[CONTENT_KEY], metadata=payload[METADATA_KEY],
                    id=None if point_id is None else str(point_id))


def chunk_from_payload(payload: dict[str, Any]) -> Chunk:
    """Rebuild a Chunk from a stored point's payload."""
    return document_to_chunk(payload_document(payload))


def _passage(hit: Hit) -> Passage:
    """A search hit as a Passage (read straight from the {page_content, metadata} payload: no Document on the way)."""
    return Passage(_chunk(hit.payload[CONTENT_KEY], hit.payload[METADATA_KEY]), hit.score)


def _info_from_payload(p: dict) -> DocumentInfo:
    return DocumentInfo(
        doc_id=p["doc_id"], title=p["title"], kind=p["kind"], pages=p.get("pages"), chunks=p["chunks"],
        added_at=p["added_at"], file_name=p.get("file_name", ""), url=p.get("url"), sha256=p.get("sha256", ""),
        revision_id=p.get("revision_id"), lang=p.get("lang"), page_id=p.get("page_id"), owner=p.get("owner"),
        flags=tuple(p.get("flags") or ()),
    )


def _scope(doc_ids: Iterable[str] | None, owners: Iterable[str | None] | None) -> Scope:
    return Scope(None if doc_ids is None else tuple(doc_ids), None if owners is None else tuple(owners))


class Store:
    """One library: chunk points plus the document registry in a Backend; safe to use from many threads."""

    def __init__(self, backend: Backend, settings: Settings, embedder: Embedder) -> None:
        self.backend = backend
        self.settings = settings
        self.embedder = embedder
        self.lexical = LexicalEncoder()
        self.collection = settings.collection
        self._lock = threading.RLock()  # writes only: add/delete are multi-step sequences
        self._ensure_collections()
        self.cleanup_pending()
        if backend.unindexed_points() >= OPTIMIZE_AT_OPEN:
            log.warning("Indexing %d chunks for fast search (once; this can take a few minutes)",
                        backend.unindexed_points())
            self.optimize()

    # -- setup ---------------------------------------------------------------
    def _ensure_collections(self) -> None:
        with self._lock:
            meta = self.backend.read_meta()
            if meta is None:
                self.backend.create(self.embedder.dim, {"embedding_model": self.embedder.name, "dim": self.embedder.dim,
                                                        "created_at": now_iso(), "lexical": LEXICAL_VERSION})
                return
            built_with = meta.get("embedding_model")
            if built_with and built_with != self.embedder.name:
                raise EmbeddingModelMismatch(self.collection, built_with, self.embedder.name)
            if meta.get("dim") not in (None, self.embedder.dim):
                raise EmbeddingModelMismatch(self.collection, f"{built_with} ({meta.get('dim')} dims)", self.embedder.name)
            if meta.get("lexical") != LEXICAL_VERSION:
                self._reencode_lexical(meta)

    def _reencode_lexical(self, meta: dict) -> None:
        """Rebuild every stored lexical vector from its chunk text after the lexical encoder changed (dense kept)."""
        done = 0
        for batch in self.backend.points(with_vectors=False, batch=UPSERT_BATCH):
            sparse = self.lexical.embed_documents([p.payload.get(CONTENT_KEY, "") for p in batch])
            self.backend.set_sparse([(p.id, v) for p, v in zip(batch, sparse, strict=True)])
            done += len(batch)
        self.backend.write_meta({**meta, "lexical": LEXICAL_VERSION})
        self.backend.flush()
        log.warning("Re-encoded the lexical vectors of %d chunks for %s", done, LEXICAL_VERSION)

    def cleanup_pending(self) -> int:
        """Remove documents whose ingest (or deletion) never finished, e.g. after a crash; returns how many."""
        removed = 0
        with self._lock:
            for status in (PENDING, DELETING):
                for p in self.backend.entries(status):
                    if (status == PENDING and self.backend.kind == "server"
                            and time.time() - p.get("started", 0) < PENDING_GRACE_S):
                        continue  # another process may still be writing it
                    log.warning("Removing half-%s document %s (%s)", "indexed" if status == PENDING else "deleted",
                                p["doc_id"], p.get("title"))
                    self._delete_points(p["doc_id"])
                    removed += 1
            if removed:
                self.backend.flush()
        return removed

    # -- registry ------------------------------------------------------------
    def get(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo | None:
        """The complete document with this id (visible to `owners`), or None."""
        p = self.backend.get_entry(doc_id)
        if not p or p.get(STATUS_KEY) != COMPLETE:
            return None
        if owners is not None and p.get("owner") not in list(owners):
            return None
        return _info_from_payload(p)

    def list_documents(self, owners: Iterable[str | None] | None = None) -> list[DocumentInfo]:
        """Every complete document, newest first."""
        entries = self.backend.entries(COMPLETE, None if owners is None else list(owners))
        return sorted((_info_from_payload(p) for p in entries), key=lambda d: d.added_at, reverse=True)

    def complete_ids(self) -> set[str]:
        """Ids of documents whose chunks are all stored."""
        return {p["doc_id"] for p in self.backend.entries(COMPLETE)}

    def count_chunks(self) -> int:
        """Number of stored chunk points (complete or not)."""
        return self.backend.count()

    # -- writes --------------------------------------------------------------
    def add_chunks(self, source: SourceMeta, chunks: list[Chunk], pages: int | None, owner: str | None = None,
                   progress: Progress | None = None, vectors: tuple | None = None) -> DocumentInfo:
        """Embed and store all chunks of one document; it becomes visible only when every chunk is stored."""
        doc_id = chunks[0].doc_id
        if vectors is None:
            vectors = self.embed_chunks(chunks, progress)
        dense, sparse = vectors
        entry: dict[str, Any] = {
            "doc_id": doc_id, "title": source.title, "kind": source.kind, "pages": pages, "chunks": len(chunks),
            "added_at": source.added_at or now_iso(), "file_name": source.file_name, "url": source.url,
            "sha256": source.sha256, "revision_id": source.revision_id, "lang": source.lang,
            "page_id": source.page_id, "owner": owner, "flags": [], STATUS_KEY: PENDING, "started": time.time(),
        }
        points = []
        for i, c in enumerate(chunks):
            payload = document_payload(chunk_to_document(c, owner))
            payload[METADATA_KEY][STATUS_KEY] = PENDING
            points.append(RawPoint(c.point_id, dense[i], sparse[i], payload))
        with self._lock:
            old = self.backend.get_entry(doc_id)
            if old and old.get(STATUS_KEY) == COMPLETE:
                return _info_from_payload(old)
            self.backend.put_entry(entry)
            try:
                for i in range(0, len(points), UPSERT_BATCH):
                    self.backend.upsert(points[i:i + UPSERT_BATCH])
                    if progress:
                        progress("saving", min(i + UPSERT_BATCH, len(points)), len(points))
                self.backend.set_status(doc_id, COMPLETE)
                entry[STATUS_KEY] = COMPLETE
                self.backend.put_entry(entry)
                self.backend.flush()
            except BaseException:
                log.exception("Storing %s failed; rolling back", source.file_name)
                self._delete_points(doc_id)
                raise
        return _info_from_payload(entry)

    def embed_chunks(self, chunks: list[Chunk], progress: Progress | None = None) -> tuple:
        """Dense and lexical vectors for chunks (outside the store lock: the slow part)."""
        import numpy as np

        texts = [c.text for c in chunks]
        dense = np.zeros((len(texts), self.embedder.dim), dtype=np.float32)
        # Length-sorted groups pad as little as one big encode() call would, yet still report progress.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        step = 128
        if progress:
            progress("embedding", 0, len(texts))  # the slow stage starts now: say so before the first batch
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            dense[idx] = self.embedder.encode([texts[i] for i in idx])
            if progress:
                progress("embedding", min(start + step, len(texts)), len(texts))
        return dense, self.lexical.embed_documents(texts)

    def set_flags(self, doc_id: str, flags: list[str]) -> None:
        """Replace a document's flags (e.g. "removed upstream")."""
        with self._lock:
            p = self.backend.get_entry(doc_id)
            if not p:
                raise DocumentNotFound(doc_id)
            self.backend.put_entry({**p, "flags": flags})
            self.backend.flush()

    def _delete_points(self, doc_id: str) -> None:
        self.backend.delete_document(doc_id)
        self.backend.delete_entry(doc_id)

    def delete(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
        """Delete a document and all its chunks (a crash half-way is finished by cleanup_pending)."""
        with self._lock:
            p = self.backend.get_entry(doc_id)
            info = self.get(doc_id, owners)
            if info is None or p is None:
                raise DocumentNotFound(doc_id)
            self.backend.put_entry({**p, STATUS_KEY: DELETING})
            self._delete_points(doc_id)
            self.backend.flush()
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

    def import_entry(self, entry: dict[str, Any]) -> None:
        """Write one registry entry as given (the keys add_chunks writes: doc_id, title, ..., status), flushed."""
        with self._lock:
            self.backend.put_entry(entry)
            self.backend.flush()

    # -- reads ---------------------------------------------------------------
    def run(self, searches: Sequence[Search], doc_ids: Iterable[str] | None = None,
            owners: Iterable[str | None] | None = None) -> list[list[Passage]]:
        """Several ranked lists of complete chunks in scope (doc_ids / owners), from one engine request."""
        scope = _scope(doc_ids, owners)
        if scope.doc_ids == () or scope.owners == ():
            return [[] for _ in searches]
        return [[_passage(h) for h in hits] for hits in self.backend.search(searches, scope)]

    def query(self, dense: Sequence[float] | None, sparse: SparseVector | None, limit: int,
              doc_ids: Iterable[str] | None = None, owners: Iterable[str | None] | None = None,
              fusion: str | None = None, prefetch_limit: int | None = None) -> list[Passage]:
        """A dense, lexical or fused ("rrf" / "dbsf", default dbsf) ranking of complete chunks in scope."""
        if dense is not None and sparse is not None:
            fusion = fusion or "dbsf"
        return self.run([Search(limit, dense, sparse, fusion, prefetch_limit)], doc_ids, owners)[0]

    def candidates(self, dense: Sequence[float], sparse: SparseVector, limit: int,
                   doc_ids: Iterable[str] | None = None,
                   owners: Iterable[str | None] | None = None) -> tuple[list[Passage], list[Passage]]:
        """Dense and lexical top-`limit` lists in one request (for client-side score fusion)."""
        dense_hits, lexical_hits = self.run([Search(limit, dense=dense), Search(limit, sparse=sparse)], doc_ids, owners)
        return dense_hits, lexical_hits

    def search(self, query: str, k: int = 5, doc_ids: Iterable[str] | None = None,
               owners: Iterable[str | None] | None = None) -> list[Passage]:
        """Dense similarity search for a text query."""
        return self.query(self.embedder.embed_query(query), None, k, doc_ids, owners)

    def optimize(self) -> bool:
        """Build the engine's search indexes now (Edge: blocks the whole process for ~2 s per 1,000 new chunks)."""
        with self._lock:
            return self.backend.optimize()

    def close(self) -> None:
        """Flush and release the engine (and the data-folder lock when embedded)."""
        with self._lock:
            self.backend.close()


def open_store(settings: Settings, embedder: Embedder) -> Store:
    """Open (creating if needed) the library's store: Qdrant Edge under the data dir, or the server at QDRANT_URL."""
    return Store(open_backend(settings), settings, embedder)


def stamp(source: SourceMeta) -> SourceMeta:
    """A copy of `source` with added_at set to now."""
    return replace(source, added_at=now_iso())
