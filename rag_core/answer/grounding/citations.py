"""Citation markers in answer text: parse [n], [1, 3], [1][2], [2-4]; map them to the numbered passages."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace

from rag_core.core.models import Answer, Citation, Passage

log = logging.getLogger(__name__)

# One bracket group of numbers: [1]  [1, 3]  [1; 3]  [1,3 and 4]  [2-4]  [2–4]  [Source 2]  [sources 1, 2].
_ITEM = r"\d{1,3}(?:\s*[-–]\s*\d{1,3})?"
_NUM_LIST = _ITEM + r"(?:(?:\s*(?:,|;|\band\b|&)\s*|\s+)" + _ITEM + r")*"
MARKER_RE = re.compile(r"\[\s*(?:(?:sources?|src)\s*:?\s*)?(" + _NUM_LIST + r")\s*\](?!\()", re.IGNORECASE)
_ITEM_RE = re.compile(r"(\d{1,3})(?:\s*[-–]\s*(\d{1,3}))?")
MAX_RANGE = 20  # a "range" wider than this is not a citation range ([1-999] is nonsense)
# The prompt's own placeholder copied instead of a number ("... is [n].", "[source n]", "[#]"): it points at nothing.
PLACEHOLDER_RE = re.compile(r"\[\s*(?:(?:sources?|src)\s*:?\s*)?(?:n|#|no\.?|number|citation)\s*\](?!\()", re.IGNORECASE)


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
    text: str  # the answer text with invalid numbers and placeholders removed from their brackets
    placeholders: int = 0  # copies of the prompt's "[n]" placeholder (removed from `text`)


def resolve(text: str, passages: list[Passage] | tuple[Passage, ...]) -> ResolvedCitations:
    """Map [n] markers to passages[n-1]; drop and count markers that point at no passage, and placeholders."""
    text, placeholders = PLACEHOLDER_RE.subn("", text)
    if placeholders:
        text = re.sub(r"[ \t]+([.,;:!?)]|$)", r"\1", text, flags=re.MULTILINE)  # the space the placeholder left
        log.warning("Answer wrote the placeholder [n] %d time(s) instead of a source number.", placeholders)
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
    return ResolvedCitations(tuple(citations.values()), tuple(invalid), "".join(pieces), placeholders)


def renumbered(answer: Answer) -> Answer:
    """The answer with its sources numbered 1..k in the order a reader meets them (first cited in the text first,
    then those the text does not cite) and listed in that order, the [n] markers of its text and every offset and
    number that points into it changed to match: a reply never shows a lone [3]. Numbers no source has are dropped
    from their brackets. The same answer again gives itself (shown and exported answers agree)."""
    if not answer.citations:
        return answer
    listed = [c.n for c in answer.citations]
    known = set(listed)
    order = [n for n in cited_numbers(answer.text) if n in known]
    order += [n for n in listed if n not in order]
    new = {old: i + 1 for i, old in enumerate(order)}
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in the old text
    for mk in find_markers(answer.text):
        numbers = list(dict.fromkeys(new[n] for n in mk.numbers if n in new))
        if numbers != list(mk.numbers):
            start = mk.start - 1 if not numbers and mk.start and answer.text[mk.start - 1] == " " else mk.start
            edits.append((start, mk.end, "[" + ", ".join(map(str, numbers)) + "]" if numbers else ""))
    if not edits and order == listed and all(new[n] == n for n in listed):
        return answer

    def at(pos: int) -> int:  # an offset of the old text in the new one
        shift = 0
        for start, end, repl in edits:
            if pos <= start:
                break
            if pos < end:
                return start + shift + min(pos - start, len(repl))
            shift += len(repl) - (end - start)
        return pos + shift

    def renum(numbers: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(new[n] for n in numbers if n in new)

    pieces, pos = [], 0
    for start, end, repl in edits:
        pieces += [answer.text[pos:start], repl]
        pos = end
    text = "".join(pieces) + answer.text[pos:]
    by_n = {c.n: c for c in answer.citations}
    citations = tuple(replace(by_n[n], n=new[n], answer_spans=tuple((at(a), at(b)) for a, b in by_n[n].answer_spans))
                      for n in order)
    sentences = tuple(replace(s, start=at(s.start), end=at(s.end), cited=renum(s.cited),
                              supported_by=renum(s.supported_by)) for s in answer.sentences)
    extra = dict(answer.extra)
    if isinstance(extra.get("instructions"), list):
        extra["instructions"] = [new[n] for n in extra["instructions"] if n in new]
    return replace(answer, text=text, citations=citations, sentences=sentences, extra=extra)


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
