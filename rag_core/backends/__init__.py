"""Storage engines behind rag_core.store.Store: Qdrant Edge (embedded, the default) or a Qdrant server.

One contract, two backends (`Backend`), the same data in both:

- **Chunks**: one point per chunk, id `Chunk.point_id`, a dense vector `dense` (cosine) and a sparse vector
  `lexical` (BM25 term weights, IDF applied by Qdrant), payload in langchain-qdrant's layout
  `{page_content, metadata}` (rag_core.store.chunk_metadata) plus `metadata.status`: "pending" while a document is
  being stored, "complete" once its last chunk is (set on all its points with one set-payload-by-filter). Searches
  filter `metadata.status == "complete"` (and doc ids / owners) inside the engine, on keyword payload indexes of
  `metadata.doc_id`, `metadata.owner` and `metadata.status`. The flag is a keyword, not a bool: qdrant-edge-py 0.9.0
  turns `MatchValue(True)` into the integer 1, which matches no boolean payload.
- **Registry**: one payload-only point per document (id `registry_point_id(doc_id)`), the library listing, with
  `status` "pending" / "complete" / "deleting" for crash recovery (rag_core.store.Store.cleanup_pending).
- **Library metadata** (embedding model, dimensions, lexical encoder version): the server backend keeps it in the
  chunk collection's metadata, as before; Edge has no collection metadata, so it keeps it in one registry point.

Backends: rag_core.backends.edge.EdgeBackend (`<data_dir>/edge/<collection>/`, two shards: `chunks` and `registry`)
and rag_core.backends.client.ClientBackend (qdrant-client: collections `<collection>` and `<collection>__library`;
qdrant-client's local mode stands in for a server in tests). The old local-mode library under `<data_dir>/qdrant/`
is never opened or changed here; `has_local_mode_library` tells whether one exists (for its migration).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from langchain_qdrant import SparseVector

if TYPE_CHECKING:
    from ..config import Settings

DENSE = "dense"
LEXICAL = "lexical"
CONTENT_KEY = "page_content"  # langchain-qdrant's payload layout: {page_content, metadata}
METADATA_KEY = "metadata"
STATUS_KEY = "status"  # metadata.status of chunk points, status of registry entries
PENDING, COMPLETE, DELETING = "pending", "complete", "deleting"
INDEXED_FIELDS = ("doc_id", "owner", STATUS_KEY)  # keyword payload indexes under metadata.
RRF_K = 2  # Qdrant's default ranking constant, given explicitly so both backends fuse alike

_REGISTRY_NS = uuid.UUID("6b1f3c1e-6a39-4c5e-9d55-8f0f1b5a2c11")  # = rag_core.models' point namespace
META_POINT_ID = str(uuid.uuid5(_REGISTRY_NS, "docchat:library-meta"))


def registry_point_id(doc_id: str) -> str:
    """Point id of a document's registry entry (the id a chunk with index -1 would have)."""
    return str(uuid.uuid5(_REGISTRY_NS, f"{doc_id}:-1"))


@dataclass(frozen=True)
class Scope:
    """Which chunk points a search or count sees: complete ones only (default), of these documents and owners."""

    doc_ids: tuple[str, ...] | None = None
    owners: tuple[str | None, ...] | None = None
    complete_only: bool = True


@dataclass(frozen=True)
class Search:
    """One ranked list: nearest to `dense`, to `sparse`, or both fused inside Qdrant (`fusion` "rrf" / "dbsf")."""

    limit: int
    dense: Sequence[float] | None = None
    sparse: SparseVector | None = None
    fusion: str | None = None
    prefetch_limit: int | None = None  # candidates per side for a fusion (default: limit)

    def kind(self) -> str:
        """"dense", "sparse" or the fusion name; ValueError when the search has nothing to search with."""
        if self.dense is not None and self.sparse is not None:
            if self.fusion not in ("rrf", "dbsf"):
                raise ValueError("a dense + sparse search needs fusion 'rrf' or 'dbsf'")
            return self.fusion
        if self.dense is not None:
            return DENSE
        if self.sparse is not None:
            return "sparse"
        raise ValueError("a search needs a dense or a sparse vector")


