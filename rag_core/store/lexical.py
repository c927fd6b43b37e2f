"""The lexical (BM25) encoder, apart from the embedding model: it needs langchain-qdrant, whose import takes seconds, so
the store loads it only when it first encodes (listing or deleting documents never does; issue 28)."""
from __future__ import annotations

import logging
from typing import Any

from langchain_qdrant import SparseEmbeddings, SparseVector

from rag_core.store.backends.base import CONTENT_KEY, Backend
from rag_core.store.embeddings import LEXICAL_LANGUAGE, LEXICAL_VERSION

log = logging.getLogger(__name__)


class LexicalEncoder(SparseEmbeddings):
    """BM25 term weights from Qdrant's own Bm25 (qdrant-edge-py): lower-cased words, Snowball stems, TF saturation
    and length norm; Qdrant adds the IDF. No stop-word list: IDF already discounts common words, and dropping them
    cost XQuAD 0.8 points of Recall@1 (docs/retrieval.md).

    Documents get BM25's term-frequency part; a query gets weight 1 per distinct term. The sparse vector is stored
    with Qdrant's IDF modifier, so the score is BM25 - the same in Qdrant Edge and on a Qdrant server. Native code,
    no model files, nothing downloaded; safe to call from many threads.
    """

    def __init__(self, language: str = LEXICAL_LANGUAGE) -> None:
        from qdrant_edge import Bm25, Bm25Config, StopwordsSet

        self._bm25 = Bm25(Bm25Config(language=language, stopwords=StopwordsSet(custom=set())))

    @staticmethod
    def _convert(emb) -> SparseVector:
        pairs = sorted(zip(emb.indices, emb.values, strict=True))
        return SparseVector.model_construct(indices=[i for i, _ in pairs], values=[v for _, v in pairs])

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        """Sparse vectors for passages."""
        return [self._convert(self._bm25.embed_document(t)) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        """Sparse vector for a query (no terms when it has no searchable word)."""
        return self._convert(self._bm25.embed_query(text))


def reencode_stored(backend: Backend, encoder: LexicalEncoder, meta: dict[str, Any], batch: int) -> int:
    """Rebuild every stored lexical vector from its chunk text after the lexical encoder changed (dense vectors
    kept), `batch` points at a time, and stamp the library with LEXICAL_VERSION; returns how many were re-encoded."""
    done = 0
    for points in backend.points(with_vectors=False, batch=batch):
        sparse = encoder.embed_documents([p.payload.get(CONTENT_KEY, "") for p in points])
        backend.set_sparse([(p.id, v) for p, v in zip(points, sparse, strict=True)])
        done += len(points)
    backend.write_meta({**meta, "lexical": LEXICAL_VERSION})
    backend.flush()
    log.warning("Re-encoded the lexical vectors of %d chunks for %s", done, LEXICAL_VERSION)
    return done
