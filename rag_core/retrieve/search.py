"""Question -> ranked, de-duplicated Passages. Methods: vector, lexical, rrf, dbsf (fused inside Qdrant), zscore.

`zscore` is the default: Qdrant returns the dense and the lexical candidates in one batched request (the same
call for Qdrant Edge and a Qdrant server); each list's scores are turned into z-scores and mixed with DENSE_WEIGHT.
Scoping (doc_ids, owners) and hiding incomplete documents happen inside Qdrant: every list comes back complete.
With a library whose model reads many languages (`Embedder.multilingual`: multilingual-e5-small), a candidate in
another language than the question's (rag_core.core.language_id) gets a neutral lexical z-score, not a low one - BM25
matches the question's own words, which a passage in another language does not use - and gets back the cosine such a
model takes off a passage for its language (CROSS_LANGUAGE_GAP): `zscore_fuse`'s `other_language`. With MiniLM none
of this runs.

`retrieve_scored` also returns the relevance used by the honesty check - the dense cosine of the best chunk in
scope - from the same engine request (the top of the dense list, or a one-hit dense search batched alongside).

Every returned passage carries its `Match` (`explain`): its cosine to the question (from the dense list, else from one
dense search filtered to those chunks), its BM25 score when the lexical list returned it, the question's words it
contains, and from those a plain kind (words, meaning, both) and level (high, medium, low): docs/retrieval.md.

With a reranker configured (DOCCHAT_RERANKER, off by default: rag_core/retrieve/reranker.py), `zscore`'s fused,
de-duplicated candidates are reordered by it before the top k are taken; those it ordered say so (`Match.reranked`).
"""
from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rag_core.core.language_id import passage_language, text_language
from rag_core.core.models import Chunk, Match, MatchKind, MatchLevel, Passage
from rag_core.core.text import STOP_WORDS, TOKEN_RE, content_terms, mentions, stem
from rag_core.retrieve import reranker
from rag_core.retrieve.rerank import RERANK_DEPTH, rerank
from rag_core.store.backends import Search
from rag_core.store.vector_store import Store

if TYPE_CHECKING:  # pragma: no cover - type only: importing langchain-qdrant takes seconds (issue 28)
    from langchain_qdrant import SparseVector

METHODS = ("vector", "lexical", "rrf", "dbsf", "zscore", "rerank")  # rerank: zscore, then rag_core.retrieve.rerank
DEFAULT_METHOD = "zscore"
ON_TOPIC = 0.5  # a passage this close in meaning (cosine) is about the question: the Match level "high" from here, and
# rag_core.answer.grounding.answerability's test of a question whose name is missing (tuned there: docs/faithfulness.md)
DENSE_WEIGHT = 0.5  # share of the dense z-score in the zscore mix (lexical gets the rest); measured in docs/retrieval.md
CANDIDATES = 50  # candidates per list for fusion
CROSS_LANGUAGE_GAP = 0.06  # cosine multilingual-e5-small takes off a passage for being in another language than the
# question: the median over the tune split's English questions of cos(its English paragraph) - cos(the paragraph's
# translation), 0.059 (0.03 French to 0.11 Chinese); docs/retrieval.md, "Cross-language retrieval"
OVERFETCH = 2  # fetch k * OVERFETCH + 4 before de-duplication so k passages remain
MAX_MERGED = 2  # chunks merged into one passage at most


@dataclass(frozen=True)
class QueryVectors:
    """A query's dense vector and lexical sparse vector, computed once and reusable across methods."""

    dense: list[float]
    sparse: SparseVector


@dataclass(frozen=True)
class Retrieved:
    """Top passages plus the dense cosine of the best chunk in scope (None when nothing is in scope)."""

    passages: list[Passage]
    relevance: float | None
    notice: str | None = None  # the reranker's, when it was late or failed (rag_core/retrieve/reranker.py)


def embed_queries(store: Store, queries: list[str]) -> list[QueryVectors]:
    """Dense (batched) and lexical vectors for many queries."""
    dense = store.embedder.encode(list(queries))
    return [QueryVectors(d.tolist(), store.lexical.embed_query(q)) for q, d in zip(queries, dense, strict=True)]


