"""The storage contract shared by the backends: names, the Backend protocol and the value types it speaks."""
from __future__ import annotations

import errno
import logging
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from rag_core.core.errors import DiskFull, DocChatError
from rag_core.store.backends.entry import RegistryEntry

if TYPE_CHECKING:  # pragma: no cover - at run time only `sparse_vector` needs the class (its import takes seconds)
    from langchain_qdrant import SparseVector

log = logging.getLogger(__name__)

DENSE = "dense"
LEXICAL = "lexical"
CONTENT_KEY = "page_content"  # langchain-qdrant's payload layout: {page_content, metadata}
METADATA_KEY = "metadata"
STATUS_KEY = "status"  # metadata.status of chunk points, status of registry entries
PENDING, COMPLETE, DELETING = "pending", "complete", "deleting"
# Folder sync (Store.replace_document, rag_core.store.vector_store): a removed file's document is kept hidden until undone or purged, and the old
# version of a changed file is hidden in the same step its new version appears, then deleted.
REMOVED, SUPERSEDED = "removed", "superseded"
INDEXED_FIELDS = ("doc_id", "owner", STATUS_KEY)  # keyword payload indexes under metadata.
RRF_K = 2  # Qdrant's default ranking constant, given explicitly so both backends fuse alike

_REGISTRY_NS = uuid.UUID("6b1f3c1e-6a39-4c5e-9d55-8f0f1b5a2c11")  # = rag_core.core.models' point namespace
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
    point_ids: tuple[str, ...] | None = None  # only these chunk points (the cosines of chosen passages)


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

    def check_room(self, points: Sequence[RawPoint]) -> None:
        """DiskFull unless storing (and completing) these points fits on the library's disk; writes nothing."""

    def explain(self, error: BaseException, action: str, outcome: str = "") -> DocChatError | None:
        """The user's sentence for a failure of the engine while trying to `action`, saying `outcome` (None: `error`
        is not the engine's, e.g. a bug to let through)."""

    def count(self, scope: Scope | None = None) -> int:
        """Exact number of chunk points in `scope` (None: all, complete or not)."""

    def search(self, searches: Sequence[Search], scope: Scope) -> list[list[Hit]]:
        """Run several searches in `scope` as one engine request; one ranked list per search, with payloads."""

    def points(self, with_vectors: bool = True, batch: int = 256, scope: Scope | None = None
               ) -> Iterator[list[RawPoint]]:
        """Every chunk point (in `scope`: None, all of them) in batches (vectors empty when not asked for)."""

    def set_sparse(self, vectors: Sequence[tuple[str, SparseVector]]) -> None:
        """Replace the lexical vectors of these points (dense vectors and payloads kept)."""

    def get_entry(self, doc_id: str) -> RegistryEntry | None:
        """A document's registry entry, or None."""

    def put_entry(self, entry: RegistryEntry) -> None:
        """Write a registry entry (keyed by entry.doc_id; stored as entry.to_payload())."""

    def delete_entry(self, doc_id: str) -> None:
        """Remove a document's registry entry."""

    def entries(self, status: str, owners: Sequence[str | None] | None = None) -> list[RegistryEntry]:
        """Registry entries with this status (and one of these owners)."""

    def flush(self) -> None:
        """Make every write so far durable on disk."""

    def unindexed_points(self) -> int:
        """Roughly how many chunk points are searched exhaustively (no HNSW index yet)."""

    def optimize(self) -> bool:
        """Build the search indexes of everything written so far (blocking); True when anything changed."""

    def close(self) -> None:
        """Release the engine (and, embedded, the library folder)."""


_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_FULL_WORDS = ("no space left on device", "disk quota exceeded", "file too large", "database or disk is full",
               "os error 28", "os error 122", "os error 27")


def disk_full(error: BaseException) -> bool:
    """True when `error` (or an error it was raised from) says the disk is full, whatever the engine's wording."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            return True
        if any(word in str(e).lower() for word in _FULL_WORDS):
            return True
        e = e.__cause__ or e.__context__
    return False


@contextmanager
def translated(backend: Backend, action: str, outcome: str | None = None) -> Iterator[None]:
    """Engine failures inside the block as one sentence: DiskFull saying `outcome` (also replacing the outcome of a
    DiskFull raised inside), else the backend's explanation (a StorageError); anything else passes unchanged."""
    try:
        yield
    except DiskFull as e:
        if outcome is None or getattr(e, "outcome", None) == outcome:
            raise
        raise DiskFull(outcome) from e
    except DocChatError:
        raise
    except Exception as e:
        error = DiskFull(outcome or "nothing was changed") if disk_full(e) else backend.explain(e, action, outcome or "")
        if error is None:
            raise
        log.warning("The library could not %s", action, exc_info=e)
        raise error from e


def sparse_vector(indices: Sequence[int], values: Sequence[float]) -> SparseVector:
    """A SparseVector from trusted (indices, values), without pydantic validation."""
    from langchain_qdrant import SparseVector

    return SparseVector.model_construct(indices=list(indices), values=list(values))


def raw_points(records: Sequence[Any]) -> list[RawPoint]:
    """RawPoints from records read back from either engine (`id`, `vector` as a dict by name, `payload`)."""
    out = []
    for r in records:
        vec: Any = r.vector if isinstance(r.vector, dict) else {}
        sv = vec.get(LEXICAL)
        out.append(RawPoint(str(r.id), list(vec.get(DENSE) or []),
                            sparse_vector(sv.indices, sv.values) if sv is not None else sparse_vector([], []),
                            r.payload or {}))
    return out


def upsert_batched(backend: Backend, points: Sequence[RawPoint], batch: int,
                   progress: Callable[[str, int, int], None] | None = None) -> None:
    """Write points `batch` at a time, reporting ("saving", written, total) after each batch."""
    for i in range(0, len(points), batch):
        backend.upsert(points[i:i + batch])
        if progress:
            progress("saving", min(i + batch, len(points)), len(points))


__all__ = [
    "Backend",
    "COMPLETE",
    "CONTENT_KEY",
    "DELETING",
    "DENSE",
    "Hit",
    "INDEXED_FIELDS",
    "LEXICAL",
    "METADATA_KEY",
    "META_POINT_ID",
    "PENDING",
    "REMOVED",
    "RRF_K",
    "RawPoint",
    "RegistryEntry",
    "STATUS_KEY",
    "SUPERSEDED",
    "Scope",
    "Search",
    "disk_full",
    "raw_points",
    "registry_point_id",
    "sparse_vector",
    "translated",
    "upsert_batched",
]
