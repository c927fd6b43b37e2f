"""Document -> Chunks: structure first (section, paragraph, line, sentence), packed to a token budget.

Bounded whatever the input: work is linear in the text (the tokenizer only ever sees short pieces, counted in
batches), no chunk exceeds the token budget or `_MAX_CHARS_PER_TOKEN` characters per token of it (runs without
spaces are cut hard), sections that are only a heading line are merged into what follows, and a document may
make at most `MAX_PASSAGES` chunks.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from .errors import TooManyPassages
from .models import Chunk, Document
from .text import paragraph_spans, sentence_spans, trim_span

_SPECIAL_TOKENS = 2  # [CLS] and [SEP] added by the model

MAX_PASSAGES = 20_000
"""The most chunks one document may make; past it the file is refused (TooManyPassages: too large to index, split
it). 20,000 chunks of 200 tokens is about 4 million tokens, some 16 MB of English prose: far more than a chat needs,
and it keeps embedding time, memory and the saved library bounded for any one file."""

_MAX_CHARS_PER_TOKEN = 10  # a chunk spans at most budget * 10 characters (prose needs ~4-6 per token)
_COUNT_BATCH = 2048  # pieces of text handed to the tokenizer per call


class Tokenizer(Protocol):
    """What chunking needs from the embedding model's tokenizer."""

    def count_tokens(self, texts: list[str]) -> list[int]: ...

    def token_offsets(self, text: str) -> list[tuple[int, int]]: ...


@dataclass
class _Unit:
    start: int
    end: int
    tokens: int
    para: int  # paragraph number inside the section (negative: a merged heading-only section)
    section: int
    cut: bool = False  # made by cutting a sentence mid-way: its token count is not additive with its neighbours