def _overlaps(a: Chunk, b: Chunk) -> bool:
    return a.doc_id == b.doc_id and a.char_start < b.char_end and b.char_start < a.char_end


def merge_chunks(a: Chunk, b: Chunk) -> Chunk:
    """One chunk covering two overlapping chunks of the same document (a's identity, the union of their text)."""
    first, second = (a, b) if a.char_start <= b.char_start else (b, a)
    if second.char_end <= first.char_end:
        text, end = first.text, first.char_end
    else:
        text, end = first.text + second.text[first.char_end - second.char_start:], second.char_end
    pages = [x for x in (a.page_start, b.page_start, a.page_end, b.page_end) if x is not None]
    return replace(a, text=text, char_start=first.char_start, char_end=end,
                   page_start=min(pages) if pages else None, page_end=max(pages) if pages else None)


def dedupe(passages: Iterable[Passage]) -> list[Passage]:
    """Collapse ranked passages so overlapping chunks share one slot.

    A chunk overlapping one kept passage of its document is merged into it (at most MAX_MERGED chunks per
    passage, keeping the better rank and score); a chunk overlapping a full passage, or two passages, and a text
    seen before are dropped. Kept passages never overlap each other.
    """
    return _dedupe(passages)[0]


def _dedupe(passages: Iterable[Passage]) -> tuple[list[Passage], list[list[Chunk]]]:
    """`dedupe`, and the chunks merged into each kept passage (best first): their scores make its Match."""
    kept: list[Passage] = []
    members: list[list[Chunk]] = []
    texts: set[str] = set()
    by_doc: dict[str, list[int]] = {}  # kept passages of each document (only those can overlap)
    for p in passages:
        key = " ".join(p.chunk.text.split()).casefold()
        if key in texts:
            continue
        texts.add(key)
        same_doc = by_doc.setdefault(p.chunk.doc_id, [])
        hit = [i for i in same_doc if _overlaps(p.chunk, kept[i].chunk)]
        if not hit:
            same_doc.append(len(kept))
            kept.append(p)
            members.append([p.chunk])
        elif len(hit) == 1 and len(members[hit[0]]) < MAX_MERGED:  # never bridge two kept passages into one
            i = hit[0]
            kept[i] = replace(kept[i], chunk=merge_chunks(kept[i].chunk, p.chunk))
            members[i].append(p.chunk)
    return kept, members


def _zscores(scores: list[float]) -> list[float]:
    n = len(scores)
    if n == 0:
        return []
    mean = sum(scores) / n
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
    if std == 0:
        return [0.0] * n
    return [(s - mean) / std for s in scores]


def zscore_fuse(dense: list[Passage], lexical: list[Passage], dense_weight: float = DENSE_WEIGHT,
                other_language: Collection[tuple[str, int]] = frozenset()) -> list[Passage]:
    """Weighted sum of per-list z-scores; a candidate missing from one list gets that list's lowest z-score.

    `other_language` (doc_id, chunk index): candidates in another language than the question's (`other_language`
    below; none with MiniLM). The lexical list cannot judge them, so their lexical score is missing rather than low:
    its z-score is neutral (0, the list's mean), and their dense z-score is taken from their cosine plus
    CROSS_LANGUAGE_GAP."""
    scores = [p.score + CROSS_LANGUAGE_GAP if _key(p.chunk) in other_language else p.score for p in dense]
    lists = []
    for weight, hits, values in ((dense_weight, dense, scores), (1.0 - dense_weight, lexical, [p.score for p in lexical])):
        zs = _zscores(values)
        lists.append((weight, {(p.chunk.doc_id, p.chunk.index): z for p, z in zip(hits, zs, strict=True)}, min(zs, default=0.0)))
    chunks: dict[tuple[str, int], Chunk] = {}
    for p in (*dense, *lexical):
        chunks.setdefault((p.chunk.doc_id, p.chunk.index), p.chunk)
    _, dense_z, dense_floor = lists[0]
    out = [Passage(c, dense_weight * dense_z.get(key, dense_floor) if key in other_language else
                   sum(w * zmap.get(key, floor) for w, zmap, floor in lists)) for key, c in chunks.items()]
    return sorted(out, key=lambda p: p.score, reverse=True)


