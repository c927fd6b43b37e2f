"""Question-aware quoting: which sentences, table rows or list items of the retrieved passages answer the question.

Each candidate is scored by what an answer looks like, not only by closeness in meaning: the question's words
weighted like BM25 over the candidates (rare words count more than the topic every passage shares), whether it
holds a span of the kind the question asks for (a name for "who", a date for "when", a number for "how many") that
the question does not already contain, how near that span is to the question's words, and the passage's rank. The
weights are measured on the XQuAD tune split by benchmarks/answers.py (docs/faithfulness.md).
"""
from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from rag_core.core.models import Passage
from rag_core.core.text import TOKEN_RE, Span, content_terms, sentence_spans, stem, tokens, trim_span

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.embeddings import Embedder

# --------------------------------------------------------------------------- question types
PERSON, DATE, NUMBER, PLACE, NAME, REASON, OTHER = "person", "date", "number", "place", "name", "reason", "other"

_TYPE_RULES: tuple[tuple[str, str], ...] = (
    (r"\b(what|which) (year|decade|century|date|day|month|time|period|era)\b|^\s*when\b|\bwhen (did|was|were|is|does|do"
     r"|will|had|has)\b|\bin what year\b|\bhow long ago\b|\bsince when\b", DATE),
    (r"\bhow (many|much|long|old|far|big|large|tall|high|deep|wide|heavy|often|fast|hot|cold|warm)\b|\bwhat "
     r"(?:(?:is|was|are|were) )?(?:the |its |their )?"
     r"(percentage|percent|proportion|share|number|amount|size|population|age|temperature|length|height|weight|"
     r"distance|speed|price|cost|rate|ratio|fraction|score)\b|\bat what (age|rate|speed|temperature)\b", NUMBER),
    (r"\bwho(m|se)?\b|\b(what|which) (person|man|woman|people|scientist|author|writer|king|queen|president|leader|"
     r"team|company|group|organi[sz]ation|band|player|artist|composer|emperor|general|architect|inventor|"
     r"engineer|family|individual|tribe|dynasty|party|researcher|physicist|chemist|philosopher|poet|musician|singer|actor|"
     r"coach|quarterback|founder|ruler|governor|mayor|minister|bishop|pope|explorer|historian|economist)\b", PERSON),
    (r"\bwhere\b|\b(what|which) (city|country|state|place|region|area|continent|island|river|town|province|"
     r"location|county|street|building|nation|ocean|sea|lake|mountain|district|neighbou?rhood|port|station)\b|"
     r"\bin (what|which) (city|country|state|place|region|area|part)\b", PLACE),
    (r"\bwhy\b|\bfor what reason\b|\bwhat (caused|causes|led|leads)\b", REASON),
    (r"\b(what|which) (is|was|are|were) the name\b|\bwhat (is|was) (it|he|she|they) called\b|\bnamed?\b|\bcalled\b|"
     r"\bwhich\b", NAME),
)
_TYPE_RES = tuple((re.compile(p, re.IGNORECASE), kind) for p, kind in _TYPE_RULES)

_NUMBER_WORDS = ("one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fifteen|twenty|thirty|forty|"
                 "fifty|sixty|hundred|hundreds|thousand|thousands|million|millions|billion|billions|dozen|dozens|half|"
                 "third|quarter|once|twice|several")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_SPAN_RES = {
    NUMBER: re.compile(rf"\d[\d,.]*\s*%?|\b({_NUMBER_WORDS})\b", re.IGNORECASE),
    DATE: re.compile(rf"\b(1\d{{3}}|20\d{{2}}|\d{{3}})s?\b|\b({_MONTHS})\b|\b\d{{1,2}}(st|nd|rd|th) century\b|"
                     r"\b(BC|AD|BCE|CE)\b|\b(century|decade|spring|summer|autumn|winter)\b"),
    REASON: re.compile(r"\b(because|due to|since|as a result|so that|in order to|owing to|caused by|led to|"
                       r"thanks to|therefore)\b", re.IGNORECASE),
}
_CAPS_RE = re.compile(r"\b[A-Z][\w'’.-]*(?:\s+(?:of|de|von|van|the|and|der|la|le|du|al)?\s*[A-Z][\w'’.-]*)*")

