"""A whole document as the summaries read it: its stored chunks in order (with their vectors), its sections and the
parts a summary speaks about (sections, grouped when there are many; equal shares of the text when there are none)."""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from rag_core.core.errors import DocumentNotFound
from rag_core.core.models import Chunk, DocumentInfo, Passage
from rag_core.core.text import STOP_WORDS

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.vector_store import Store

MIN_SECTIONS = 3  # fewer sections than this: the parts are equal shares of the text instead
CHUNKS_PER_PART = 4  # without sections, about one part per this many passages (at least 4 parts)
SAME_TOP_COST = 1.0  # merging two neighbouring sections under the same top heading costs their size times this ...
OTHER_TOP_COST = 3.0  # ... and across top headings this much (chapters stay apart while they can)
PARENT_COST = 0.5  # ... and a heading with the first section under it (a chapter's title and its first section) less
_WORD_RE = re.compile(r"[^\W\d_]{3,}")


def words(text: str) -> list[str]:
    """The case-folded words of `text` (letters only, 3+ long, no stop words): cheap topic words, unstemmed."""
    return [w for w in (m.group().casefold() for m in _WORD_RE.finditer(text)) if w not in STOP_WORDS]


@dataclass(frozen=True)
class Part:
    """A run of consecutive chunks, chunks[first:stop], and the headings of the sections it holds."""

    first: int
    stop: int
    headings: tuple[tuple[str, ...], ...] = ()  # heading paths of its sections, in order (empty: an equal share)

    @property
    def label(self) -> str:
        """Its heading (a group of sections: their common heading, first and last), "" for an equal share."""
        paths = [tuple(h for h in p if h.strip()) for p in self.headings]
        paths = [p for p in paths if p]
        if not paths:
            return ""
        if len(paths) == 1:
            return " › ".join(paths[0])
        common = 0
        while all(len(p) > common and p[common] == paths[0][common] for p in paths):
            common += 1
        rests = [" › ".join(p[common:]) for p in paths if len(p) > common]
        span = rests[0] if len(rests) == 1 else f"{rests[0]} to {rests[-1]}" if rests else ""  # no "…": it ends a sentence
        return " › ".join((*paths[0][:common], span) if span else paths[0][:common])