def other_language(store: Store, query: str, candidates: Iterable[Passage]) -> frozenset[tuple[str, int]]:
    """The candidates (doc_id, chunk index) whose language differs from the question's, when the library's model reads
    many languages and both languages are clear (rag_core.core.language_id); else none - and with an English-only
    model (MiniLM) nothing is read."""
    if getattr(store.embedder, "multilingual", False) is not True:
        return frozenset()
    asked = text_language(query)
    if asked is None:
        return frozenset()
    return frozenset(_key(p.chunk) for p in candidates if passage_language(p.chunk.text) not in (None, asked))


def retrieve_scored(store: Store, query: str, k: int = 5, doc_ids: Iterable[str] | None = None,
                    owners: Iterable[str | None] | None = None, method: str = DEFAULT_METHOD,
                    vectors: QueryVectors | None = None, dense_weight: float = DENSE_WEIGHT,
                    relevance: bool = True, model_rerank: bool = True) -> Retrieved:
    """Top-k de-duplicated passages for `query` (scoped to doc_ids / owners when given) and, unless `relevance` is
    False, the best chunk's dense cosine, all from one request to Qdrant. With a reranker configured (and
    `model_rerank`), the fused candidates are reordered by it first (rag_core/retrieve/reranker.py)."""
    if method not in METHODS:
        raise ValueError(f"unknown retrieval method {method!r}; choose one of {', '.join(METHODS)}")
    if doc_ids is not None:
        doc_ids = list(doc_ids)
        if not doc_ids:
            return Retrieved([], None)
    reranked = method == "rerank"
    if reranked:
        method = "zscore"
    qv = vectors or embed_queries(store, [query])[0]
    has_words = bool(qv.sparse.indices)
    if not has_words and method != "lexical":  # no searchable word (e.g. only punctuation): lexical has nothing to say
        method = "vector"
    fetch = k * OVERFETCH + 4
    pool = max(CANDIDATES, fetch)
    searches: list[Search] = []
    if method == "zscore":
        searches = [Search(pool, dense=qv.dense), Search(pool, sparse=qv.sparse)]
    elif method == "vector":
        searches = [Search(fetch, dense=qv.dense)]
    elif method == "lexical" and has_words:
        searches = [Search(fetch, sparse=qv.sparse)]
    elif method != "lexical":
        searches = [Search(fetch, qv.dense, qv.sparse, fusion=method, prefetch_limit=pool)]
    ranking = len(searches)
    dense_first = method in ("zscore", "vector")  # the first list is the dense ranking itself
    if relevance and not dense_first:
        searches.append(Search(1, dense=qv.dense))
    lists = store.run(searches, doc_ids, owners) if searches else []
    if method == "zscore":
        ranked = zscore_fuse(lists[0], lists[1], dense_weight, other_language(store, query, (*lists[0], *lists[1])))
    else:
        ranked = lists[0] if ranking else []
    best = (lists[0] if dense_first else lists[ranking]) if relevance else []
    kept, members = _dedupe(ranked)
    by_model = (reranker.reorder(store.settings, query, [p.chunk.text for p in kept])
                if model_rerank and method == "zscore" else reranker.UNCHANGED)
    kept, members = by_model.apply(kept), by_model.apply(members)
    dense = lists[0] if dense_first else best  # the scores that are cosines (the others are fetched for the top k)
    lexical: list[Passage] = []  # the scores that are BM25 (fused ones are neither)
    if method == "zscore":
        lexical = lists[1]
    elif method == "lexical" and ranking:
        lexical = lists[0]
    n = max(k, RERANK_DEPTH) if reranked else k
    passages = explain(store, query, qv, kept[:n], members[:n], _scores(dense), _scores(lexical))
    if by_model.order:
        passages = reranker.marked(passages, len(by_model.order))
    elif reranked:
        passages = rerank(query, passages)[:k]
    return Retrieved(passages, best[0].score if best else None, by_model.notice)


def retrieve(store: Store, query: str, k: int = 5, doc_ids: Iterable[str] | None = None,
             owners: Iterable[str | None] | None = None, method: str = DEFAULT_METHOD,
             vectors: QueryVectors | None = None, dense_weight: float = DENSE_WEIGHT) -> list[Passage]:
    """Top-k de-duplicated passages for `query` (scoped to doc_ids / owners when given)."""
    return retrieve_scored(store, query, k, doc_ids, owners, method, vectors, dense_weight, relevance=False).passages


