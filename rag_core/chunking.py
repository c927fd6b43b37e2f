"""Document -> Chunks: structure first (section, paragraph, line, sentence), packed to a token budget."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from .models import Chunk, Document

# Sentence ends: terminal punctuation (Latin, CJK, Arabic) optionally followed by closing quotes/brackets,
# then whitespace. Paragraph = blank-line separated; single newlines (list items, table rows) also end a unit.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？؟])[\"'”’)\]]*\s+")
_PARA_BREAK = re.compile(r"\n[ \t]*\n\s*")
_ABBREV = re.compile(r"(?:\b(?:e\.g|i\.e|etc|vs|Dr|Mr|Mrs|Ms|Prof|Fig|Nr|No|ca|bzw|z\.B|d\.h|S)\.|\b[A-Z]\.)$")
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


def _spans(text: str, base: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    """Split text[.] at pattern matches into (start, end) spans with absolute offsets, trimmed."""
    out, pos = [], 0
    for m in pattern.finditer(text):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, len(text)))
    spans = []
    for s, e in out:
        seg = text[s:e]
        stripped = seg.strip()
        if not stripped:
            continue
        lead = len(seg) - len(seg.lstrip())
        spans.append((base + s + lead, base + s + lead + len(stripped)))
    return spans


def _sentences(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Sentence spans in text[start:end], not breaking after common abbreviations."""
    seg = text[start:end]
    out: list[tuple[int, int]] = []
    pos = 0
    for m in _SENTENCE_END.finditer(seg):
        if _ABBREV.search(seg[max(pos, m.start() - 8):m.start()]):
            continue
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, len(seg)))
    return [(start + s, start + e) for s, e in out if seg[s:e].strip()]


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
    for p, (ps, pe) in enumerate(_spans(text[s_start:s_end], s_start, _PARA_BREAK)):
        for ls, le in _spans(text[ps:pe], ps, re.compile(r"\n")):
            raw.extend((a, b, p) for a, b in _sentences(text, ls, le))
    counts = tok.count_tokens([text[a:b] for a, b, _ in raw])
    units: list[_Unit] = []
    for (a, b, p), n in zip(raw, counts):
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