def _cut_chars(text: str, start: int, end: int, max_chars: int) -> Iterator[tuple[int, int, bool]]:
    """text[start:end] in pieces of at most `max_chars` characters, cut at the last space of each window when there
    is one in its second half, else hard (a run without spaces); (start, end, was_cut)."""
    if end - start <= max_chars:
        yield start, end, False
        return
    while start < end:
        cut = min(start + max_chars, end)
        if cut < end:
            space = text.rfind(" ", start + max_chars // 2, cut)
            cut = space if space > start else cut
        s, e = trim_span(text, start, cut)
        if e > s:
            yield s, e, True
        start = cut


def _token_pieces(seg: str, offsets: list[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
    """Cut at word-piece boundaries (preferring whitespace) into pieces of <= budget word pieces."""
    pieces: list[tuple[int, int]] = []
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
        pieces.append((offsets[i][0], offsets[j - 1][1]))
        i = j
    return pieces


def _split_long(text: str, start: int, end: int, budget: int, tok: Tokenizer) -> list[tuple[int, int, int]]:
    """Cut one over-long (but at most max_chars long) sentence into pieces whose own token count is <= budget.

    A piece cut inside a word may tokenize differently on its own, so every piece is counted again and cut with a
    smaller budget when it is still over."""
    out: list[tuple[int, int, int]] = []
    todo = [(start, end, budget)]
    while todo:
        a, b, target = todo.pop()
        seg = text[a:b]
        spans = _token_pieces(seg, tok.token_offsets(seg), target)
        counts = tok.count_tokens([seg[s:e] for s, e in spans])
        for (s, e), n in reversed(list(zip(spans, counts, strict=True))):
            if n <= budget or e - s <= 1 or target <= 1:
                out.append((a + s, a + e, n))
            else:
                todo.append((a + s, a + e, max(1, target - (n - budget) - 1)))
    out.sort()
    return out


def _raw_spans(doc: Document, max_chars: int) -> Iterator[tuple[int, int, int, int, bool]]:
    """(start, end, paragraph, section, cut) of every sentence-level piece of the document, in order."""
    text = doc.text
    for sec, section in enumerate(doc.sections):
        for p, (ps, pe) in enumerate(paragraph_spans(text, section.char_start, section.char_end)):
            for a, b in sentence_spans(text, ps, pe):  # every line break also ends a unit
                for s, e, cut in _cut_chars(text, a, b, max_chars):
                    yield s, e, p, sec, cut


def _units(doc: Document, budget: int, max_chars: int, tok: Tokenizer) -> Iterator[_Unit]:
    """Sentence-level units of the whole document, in order, each within the budget, counted in batches."""
    raw = _raw_spans(doc, max_chars)
    while batch := list(itertools.islice(raw, _COUNT_BATCH)):
        counts = tok.count_tokens([doc.text[a:b] for a, b, _, _, _ in batch])
        for (a, b, p, sec, cut), n in zip(batch, counts, strict=True):
            if n <= budget:
                yield _Unit(a, b, n, p, sec, cut)
            else:
                yield from (_Unit(x, y, m, p, sec, True) for x, y, m in _split_long(doc.text, a, b, budget, tok))


def _pack(units: list[_Unit], budget: int, max_chars: int, overlap: int) -> list[list[_Unit]]:
    """Group units into chunks of <= budget tokens and <= max_chars characters, preferring paragraph ends."""
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
        elif cur and (size + u.tokens > budget or u.end - cur[0].start > max_chars):
            groups.append(cur)
            tail = cur[-overlap:] if overlap and u.para == cur[-1].para else []
            tail = [t for t in tail if t.tokens <= budget // 4 and t.tokens + u.tokens <= budget
                    and u.end - t.start <= max_chars]
            cur, size = list(tail), sum(t.tokens for t in tail)
        cur.append(u)
        size += u.tokens
    if cur:
        groups.append(cur)
    return groups


def _verified(doc: Document, groups: list[list[_Unit]], budget: int, tok: Tokenizer) -> list[list[_Unit]]:
    """Groups joining pieces of a cut sentence, counted as one text; one over the budget goes back to its pieces."""
    mixed = [i for i, g in enumerate(groups) if len(g) > 1 and any(u.cut for u in g)]
    counts = tok.count_tokens([doc.text[groups[i][0].start:groups[i][-1].end] for i in mixed]) if mixed else []
    over = {i for i, n in zip(mixed, counts, strict=True) if n > budget}
    return [[u] for i, g in enumerate(groups) for u in (g if i in over else ())] if over else groups


def _heading_only(units: list[_Unit], budget: int) -> bool:
    """A section that is a single short line (a heading straight before the next one) is merged into what follows."""
    return len(units) == 1 and units[0].tokens <= budget // 4


def chunk_document(doc: Document, tok: Tokenizer, max_tokens: int = 200, overlap: int = 1) -> list[Chunk]:
    """Split a document into chunks of at most `max_tokens` word pieces, never crossing a section with a body (a
    section that is only its heading line goes with the next one); TooManyPassages past MAX_PASSAGES chunks."""
    budget = max_tokens - _SPECIAL_TOKENS
    max_chars = budget * _MAX_CHARS_PER_TOKEN
    if len(doc.text) > MAX_PASSAGES * max_chars:  # decided up front: it cannot fit in MAX_PASSAGES chunks
        raise TooManyPassages(doc.source.file_name, MAX_PASSAGES)
    chunks: list[Chunk] = []
    carry: list[_Unit] = []  # heading-only sections waiting for a body
    for _, grouped in itertools.groupby(_units(doc, budget, max_chars, tok), key=lambda u: u.section):
        units = list(grouped)
        if _heading_only(units, budget):
            carry.append(_Unit(units[0].start, units[0].end, units[0].tokens, -1 - len(carry), units[0].section))
            if sum(u.tokens for u in carry) < budget and carry[-1].end - carry[0].start < max_chars:
                continue
            units, carry = carry, []
        elif carry:
            units, carry = carry + units, []
        for g in _verified(doc, _pack(units, budget, max_chars, overlap), budget, tok):
            _emit(doc, g, chunks)
    if carry:
        for g in _pack(carry, budget, max_chars, overlap):
            _emit(doc, g, chunks)
    return chunks


def _emit(doc: Document, group: list[_Unit], chunks: list[Chunk]) -> None:
    """Append the chunk of one group; its heading path is that of the section its last unit is in."""
    if len(chunks) >= MAX_PASSAGES:
        raise TooManyPassages(doc.source.file_name, MAX_PASSAGES)
    section = doc.sections[group[-1].section]
    start, end = group[0].start, group[-1].end
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
