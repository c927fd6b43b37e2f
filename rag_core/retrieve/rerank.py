"""A rerank of the fused top passages from signals DocChat already has (retrieval method `rerank`; not the default).

No cross-encoder installs offline from a package (the `env` package lists hold embedders only; docs/retrieval.md),
so this reorders the best RERANK_DEPTH passages of the default `zscore` fusion by a weighted sum of per-list
z-scores: the fused score, the passage's dense cosine, and the share of the question's word pairs (adjacent content
words, stemmed) that the passage also has in a row. The weights were chosen on the tune splits of XQuAD and PubMedQA
(benchmarks/rerank.py); on their test splits the rerank does not win, so `zscore` stays the default (measured there).
It costs well under a millisecond a question: no model runs.
"""
from __future__ import annotations

import math

from rag_core.core.models import Passage
from rag_core.core.text import STOP_WORDS, TOKEN_RE, stem

RERANK_DEPTH = 10  # fused passages reordered
WEIGHTS = {"fused": 1.0, "cosine": 0.25, "pairs": 0.25}  # tuned on the tune splits (benchmarks/rerank.py)


def content_terms_in_order(text: str) -> list[str]:
    """The text's numbers and stemmed non-stop words, in order."""
    out = []
    for m in TOKEN_RE.finditer(text):
        low = m.group().casefold()
        if low[0].isdigit():
            out.append(low.replace(",", ""))
        elif low not in STOP_WORDS and len(low) > 1:
            out.append(stem(low))
    return out


def pair_share(question_terms: list[str], text: str) -> float:
    """Share of the question's adjacent term pairs that the text also has adjacent (0 when the question has none)."""
    asked = set(zip(question_terms, question_terms[1:], strict=False))
    if not asked:
        return 0.0
    terms = content_terms_in_order(text)
    return len(asked & set(zip(terms, terms[1:], strict=False))) / len(asked)


def _z(values: list[float]) -> list[float]:
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return [(v - mean) / std if std else 0.0 for v in values]


def rerank(question: str, passages: list[Passage], depth: int = RERANK_DEPTH) -> list[Passage]:
    """The passages with their first `depth` reordered (explained ones: a Match carries the cosine); scores kept."""
    head, tail = passages[:depth], passages[depth:]
    if len(head) < 2:
        return passages
    q_terms = content_terms_in_order(question)
    fused = _z([p.score for p in head])
    cosine = _z([(p.match.cosine if p.match and p.match.cosine is not None else 0.0) for p in head])
    pairs = _z([pair_share(q_terms, p.chunk.text) for p in head])
    scored = [(WEIGHTS["fused"] * f + WEIGHTS["cosine"] * c + WEIGHTS["pairs"] * w, i)
              for i, (f, c, w) in enumerate(zip(fused, cosine, pairs, strict=True))]
    return [head[i] for _, i in sorted(scored, key=lambda t: (-t[0], t[1]))] + tail