@dataclass(frozen=True)
class Question:
    """What a question asks: its kind of answer, its content stems and its key terms (names, numbers)."""

    text: str
    kind: str
    terms: frozenset[str]
    keys: frozenset[str]


def question_kind(question: str) -> str:
    """The kind of answer a question asks for: person, date, number, place, name, reason or other."""
    for pattern, kind in _TYPE_RES:
        if pattern.search(question):
            return kind
    return OTHER


def analyse(question: str) -> Question:
    """The question's kind, content stems and key terms."""
    t = content_terms(question)
    return Question(question, question_kind(question), t.words, t.keys)


def typed_spans(text: str, kind: str, exclude: frozenset[str] = frozenset()) -> list[Span]:
    """Spans of `text` of the kind a question asks for (names for who/where/which, dates, numbers), leaving out
    the ones made only of words in `exclude` (the question's own stems: they are not its answer)."""
    if kind in (PERSON, PLACE, NAME):
        out = []
        for m in _CAPS_RE.finditer(text):
            words = {stem(w.casefold()) for w in tokens(m.group())}
            if m.start() == 0 and len(words) == 1:
                continue  # a capitalised first word alone is the sentence start, not a name
            if words - exclude - {"the"}:
                out.append(m.span())
        return out
    pattern = _SPAN_RES.get(kind)
    if pattern is None:
        return []
    return [m.span() for m in pattern.finditer(text) if m.group().strip(" ,.%").casefold() not in exclude]


# --------------------------------------------------------------------------- candidates
_LINE_RE = re.compile(r"^.*$", re.MULTILINE)  # every line, empty ones included (they end a table)
MIN_QUOTE_WORDS = 4  # shorter sentences ("Short one.", a heading) are not worth quoting


@dataclass(frozen=True)
class Candidate:
    """A quotable unit of passage `n` (1-based): a sentence, a table row (with its table's header) or a list item."""

    n: int
    start: int
    end: int
    kind: str = "sentence"  # "sentence" | "row"
    header: Span | None = None  # the header line of the table a row belongs to
    score: float = 0.0
    cosine: float | None = None  # closeness in meaning to the question (the SHORTLIST best only; None: not embedded)


def table_blocks(text: str) -> list[list[Span]]:
    """Runs of 2+ consecutive "cell | cell" lines: each run's line spans, the first being the header."""
    blocks: list[list[Span]] = []
    run: list[Span] = []
    for m in _LINE_RE.finditer(text):
        if " | " in m.group():
            run.append(m.span())
            continue
        if len(run) >= 2:
            blocks.append(run)
        run = []
    if len(run) >= 2:
        blocks.append(run)
    return blocks


def passage_candidates(n: int, text: str) -> list[Candidate]:
    """The sentences (of 4+ words), list items and table rows of one passage's text."""
    out: list[Candidate] = []
    pos = 0
    for block in table_blocks(text):
        out += _sentences(n, text, pos, block[0][0])
        out += [Candidate(n, s, e, "row", block[0]) for s, e in block[1:]]
        pos = block[-1][1]
    out += _sentences(n, text, pos, len(text))
    return out


_HEADING_RE = re.compile(r"#{1,6}\s")  # a Markdown heading line is a title, never an answer


def _sentences(n: int, text: str, start: int, end: int) -> list[Candidate]:
    out = []
    for s, e in sentence_spans(text, start, end, lines=False):
        while _HEADING_RE.match(text, s):  # drop heading lines glued to the sentence after them
            nl = text.find("\n", s, e)
            if nl < 0:
                break
            s, e = trim_span(text, nl, e)
        if len(tokens(text[s:e])) >= MIN_QUOTE_WORDS and not _HEADING_RE.match(text, s):
            out.append(Candidate(n, s, e))
    return out


