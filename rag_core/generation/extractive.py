"""The answer without a language model: the sentences of the best passages closest to the question, quoted."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..models import Citation, Passage
from ..text import Span, sentence_spans

if TYPE_CHECKING:  # pragma: no cover
    from ..embeddings import Embedder

EXTRACTIVE_LABEL = "Quoted from your documents (extractive answer, no AI-written summary):"
EXTRACTIVE_PASSAGES = 3
EXTRACTIVE_SENTENCES = 3
EXTRACTIVE_MARGIN = 0.15  # keep sentences within this cosine of the best one
EXTRACTIVE_MAX_CHARS = 600
MIN_QUOTE_WORDS = 4  # shorter sentences ("Short one.", a heading) are not worth quoting


def quotable_spans(text: str) -> list[Span]:
    """(start, end) of each sentence of `text` long enough to quote (paragraphs and list items also split)."""
    return [(s, e) for s, e in sentence_spans(text, lines=False) if len(text[s:e].split()) >= MIN_QUOTE_WORDS]


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= EXTRACTIVE_MAX_CHARS:
        return text
    return text[:EXTRACTIVE_MAX_CHARS].rsplit(" ", 1)[0] + " …"


def extractive_answer(question_vec: np.ndarray, passages: Sequence[Passage], embedder: Embedder,
                      max_sentences: int = EXTRACTIVE_SENTENCES) -> tuple[str, tuple[Citation, ...]]:
    """EXTRACTIVE_LABEL, then the sentences of the top passages most similar to the question, each with its [n]."""
    cands: list[tuple[int, int, int]] = []  # (n, start, end)
    for n, p in enumerate(passages[:EXTRACTIVE_PASSAGES], 1):
        cands.extend((n, s, e) for s, e in quotable_spans(p.chunk.text))
    if not cands:  # passages without a single full sentence: quote the best passage itself
        if not passages:
            return "", ()
        text = passages[0].chunk.text.strip()
        return (f"{EXTRACTIVE_LABEL}\n\n- “{_shorten(text)}” [1]",
                (Citation(1, passages[0], "cited", 0, len(passages[0].chunk.text)),))
    vecs = embedder.encode([passages[n - 1].chunk.text[s:e] for n, s, e in cands])
    scores = vecs @ np.asarray(question_vec, dtype=np.float32)
    order = np.argsort(-scores)
    best = float(scores[order[0]])
    lines: list[str] = []
    found: dict[int, Citation] = {}
    seen: set[str] = set()
    for i in order:
        if len(lines) >= max_sentences or float(scores[i]) < best - EXTRACTIVE_MARGIN:
            break
        n, s, e = cands[int(i)]
        sentence = " ".join(passages[n - 1].chunk.text[s:e].split())
        if sentence.lower() in seen:  # overlapping chunks repeat sentences
            continue
        seen.add(sentence.lower())
        lines.append(f"- “{_shorten(sentence)}” [{n}]")
        found.setdefault(n, Citation(n, passages[n - 1], "cited", s, e))
    return EXTRACTIVE_LABEL + "\n\n" + "\n".join(lines), tuple(sorted(found.values(), key=lambda c: c.n))


def tidy_answer_text(text: str, mode: str) -> str:
    """The answer text to keep and check: an extractive answer loses its label line (pages show their own badge).

    Applied before verification, so every stored offset (SentenceCheck.start/end, Citation.answer_spans) indexes
    the final text."""
    if mode == "extractive" and text.startswith(EXTRACTIVE_LABEL):
        return text[len(EXTRACTIVE_LABEL):].lstrip()
    return text