def _key(chunk: Chunk) -> tuple[str, int]:
    return chunk.doc_id, chunk.index


def _scores(hits: list[Passage]) -> dict[tuple[str, int], float]:
    return {_key(p.chunk): p.score for p in hits}


def explain(store: Store, query: str, qv: QueryVectors, passages: list[Passage], members: list[list[Chunk]],
            cosines: dict[tuple[str, int], float], lexical: dict[tuple[str, int], float]) -> list[Passage]:
    """Each passage with its Match. `members` are the chunks merged into each passage; `cosines` and `lexical` the
    scores of the dense and lexical lists (a passage's best chunk counts). A passage no dense list returned gets its
    cosine from one dense search filtered to such chunks."""
    missing = [m[0].point_id for m in members if not any(_key(c) in cosines for c in m)]
    if missing:
        cosines = {**cosines, **_scores(store.run([Search(len(missing), dense=qv.dense)], point_ids=missing)[0])}
    asked = _question_words(query)
    out = []
    for p, chunks in zip(passages, members, strict=True):
        cosine = max((cosines[_key(c)] for c in chunks if _key(c) in cosines), default=None)
        bm25 = max((lexical[_key(c)] for c in chunks if _key(c) in lexical), default=None)
        out.append(replace(p, match=match_for(cosine, bm25, shared_words(asked, p.chunk.text),
                                              store.settings.retrieval.min_relevance)))
    return out


def match_for(cosine: float | None, lexical: float | None, words: tuple[str, ...], min_relevance: float) -> Match:
    """The Match of a passage: low below `min_relevance` (the "not in your documents" bar), high from the
    answerability check's on-topic cosine; both when it has the question's words and is high, words when it has them
    and is not, meaning when it has none (only the search by meaning can rank it then)."""
    low_below, high_from = level_bounds(min_relevance)
    if cosine is None or cosine < low_below:
        level = MatchLevel.LOW
    else:
        level = MatchLevel.HIGH if cosine >= high_from else MatchLevel.MEDIUM
    if not words:
        kind = MatchKind.MEANING
    else:
        kind = MatchKind.BOTH if level == MatchLevel.HIGH else MatchKind.WORDS
    return Match(kind, level, cosine, lexical, words)


def level_bounds(min_relevance: float) -> tuple[float, float]:
    """The cosines that bound the Match levels: (low below, high from)."""
    return min_relevance, max(ON_TOPIC, min_relevance)


def _question_words(query: str) -> list[tuple[str, str]]:
    """(the word as the question writes it, its term): numbers and stems of the words that are not stop words."""
    out: dict[str, str] = {}
    for m in TOKEN_RE.finditer(query):
        low = m.group().casefold()
        if low[0].isdigit():
            out.setdefault(low.replace(",", ""), m.group())
        elif low not in STOP_WORDS and len(low) > 1:
            out.setdefault(stem(low), m.group())
    return [(word, term) for term, word in out.items()]


def shared_words(asked: list[tuple[str, str]], text: str) -> tuple[str, ...]:
    """The question's words (from `_question_words`) that `text` contains, stems compared, in the question's order."""
    if not asked:
        return ()
    have = content_terms(text).words
    return tuple(word for word, term in asked if term in have)


PHRASE_HITS = 25  # lexical hits read to find a phrase in the whole library


def phrase_in_library(store: Store, phrase: str, doc_ids: Iterable[str] | None = None,
                      owners: Iterable[str | None] | None = None) -> bool:
    """Does the phrase occur (whole words, case ignored) in any chunk in scope? One lexical search for its words;
    the best PHRASE_HITS chunks are read for the phrase itself."""
    sparse = store.lexical.embed_query(phrase)
    if not sparse.indices:
        return False
    hits = store.run([Search(PHRASE_HITS, sparse=sparse)], doc_ids, owners)[0]
    return mentions([f"{h.chunk.source.title}\n{h.chunk.section}\n{h.chunk.text}" for h in hits], phrase)
