"""LangChain adapters: DocChat's library as a LangChain retriever and vector store.

`DocChatRetriever` runs DocChat's default hybrid retrieval (rag_core.retrieve.search.retrieve) and `DocChatVectorStore`
adds texts through DocChat's own loading, chunking and embedding path, so what a LangChain chain reads and writes
is what the app reads and writes. Every returned Document carries what is needed to cite it (see
rag_core.store.vector_store.chunk_metadata) plus its retrieval score. Usage: docs/langchain.md.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import PurePath
from typing import Any, Self

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, field_validator

from rag_core.core.config import Settings, load_settings
from rag_core.core.errors import DocumentNotFound, EmbeddingModelMismatch
from rag_core.core.models import Document as DocChatDocument
from rag_core.core.models import Passage
from rag_core.ingest.loaders import load_bytes
from rag_core.retrieve.search import DEFAULT_METHOD, METHODS, retrieve
from rag_core.store.embeddings import Embedder
from rag_core.store.vector_store import Store, chunk_metadata, open_store

log = logging.getLogger(__name__)

DEFAULT_FILE_NAME = "text.txt"  # for added texts whose metadata names no file (plain text, titled by first line)
TITLE_CHARS = 80
# Metadata keys add_texts understands; DocChat's chunk metadata has a fixed shape, so others are not stored.
KNOWN_METADATA = frozenset({"title", "file_name", "source", "url", "license"})


def passage_to_document(passage: Passage) -> Document:
    """A retrieved passage as a LangChain Document: citation metadata plus `score` (id = the chunk's point id)."""
    chunk = passage.chunk
    return Document(page_content=chunk.text, metadata={**chunk_metadata(chunk), "score": passage.score},
                    id=chunk.point_id)


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"unknown retrieval method {method!r}; choose one of {', '.join(METHODS)}")
    return method


