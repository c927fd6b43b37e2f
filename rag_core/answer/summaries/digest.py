"""The summary without a model: quotes of the document, in its order. The opening, then one central sentence per part
(a section, a group of sections, or an equal share of the text), and more where a quarter of the text would otherwise
go unquoted; each quote is cited to the stored passage it comes from.

Which sentence speaks for a part (`Pick`, compared in benchmarks/summaries.py, docs/whole-documents.md): CENTRAL takes
the part's passage nearest to the part's mean vector (the stored vectors: nothing is embedded) and, in it, the
sentence whose words are most typical of the part; POSITION the part's first sentence; TITLE the sentence sharing most
words with the part's heading and the document's title."""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from rag_core.answer.grounding.quotes import passage_candidates
from rag_core.answer.summaries.document import DocText, Part, centrality, words
from rag_core.core.models import Citation, CitationStatus, Passage
from rag_core.core.text import tokens

MIN_WORDS = 6  # a quote shorter than this says too little to stand for a part
MAX_QUOTE_CHARS = 420  # a longer "sentence" is a run of text the splitter could not cut (formulas, lists)
MIN_LETTER_SHARE = 0.6  # of its tokens that are words: "3.2 (17) 4.5 …" is not prose
MAX_SYMBOL_SHARE = 0.04  # of its characters that are symbols (=, ∠, ∩, →): a formula is not prose either
MIN_FALLBACK_WORDS = 3  # a part without prose is quoted by a list item, row or line of at least this many words
_PUNCTUATION = set(".,;:!?'\"()[]-–—/&%«»„“”‘’…")
CHUNKS_TRIED = 3  # the part's passages tried, best first, for a sentence that qualifies
OPENING_CHUNKS = 6  # the opening is the first qualifying sentence among the document's first passages
_LEADER_RE = re.compile(r"(?:\.\s?){4,}|(?:…\s?){2,}|_{4,}")  # table-of-contents dot leaders, form lines
_SPACED_RE = re.compile(r"\s[,;:!?](?:\s|$)")  # "f : X → Y": spaced punctuation marks a formula (and no quote)
_END_RE = re.compile(r"[.!?…。！？][\"'”’»)]*$")  # a whole sentence ends so


class Pick(StrEnum):
    """How the sentence that speaks for a part is chosen."""

    CENTRAL = "central"
    POSITION = "position"
    TITLE = "title"


@dataclass(frozen=True)
class Point:
    """One quote of the digest: chunk `chunk` of the document, characters [start, end) of its text."""

    part: int  # index of the part it speaks for (-1: the opening)
    chunk: int
    start: int
    end: int
    score: float = 0.0

    def key(self) -> tuple[int, int]:
        """Its place in the document."""
        return self.chunk, self.start


def prose(text: str) -> bool:
    """Is this sentence quotable prose: a whole sentence of words (not a heading, a caption, a table-of-contents or
    index line, a table row, a formula, or a sentence cut at the end of a passage)?"""
    toks = tokens(text)
    if (len(toks) < MIN_WORDS or len(text) > MAX_QUOTE_CHARS or _LEADER_RE.search(text) or " | " in text
            or _SPACED_RE.search(text) or not _END_RE.search(text)):
        return False
    letters = sum(t[0].isalpha() and len(t) > 1 for t in toks)
    symbols = sum(not (ch.isalnum() or ch.isspace() or ch in _PUNCTUATION) for ch in text)
    opener = next((ch for ch in text if ch.isalpha()), "")
    return (letters / len(toks) >= MIN_LETTER_SHARE and symbols / len(text) <= MAX_SYMBOL_SHARE
            and not opener.islower())  # a sentence starting in lower case is the tail of one cut by a formula


