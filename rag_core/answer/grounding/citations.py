"""Citation markers in answer text: parse [n], [1, 3], [1][2], [2-4]; map them to the numbered passages."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from rag_core.core.models import Citation, Passage

log = logging.getLogger(__name__)

# One bracket group of numbers: [1]  [1, 3]  [1; 3]  [1,3 and 4]  [2-4]  [2–4]  [Source 2]  [sources 1, 2].
_ITEM = r"\d{1,3}(?:\s*[-–]\s*\d{1,3})?"
_NUM_LIST = _ITEM + r"(?:(?:\s*(?:,|;|\band\b|&)\s*|\s+)" + _ITEM + r")*"
MARKER_RE = re.compile(r"\[\s*(?:(?:sources?|src)\s*:?\s*)?(" + _NUM_LIST + r")\s*\](?!\()", re.IGNORECASE)
_ITEM_RE = re.compile(r"(\d{1,3})(?:\s*[-–]\s*(\d{1,3}))?")
MAX_RANGE = 20  # a "range" wider than this is not a citation range ([1-999] is nonsense)


@dataclass(frozen=True)
class Marker:
    """One bracket group found in a text: its span and the numbers it names, in order."""

    start: int
    end: int
    numbers: tuple[int, ...]


def _numbers(group: str) -> tuple[int, ...]:
    out: list[int] = []
    for m in _ITEM_RE.finditer(group):
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) else None
        if b is not None and a <= b <= a + MAX_RANGE:
            out.extend(range(a, b + 1))
        else:
            out.append(a)
            if b is not None:
                out.append(b)
    return tuple(out)


def find_markers(text: str) -> list[Marker]:
    """Every citation bracket group in `text`, left to right ([1][2] gives two groups)."""
    return [Marker(m.start(), m.end(), _numbers(m.group(1))) for m in MARKER_RE.finditer(text)]


def cited_numbers(text: str) -> list[int]:
    """The distinct numbers cited in `text`, in order of first appearance."""
    seen: dict[int, None] = {}
    for mk in find_markers(text):
        for n in mk.numbers:
            seen.setdefault(n, None)
    return list(seen)


@dataclass(frozen=True)
class ResolvedCitations:
    """The outcome of matching an answer's markers against the passages that were in the prompt."""

    citations: tuple[Citation, ...]
    invalid: tuple[int, ...]  # numbers that point at no provided passage (one entry per occurrence)
    text: str  # the answer text with invalid numbers removed from their brackets


def resolve(text: str, passages: list[Passage] | tuple[Passage, ...]) -> ResolvedCitations:
    """Map [n] markers to passages[n-1]; drop and count markers that point at no passage."""
    valid = range(1, len(passages) + 1)
    citations: dict[int, Citation] = {}
    invalid: list[int] = []
    pieces: list[str] = []
    pos = 0
    for mk in find_markers(text):
        good = [n for n in mk.numbers if n in valid]
        invalid.extend(n for n in mk.numbers if n not in valid)
        for n in good:
            if n not in citations:
                citations[n] = Citation(n=n, passage=passages[n - 1])
        pieces.append(text[pos:mk.start])
        if len(good) == len(mk.numbers):
            pieces.append(text[mk.start:mk.end])
        elif good:
            pieces.append("[" + ", ".join(str(n) for n in dict.fromkeys(good)) + "]")
        else:  # the whole bracket was invalid: remove it, and the space before it
            if pieces and pieces[-1].endswith(" "):
                pieces[-1] = pieces[-1][:-1]
        pos = mk.end
    pieces.append(text[pos:])
    if invalid:
        log.warning("Answer cited %d marker(s) that match no source (%s); only %d sources were given.",
                    len(invalid), ", ".join(f"[{n}]" for n in invalid), len(passages))
    return ResolvedCitations(tuple(citations.values()), tuple(invalid), "".join(pieces))


def source_url(passage: Passage) -> str | None:
    """The link for a passage: the document URL, with the section anchor when there is one."""
    url = passage.chunk.source.url
    if url and passage.chunk.anchor and "#" not in url:
        return f"{url}#{passage.chunk.anchor}"
    return url


def passage_json(passage: Passage, n: int | None = None) -> dict:
    """A passage as the CLI's JSON shape."""
    c = passage.chunk
    out = {"doc_id": c.doc_id, "title": c.source.title, "page": c.page_start, "page_end": c.page_end,
           "section": c.section, "text": c.text, "char_start": c.char_start, "char_end": c.char_end,
           "url": source_url(passage), "score": round(passage.score, 4)}
    if n is not None:
        out = {"n": n, **out}
    return out


def citation_json(citation: Citation) -> dict:
    """A citation as the CLI's JSON shape: where it points and the quoted text."""
    c = citation.passage.chunk
    quote = c.text
    if citation.evidence_start is not None and citation.evidence_end is not None:
        quote = c.text[citation.evidence_start:citation.evidence_end]
    return {"n": citation.n, "doc_id": c.doc_id, "title": c.source.title, "page": c.page_start,
            "section": c.section, "quote": quote, "char_start": c.char_start, "char_end": c.char_end,
            "url": source_url(citation.passage), "status": citation.status}