@dataclass(frozen=True)
class DocText:
    """One stored document: its chunks in order and (when read with them) their unit vectors."""

    info: DocumentInfo
    chunks: tuple[Chunk, ...]
    vectors: np.ndarray | None = None  # (len(chunks), dim), rows of unit length

    @property
    def title(self) -> str:
        """Its title, else its file name."""
        return self.info.title or self.info.file_name or "Untitled"

    @cached_property
    def length(self) -> int:
        """Characters of its text (the end of its last chunk)."""
        return max((c.char_end for c in self.chunks), default=0)

    def quarter(self, offset: int) -> int:
        """Which quarter (0-3) of the text a character offset lies in."""
        return min(3, max(0, 4 * offset // max(self.length, 1)))

    def quarters(self, start: int, end: int) -> set[int]:
        """The quarters a character range [start, end) overlaps."""
        return set(range(self.quarter(start), self.quarter(max(start, end - 1)) + 1))

    def sections(self) -> list[Part]:
        """Its sections: the runs of consecutive chunks under one heading path."""
        out: list[Part] = []
        for i, c in enumerate(self.chunks):
            if out and self.chunks[out[-1].first].heading_path == c.heading_path:
                out[-1] = Part(out[-1].first, i + 1, out[-1].headings)
            else:
                out.append(Part(i, i + 1, (c.heading_path,)))
        return out

    def chars(self, part: Part) -> int:
        """Characters of a part's chunks."""
        return sum(len(c.text) for c in self.chunks[part.first:part.stop])

    def pages(self, part: Part) -> tuple[int | None, int | None]:
        """First and last page of a part (None, None when the document has no pages)."""
        found = [p for c in self.chunks[part.first:part.stop] for p in (c.page_start, c.page_end) if p]
        return (min(found), max(found)) if found else (None, None)

    def passage(self, i: int, score: float = 0.0) -> Passage:
        """Chunk i as a Passage."""
        return Passage(self.chunks[i], score)

    @cached_property
    def words(self) -> tuple[tuple[str, ...], ...]:
        """Each chunk's topic words (see `words`), computed once."""
        return tuple(tuple(words(c.text)) for c in self.chunks)

    def term_counts(self, part: Part) -> Counter[str]:
        """How often each topic word occurs in a part."""
        counts: Counter[str] = Counter()
        for ws in self.words[part.first:part.stop]:
            counts.update(ws)
        return counts


def load_document(store: Store, info: DocumentInfo, owners: Iterable[str | None] | None = None,
                  vectors: bool = True) -> DocText:
    """The stored chunks of one complete document, in order, with unit vectors when `vectors`."""
    rows = store.document_chunks(info.doc_id, owners, with_vectors=vectors)
    if not rows:
        raise DocumentNotFound(info.doc_id)
    chunks = tuple(c for c, _ in rows)
    matrix = None
    if vectors and all(len(v) for _, v in rows):
        matrix = np.asarray([v for _, v in rows], dtype=np.float32)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    return DocText(info, chunks, matrix)


def equal_parts(doc: DocText, n: int) -> list[Part]:
    """`n` runs of chunks holding about equal shares of the text (fewer when there are fewer chunks)."""
    n = max(1, min(n, len(doc.chunks)))
    sizes = [len(c.text) for c in doc.chunks]
    out: list[Part] = []
    total, first, acc = sum(sizes), 0, 0
    for i, size in enumerate(sizes):
        acc += size
        left_parts, left_chunks = n - len(out) - 1, len(sizes) - i - 1
        if left_parts and (acc >= total * (len(out) + 1) / n or left_chunks == left_parts):
            out.append(Part(first, i + 1))
            first = i + 1
    out.append(Part(first, len(sizes)))
    return [p for p in out if p.stop > p.first]


def _merge(a: Part, b: Part) -> Part:
    return Part(a.first, b.stop, a.headings + b.headings)


def group_sections(doc: DocText, sections: Sequence[Part], cap: int) -> list[Part]:
    """At most `cap` parts from the sections: the two neighbours whose merge costs least are merged until they fit
    (cost: their size, three times that across top-level headings), so small sibling sections go together first."""
    parts = list(sections)
    sizes = [doc.chars(p) for p in parts]
    while len(parts) > max(1, cap):
        def cost(i: int) -> float:
            a, b = parts[i].headings[-1], parts[i + 1].headings[0]
            if b[:len(a)] == a:  # a heading and the sections under it
                return (sizes[i] + sizes[i + 1]) * PARENT_COST
            return (sizes[i] + sizes[i + 1]) * (SAME_TOP_COST if a[:1] == b[:1] else OTHER_TOP_COST)

        i = min(range(len(parts) - 1), key=cost)
        parts[i:i + 2] = [_merge(parts[i], parts[i + 1])]
        sizes[i:i + 2] = [sizes[i] + sizes[i + 1]]
    return parts


def plan_parts(doc: DocText, cap: int) -> list[Part]:
    """The parts a summary speaks about, in order: the sections (grouped to at most `cap`), or equal shares of the
    text when the document has fewer than MIN_SECTIONS sections."""
    sections = doc.sections()
    if len(sections) >= MIN_SECTIONS:
        return group_sections(doc, sections, cap)
    n = max(4, min(cap, math.ceil(len(doc.chunks) / CHUNKS_PER_PART)))
    return equal_parts(doc, n)


def centrality(doc: DocText, part: Part) -> np.ndarray:
    """Each chunk of a part: cosine of its vector with the part's mean vector (zeros without vectors)."""
    if doc.vectors is None:
        return np.zeros(part.stop - part.first, dtype=np.float32)
    rows = doc.vectors[part.first:part.stop]
    mean = rows.mean(axis=0)
    return np.asarray(rows @ (mean / max(float(np.linalg.norm(mean)), 1e-9)), dtype=np.float32)


def find_document(infos: Sequence[DocumentInfo], doc_id: str) -> DocumentInfo:
    """The entry of `doc_id` among `infos` (DocumentNotFound when it is not there)."""
    for info in infos:
        if info.doc_id == doc_id:
            return info
    raise DocumentNotFound(doc_id)
