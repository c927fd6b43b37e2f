"""Question -> ranked Passages. Methods: vector, lexical, rrf, dbsf (fused inside Qdrant)."""
from __future__ import annotations

from typing import Iterable

from qdrant_client import models

from .models import Passage
from .store import Store

METHODS = ("vector", "lexical", "rrf", "dbsf")
DEFAULT_METHOD = "dbsf"


def retrieve(store: Store, query: str, k: int = 5, doc_ids: Iterable[str] | None = None,
             owners: Iterable[str | None] | None = None, method: str = DEFAULT_METHOD) -> list[Passage]:
    """Top-k passages for `query` with the given method (scoped to doc_ids / owners when given)."""
    if method not in METHODS:
        raise ValueError(f"unknown retrieval method {method!r}; choose one of {', '.join(METHODS)}")
    dense = store.embedder.embed_query(query) if method != "lexical" else None
    sparse = None
    if method != "vector":
        sv = store.lexical.embed_query(query)
        sparse = models.SparseVector(indices=sv.indices, values=sv.values)
    fusion = {"rrf": models.Fusion.RRF, "dbsf": models.Fusion.DBSF}.get(method)
    return store.query(dense, sparse, k, doc_ids, owners, fusion=fusion)
