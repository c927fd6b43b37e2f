"""Evidence for a finished answer: split it into sentences, find the span of each passage that backs each sentence,
and mark every citation "verified" (its passage holds the evidence), "unsupported" (the model cited it, the passage
does not back the sentence) or "matched" (a sentence the model left uncited, attached to the passage that backs it).

A span backs a sentence when enough of the sentence's content words appear in it (lexical coverage, Snowball
stems) *and* it means the same (cosine of the bundled sentence-embedding model), and every number of the sentence
is in it. The thresholds are measured in benchmarks/faithfulness.py --calibrate (docs/faithfulness.md).
The sentences and the claim each makes come from rag_core.answer.grounding.claims (re-exported here).
"""
from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from rag_core.answer.grounding.claims import answer_sentences, claim_text, is_claim, split_sentences
from rag_core.core.models import Answer, AnswerMode, Citation, CitationStatus, Passage, SentenceCheck
from rag_core.core.text import Terms, content_terms

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)

VERIFIED, UNSUPPORTED, MATCHED = CitationStatus.VERIFIED, CitationStatus.UNSUPPORTED, CitationStatus.MATCHED
NO_CLAIM = CitationStatus.NO_CLAIM  # sentence status only: nothing to check (a heading line, a refusal, filler)
# Set after verification by rag_core.injection.detect.mark_answer: the passage backs the sentence (verified or matched) but
# holds instructions addressed to an AI, so the words came from the document and may be an instruction, not a fact.
FLAGGED = CitationStatus.FLAGGED

# Decision thresholds (benchmarks/faithfulness.py --calibrate measures them on XQuAD; see docs/faithfulness.md).
COVERAGE_MIN = 0.5  # share of the sentence's content words found in the span ...
COSINE_MIN = 0.45  # ... and this embedding similarity between sentence and span
COVERAGE_ALONE = 0.8  # or this coverage alone, for sentences of at least ALONE_TERMS content words
ALONE_TERMS = 3
COSINE_ALONE = 0.75  # or this similarity alone, with at least COVERAGE_FLOOR coverage
COVERAGE_FLOOR = 0.34
NOVEL_MIN = 0.5  # share of the words the sentence adds to the question (its answer) that must be in the span
SHORT_CLAIM_TERMS = 2  # sentences this short ("Brussels.") are embedded together with the question
METHODS = ("combined", "lexical", "embedding")

_ANAPHOR_RE = re.compile(r"^\W*(it|its|he|his|she|her|they|their|them|this|these|those|there|the latter|"
                         r"the former|both|such)\b", re.IGNORECASE)


# --------------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class Evidence:
    """The best span of one passage for one claim, and how well it backs the claim."""

    start: int  # span inside the passage text
    end: int
    coverage: float  # share of the claim's content words in the span
    cosine: float  # embedding similarity of claim and span (best sentence of the span); 1.0 for verbatim
    keys_ok: bool  # every number and name of the claim is in the span (or, if the question has it, the passage)
    verbatim: bool
    supported: bool
    novel: float = 1.0  # share of the claim's words that are not in the question (its answer) found in the span

    @property
    def score(self) -> float:
        """One number to rank spans and show (0..1)."""
        return round(0.5 * self.coverage + 0.5 * max(0.0, self.cosine), 4)


def decide(coverage: float, cosine: float, keys_ok: bool, n_terms: int, method: str = "combined",
           novel: float = 1.0) -> bool:
    """Does a span with these measurements back the claim? `method` picks the signal (the benchmark compares them):
    "embedding" is the cosine alone; "lexical" the words alone; "combined" needs the words and the meaning."""
    if method == "embedding":
        return cosine >= COSINE_ALONE
    if not keys_ok or novel < NOVEL_MIN:
        return False
    if method == "lexical":
        return coverage >= (COVERAGE_ALONE if n_terms >= ALONE_TERMS else 1.0)
    return ((coverage >= COVERAGE_MIN and cosine >= COSINE_MIN)
            or (coverage >= COVERAGE_ALONE and n_terms >= ALONE_TERMS)
            or (cosine >= COSINE_ALONE and coverage >= COVERAGE_FLOOR))


@dataclass
class _Unit:
    """A sentence of a passage: its span, its terms and the row of its vector."""

    start: int
    end: int
    terms: frozenset[str]
    anaphoric: bool
    row: int = -1