def sentences(text: str, strict: bool = True) -> list[tuple[int, int]]:
    """(start, end) of the quotable units of a chunk's text: its prose sentences (`strict`), else any sentence, list
    item or table row without dot leaders, else its first line."""
    units = passage_candidates(1, text)
    if strict:
        return [(c.start, c.end) for c in units if c.kind == "sentence" and prose(text[c.start:c.end])]
    spans = [(c.start, c.end) for c in units]
    line = re.search(r"\S[^\n]*", text)
    spans = spans or ([line.span()] if line else [])
    return [(s, e) for s, e in spans if len(tokens(text[s:e])) >= MIN_FALLBACK_WORDS
            and not _LEADER_RE.search(text[s:e]) and not text[s:e].rstrip().endswith(":")]  # not a lead-in


class _Scorer:
    """Scores the chunks and sentences of one part for a Pick."""

    def __init__(self, doc: DocText, part: Part, pick: Pick, document_freq: Counter[str], n_parts: int,
                 label: str) -> None:
        self.doc, self.part, self.pick = doc, part, pick
        self.central = centrality(doc, part)
        counts = doc.term_counts(part)
        total = max(1, sum(counts.values()))
        # a word typical of this part: frequent in it, found in few of the other parts
        self.weight = {w: n / total * math.log(1 + n_parts / document_freq[w]) for w, n in counts.items()}
        self.title = set(words(f"{label} {doc.title}"))

    def chunk_order(self) -> list[int]:
        """The part's chunks, best first."""
        idx = list(range(self.part.first, self.part.stop))
        if self.pick is Pick.POSITION:
            return idx
        if self.pick is Pick.TITLE:
            return sorted(idx, key=lambda i: -len(self.title & set(self.doc.words[i])))
        return sorted(idx, key=lambda i: -float(self.central[i - self.part.first]))

    def sentence(self, text: str, span: tuple[int, int]) -> float:
        """A sentence's score (higher is better)."""
        ws = set(words(text[span[0]:span[1]]))
        if self.pick is Pick.POSITION:
            return -span[0]
        if self.pick is Pick.TITLE:
            return len(self.title & ws) + 0.01 * len(ws)
        return sum(self.weight.get(w, 0.0) for w in ws) / math.sqrt(len(ws) + 2)

    def best(self, chunks: Sequence[int], within: tuple[int, int] | None = None, strict: bool = True
             ) -> Point | None:
        """The best sentence among these chunks (each tried in turn; `within`: starting in this character range)."""
        for i in chunks:
            c = self.doc.chunks[i]
            spans = [s for s in sentences(c.text, strict)
                     if within is None or within[0] <= c.char_start + s[0] < within[1]]
            if spans:
                span = max(spans, key=lambda s: self.sentence(c.text, s))
                return Point(-1, i, span[0], span[1], self.sentence(c.text, span))
        return None


def choose_points(doc: DocText, parts: Sequence[Part], pick: Pick = Pick.CENTRAL) -> list[Point]:
    """The digest's quotes in document order: the opening, one per part, and one more for any quarter of the text
    none of them is in."""
    freq: Counter[str] = Counter()
    for p in parts:
        freq.update(set(doc.term_counts(p)))
    scorers = [_Scorer(doc, p, pick, freq, len(parts), p.label) for p in parts]
    points: list[Point] = []
    if parts:  # the opening: the first sentence of prose
        first = _Scorer(doc, parts[0], Pick.POSITION, freq, len(parts), "")
        opening = first.best(range(min(len(doc.chunks), OPENING_CHUNKS)))
        if opening is not None:
            points.append(Point(-1, opening.chunk, opening.start, opening.end, opening.score))
    for k, sc in enumerate(scorers):
        found = sc.best(sc.chunk_order()[:CHUNKS_TRIED]) or sc.best(sc.chunk_order())
        if found is None and not any(parts[k].first <= p.chunk < parts[k].stop for p in points):
            found = sc.best(sc.chunk_order(), strict=False)  # a part without prose: a list item, a row, a line
        if found is not None and all(found.key() != p.key() for p in points):
            points.append(Point(k, found.chunk, found.start, found.end, found.score))
    for q in range(4):  # every quarter of the text is quoted at least once
        if any(q in doc.quarters(*_span(doc, p)) for p in points):
            continue
        lo, hi = q * doc.length // 4, (q + 1) * doc.length // 4
        for k, sc in enumerate(scorers):
            inside = [i for i in sc.chunk_order() if doc.chunks[i].char_start < hi and doc.chunks[i].char_end > lo]
            found = sc.best(inside, (lo, hi)) or sc.best(inside, (lo, hi), strict=False)
            if found is not None:
                points.append(Point(k, found.chunk, found.start, found.end, found.score))
                break
    return [p for p in points if p.part < 0] + sorted((p for p in points if p.part >= 0), key=Point.key)


