"""Document -> Chunks: structure first (section, paragraph, line, sentence), packed to a token budget.

Bounded whatever the input: work is linear in the text (the tokenizer only ever sees short pieces, counted in
batches), no chunk exceeds the token budget or `_MAX_CHARS_PER_TOKEN` characters per token of it (runs without
spaces are cut hard), sections that are only a heading line are merged into what follows, and a document may
make at most `MAX_PASSAGES` chunks - estimated up front from samples of the text (`estimate`), then counted.
Every step between two checks of the file's time budget (a `Deadline`) is bounded: text is split into paragraphs
and sentences in windows of about `_WINDOW` characters, and tokenized in batches of at most `_COUNT_CHARS`.
"""
from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from rag_core.core.deadline import Deadline
from rag_core.core.errors import TooManyPassages
from rag_core.core.models import Chunk, Document
from rag_core.core.text import paragraph_spans, sentence_spans, trim_span

_SPECIAL_TOKENS = 2  # [CLS] and [SEP] added by the model

MAX_PASSAGES = 20_000
"""The most chunks one document may make; past it the file is refused (TooManyPassages: too large to index, split
it). 20,000 chunks of 200 tokens is about 4 million tokens, some 16 MB of English prose: far more than a chat needs,
and it keeps embedding time, memory and the saved library bounded for any one file."""

_MAX_CHARS_PER_TOKEN = 10  # a chunk spans at most budget * 10 characters (prose needs ~4-6 per token)
_COUNT_BATCH = 2048  # pieces of text handed to the tokenizer per call...
# ...and at most this many characters of them: 0.16 s a call on a busy 2-core machine (256 KB: 1.3 s, as fast in
# all), so Stop, checked between calls, is seen soon (issue 24)
_COUNT_CHARS = 1 << 16
_WINDOW = 1 << 18  # characters split into paragraphs and sentences per step (text.py's splitters return lists)
# Where a window may end, best first: a blank line, a line break (both end a sentence anyway), a space, else hard.
_BREAKS = (re.compile(r"\n[ \t]*\n"), re.compile(r"\n"), re.compile(r"[ \t]"))
_SAMPLES = 32  # windows of the text tokenized to estimate a document's size up front
_SAMPLE_CHARS = 2048


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


def _window_end(text: str, target: int, limit: int) -> int:
    """Where a piece of text meant to end near `target` ends: just after the first blank line, else line break, else
    space in text[target:limit]; at `target` when there is none (a run without any is cut hard)."""
    for pattern in _BREAKS:
        m = pattern.search(text, target, limit)
        if m:
            return m.end()
    return target