def _units(text: str) -> list[_Unit]:
    """The passage's sentences; a table row (`cell | cell`) also holds the words of its table's header row, so "12,000
    EUR" is backed by "Travel | 12,000" under "Item | Budget (EUR)"."""
    headers = _row_headers(text)
    units = []
    for s, e in split_sentences(text):
        terms = content_terms(text[s:e]).words
        header = headers.get(text.rfind("\n", 0, s + 1) + 1)
        if header:
            terms |= content_terms(header).words
        units.append(_Unit(s, e, terms, bool(_ANAPHOR_RE.match(text[s:e]))))
    return units


def _row_headers(text: str) -> dict[int, str]:
    """Line start -> the header row of the table that line is a later row of (a table: consecutive `|` lines)."""
    out: dict[int, str] = {}
    header, start = "", 0
    for line in text.split("\n"):
        if " | " in line:
            if header:
                out[start] = header
            else:
                header = line
        else:
            header = ""
        start += len(line) + 1
    return out


def _verbatim(claim: str, text: str) -> tuple[int, int] | None:
    """Where the claim appears word for word in `text` (whitespace-insensitive, ≥ 4 words), else None. A quote
    with an elision ("header … row") matches when its parts appear in that order; the span is the last part's."""
    parts = [p.split() for p in claim.rstrip(" .…").split("…")]
    if any(not p for p in parts) or sum(map(len, parts)) < 4:
        return None
    m = re.search(r"[\s\S]*?".join("(" + r"\s+".join(map(re.escape, p)) + ")" for p in parts), text, re.IGNORECASE)
    return m.span(len(parts)) if m else None


def _quoted(span: tuple[int, int]) -> Evidence:
    """The evidence of a word-for-word quote: fully covered, fully similar, supported."""
    return Evidence(span[0], span[1], 1.0, 1.0, True, True, True)


def _snap(span: tuple[int, int], units: list[_Unit]) -> tuple[int, int]:
    """Widen a span to the whole passage sentences it touches."""
    touched = [u for u in units if u.start < span[1] and span[0] < u.end]
    if not touched:
        return span
    return min(span[0], touched[0].start), max(span[1], touched[-1].end)


def _best(claim: Terms, claim_vec: np.ndarray | None, units: list[_Unit], vecs: np.ndarray | None, method: str,
          question_terms: frozenset[str] = frozenset(), title_terms: frozenset[str] = frozenset(),
          novel_terms: frozenset[str] = frozenset()) -> Evidence | None:
    """The span (one sentence, or two when the second starts with "It/They/This…") that best backs the claim.

    Its key terms (numbers, names) must be in the span, except those the question already names and a capitalised
    first word: those only need to be somewhere in the passage or its title ("Warsaw" in "Warsaw's population is …"
    when the passage says "the city")."""
    claim_terms = claim.words
    if not units or not claim_terms:
        return None
    everywhere = frozenset().union(*(u.terms for u in units)) | title_terms
    if not claim.opener <= everywhere:
        return Evidence(units[0].start, units[0].end, 0.0, 0.0, False, False, False)
    keys = claim.keys - (question_terms & everywhere)  # `question_terms` is empty for short claims: all strict
    cos = np.zeros(len(units), dtype=np.float32)
    if claim_vec is not None and vecs is not None:
        rows = np.array([u.row for u in units])
        cos = np.where(rows >= 0, vecs[np.maximum(rows, 0)] @ claim_vec, 0.0)  # row -1: not worth encoding
    windows = [(i, i) for i in range(len(units))]
    windows += [(i, i + 1) for i in range(len(units) - 1) if units[i + 1].anaphoric]
    best: Evidence | None = None
    best_key: tuple = ()
    for a, b in windows:
        terms = units[a].terms | units[b].terms
        coverage = len(claim_terms & terms) / len(claim_terms)
        cosine = float(max(cos[a], cos[b]))
        ok = keys <= terms
        novel = len(novel_terms & terms) / len(novel_terms) if novel_terms else 1.0
        ev = Evidence(units[a].start, units[b].end, round(coverage, 4), round(cosine, 4), ok, False,
                      decide(coverage, cosine, ok, len(claim_terms), method, novel), round(novel, 4))
        key = (ev.supported, ev.score, a == b)  # single sentences win ties
        if best is None or key > best_key:
            best, best_key = ev, key
    return best


