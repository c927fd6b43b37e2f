"""Document -> Chunks: structure first (section, paragraph, line, sentence), packed to a token budget."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .models import Chunk, Document
from .text import paragraph_spans, sentence_spans

_SPECIAL_TOKENS = 2  # [CLS] and [SEP] added by the model


class Tokenizer(Protocol):
    """What chunking needs from the embedding model's tokenizer."""

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class _Unit:
    start: int
    end: int
    tokens: int
    para: int  # paragraph number inside the section


def _split_long(text: str, start: int, end: int, budget: int, tok: Tokenizer) -> list[tuple[int, int, int]]:
    """Cut one over-long sentence at word-piece boundaries (preferring whitespace) into <= budget pieces."""
    seg = text[start:end]
    offsets = tok.token_offsets(seg)
    pieces: list[tuple[int, int, int]] = []
    i = 0
    while i < len(offsets):
        j = min(i + budget, len(offsets))
        if j < len(offsets):
            # step back to a token that starts after whitespace, so words stay whole when possible
            k = j
            while k > i + budget // 2 and not (offsets[k][0] > 0 and seg[offsets[k][0] - 1].isspace()):
                k -= 1
            if k > i + budget // 2:
                j = k
        s = offsets[i][0]
        e = offsets[j - 1][1]
        pieces.append((start + s, start + e, j - i))
        i = j
    return pieces


def _units(doc: Document, s_start: int, s_end: int, budget: int, tok: Tokenizer) -> list[_Unit]:
    """Sentence-level units of one section, tagged with their paragraph, each within the budget."""
    text = doc.text
    raw: list[tuple[int, int, int]] = []  # (start, end, para)
    for p, (ps, pe) in enumerate(paragraph_spans(text, s_start, s_end)):
        raw.extend((a, b, p) for a, b in sentence_spans(text, ps, pe))  # every line break also ends a unit
    counts = tok.count_tokens([text[a:b] for a, b, _ in raw])
    units: list[_Unit] = []
    for (a, b, p), n in zip(raw, counts, strict=True):
        if n <= budget:
            units.append(_Unit(a, b, n, p))
        else:
            units.extend(_Unit(x, y, m, p) for x, y, m in _split_long(text, a, b, budget, tok))
    return units


def chunk_document(doc: Document, tok: Tokenizer, max_tokens: int = 200, overlap: int = 1) -> list[Chunk]:
    """Split a document into chunks of at most `max_tokens` word pieces, never crossing a section."""
    budget = max_tokens - _SPECIAL_TOKENS
    chunks: list[Chunk] = []
    for section in doc.sections:
        units = _units(doc, section.char_start, section.char_end, budget, tok)
        para_tokens: dict[int, int] = {}
        for u in units:
            para_tokens[u.para] = para_tokens.get(u.para, 0) + u.tokens
        groups: list[list[_Unit]] = []
        cur: list[_Unit] = []
        size = 0
        for u in units:
            new_para = bool(cur) and u.para != cur[-1].para
            if new_para and size >= budget // 2 and size + para_tokens[u.para] > budget:
                # Prefer a paragraph boundary once the chunk is half full and the next paragraph won't fit.
                groups.append(cur)
                cur, size = [], 0
            elif cur and size + u.tokens > budget:
                groups.append(cur)
                tail = cur[-overlap:] if overlap and u.para == cur[-1].para else []
                tail = [t for t in tail if t.tokens <= budget // 4 and t.tokens + u.tokens <= budget]
                cur, size = list(tail), sum(t.tokens for t in tail)
            cur.append(u)
            size += u.tokens
        if cur:
            groups.append(cur)
        for g in groups:
            start, end = g[0].start, g[-1].end
            chunks.append(
                Chunk(
                    doc_id=doc.doc_id,
                    index=len(chunks),
                    text=doc.text[start:end],
                    char_start=start,
                    char_end=end,
                    page_start=doc.page_at(start),
                    page_end=doc.page_at(max(start, end - 1)),
                    heading_path=section.heading_path,
                    source=doc.source,
                    anchor=section.anchor,
                )
            )
    return chunks