def _windows(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """text[start:end] as consecutive windows of at most 1.5 * _WINDOW characters, cut as `_window_end` says."""
    while end - start > _WINDOW * 3 // 2:
        cut = _window_end(text, start + _WINDOW, start + _WINDOW * 3 // 2)
        yield start, cut
        start = cut
    yield start, end


def _sentences(doc: Document, deadline: Deadline) -> Iterator[tuple[int, int, int, int]]:
    """(start, end, paragraph, section) of every sentence of the document in order; every line break ends one.

    A section is split window by window, so one call of the (list-returning) splitters handles a bounded amount of
    text; a paragraph or a line longer than a window is cut where the window ends (a space, else hard)."""
    text = doc.text
    for sec, section in enumerate(doc.sections):
        para = 0
        for ws, we in _windows(text, section.char_start, section.char_end):
            deadline.check()
            for ps, pe in paragraph_spans(text, ws, we):
                for a, b in sentence_spans(text, ps, pe):
                    yield a, b, para, sec
                para += 1


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
    """Cut one over-long (but at most max_chars long) piece into pieces whose own token count is <= budget.

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


def _counted(text: str, spans: list[tuple[int, int]], budget: int, tok: Tokenizer) -> Iterator[tuple[int, int, int]]:
    """(start, end, tokens) of each span, counted in one tokenizer call; a span over the budget is cut further."""
    counts = tok.count_tokens([text[a:b] for a, b in spans]) if spans else []
    for (a, b), n in zip(spans, counts, strict=True):
        if n <= budget:
            yield a, b, n
        else:
            yield from _split_long(text, a, b, budget, tok)


def _run_pieces(text: str, start: int, end: int, budget: int, max_chars: int, tok: Tokenizer,
                deadline: Deadline) -> Iterator[tuple[int, int, int]]:
    """(start, end, tokens) of the pieces of a sentence longer than max_chars (a run without sentence ends).

    The run is tokenized window by window (max_chars each, cut at a space in the second half, else hard) and each
    window cut into pieces of `budget` word pieces; the last, partial piece starts the next window, so a long run
    makes full pieces rather than a short leftover at every window edge, and is tokenized about twice in all."""
    pieces: list[tuple[int, int]] = []
    size = 0
    pos = start
    while pos < end:
        deadline.check()
        cut = min(pos + max_chars, end)
        if cut < end:
            space = text.rfind(" ", pos + max_chars // 2, cut)
            cut = space if space > pos else cut
        s, e = trim_span(text, pos, cut)
        if e <= s:
            pos = cut
            continue
        seg = text[s:e]
        found = _token_pieces(seg, tok.token_offsets(seg), budget) or [(0, e - s)]
        if cut < end and len(found) > 1:
            found, pos = found[:-1], s + found[-1][0]  # carried into the next window
        else:
            pos = cut
        pieces.extend((s + a, s + b) for a, b in found)
        size += e - s
        if size >= _COUNT_CHARS:
            yield from _counted(text, pieces, budget, tok)
            pieces, size = [], 0
    yield from _counted(text, pieces, budget, tok)


def _units(doc: Document, budget: int, max_chars: int, tok: Tokenizer, deadline: Deadline) -> Iterator[_Unit]:
    """Sentence-level units of the whole document, in order, each within the budget, counted in batches."""
    text = doc.text
    batch: list[tuple[int, int, int, int]] = []
    size = 0

    def counted(batch: list[tuple[int, int, int, int]]) -> Iterator[_Unit]:
        for (a, b, p, sec), n in zip(batch, tok.count_tokens([text[a:b] for a, b, _, _ in batch]), strict=True):
            if n <= budget:
                yield _Unit(a, b, n, p, sec)
            else:
                yield from (_Unit(x, y, m, p, sec, True) for x, y, m in _split_long(text, a, b, budget, tok))

    for a, b, p, sec in _sentences(doc, deadline):
        if b - a > max_chars:
            if batch:
                yield from counted(batch)
                batch, size = [], 0
            for x, y, n in _run_pieces(text, a, b, budget, max_chars, tok, deadline):
                yield _Unit(x, y, n, p, sec, True)
            continue
        batch.append((a, b, p, sec))
        size += b - a
        if len(batch) >= _COUNT_BATCH or size >= _COUNT_CHARS:
            deadline.check()
            yield from counted(batch)
            batch, size = [], 0
    if batch:
        deadline.check()
        yield from counted(batch)


@dataclass(frozen=True)
class Estimate:
    """How big a document will be once chunked, judged before chunking from samples spread over its text."""

    passages: int  # about how many chunks, were every chunk full (real ones make somewhat more)
    samples: tuple[str, ...]  # chunk-sized pieces of the text, spread over it (to time the embedding model on)
    sampled_chars: int  # how much of the text was tokenized to judge it


def estimate(doc: Document, tok: Tokenizer, max_tokens: int = 200) -> Estimate:
    """The size of `doc` in chunks, from the token density of `_SAMPLES` evenly spread windows of its text (one
    tokenizer call on at most 64 KB, whatever the document's size)."""
    budget = max_tokens - _SPECIAL_TOKENS
    text, n = doc.text, len(doc.text)
    step = max(_SAMPLE_CHARS, n // _SAMPLES)
    windows = [text[i:i + _SAMPLE_CHARS] for i in range(0, n, step)][:_SAMPLES]
    counts = tok.count_tokens(windows) if windows else []
    sampled, sampled_tokens = sum(len(w) for w in windows), sum(counts)
    tokens = sampled_tokens * n / sampled if sampled else 0.0
    max_chars = budget * _MAX_CHARS_PER_TOKEN
    passages = max(math.ceil(tokens / budget), math.ceil(n / max_chars))
    chunk_chars = max(1, min(max_chars, int(budget * sampled / max(1, sampled_tokens))))
    return Estimate(passages, tuple(w[:chunk_chars] for w, c in zip(windows, counts, strict=True) if c), sampled)


def _pack(units: list[_Unit], budget: int, max_chars: int, overlap: int, deadline: Deadline,
          page_at: Callable[[int], int | None] | None = None) -> list[list[_Unit]]:
    """Group units into chunks of <= budget tokens and <= max_chars characters, preferring paragraph ends; a paragraph
    that begins a new page (`page_at`: the page of an offset) begins a new chunk too, so a chunk's pages are those its
    text is on (a table at the top of page 3 is not "pages 2-3" for the paragraph before it), unless what came before
    is only a heading carried over to its body."""
    para_tokens: dict[int, int] = {}
    for u in units:
        para_tokens[u.para] = para_tokens.get(u.para, 0) + u.tokens
    groups: list[list[_Unit]] = []
    cur: list[_Unit] = []
    size = 0
    for i, u in enumerate(units):
        if not i % _COUNT_BATCH:
            deadline.check()
        new_para = bool(cur) and u.para != cur[-1].para
        if (new_para and page_at is not None and any(c.para >= 0 for c in cur)
                and page_at(u.start) != page_at(cur[-1].start)):
            groups.append(cur)  # a paragraph on a new page: its own chunk
            cur, size = [], 0
        elif new_para and size >= budget // 2 and size + para_tokens[u.para] > budget:
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


def chunk_document(doc: Document, tok: Tokenizer, max_tokens: int = 200, overlap: int = 1,
                   deadline: Deadline | None = None) -> list[Chunk]:
    """Split a document into chunks of at most `max_tokens` word pieces, never crossing a section with a body (a
    section that is only its heading line goes with the next one); TooManyPassages past MAX_PASSAGES chunks (refused
    up front when the text is too long, or its samples say it would make too many), IngestTimedOut once `deadline`
    has passed."""
    budget = max_tokens - _SPECIAL_TOKENS
    max_chars = budget * _MAX_CHARS_PER_TOKEN
    deadline = deadline or Deadline.never(doc.source.file_name)
    if len(doc.text) > MAX_PASSAGES * max_chars:  # decided up front: it cannot fit in MAX_PASSAGES chunks
        raise TooManyPassages(doc.source.file_name, MAX_PASSAGES)
    if len(doc.text) > _SAMPLES * _SAMPLE_CHARS and estimate(doc, tok, max_tokens).passages > MAX_PASSAGES:
        raise TooManyPassages(doc.source.file_name, MAX_PASSAGES)  # judged from samples, before tokenizing it all
    chunks: list[Chunk] = []
    carry: list[_Unit] = []  # heading-only sections waiting for a body
    for _, grouped in itertools.groupby(_units(doc, budget, max_chars, tok, deadline), key=lambda u: u.section):
        units = list(grouped)
        if _heading_only(units, budget):
            carry.append(_Unit(units[0].start, units[0].end, units[0].tokens, -1 - len(carry), units[0].section))
            if sum(u.tokens for u in carry) < budget and carry[-1].end - carry[0].start < max_chars:
                continue
            units, carry = carry, []
        elif carry:
            units, carry = carry + units, []
        for g in _verified(doc, _pack(units, budget, max_chars, overlap, deadline, doc.page_at), budget, tok):
            _emit(doc, g, chunks)
    if carry:
        for g in _pack(carry, budget, max_chars, overlap, deadline, doc.page_at):
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
