"""Qdrant storage: chunk vectors (dense + lexical) and a registry of complete documents; atomic add/delete."""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, replace
from datetime import datetime, timezone
from typing import Callable, Iterable

from langchain_qdrant import QdrantVectorStore, RetrievalMode
from qdrant_client import QdrantClient, models

from .config import Settings
from .embeddings import LEXICAL_VERSION, Embedder, LexicalEncoder
from .errors import DocumentNotFound, EmbeddingModelMismatch, LibraryBusy, StoreUnavailable
from .models import Chunk, DocumentInfo, Passage, SourceMeta

log = logging.getLogger(__name__)

DENSE = "dense"
LEXICAL = "lexical"
CONTENT_KEY = "page_content"  # langchain-qdrant's payload layout: {page_content, metadata}
METADATA_KEY = "metadata"
UPSERT_BATCH = 256
PENDING_GRACE_S = 3600  # server mode: a pending document older than this is a crashed ingest

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def now_iso() -> str:
    """Current UTC time, ISO-8601, seconds precision."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def open_client(settings: Settings) -> QdrantClient:
    """A Qdrant client: the server at QDRANT_URL, else embedded local mode under the data dir."""
    if settings.qdrant_url:
        try:
            client = QdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key, timeout=30)
            client.get_collections()
            return client
        except Exception as e:  # noqa: BLE001 - any transport error means "unreachable"
            raise StoreUnavailable(type(e).__name__) from e
    settings.qdrant_path.mkdir(parents=True, exist_ok=True)
    try:
        return QdrantClient(path=str(settings.qdrant_path))
    except RuntimeError as e:
        if "already accessed" in str(e):
            raise LibraryBusy(str(settings.qdrant_path)) from e
        raise


def _chunk_payload(chunk: Chunk, owner: str | None) -> dict:
    src = chunk.source
    meta = {
        "doc_id": chunk.doc_id,
        "index": chunk.index,
        "char_start": chunk.char_start,
        "char_end": chunk.char_end,
        "page_start": chunk.page_start,
        "page_end": chunk.page_end,
        "heading_path": list(chunk.heading_path),
        "anchor": chunk.anchor,
        "owner": owner,
        "source": asdict(src),
    }
    return {CONTENT_KEY: chunk.text, METADATA_KEY: meta}


def chunk_from_payload(payload: dict) -> Chunk:
    """Rebuild a Chunk from a stored point's payload."""
    meta = payload[METADATA_KEY]
    return Chunk(
        doc_id=meta["doc_id"],
        index=meta["index"],
        text=payload[CONTENT_KEY],
        char_start=meta["char_start"],
        char_end=meta["char_end"],
        page_start=meta.get("page_start"),
        page_end=meta.get("page_end"),
        heading_path=tuple(meta.get("heading_path") or ()),
        source=SourceMeta(**meta["source"]),
        anchor=meta.get("anchor"),
    )


def _info_from_payload(p: dict) -> DocumentInfo:
    return DocumentInfo(
        doc_id=p["doc_id"], title=p["title"], kind=p["kind"], pages=p.get("pages"), chunks=p["chunks"],
        added_at=p["added_at"], file_name=p.get("file_name", ""), url=p.get("url"), sha256=p.get("sha256", ""),
        revision_id=p.get("revision_id"), lang=p.get("lang"), page_id=p.get("page_id"), owner=p.get("owner"),
        flags=tuple(p.get("flags") or ()),
    )


def _doc_filter(doc_ids: Iterable[str] | None = None, owners: Iterable[str | None] | None = None) -> models.Filter | None:
    must: list[models.Condition] = []
    if doc_ids is not None:
        must.append(models.FieldCondition(key=f"{METADATA_KEY}.doc_id", match=models.MatchAny(any=list(doc_ids))))
    if owners is not None:
        must.append(_owner_condition(f"{METADATA_KEY}.owner", owners))
    return models.Filter(must=must) if must else None


