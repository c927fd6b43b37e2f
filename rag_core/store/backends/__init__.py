"""Storage engines behind rag_core.store.vector_store.Store: Qdrant Edge (embedded, the default) or a Qdrant server.

One contract, two backends (`Backend`), the same data in both:

- **Chunks**: one point per chunk, id `Chunk.point_id`, a dense vector `dense` (cosine) and a sparse vector
  `lexical` (BM25 term weights, IDF applied by Qdrant), payload in langchain-qdrant's layout
  `{page_content, metadata}` (rag_core.store.vector_store.chunk_metadata) plus `metadata.status`: "pending" while a document is
  being stored, "complete" once its last chunk is (set on all its points with one set-payload-by-filter). Searches
  filter `metadata.status == "complete"` (and doc ids / owners) inside the engine, on keyword payload indexes of
  `metadata.doc_id`, `metadata.owner` and `metadata.status`. The flag is a keyword, not a bool: qdrant-edge-py 0.9.0
  turns `MatchValue(True)` into the integer 1, which matches no boolean payload.
- **Registry**: one payload-only point per document (id `registry_point_id(doc_id)`), the library listing, with
  `status` "pending" / "complete" / "deleting" for crash recovery (rag_core.store.vector_store.Store.cleanup_pending).
- **Library metadata** (embedding model, dimensions, lexical encoder version): the server backend keeps it in the
  chunk collection's metadata, as before; Edge has no collection metadata, so it keeps it in one registry point.

Backends: rag_core.store.backends.edge.EdgeBackend (`<data_dir>/edge/<collection>/`, two shards: `chunks` and `registry`)
and rag_core.store.backends.client.ClientBackend (qdrant-client: collections `<collection>` and `<collection>__library`;
qdrant-client's local mode stands in for a server in tests). The old local-mode library under `<data_dir>/qdrant/`
is never opened or changed here; `has_local_mode_library` tells whether one exists (for its migration).
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from rag_core.store.backends.base import *  # noqa: F403 - the package re-exports the storage contract
from rag_core.store.backends.base import Backend
from rag_core.store.backends.base import __all__ as _base_all

if TYPE_CHECKING:
    from rag_core.core.config import Settings

__all__ = [*_base_all, "closed_on_error", "edge_path", "has_local_mode_library", "open_backend"]


def edge_path(settings: Settings) -> Path:
    """Folder of the embedded Qdrant Edge library of these settings (issue 46: the pointer file's, after a switch of
    embedding model; else `<data_dir>/edge/<collection>/`)."""
    from rag_core.store.model_record import active_folder  # issue 46

    return active_folder(settings)


def has_local_mode_library(data_dir: Path) -> bool:
    """True when `data_dir` holds a library of the old embedded engine (qdrant-client local mode) to migrate."""
    folder = Path(data_dir) / "qdrant" / "collection"
    return folder.is_dir() and any(p.is_dir() for p in folder.iterdir())


def open_backend(settings: Settings) -> Backend:
    """The Qdrant server at QDRANT_URL, else the embedded Qdrant Edge library under the data dir."""
    if settings.library.qdrant_url:
        from rag_core.store.backends.client import connect

        return connect(settings)
    from rag_core.store.backends.edge import EdgeBackend

    return EdgeBackend(edge_path(settings))


@contextmanager
def closed_on_error(backend: Backend) -> Iterator[None]:
    """Close `backend` when the block fails (issue 46: a library refused for another embedding model is let go at
    once, so it can be opened again with its own model in the same process), then re-raise."""
    try:
        yield
    except BaseException:
        backend.close()
        raise