def _span(doc: DocText, p: Point) -> tuple[int, int]:
    c = doc.chunks[p.chunk]
    return c.char_start + p.start, c.char_start + p.end


def where(doc: DocText, part: Part, n_parts: int, index: int) -> str:
    """How a part is named in the digest: its heading with its pages, or "Pages 30–58" / "Part 2 of 4"."""
    first, last = doc.pages(part)
    pages = "" if first is None else f"page {first}" if first == last else f"pages {first}–{last}"
    label = part.label or ("Beginning" if part.headings and index == 0 else f"Part {index + 1} of {n_parts}")
    return f"{label} ({pages})" if pages else label


def quote(doc: DocText, p: Point) -> str:
    """The quoted text of a point, on one line."""
    return " ".join(doc.chunks[p.chunk].text[p.start:p.end].split())


class Numbered:
    """The passages an answer cites, numbered [1..] in order of first use across its documents."""

    def __init__(self) -> None:
        self.passages: list[Passage] = []
        self.citations: list[Citation] = []
        self.numbers: dict[tuple[str, int], int] = {}

    def n(self, doc: DocText, chunk: int, start: int = 0, end: int | None = None, score: float = 0.0) -> int:
        """The number of chunk `chunk` of `doc` (given the next one at its first use; [start, end) its quote)."""
        key = (doc.info.doc_id, chunk)
        if key not in self.numbers:
            self.numbers[key] = len(self.passages) + 1
            self.passages.append(doc.passage(chunk, score))
            end = len(doc.chunks[chunk].text) if end is None else end
            self.citations.append(Citation(self.numbers[key], self.passages[-1], CitationStatus.CITED, start, end))
        return self.numbers[key]


def digest_lines(doc: DocText, parts: Sequence[Part], points: Sequence[Point], numbered: Numbered,
                 headed: bool = True) -> list[str]:
    """The digest's lines: a heading line per part (ending with ":", so it states nothing) and its quotes, each
    cited [n]."""
    out: list[str] = []
    last: int | None = None
    for p in points:
        if headed and p.part != last:
            out.append(("Opening" + _opening_pages(doc, p) if p.part < 0
                        else where(doc, parts[p.part], len(parts), p.part)) + ":")
            last = p.part
        out.append(f"- “{quote(doc, p)}” [{numbered.n(doc, p.chunk, p.start, p.end, p.score)}]")
    return out


def _opening_pages(doc: DocText, p: Point) -> str:
    page = doc.chunks[p.chunk].page_start
    return f" (page {page})" if page else ""


def coverage(doc: DocText, spans: Sequence[tuple[int, int, int]]) -> dict[str, float | int]:
    """What a summary cites of a document: (chunk, start, end) spans -> share of quarters and of sections quoted."""
    quarters: set[int] = set()
    sections = doc.sections()
    hit: set[int] = set()
    for i, s, e in spans:
        c = doc.chunks[i]
        quarters |= doc.quarters(c.char_start + s, c.char_start + e)
        hit |= {k for k, sec in enumerate(sections) if sec.first <= i < sec.stop}
    return {"quarters": len(quarters), "quarter_share": len(quarters) / 4, "sections": len(sections),
            "sections_cited": len(hit), "section_share": round(len(hit) / max(1, len(sections)), 3)}
