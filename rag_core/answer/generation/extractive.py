"""The answer without a language model: the sentences of the best passages that answer the question, quoted."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rag_core.answer.grounding.quotes import GENERIC_WORDS, Candidate, passage_candidates, quote_text, rank_quotes
from rag_core.core.models import AnswerMode, Citation, CitationStatus, Passage
from rag_core.core.text import Span, content_terms

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.embeddings import Embedder

EXTRACTIVE_LABEL = "Quoted from your documents (no AI-written summary):"
CLOSEST_LABEL = "Closest passages — not a direct answer (quoted from your documents):"
RELATED_COSINE = 0.45  # a quote after the first must share a word of what is asked, or be this close in meaning
EXTRACTIVE_PASSAGES = 3
EXTRACTIVE_SENTENCES = 4
EXTRACTIVE_MARGIN = 2.5  # keep quotes whose score is within this of the best one (scores: rag_core.answer.grounding.quotes)
EXTRACTIVE_MAX_CHARS = 600


def quotable_spans(text: str) -> list[Span]:
    """(start, end) of each quotable unit of `text`: sentences of 4+ words, list items and table rows."""
    return [(c.start, c.end) for c in passage_candidates(1, text)]


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= EXTRACTIVE_MAX_CHARS:
        return text
    return text[:EXTRACTIVE_MAX_CHARS].rsplit(" ", 1)[0] + " …"


def extractive_answer(question: str, question_vec: np.ndarray | None, passages: Sequence[Passage],
                      embedder: Embedder | None, max_sentences: int | None = None,
                      ranked: Sequence[Candidate] | None = None, direct: bool = True
                      ) -> tuple[str, tuple[Citation, ...]]:
    """EXTRACTIVE_LABEL (CLOSEST_LABEL when not `direct`), then the sentences (or table rows, with their header) of
    the top passages that best answer the question, best first, each with its [n]: the best one, then only those
    that carry what the question asks about (see rag_core.answer.grounding.quotes for how they are chosen)."""
    label = EXTRACTIVE_LABEL if direct else CLOSEST_LABEL
    max_sentences = max_sentences or EXTRACTIVE_SENTENCES
    top = list(passages[:EXTRACTIVE_PASSAGES])
    if ranked is None:
        ranked = rank_quotes(question, top, question_vec, embedder)
    asked = content_terms(question)
    keys, wanted = asked.keys, asked.words - asked.keys - GENERIC_WORDS
    if not ranked:  # passages without a single full sentence: quote the best passage itself
        if not passages:
            return "", ()
        text = passages[0].chunk.text.strip()
        return (f"{label}\n\n- “{_shorten(text)}” [1]",
                (Citation(1, passages[0], CitationStatus.CITED, 0, len(passages[0].chunk.text)),))
    lines: list[str] = []
    found: dict[int, Citation] = {}
    seen: set[str] = set()
    for c in ranked:
        if len(lines) >= max_sentences or c.score < ranked[0].score - EXTRACTIVE_MARGIN:
            break
        quote = quote_text(top[c.n - 1].chunk.text, c)
        if lines and c.kind == "row" and keys and not keys & content_terms(top[c.n - 1].chunk.text[c.start:c.end]).words:
            continue  # another row of the table, about something else than the question names
        if quote.lower() in seen:  # overlapping chunks repeat sentences
            continue
        if lines and not _carries(quote, c, wanted or asked.words):
            continue  # a quote without the question's content is filler, not an answer
        seen.add(quote.lower())
        lines.append(f"- “{_shorten(quote)}” [{c.n}]")
        found.setdefault(c.n, Citation(c.n, top[c.n - 1], CitationStatus.CITED, c.start, c.end))
    return label + "\n\n" + "\n".join(lines), tuple(sorted(found.values(), key=lambda c: c.n))


def _carries(quote: str, c: Candidate, wanted: frozenset[str]) -> bool:
    """Does a quote carry what the question asks about: one of its words, or a meaning this close?"""
    return bool(wanted & content_terms(quote).words) or (c.cosine is not None and c.cosine >= RELATED_COSINE)


def tidy_answer_text(text: str, mode: AnswerMode) -> str:
    """The answer text to keep and check: an extractive answer loses its label line (pages show their own badge).

    Applied before verification, so every stored offset (SentenceCheck.start/end, Citation.answer_spans) indexes
    the final text."""
    for label in (EXTRACTIVE_LABEL, CLOSEST_LABEL):
        if mode == AnswerMode.QUOTES and text.startswith(label):
            return text[len(label):].lstrip()
    return text