# --------------------------------------------------------------------------- scoring
# Measured on the XQuAD tune split (benchmarks/answers.py --tune); see docs/faithfulness.md.
W_TYPE = 0.35  # the candidate holds a span of the asked kind the question does not contain
W_NEAR = 0.45  # ... close to the question's words
W_RANK = 0.45  # passage rank prior (first passage 1, then decreasing)
W_TITLE = 0.5  # a question word found only in the passage's title or section counts this much
BM25_K1, BM25_B = 1.2, 0.75
GENERIC_WORDS = frozenset(["say", "mention", "describ", "call", "name", "mean", "refer", "known", "consid", "use", "made",
                      "make", "happen", "give", "tell", "explain", "write", "talk", "state", "like", "kind", "type"])
# Words that say what kind of answer is wanted ("what year", "how many"), not what it is about.
ANSWER_KIND_WORDS = frozenset(["year", "date", "day", "month", "time", "centuri", "decad", "period", "mani", "much",
                               "number", "amount", "percentag", "percent", "kind", "type", "long", "old", "often"])
W_AFTER = 0.2  # the previous sentence's match, carried over
W_ASKED = 0.5  # the share of what the question asks about found in the candidate
W_DENSE = 3.0  # cosine of candidate and question, for the SHORTLIST best candidates only
DENSE_CONTEXT = True  # embed each shortlisted quote under its document's title (see _in_context)
SHORTLIST = 5  # candidates embedded for the cosine (one batched encode: the cost of the answer choice)
NEAR_TOKENS = 6  # distance (in words) at which nearness has halved


def _positions(text: str, terms: frozenset[str]) -> tuple[list[int], list[int]]:
    """Word positions of `text` whose stem is in `terms`, and the character offset of every word."""
    hits, starts = [], []
    for i, m in enumerate(TOKEN_RE.finditer(text)):
        tok = m.group().casefold()
        st = tok.replace(",", "") if tok[0].isdigit() else stem(tok)
        starts.append(m.start())
        if st in terms:
            hits.append(i)
    return hits, starts


@dataclass(frozen=True)
class Features:
    """What one candidate's score is made of (benchmarks/answers.py tunes the weights on them)."""

    lexical: float  # BM25 of the question's words over the candidates, divided by the best candidate's
    typed: bool  # holds a span of the asked kind that the question does not contain
    near: float  # 1 / (1 + distance in words between such a span and a question word / NEAR_TOKENS)
    prior: float  # 1/n for the first three passages, else 0
    after: float  # the sentence before it matched the question this much (lexical), for answers told next
    asked: float  # share of what the question asks about (its words other than names and generic verbs) present


def candidate_features(question: Question, passages: Sequence[Passage], cands: Sequence[Candidate]) -> list[Features]:
    """The features of every candidate, in order."""
    if not cands:
        return []
    texts = [passages[c.n - 1].chunk.text[c.start:c.end] for c in cands]
    bags = [content_terms(t).words for t in texts]
    heads = [content_terms(passages[c.n - 1].chunk.text[c.header[0]:c.header[1]]).words if c.header else frozenset()
             for c in cands]
    titles = {n: content_terms(f"{p.chunk.source.title} {p.chunk.section}").words
              for n, p in enumerate(passages, 1)}
    df: Counter[str] = Counter(t for bag in bags for t in bag & question.terms)
    total = len(cands)
    lengths = [len(tokens(t)) for t in texts]
    avg = sum(lengths) / total
    raw = []
    for c, bag, head, length in zip(cands, bags, heads, lengths, strict=True):
        s = 0.0
        for t in question.terms:
            idf = math.log(1 + (total - df[t] + 0.5) / (df[t] + 0.5))
            if t in bag or t in head:
                s += idf * (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B + BM25_B * length / avg))
            elif t in titles[c.n]:
                s += W_TITLE * idf
        raw.append(s)
    top = max(raw) or 1.0
    wanted = question.terms - question.keys - GENERIC_WORDS
    out = []
    for i, (c, text) in enumerate(zip(cands, texts, strict=True)):
        spans = typed_spans(text, question.kind, question.terms)
        near = 0.0
        if spans:
            hits, starts = _positions(text, question.terms)
            if hits:
                span_words = [bisect.bisect_left(starts, a) for a, _ in spans]
                gap = min(abs(h - w) for h in hits for w in span_words)
                near = 1.0 / (1.0 + gap / NEAR_TOKENS)
        prev = raw[i - 1] / top if i and cands[i - 1].n == c.n else 0.0
        asked = len(wanted & (bags[i] | heads[i])) / len(wanted) if wanted else 1.0
        out.append(Features(raw[i] / top, bool(spans), near, 1.0 / c.n if c.n <= 3 else 0.0, prev, asked))
    return out