@dataclass(frozen=True)
class RawPoint:
    """A chunk point exactly as stored: id, dense vector, lexical sparse vector, payload {page_content, metadata}."""

    id: str
    dense: Sequence[float]
    sparse: SparseVector
    payload: dict[str, Any]


class Hit(NamedTuple):
    """One search result: point id, score and payload."""

    id: str
    score: float
    payload: dict[str, Any]


class Backend(Protocol):
    """What Store needs from a storage engine; implementations are safe to call from many threads."""

    kind: str  # "edge" | "server"

    def read_meta(self) -> dict[str, Any] | None:
        """The library metadata, or None when the chunk collection does not exist yet."""

    def create(self, dim: int, meta: dict[str, Any]) -> None:
        """Create the chunk collection (dense of `dim`, lexical with IDF, payload indexes) and record `meta`."""

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace the library metadata."""

    def upsert(self, points: Sequence[RawPoint]) -> None:
        """Insert or replace chunk points (one call, written before it returns)."""

    def set_status(self, doc_id: str, status: str) -> None:
        """Set metadata.status on every chunk point of a document."""

    def delete_document(self, doc_id: str) -> None:
        """Delete every chunk point of a document."""

    def count(self, scope: Scope | None = None) -> int:
        """Exact number of chunk points in `scope` (None: all, complete or not)."""

    def search(self, searches: Sequence[Search], scope: Scope) -> list[list[Hit]]:
        """Run several searches in `scope` as one engine request; one ranked list per search, with payloads."""

    def points(self, with_vectors: bool = True, batch: int = 256) -> Iterator[list[RawPoint]]:
        """Every chunk point in batches (vectors empty when not asked for)."""

    def set_sparse(self, vectors: Sequence[tuple[str, SparseVector]]) -> None:
        """Replace the lexical vectors of these points (dense vectors and payloads kept)."""

    def get_entry(self, doc_id: str) -> dict[str, Any] | None:
        """A document's registry entry, or None."""

    def put_entry(self, entry: dict[str, Any]) -> None:
        """Write a registry entry (keyed by entry["doc_id"])."""

    def delete_entry(self, doc_id: str) -> None:
        """Remove a document's registry entry."""

    def entries(self, status: str, owners: Sequence[str | None] | None = None) -> list[dict[str, Any]]:
        """Registry entries with this status (and one of these owners)."""

    def flush(self) -> None:
        """Make every write so far durable on disk."""

    def unindexed_points(self) -> int:
        """Roughly how many chunk points are searched exhaustively (no HNSW index yet)."""

    def optimize(self) -> bool:
        """Build the search indexes of everything written so far (blocking); True when anything changed."""

    def close(self) -> None:
        """Release the engine (and, embedded, the library folder)."""


def sparse_vector(indices: Sequence[int], values: Sequence[float]) -> SparseVector:
    """A SparseVector from trusted (indices, values), without pydantic validation."""
    return SparseVector.model_construct(indices=list(indices), values=list(values))


def edge_path(settings: Settings) -> Path:
    """Folder of the embedded Qdrant Edge library of these settings."""
    return settings.data_dir / "edge" / settings.collection


def has_local_mode_library(data_dir: Path) -> bool:
    """True when `data_dir` holds a library of the old embedded engine (qdrant-client local mode) to migrate."""
    folder = Path(data_dir) / "qdrant" / "collection"
    return folder.is_dir() and any(p.is_dir() for p in folder.iterdir())


def open_backend(settings: Settings) -> Backend:
    """The Qdrant server at QDRANT_URL, else the embedded Qdrant Edge library under the data dir."""
    if settings.qdrant_url:
        from .client import connect

        return connect(settings)
    from .edge import EdgeBackend

    return EdgeBackend(edge_path(settings))