class DocChatRetriever(BaseRetriever):
    """DocChat's default hybrid retrieval as a LangChain retriever, scoped by `doc_ids` and `owners`.

    `doc_ids` None searches every document, `owners` None every owner (None in the list = documents without one).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    store: Store
    k: int = 5
    doc_ids: list[str] | None = None
    owners: list[str | None] | None = None
    method: str = DEFAULT_METHOD

    @field_validator("method")
    @classmethod
    def _known_method(cls, method: str) -> str:
        return _check_method(method)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        passages = retrieve(self.store, query, self.k, self.doc_ids, self.owners, self.method)
        return [passage_to_document(p) for p in passages]


class DocChatVectorStore(VectorStore):
    """DocChat's store as a LangChain VectorStore; its ids are DocChat document ids (one per added text).

    Texts are added like uploaded files (loaded, chunked, embedded, visible once every chunk is stored) under
    `owner`; searches use `method` (the default hybrid retrieval unless "vector") scoped to `owners`.
    """

    def __init__(self, store: Store, *, owner: str | None = None, owners: Iterable[str | None] | None = None,
                 method: str = DEFAULT_METHOD) -> None:
        self.store = store
        self.owner = owner
        self.owners = None if owners is None else list(owners)
        self.method = _check_method(method)

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (a LangChain Embeddings) of the store."""
        return self.store.embedder

    # -- writes --------------------------------------------------------------
    def add_texts(self, texts: Iterable[str], metadatas: list[dict[str, Any]] | None = None, *,
                  ids: list[str] | None = None, **kwargs: Any) -> list[str]:
        """Add each text as one DocChat document; returns their document ids (deterministic: hash of the text).

        Metadata keys used: title, file_name (".md" reads Markdown headings), source (a path or URL), url, license.
        `ids` replace the hash-based ids; with an owner, ids are scoped to it as for uploads.
        """
        from rag_core.service.library import Library  # here: library.py may import this module for its one-liners

        _no_kwargs("add_texts", kwargs)
        texts = list(texts)
        metadatas = metadatas or [{} for _ in texts]
        if len(metadatas) != len(texts) or (ids is not None and len(ids) != len(texts)):
            raise ValueError("texts, metadatas and ids must have the same length")
        library = Library(self.store.settings, embedder=self.store.embedder, store=self.store)
        out = []
        for i, (text, meta) in enumerate(zip(texts, metadatas, strict=True)):
            doc = _load_text(text, meta, self.store.settings)
            if ids is not None:
                doc = replace(doc, doc_id=ids[i])
            out.append(str(library.ingest_document(doc, owner=self.owner).doc_id))
        return out

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool:
        """Delete these documents (within `owners`); True when every one existed. `ids` is required."""
        _no_kwargs("delete", kwargs)
        if ids is None:
            raise ValueError("DocChatVectorStore.delete needs the document ids to delete (it never deletes all)")
        found = True
        for doc_id in ids:
            try:
                self.store.delete(doc_id, self.owners)
            except DocumentNotFound:
                log.info("Nothing to delete for document %s", doc_id)
                found = False
        return found

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: list[dict[str, Any]] | None = None, *,
                   ids: list[str] | None = None, store: Store | None = None, settings: Settings | None = None,
                   owner: str | None = None, owners: Iterable[str | None] | None = None,
                   method: str = DEFAULT_METHOD, **kwargs: Any) -> Self:
        """A vector store over `store` (else the library of `settings`, else of the environment) with `texts` added.

        `embedding` must be DocChat's Embedder (chunking counts its word pieces) for the store's model.
        """
        _no_kwargs("from_texts", kwargs)
        if not isinstance(embedding, Embedder):
            raise TypeError("DocChatVectorStore needs rag_core.store.embeddings.Embedder as its embedding")
        if store is None:
            store = open_store(settings or load_settings(), embedding)
        elif embedding.name != store.embedder.name:
            raise EmbeddingModelMismatch(store.collection, store.embedder.name, embedding.name)
        vs = cls(store, owner=owner, owners=owners, method=method)
        vs.add_texts(texts, metadatas, ids=ids)
        return vs

    # -- reads ---------------------------------------------------------------
    def similarity_search_with_score(self, query: str, k: int = 4, *, doc_ids: Iterable[str] | None = None,
                                     **kwargs: Any) -> list[tuple[Document, float]]:
        """Top-k (Document, score) for `query` by `method`; `doc_ids` limits the search to those documents."""
        _no_kwargs("similarity_search_with_score", kwargs)
        passages = retrieve(self.store, query, k, doc_ids, self.owners, self.method)
        return [(passage_to_document(p), p.score) for p in passages]

    def similarity_search(self, query: str, k: int = 4, *, doc_ids: Iterable[str] | None = None,
                          **kwargs: Any) -> list[Document]:
        """Top-k Documents for `query` (see similarity_search_with_score)."""
        return [d for d, _ in self.similarity_search_with_score(query, k, doc_ids=doc_ids, **kwargs)]

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, *,
                                    doc_ids: Iterable[str] | None = None, **kwargs: Any) -> list[Document]:
        """Top-k Documents by cosine similarity to a dense query vector."""
        _no_kwargs("similarity_search_by_vector", kwargs)
        return [passage_to_document(p) for p in self.store.query(embedding, None, k, doc_ids, self.owners)]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance in [0, 1] from cosine similarity; only the "vector" method scores by cosine."""
        if self.method != "vector":
            raise NotImplementedError(f"relevance scores need method='vector' (the {self.method!r} scores are "
                                      "not on a 0-1 scale)")
        return _cosine_relevance


def _cosine_relevance(similarity: float) -> float:
    return (1.0 + similarity) / 2.0


def _no_kwargs(method: str, kwargs: dict[str, Any]) -> None:
    if kwargs:
        raise TypeError(f"DocChatVectorStore.{method} got unexpected arguments: {', '.join(sorted(kwargs))}")


def _load_text(text: str, meta: dict[str, Any], settings: Settings) -> DocChatDocument:
    """A DocChat Document for one added text, loaded like an uploaded file of that name."""
    ignored = sorted(set(meta) - KNOWN_METADATA)
    if ignored:
        log.info("DocChat stores its own chunk metadata; not kept: %s", ", ".join(ignored))
    source = meta.get("source") if isinstance(meta.get("source"), str) else None
    url = meta.get("url") or (source if source and source.startswith(("http://", "https://")) else None)
    file_name = meta.get("file_name") or (PurePath(source).name if source and not url else None) or DEFAULT_FILE_NAME
    doc = load_bytes(text.encode("utf-8"), file_name, settings)
    title = meta.get("title")
    if not title and file_name == DEFAULT_FILE_NAME:
        first = next((line for line in doc.text.splitlines() if line.strip()), "")
        title = " ".join(first.split())[:TITLE_CHARS]
    source_meta = replace(doc.source, title=title or doc.source.title, url=url, license=meta.get("license"))
    return replace(doc, source=source_meta)
