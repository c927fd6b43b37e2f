"""How DocChat's values are laid out in the engine: Chunk <-> LangChain Document <-> point payload (langchain-qdrant's
{page_content, metadata}), search hit -> Passage, registry entry -> DocumentInfo. rag_core.store.vector_store re-exports them."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any
from uuid import UUID

from langchain_core.documents import Document

from rag_core.core.models import Chunk, DocumentInfo, Passage, SourceMeta
from rag_core.store.backends.base import CONTENT_KEY, METADATA_KEY, Hit
from rag_core.store.backends.entry import RegistryEntry


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
        "instructions": chunk.instructions,  # holds instructions addressed to an AI (rag_core.injection.detect)
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
        instructions=bool(meta.get("instructions", False)),  # absent in libraries added before the check
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


def passage_from_hit(hit: Hit) -> Passage:
    """A search hit as a Passage (read straight from the {page_content, metadata} payload: no Document on the way)."""
    return Passage(_chunk(hit.payload[CONTENT_KEY], hit.payload[METADATA_KEY]), hit.score)


def info_from_entry(entry: RegistryEntry) -> DocumentInfo:
    """A registry entry as the DocumentInfo the library lists."""
    return entry.info()