def combine(f: Features) -> float:
    """One candidate's score from its features (higher answers better)."""
    return (f.lexical + W_TYPE * f.typed + W_NEAR * f.near + W_RANK * f.prior + W_AFTER * f.after
            + W_ASKED * f.asked)


def score_candidates(question: Question, passages: Sequence[Passage], cands: Sequence[Candidate]) -> list[Candidate]:
    """Every candidate with its score (higher answers better), best first."""
    feats = candidate_features(question, passages, cands)
    out = [replace(c, score=round(combine(f), 4)) for c, f in zip(cands, feats, strict=True)]
    return sorted(out, key=lambda c: (-c.score, c.n, c.start))


def rank_quotes(question: str, passages: Sequence[Passage], question_vec: np.ndarray | None = None,
                embedder: Embedder | None = None) -> list[Candidate]:
    """The candidates of all `passages`, best answer first; with the question's vector and the embedder, the
    SHORTLIST best are re-ranked with their cosine to the question (one small batched encode)."""
    q = analyse(question)
    cands = [c for n, p in enumerate(passages, 1) for c in passage_candidates(n, p.chunk.text)]
    ranked = score_candidates(q, passages, cands)
    if question_vec is None or embedder is None or len(ranked) < 2:
        return ranked
    head, tail = ranked[:SHORTLIST], ranked[SHORTLIST:]
    vecs = np.asarray(embedder.encode([_in_context(passages[c.n - 1], c) for c in head]), dtype=np.float32)
    cos = vecs @ np.asarray(question_vec, dtype=np.float32)
    head = [replace(c, score=round(c.score + W_DENSE * float(x), 4), cosine=round(float(x), 4))
            for c, x in zip(head, cos, strict=True)]
    return sorted(head, key=lambda c: (-c.score, c.n, c.start)) + tail


def _in_context(passage: Passage, c: Candidate) -> str:
    """What is embedded for a candidate: the quote under its document's title (with DENSE_CONTEXT), so that a
    sentence naming the topic ("the Zen of Python is a guideline") has no edge over one that answers under it
    ("Errors should never pass silently.")."""
    quote = quote_text(passage.chunk.text, c)
    return f"{passage.chunk.source.title}: {quote}" if DENSE_CONTEXT else quote


def quote_text(passage_text: str, c: Candidate) -> str:
    """What is quoted for a candidate: the sentence, or a table row preceded by its header and an ellipsis."""
    body = " ".join(passage_text[c.start:c.end].split())
    if c.header is None:
        return body
    s, e = trim_span(passage_text, *c.header)
    return f"{' '.join(passage_text[s:e].split())} … {body}"


__all__ = ["ANSWER_KIND_WORDS", "GENERIC_WORDS", "DATE", "NAME", "NUMBER", "OTHER", "PERSON", "PLACE", "REASON", "Candidate", "Question", "Features", "analyse", "candidate_features", "combine",
           "passage_candidates", "question_kind", "quote_text", "rank_quotes", "score_candidates", "table_blocks",
           "typed_spans"]
