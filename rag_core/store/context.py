"""Contextual passages (issue 38, item 3): the text a chunk is embedded and indexed by, optionally prefixed with its
document title and section path. Measured on and off by benchmarks/contextual.py; off, because it lost on the test
splits there (docs/retrieval.md). The stored, shown and quoted text is always the chunk's own."""
from __future__ import annotations

from rag_core.core.models import Chunk

PREFIX_CONTEXT = False  # True: "title\nsection path\n\ntext" is embedded and indexed (the benchmark's "on")


def indexed_text(chunk: Chunk) -> str:
    """What the chunk is embedded and indexed by."""
    if not PREFIX_CONTEXT:
        return chunk.text
    head = "\n".join(x for x in (chunk.source.title, chunk.section) if x)
    return f"{head}\n\n{chunk.text}" if head else chunk.text