def find_evidence(claims: Sequence[str], passages: Sequence[str], embedder: Embedder, question: str = "",
                  method: str = "combined", titles: Sequence[str] | None = None) -> list[list[Evidence | None]]:
    """For every claim × passage text, the best evidence span (None when the claim has no content words).

    One batched encode of the claims and the passages' sentences; verbatim quotes need no embedding at all.
    """
    q = content_terms(question)
    parsed, novel, short = [], [], []
    for c in claims:
        t = content_terms(c)
        novel.append(t.words - q.words)  # what the sentence adds to the question: its answer
        short.append(bool(question) and len(t.words) <= SHORT_CLAIM_TERMS)
        if short[-1]:  # "Brussels." only means something together with its question
            t = Terms(t.words | q.words, t.keys | q.keys, t.opener)
        parsed.append(t)
    title_terms = [content_terms(t).words for t in (titles or [""] * len(passages))]
    verbatim = [[_verbatim(c, p) for p in passages] for c in claims]
    need_vectors = method != "lexical" and any(t.words for t, row in zip(parsed, verbatim, strict=True) if not any(row))
    units = [_units(p) for p in passages]
    claim_vecs: list[np.ndarray | None] = [None] * len(claims)
    vecs = None
    if need_vectors:
        texts: dict[str, int] = {}
        claim_rows = []
        for c, is_short in zip(claims, short, strict=True):
            key = f"{question.strip()} {c}" if is_short else c
            claim_rows.append(texts.setdefault(key, len(texts)))
        open_claims = [t.words for t, row in zip(parsed, verbatim, strict=True) if t.words and not any(row)]
        for p, us in zip(passages, units, strict=True):
            for u in us:
                # A sentence sharing too few words with every claim cannot back one (see decide): skip encoding it.
                if method == "embedding" or any(len(w & u.terms) >= COVERAGE_FLOOR * len(w) for w in open_claims):
                    u.row = texts.setdefault(p[u.start:u.end], len(texts))
        vecs = np.asarray(embedder.encode(list(texts)), dtype=np.float32)
        claim_vecs = [vecs[r] for r in claim_rows]
    out: list[list[Evidence | None]] = []
    for ci, terms in enumerate(parsed):
        row: list[Evidence | None] = []
        for pi in range(len(passages)):
            span = verbatim[ci][pi]
            if span is not None and terms.words:
                row.append(_quoted(_snap(span, units[pi])))
            else:
                row.append(_best(terms, claim_vecs[ci], units[pi], vecs, method,
                                 frozenset() if short[ci] else q.words, title_terms[pi], novel[ci]))
        out.append(row)
    return out


# --------------------------------------------------------------------------- the answer
def unbacked_sentences(answer: Answer) -> tuple[SentenceCheck, ...]:
    """The sentences of a verified answer that cite [n] but that none of their cited passages backs (unsupported,
    or backed only by a passage they did not cite): the ones a reader must be warned about."""
    return answer.unbacked()


def _context(answer: Answer) -> list[Passage]:
    n = answer.context_passages or len(answer.passages)
    return list(answer.passages[:n])


Spans = tuple[int, int]
Uses = dict[int, list[tuple[Spans, Evidence | None]]]
Matches = dict[int, list[tuple[Spans, Evidence]]]