def _owner_condition(key: str, owners: Iterable[str | None]) -> models.Condition:
    owners = list(owners)
    named = [o for o in owners if o is not None]
    conds: list[models.Condition] = []
    if named:
        conds.append(models.FieldCondition(key=key, match=models.MatchAny(any=named)))
    if None in owners:
        conds.append(models.IsNullCondition(is_null=models.PayloadField(key=key)))
    return models.Filter(should=conds)


class Store:
    """One Qdrant collection of chunks plus its document registry; thread-safe within a process."""

    def __init__(self, client: QdrantClient, settings: Settings, embedder: Embedder) -> None:
        self.client = client
        self.settings = settings
        self.embedder = embedder
        self.lexical = LexicalEncoder(embedder)
        self.collection = settings.collection
        self.registry = f"{settings.collection}__library"
        self._lock = threading.RLock()
        self._ensure_collections()
        self.vectorstore = QdrantVectorStore(
            client=client, collection_name=self.collection, embedding=embedder,
            retrieval_mode=RetrievalMode.HYBRID, vector_name=DENSE, sparse_embedding=self.lexical,
            sparse_vector_name=LEXICAL, content_payload_key=CONTENT_KEY, metadata_payload_key=METADATA_KEY,
            validate_collection_config=False,
        )
        self.cleanup_pending()

    # -- setup ---------------------------------------------------------------
    def _ensure_collections(self) -> None:
        with self._lock:
            if self.client.collection_exists(self.collection):
                meta = self.client.get_collection(self.collection).config.metadata or {}
                built_with = meta.get("embedding_model")
                if built_with and built_with != self.embedder.name:
                    raise EmbeddingModelMismatch(self.collection, built_with, self.embedder.name)
                if meta.get("dim") not in (None, self.embedder.dim):
                    raise EmbeddingModelMismatch(self.collection, f"{built_with} ({meta.get('dim')} dims)", self.embedder.name)
                if meta.get("lexical") != LEXICAL_VERSION:
                    self._reencode_lexical(meta)
            else:
                self.client.create_collection(
                    self.collection,
                    vectors_config={DENSE: models.VectorParams(size=self.embedder.dim, distance=models.Distance.COSINE)},
                    sparse_vectors_config={LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                    metadata={"embedding_model": self.embedder.name, "dim": self.embedder.dim, "created_at": now_iso(),
                              "lexical": LEXICAL_VERSION},
                )
                if self.settings.qdrant_url:
                    for key in ("doc_id", "owner"):
                        self.client.create_payload_index(self.collection, f"{METADATA_KEY}.{key}",
                                                         models.PayloadSchemaType.KEYWORD)
            if not self.client.collection_exists(self.registry):
                self.client.create_collection(self.registry, vectors_config={})

    def _reencode_lexical(self, meta: dict) -> None:
        """Rebuild every stored lexical vector from its chunk text after the lexical encoder changed (dense kept)."""
        done, offset = 0, None
        while True:
            points, offset = self.client.scroll(self.collection, limit=UPSERT_BATCH, offset=offset,
                                                with_payload=[CONTENT_KEY], with_vectors=False)
            sparse = self.lexical.embed_documents([(p.payload or {}).get(CONTENT_KEY, "") for p in points])
            if points:
                self.client.update_vectors(self.collection, wait=True, points=[models.PointVectors(
                    id=p.id, vector={LEXICAL: models.SparseVector(indices=v.indices, values=v.values)})
                    for p, v in zip(points, sparse)])
            done += len(points)
            if offset is None:
                break
        self.client.update_collection(self.collection, metadata={**meta, "lexical": LEXICAL_VERSION})
        log.warning("Re-encoded the lexical vectors of %d chunks for %s", done, LEXICAL_VERSION)

    def cleanup_pending(self) -> int:
        """Remove documents whose ingest never finished (crash mid-way); returns how many."""
        removed = 0
        with self._lock:
            for p in self._registry_entries(status="pending"):
                if self.settings.qdrant_url and time.time() - p.get("started", 0) < PENDING_GRACE_S:
                    continue
                log.warning("Removing half-indexed document %s (%s)", p["doc_id"], p.get("title"))
                self._delete_points(p["doc_id"])
                removed += 1
        return removed

    # -- registry ------------------------------------------------------------
    def _registry_id(self, doc_id: str) -> str:
        return Chunk(doc_id=doc_id, index=-1, text="", char_start=0, char_end=0, page_start=None, page_end=None,
                     heading_path=(), source=SourceMeta("", "", "", "")).point_id

    def _registry_entries(self, status: str | None = "complete", owners: Iterable[str | None] | None = None) -> list[dict]:
        must: list[models.Condition] = []
        if status:
            must.append(models.FieldCondition(key="status", match=models.MatchValue(value=status)))
        if owners is not None:
            must.append(_owner_condition("owner", owners))
        out, offset = [], None
        while True:
            points, offset = self.client.scroll(self.registry, scroll_filter=models.Filter(must=must) if must else None,
                                                limit=1000, offset=offset, with_payload=True, with_vectors=False)
            out.extend(p.payload for p in points)
            if offset is None:
                return out

    def _entry(self, doc_id: str) -> dict | None:
        got = self.client.retrieve(self.registry, ids=[self._registry_id(doc_id)], with_payload=True)
        return got[0].payload if got else None

    def _put_entry(self, payload: dict) -> None:
        self.client.upsert(self.registry, points=[models.PointStruct(id=self._registry_id(payload["doc_id"]), vector={}, payload=payload)])

    def get(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo | None:
        """The complete document with this id (visible to `owners`), or None."""
        with self._lock:
            p = self._entry(doc_id)
        if not p or p.get("status") != "complete":
            return None
        if owners is not None and p.get("owner") not in list(owners):
            return None
        return _info_from_payload(p)

    def list_documents(self, owners: Iterable[str | None] | None = None) -> list[DocumentInfo]:
        """Every complete document, newest first."""
        with self._lock:
            entries = self._registry_entries("complete", owners)
        return sorted((_info_from_payload(p) for p in entries), key=lambda d: d.added_at, reverse=True)

    def complete_ids(self) -> set[str]:
        """Ids of documents whose chunks are all stored."""
        with self._lock:
            return {p["doc_id"] for p in self._registry_entries("complete")}

    def count_chunks(self) -> int:
        """Number of stored chunk points."""
        with self._lock:
            return self.client.count(self.collection, exact=True).count

    # -- writes --------------------------------------------------------------
    def add_chunks(self, source: SourceMeta, chunks: list[Chunk], pages: int | None, owner: str | None = None,
                   progress: Progress | None = None, vectors: tuple | None = None) -> DocumentInfo:
        """Embed and store all chunks of one document; it becomes visible only when every chunk is stored."""
        doc_id = chunks[0].doc_id
        if vectors is None:
            vectors = self.embed_chunks(chunks, progress)
        dense, sparse = vectors
        entry = {
            "doc_id": doc_id, "title": source.title, "kind": source.kind, "pages": pages, "chunks": len(chunks),
            "added_at": source.added_at or now_iso(), "file_name": source.file_name, "url": source.url,
            "sha256": source.sha256, "revision_id": source.revision_id, "lang": source.lang,
            "page_id": source.page_id, "owner": owner, "flags": [], "status": "pending", "started": time.time(),
        }
        points = [
            models.PointStruct(id=c.point_id, vector={DENSE: dense[i].tolist(), LEXICAL: models.SparseVector(
                indices=sparse[i].indices, values=sparse[i].values)}, payload=_chunk_payload(c, owner))
            for i, c in enumerate(chunks)
        ]
        with self._lock:
            old = self._entry(doc_id)
            if old and old.get("status") == "complete":
                return _info_from_payload(old)
            self._put_entry(entry)
            try:
                for i in range(0, len(points), UPSERT_BATCH):
                    self.client.upsert(self.collection, points=points[i:i + UPSERT_BATCH], wait=True)
                    if progress:
                        progress("saving", min(i + UPSERT_BATCH, len(points)), len(points))
                entry["status"] = "complete"
                self._put_entry(entry)
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
        for start in range(0, len(order), step):
            idx = order[start:start + step]
            dense[idx] = self.embedder.encode([texts[i] for i in idx])
            if progress:
                progress("embedding", min(start + step, len(texts)), len(texts))
        return dense, self.lexical.embed_documents(texts)

    def set_flags(self, doc_id: str, flags: list[str]) -> None:
        """Replace a document's flags (e.g. "removed upstream")."""
        with self._lock:
            p = self._entry(doc_id)
            if not p:
                raise DocumentNotFound(doc_id)
            self._put_entry({**p, "flags": flags})

    def _delete_points(self, doc_id: str) -> None:
        self.client.delete(self.collection, points_selector=models.FilterSelector(filter=_doc_filter([doc_id])), wait=True)
        self.client.delete(self.registry, points_selector=models.PointIdsList(points=[self._registry_id(doc_id)]), wait=True)

    def delete(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
        """Delete a document and all its chunks."""
        with self._lock:
            info = self.get(doc_id, owners)
            if info is None:
                raise DocumentNotFound(doc_id)
            self._delete_points(doc_id)
        return info

    # -- reads ---------------------------------------------------------------
    def query(self, dense: list[float] | None, sparse: models.SparseVector | None, limit: int,
              doc_ids: Iterable[str] | None = None, owners: Iterable[str | None] | None = None,
              fusion: models.Fusion | None = None, prefetch_limit: int | None = None) -> list[Passage]:
        """Run a dense, lexical or fused (RRF/DBSF) query; only complete documents are returned."""
        flt = _doc_filter(doc_ids, owners)
        complete = self.complete_ids()
        want = limit + 4  # head-room for chunks of documents still being indexed
        with self._lock:
            if dense is not None and sparse is not None:
                pre = prefetch_limit or max(want * 4, 40)
                res = self.client.query_points(
                    self.collection,
                    prefetch=[models.Prefetch(query=dense, using=DENSE, limit=pre, filter=flt),
                              models.Prefetch(query=sparse, using=LEXICAL, limit=pre, filter=flt)],
                    query=models.FusionQuery(fusion=fusion or models.Fusion.DBSF), limit=want, with_payload=True)
            elif dense is not None:
                res = self.client.query_points(self.collection, query=dense, using=DENSE, limit=want,
                                               query_filter=flt, with_payload=True)
            elif sparse is not None:
                res = self.client.query_points(self.collection, query=sparse, using=LEXICAL, limit=want,
                                               query_filter=flt, with_payload=True)
            else:
                raise ValueError("query needs a dense or a sparse vector")
        out = [Passage(chunk_from_payload(p.payload), float(p.score)) for p in res.points
               if p.payload[METADATA_KEY]["doc_id"] in complete]
        return out[:limit]

    def candidates(self, dense: list[float], sparse: models.SparseVector, limit: int,
                   doc_ids: Iterable[str] | None = None,
                   owners: Iterable[str | None] | None = None) -> tuple[list[Passage], list[Passage]]:
        """Dense and lexical top-`limit` lists in one batched request (for client-side score fusion)."""
        flt = _doc_filter(doc_ids, owners)
        complete = self.complete_ids()
        want = limit + 4
        with self._lock:
            res = self.client.query_batch_points(self.collection, requests=[
                models.QueryRequest(query=dense, using=DENSE, limit=want, filter=flt, with_payload=True),
                models.QueryRequest(query=sparse, using=LEXICAL, limit=want, filter=flt, with_payload=True)])
        return tuple([Passage(chunk_from_payload(p.payload), float(p.score)) for p in r.points
                      if p.payload[METADATA_KEY]["doc_id"] in complete][:limit] for r in res)

    def search(self, query: str, k: int = 5, doc_ids: Iterable[str] | None = None,
               owners: Iterable[str | None] | None = None) -> list[Passage]:
        """Dense similarity search for a text query."""
        return self.query(self.embedder.embed_query(query), None, k, doc_ids, owners)

    def close(self) -> None:
        """Release the client (and the data-folder lock in local mode)."""
        with self._lock:
            self.client.close()


def open_store(settings: Settings, embedder: Embedder) -> Store:
    """Open (creating if needed) the library's store."""
    return Store(open_client(settings), settings, embedder)


def stamp(source: SourceMeta) -> SourceMeta:
    """A copy of `source` with added_at set to now."""
    return replace(source, added_at=now_iso())
