"""Small-to-large read (issue 38, item 3): search the small passages, then read each one with its neighbours in the
same section, within a token budget, so the quotes and the model see the text around the hit and cite that.

Off by default (`WIDEN_READ`): benchmarks/answers.py `--widen` measures it on and off (docs/retrieval.md). A widened
passage keeps the hit's rank and score; it grows one neighbour at a time (the one before, then the one after) while
the neighbour has the same heading path, is not part of another passage, and the whole stays within WIDEN_TOKENS.
"""
from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from rag_core.core.models import Chunk, Passage

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.vector_store import Store

log = logging.getLogger(__name__)

WIDEN_READ = False  # True: read each passage with its section's neighbours (the benchmark's "on")
WIDEN_TOKENS = 800  # at most this many tokens (4 characters each) per widened passage: about four chunks' worth
WIDEN_PASSAGES = 5  # the top passages widened (the ones quoted from and given to the model first)
CHARS_PER_TOKEN = 4


def join(first: Chunk, second: Chunk, like: Chunk) -> Chunk:
    """One chunk covering two chunks of a document in order (`second` starts after `first` does), with the identity
    (index, so point id and citations) of `like`."""
    if second.char_start <= first.char_end:  # neighbours overlap by a sentence (or touch)
        text = first.text + second.text[first.char_end - second.char_start:]
    else:
        text = first.text + "\n\n" + second.text
    pages = [x for x in (first.page_start, second.page_start, first.page_end, second.page_end) if x is not None]
    return replace(like, text=text, char_start=first.char_start, char_end=max(first.char_end, second.char_end),
                   page_start=min(pages) if pages else None, page_end=max(pages) if pages else None)


def _widened(whole: Chunk, span: tuple[int, int], chunks: Sequence[Chunk], taken: set[int], budget_chars: int
             ) -> Chunk:
    """The passage's chunk grown with its section's free neighbours, before and after in turn, within the budget;
    the neighbours it takes are added to `taken`."""
    by_index = {c.index: c for c in chunks}
    lo, hi = span
    grew = True
    while grew:
        grew = False
        for nxt in (lo - 1, hi + 1):
            c = by_index.get(nxt)
            if c is None or nxt in taken or c.heading_path != whole.heading_path:
                continue
            candidate = join(c, whole, whole) if nxt < lo else join(whole, c, whole)
            if len(candidate.text) > budget_chars:
                continue
            whole, grew = candidate, True
            lo, hi = min(lo, nxt), max(hi, nxt)
            taken.add(nxt)
    return whole


def widen(store: Store, passages: list[Passage], owners: Iterable[str | None] | None = None,
          tokens: int = WIDEN_TOKENS, top: int = WIDEN_PASSAGES) -> list[Passage]:
    """The passages with the first `top` read with their neighbours (one document read per document)."""
    docs: dict[str, list[Chunk]] = {}
    taken: dict[str, set[int]] = {}
    spans: list[tuple[int, int] | None] = []
    for i, p in enumerate(passages):  # every passage's own chunks are taken: no widened passage may overlap another
        doc = p.chunk.doc_id
        if i < top and doc not in docs:
            docs[doc] = [c for c, _ in store.document_chunks(doc, owners)]
        # the chunks the passage is made of (it may be two merged ones); neighbours only overlap it by a sentence
        own = {c.index for c in docs.get(doc, ()) if p.chunk.char_start <= c.char_start and c.char_end <= p.chunk.char_end}
        own.add(p.chunk.index)
        taken.setdefault(doc, set()).update(own)
        spans.append((min(own), max(own)) if i < top else None)
    out = []
    for p, span in zip(passages, spans, strict=True):
        if span is None:
            out.append(p)
            continue
        grown = _widened(p.chunk, span, docs[p.chunk.doc_id], taken[p.chunk.doc_id], tokens * CHARS_PER_TOKEN)
        out.append(p if grown is p.chunk else replace(p, chunk=grown))
    return out