def verify_answer(answer: Answer, embedder: Embedder, method: str = "combined") -> Answer:
    """A copy of `answer` whose citations are verified / unsupported / matched, with evidence spans and per-sentence
    checks in `sentences`; a not-found answer (or one without passages) comes back unchanged."""
    t0 = time.perf_counter()
    context = _context(answer)
    # Citations the model wrote (a "matched" one from an earlier verification is not): verifying twice is harmless.
    cited_passages = {c.n: c.passage for c in answer.citations if c.status != MATCHED}
    if answer.mode == AnswerMode.NOT_FOUND or not answer.text.strip() or not (context or cited_passages):
        return answer
    # Passage list the sentences are checked against: the numbered context, plus any cited passage outside it.
    numbered: dict[int, Passage] = {i: p for i, p in enumerate(context, 1)}
    numbered.update(cited_passages)
    ns = sorted(numbered)
    texts = [numbered[n].chunk.text for n in ns]
    titles = [" ".join((numbered[n].chunk.source.title, numbered[n].chunk.section)) for n in ns]

    sentences = answer_sentences(answer.text)
    claims, claim_of = _claims(answer.text, sentences)
    question = answer.standalone_question or answer.question
    matrix = find_evidence(claims, texts, embedder, question, method, titles) if claims else []
    cites_for, orphan = _markers(sentences, cited_passages, claim_of)
    rows = {k: dict(zip(ns, matrix[c], strict=True)) for k, c in claim_of.items()}
    checks, uses, matches = _check_sentences(answer.text, sentences, cites_for, orphan, rows, numbered)
    # A claim that cites [n] but none of whose cited passages backs it: [n] is not "verified", even if it backs
    # another sentence (a true sentence and an injected one both citing [1] leave [1] unsupported, evidence kept).
    doubted = {n for ch in replace(answer, sentences=tuple(checks)).unbacked() for n in ch.cited}
    ordered = _citations(answer, cited_passages, uses, matches, doubted, numbered)
    statuses = [c.status for c in ordered]
    summary = {
        "method": method,
        "claims": len(claims),
        "supported_claims": sum(ch.status in (VERIFIED, MATCHED) for ch in checks),
        "verified": statuses.count(VERIFIED), "unsupported": statuses.count(UNSUPPORTED),
        "matched": statuses.count(MATCHED), "unbacked_cited": len(replace(answer, sentences=tuple(checks)).unbacked()),
        "question_coverage": _question_coverage(question, ordered),
        "ms": round((time.perf_counter() - t0) * 1000, 1),
    }
    if summary["unsupported"]:
        log.info("Evidence: %d citation(s) not backed by their passage", summary["unsupported"])
    return replace(answer, citations=ordered, sentences=tuple(checks),
                   extra={**answer.extra, "evidence": summary})


def _claims(text: str, sentences: list) -> tuple[list[str], dict[int, int]]:
    """The sentences that state something, as claims, and which claim each such sentence (by index) is."""
    claims: list[str] = []
    claim_of: dict[int, int] = {}
    for k, ((s, e), _) in enumerate(sentences):
        claim = claim_text(text[s:e])
        if is_claim(claim, content_terms(claim).words):
            claim_of[k] = len(claims)
            claims.append(claim)
    return claims, claim_of


def _markers(sentences: list, cited_passages: dict[int, Passage], claim_of: dict[int, int]
             ) -> tuple[list[list[int]], list[bool]]:
    """The citations each sentence stands for, and which marker-only sentences back no claim (orphans).

    Markers in a sentence that states nothing ("The answer is [1].", "Source: [2]") cite the claims before it, back
    to the previous sentence with markers of its own."""
    own = [[n for n in written if n in cited_passages] for _, written in sentences]
    cites_for = [list(o) for o in own]
    orphan = [False] * len(sentences)
    for k, markers in enumerate(own):
        if k in claim_of or not markers:
            continue
        j = k - 1
        while j >= 0 and not own[j]:
            if j in claim_of:
                cites_for[j].extend(n for n in markers if n not in cites_for[j])
            j -= 1
        orphan[k] = not any(j in claim_of for j in range(j + 1, k))
    return cites_for, orphan


def _check_sentences(text: str, sentences: list, cites_for: list[list[int]], orphan: list[bool],
                     rows: dict[int, dict[int, Evidence | None]], numbered: dict[int, Passage]
                     ) -> tuple[list[SentenceCheck], Uses, Matches]:
    """Each sentence's check, what each cited passage backs (`uses`) and which uncited passage backs a claim
    (`matches`); `rows`: each claim sentence's evidence in every numbered passage."""
    checks: list[SentenceCheck] = []
    uses: Uses = {n: [] for n in {n for cited in cites_for for n in cited}}
    matches: Matches = {}
    for k, (span, _) in enumerate(sentences):
        cited = tuple(cites_for[k])
        if k not in rows:
            # Not a claim (a question, a label) - but a word-for-word quote of its cited passage still backs [n]
            # (extractive answers quote questions from the documents too).
            quote = claim_text(text[span[0]:span[1]])
            checks.append(SentenceCheck(span[0], span[1], NO_CLAIM, cited))
            for n in cited:
                hit = _verbatim(quote, numbered[n].chunk.text)
                if hit is not None:
                    uses[n].append((span, _quoted(hit)))
                elif orphan[k]:
                    uses[n].append((span, None))
            continue
        row = rows[k]
        for n in cited:
            uses[n].append((span, row[n]))
        checks.append(_claim_check(span, cited, row, matches))
    return checks, uses, matches


