"""Two (or three) documents side by side: the topics they share, each with the best passage of every document; and a
document's outline (its headings with their pages). Both read only the stored passages: no model, nothing embedded."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rag_core.answer.summaries.digest import Numbered, Point, prose, quote, sentences
from rag_core.answer.summaries.document import DocText, words

SHARED_TOPICS = 4  # topics listed under "On shared topics"
MIN_TOPIC_LETTERS = 5  # a topic word is at least this long ("budget", not "also")
MIN_TOPIC_COUNT = 2  # ... and occurs at least this often in every document


@dataclass(frozen=True)
class Topic:
    """A word every compared document uses as a topic, and where each says most about it."""

    word: str
    points: tuple[Point, ...]  # one per document, in the documents' order


def _spread(doc: DocText) -> tuple[Counter[str], Counter[str]]:
    """How often each word occurs in a document, and in how many of its chunks."""
    counts: Counter[str] = Counter()
    chunks: Counter[str] = Counter()
    for ws in doc.words:
        counts.update(ws)
        chunks.update(set(ws))
    return counts, chunks


def _where(doc: DocText, word: str) -> Point | None:
    """The sentence of `doc` that says most about `word`: in the chunk that uses it most, its first prose sentence
    holding it (else any sentence holding it)."""
    ranked = sorted(range(len(doc.chunks)), key=lambda i: -doc.words[i].count(word))
    for i in ranked[:3]:
        text = doc.chunks[i].text
        spans = [s for s in sentences(text, strict=False) if word in words(text[s[0]:s[1]])]
        spans.sort(key=lambda s: not prose(text[s[0]:s[1]]))
        if spans:
            return Point(-1, i, *spans[0])
    return None


def shared_topics(docs: Sequence[DocText], limit: int = SHARED_TOPICS) -> list[Topic]:
    """The words every document uses repeatedly, ranked by how much of a topic they are in each (frequent, but in
    few of its chunks), with each document's best sentence on them."""
    spreads = [_spread(d) for d in docs]
    common = set.intersection(*(
        {w for w, n in counts.items() if n >= MIN_TOPIC_COUNT and len(w) >= MIN_TOPIC_LETTERS}
        for counts, _ in spreads)) if spreads else set()
    titles = {w for d in docs for w in words(d.title)}

    def score(w: str) -> float:
        return min(math.log1p(counts[w]) * math.log1p(len(d.chunks) / chunks[w])
                   for d, (counts, chunks) in zip(docs, spreads, strict=True)) * (0.5 if w in titles else 1.0)

    out: list[Topic] = []
    for w in sorted(common, key=lambda w: (-score(w), w)):
        points = tuple(p for p in (_where(d, w) for d in docs) if p is not None)
        if len(points) == len(docs) and all(points != t.points for t in out):  # the same quotes: the same topic
            out.append(Topic(w, points))
        if len(out) >= limit:
            break
    return out


def topic_lines(docs: Sequence[DocText], topics: Sequence[Topic], numbered: Numbered) -> list[str]:
    """'On shared topics:' and, per topic, a line naming it and the documents in order, then each one's quote."""
    if not topics:
        return []
    names = ", then in ".join(f"“{d.title}”" for d in docs)
    out = ["On shared topics:"]
    for t in topics:
        out.append(f"“{t.word}” — in {names}:")
        out += [f"- “{quote(d, p)}” [{numbered.n(d, p.chunk, p.start, p.end)}]"
                for d, p in zip(docs, t.points, strict=True)]
    return out


def outline_lines(doc: DocText) -> list[str]:
    """The document's headings in order, one line each with its pages; deeper headings after "›" marks."""
    out: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for sec in doc.sections():
        path = tuple(h for h in doc.chunks[sec.first].heading_path if h.strip())
        for depth in range(1, len(path) + 1):  # a chapter whose text starts with a section is listed too
            head = path[:depth]
            if head in seen:
                continue
            seen.add(head)
            first, last = _pages(doc, head)
            pages = "" if first is None else f" (page {first})" if first == last else f" (pages {first}–{last})"
            out.append(f"- {'› ' * (depth - 1)}{' '.join(head[-1].split())}{pages}")
    return out


def _pages(doc: DocText, head: tuple[str, ...]) -> tuple[int | None, int | None]:
    found = [p for c in doc.chunks if tuple(h for h in c.heading_path if h.strip())[:len(head)] == head
             for p in (c.page_start, c.page_end) if p]
    return (min(found), max(found)) if found else (None, None)