def _claim_check(span: Spans, cited: tuple[int, ...], row: dict[int, Evidence | None], matches: Matches
                 ) -> SentenceCheck:
    """A claim's check: verified by a cited passage, matched by another one (noted in `matches`), or unsupported."""
    good = {n: ev for n in cited if (ev := row[n]) is not None and ev.supported}
    if good:
        best = max(ev.score for ev in good.values())
        return SentenceCheck(span[0], span[1], VERIFIED, cited, tuple(good), best)
    candidates = [(ev.score, -n, n, ev) for n, ev in row.items() if ev is not None and ev.supported]
    if candidates:
        _, _, m, ev = max(candidates)
        matches.setdefault(m, []).append((span, ev))
        return SentenceCheck(span[0], span[1], MATCHED, cited, (m,), ev.score)
    best_any = max((ev.score for ev in row.values() if ev is not None), default=0.0)
    return SentenceCheck(span[0], span[1], UNSUPPORTED, cited, (), best_any)


def _citations(answer: Answer, cited_passages: dict[int, Passage], uses: Uses, matches: Matches, doubted: set[int],
               numbered: dict[int, Passage]) -> tuple[Citation, ...]:
    """The answer's citations with their status and evidence, plus a "matched" one for each uncited backing passage,
    in number order."""
    citations: dict[int, Citation] = {}
    for c in (c for c in answer.citations if c.n in cited_passages):
        backed = [(span, ev) for span, ev in uses.get(c.n, []) if ev is not None and ev.supported]
        extra_spans = tuple(span for span, _ in matches.get(c.n, []))
        if backed and c.n in doubted:
            _, top = max(backed, key=lambda x: x[1].score)
            citations[c.n] = replace(c, status=UNSUPPORTED, evidence_start=top.start, evidence_end=top.end,
                                     support=top.score,
                                     answer_spans=tuple(span for span, _ in uses.get(c.n, [])) + extra_spans)
        elif backed:
            _, top = max(backed, key=lambda x: x[1].score)
            citations[c.n] = replace(c, status=VERIFIED, evidence_start=top.start, evidence_end=top.end,
                                     support=top.score,
                                     answer_spans=tuple(span for span, _ in backed) + extra_spans)
        else:
            scores = [ev.score for _, ev in uses.get(c.n, []) if ev is not None]
            citations[c.n] = replace(c, status=UNSUPPORTED, evidence_start=None, evidence_end=None,
                                     support=max(scores) if scores else 0.0,
                                     answer_spans=tuple(span for span, _ in uses.get(c.n, [])))
    for m, backing in matches.items():
        if m in citations:
            continue
        _, top = max(backing, key=lambda x: x[1].score)
        citations[m] = Citation(n=m, passage=numbered[m], status=MATCHED, evidence_start=top.start,
                                evidence_end=top.end, support=top.score,
                                answer_spans=tuple(span for span, _ in backing))
    return tuple(citations[n] for n in sorted(citations))


def _question_coverage(question: str, ordered: tuple[Citation, ...]) -> float | None:
    """How much of the question the evidence speaks about: a low share means the answer, however faithful to its
    sources, may not answer this question (the benchmark measures it as a refusal signal)."""
    q_words = content_terms(question).words if question else frozenset()
    seen: set[str] = set()
    for c in ordered:
        if c.evidence_start is not None:  # verified, matched, or the backed part of a doubted citation
            chunk = c.passage.chunk
            seen |= content_terms(chunk.text[c.evidence_start:c.evidence_end]).words
            seen |= content_terms(f"{chunk.source.title} {chunk.section}").words
    return round(len(q_words & seen) / len(q_words), 4) if q_words else None


__all__ = ["Evidence", "Terms", "FLAGGED", "MATCHED", "METHODS", "NO_CLAIM", "UNSUPPORTED", "VERIFIED", "answer_sentences",
           "claim_text", "content_terms", "decide", "find_evidence", "split_sentences", "unbacked_sentences",
           "verify_answer"]
