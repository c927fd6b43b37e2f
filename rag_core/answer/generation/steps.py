"""The steps of a fact question, one function each, over one AnswerRun (run.py): rewrite the follow-up → retrieve →
decide answerable → quote (no model) or build the prompt → stream → verify and conclude. A step that ends the answer
sets `run.answer` (finish.py) and returns the text it says; answer.py drives the chain (FACTS)."""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from rag_core.answer.generation.extractive import EXTRACTIVE_PASSAGES, extractive_answer
from rag_core.answer.generation.finish import finish
from rag_core.answer.generation.notices import (
    DETAILS_EMPTY,
    DETAILS_NO_MODEL,
    NOTICE_CLOSEST,
    NOTICE_EMPTY,
    NOTICE_MODEL_FOUND_NONE,
    NOTICE_NO_LLM,
    NOTICE_NO_MODEL,
    NOTICE_NOT_IN_SOURCES,
    NOTICE_NOT_RELEVANT,
    details_extra,
    fallback_notice,
    fault_sentence,
)
from rag_core.answer.generation.outcome import (
    End,
    Ending,
    MemoEncoder,
    ending,
    keep_backed,
    model_words,
    read_stream,
)
from rag_core.answer.generation.prompt import NOT_FOUND_REPLY, build_prompt, standalone_question
from rag_core.answer.generation.run import AnswerRun, Chain
from rag_core.answer.grounding import answerability
from rag_core.answer.grounding import citations as cites
from rag_core.answer.grounding.answerability import Verdict
from rag_core.answer.grounding.quotes import rank_quotes
from rag_core.core.errors import LLMError
from rag_core.core.models import AnswerMode, Step
from rag_core.core.text import is_refusal
from rag_core.llm.chat import backend_for
from rag_core.retrieve import widen
from rag_core.retrieve.search import embed_queries, phrase_in_library, retrieve_scored

log = logging.getLogger(__name__)


def said(text: str) -> Iterator[str]:
    """What a step that ends the answer says: its text, once."""
    return iter((text,))


# --------------------------------------------------------------------------- 1. rewrite the follow-up
def rewrite(run: AnswerRun) -> None:
    """The model that writes (when one does) and a follow-up rewritten as a question that stands alone; a model the
    server does not serve, or a rewrite that failed, is kept as `llm_error` (the answer then quotes)."""
    ask = run.ask
    run.chat = chat = backend_for(run.settings, ask.chat_model) if ask.writes_with_llm else None
    run.llm_error = chat.unserved() if chat else None  # a name the server does not serve: quote, no rewrite
    if run.llm_error is not None:
        return
    t = time.perf_counter()
    rewritten = standalone_question(ask.text, ask.history, run.settings, chat)
    if rewritten is None:
        return
    run.standalone, run.llm_error = rewritten
    run.mark("rewrite", t)


# --------------------------------------------------------------------------- 2. retrieve
def retrieve(run: AnswerRun) -> None:
    """The passages nearest to the question, its vector and the best passage's cosine."""
    ask, store = run.ask, run.ask.library.store
    t = time.perf_counter()
    vectors = embed_queries(store, [run.standalone])[0]  # embedded once: relevance check and retrieval
    run.qvec = np.asarray(vectors.dense, dtype=np.float32)
    run.mark("embed_query", t)
    found = retrieve_scored(store, run.standalone, ask.k, ask.scope, ask.seen_by, vectors=vectors)
    run.rerank_notice = found.notice  # the reranker's, when it was late or failed (rag_core/retrieve/reranker.py)
    run.passages = (widen.widen(store, found.passages, ask.seen_by) if widen.WIDEN_READ
                    else found.passages)  # the small-to-large read, when on (rag_core/retrieve/widen.py)
    run.mark("retrieve")
    run.relevance = found.relevance  # the best chunk's dense cosine, from the same request as the passages


# --------------------------------------------------------------------------- 3. decide answerable
def decide(run: AnswerRun) -> Iterator[str] | None:
    """Not found when nothing relevant was retrieved or the evidence check before answering says the passages do
    not answer it (the answer ends here); else the quotes are ranked and `direct` says whether one answers it."""
    s, relevance = run.settings, run.relevance
    if not run.passages or relevance is None:
        empty = not run.ask.library.documents(run.ask.seen_by)
        return said(finish(run, NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, relevance=relevance,
                           notice=NOTICE_EMPTY if empty else NOTICE_NOT_RELEVANT,
                           extra=details_extra(DETAILS_EMPTY if empty else None)).text)
    if relevance < s.retrieval.min_relevance:
        log.info("Best passage cosine %.3f < %.3f: not in the documents", relevance, s.retrieval.min_relevance)
        return said(finish(run, NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, relevance=relevance,
                           notice=NOTICE_NOT_RELEVANT).text)
    # The quotes decide what can be answered. Quoting, the shortlist is re-ranked by meaning (one small encode);
    # with a model, by words only (names, numbers), so the model is asked without waiting for a busy embedder
    # again; the model's own answer is checked sentence by sentence afterwards.
    quoting = _quoting(run)
    embedder = run.ask.library.embedder
    run.ranked = rank_quotes(run.standalone, run.passages[:EXTRACTIVE_PASSAGES], run.qvec if quoting else None,
                             embedder if quoting else None)
    run.dense = quoting
    verdict = _answerable(run, run.standalone, relevance)
    run.mark("answerability")
    if not verdict.answerable:
        log.info("Not answerable from the documents (%s): %s", verdict.reason, verdict.missing)
        return said(finish(run, NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, relevance=relevance,
                           notice=verdict.notice or NOTICE_NOT_RELEVANT, extra=details_extra(verdict.details)).text)
    run.direct = verdict.direct
    return None


def _quoting(run: AnswerRun) -> bool:
    return run.chat is None or run.llm_error is not None


def _answerable(run: AnswerRun, query: str, relevance: float) -> Verdict:
    """The evidence check before answering (rag_core.answer.grounding.answerability); what it measured goes to
    `run.checked` (Answer.extra["answerability"])."""
    ask, score = run.ask, (_best_score(run, query) if run.ranked else 0.0)
    # a follow-up searched with the question before it: its own words count too
    signals = answerability.gather((query, ask.text), run.ranked, run.passages, relevance, score, EXTRACTIVE_PASSAGES)
    verdict = answerability.check(
        query, run.passages, lambda phrase: phrase_in_library(ask.library.store, phrase, ask.scope, ask.seen_by),
        signals)
    run.checked = answerability.measured(verdict, signals)
    return verdict


def _best_score(run: AnswerRun, query: str) -> float:
    """The best quote's score; a follow-up searched together with the question before it is also scored on its own
    words (the joined question dilutes them)."""
    best, question, embedder = run.ranked[0].score, run.ask.text, run.ask.library.embedder
    if run.dense and question.strip() != query.strip():  # (with a model: words only, no encode)
        vec = np.asarray(embedder.encode([question])[0], dtype=np.float32)
        own = rank_quotes(question, run.passages[:EXTRACTIVE_PASSAGES], vec, embedder)
        best = max(best, own[0].score if own else 0.0)
    return best


# --------------------------------------------------------------------------- 4a. quote (no model)
def quote_without_model(run: AnswerRun) -> Iterator[str] | None:
    """Without a model (none configured, use_llm off, or it failed before writing) the answer quotes the documents."""
    if not _quoting(run):
        return None
    fault = run.llm_error
    notice = (fallback_notice(fault) if fault else NOTICE_NO_LLM if not run.ask.use_llm else NOTICE_NO_MODEL)
    return said(quote(run, notice, fault, DETAILS_NO_MODEL if notice == NOTICE_NO_MODEL else None))


def quote(run: AnswerRun, notice: str, fault: LLMError | None = None, details: str | None = None,
          extra: dict[str, Any] | None = None, withheld: bool = False, fast: bool = False,
          incomplete: bool = False) -> str:
    """Quote the documents; returns the text. `fast` (after Stop) keeps the quotes ranked by their words: no encode,
    no search."""
    t = time.perf_counter()
    if not fast:
        _by_meaning(run)
    embedder = None if fast else run.ask.library.embedder
    text, citations = extractive_answer(run.standalone, None if fast else run.qvec, run.passages, embedder,
                                        ranked=run.ranked or None, direct=run.direct)
    run.mark("extractive", t)
    extra = {**(extra or {}), **({"fault": type(fault).__name__} if fault else {})}
    if not run.direct:  # say so first: the person judges the passages, DocChat does not claim an answer
        extra["closest"] = True
        notice = (f"{NOTICE_CLOSEST} {notice}" if withheld
                  else f"{NOTICE_CLOSEST} {fault_sentence(fault)}" if fault else NOTICE_CLOSEST)
    finish(run, text, AnswerMode.QUOTES, citations=citations, relevance=run.relevance, notice=notice,
           incomplete=incomplete, context_passages=min(EXTRACTIVE_PASSAGES, len(run.passages)),
           extra={**extra, **details_extra(details or (fault.details if fault else None))})
    return text


def _by_meaning(run: AnswerRun) -> None:
    """Quotes ranked for the model's check (by words) are re-ranked by meaning once quotes are to be shown."""
    if not run.dense:
        run.ranked = rank_quotes(run.standalone, run.passages[:EXTRACTIVE_PASSAGES], run.qvec,
                                 run.ask.library.embedder)
        run.dense = True
        assert run.relevance is not None
        run.direct = _answerable(run, run.standalone, run.relevance).direct  # with the quotes' meaning


# --------------------------------------------------------------------------- 4b. build the prompt
def prompt(run: AnswerRun) -> None:
    """The model's prompt: the passages that fit its context, numbered [1..]."""
    run.prompt = build_prompt(run.standalone, run.passages, run.settings)
    run.mark("prompt_build")


# --------------------------------------------------------------------------- 5. stream
def stream(run: AnswerRun) -> Iterator[str]:
    """Stream the model's answer; when it fails before writing anything, quote the documents instead."""
    assert run.chat is not None and run.prompt is not None
    got = yield from read_stream(run.chat, run.prompt, run.settings.answer.answer_tokens, run.partial, lambda: _first(run))
    run.prompt = got.prompt or run.prompt  # a smaller one after a refusal for size
    run.streamed = got
    run.mark("llm")
    if got.fault is not None and not run.partial:  # nothing streamed yet: answer extractively instead
        yield quote(run, fallback_notice(got.fault), got.fault)


def _first(run: AnswerRun) -> None:
    run.mark_since_start("first_token")
    run.enter(Step.WRITING)


# --------------------------------------------------------------------------- 6. verify the citations, conclude
def conclude_stream(run: AnswerRun) -> None:
    """The streamed answer concluded by how its stream ended."""
    got, raw = run.streamed, "".join(run.partial)
    assert got is not None
    conclude(run, got.ending(run.settings.answer.answer_tokens), raw, got.kept(raw), got.done_reason)


def conclude(run: AnswerRun, end: Ending, raw: str, text: str | None = None, done_reason: str | None = None) -> None:
    """The model's text checked against the passages whatever ended it: one that did not finish keeps only its
    backed sentences; when nothing is backed, the closest quotes replace it (its text goes under details)."""
    assert run.prompt is not None
    passages, name = run.prompt.passages, run.model_name
    resolved = cites.resolve(raw if text is None else text, passages)
    extra: dict[str, Any] = {"raw_text": raw, "done_reason": done_reason, "model": name, "ended": end.end.value}
    common: dict[str, Any] = dict(relevance=run.relevance, context_passages=len(passages),
                                  invalid_markers=len(resolved.invalid))
    if end.end not in (End.FAILED, End.STOPPED) and not resolved.citations and is_refusal(raw):
        return _refused(run, raw, extra, common)
    memo = MemoEncoder(run.ask.library.embedder)  # the kept part is checked again without a second encode
    answer = finish(run, resolved.text, AnswerMode.MODEL, citations=resolved.citations, incomplete=end.incomplete,
                    notice=end.notice, extra={**extra, **details_extra(end.details)}, embedder=memo, **common)
    evidence = answer.extra.get("evidence", {})
    echoed = resolved.placeholders > 0 and not resolved.citations  # it copied the prompt's "[n]", cited nothing
    if answer.text.strip() and (echoed or not evidence.get("supported_claims") and (evidence.get("claims")
                                                                                  or end.incomplete)):
        # Nothing the model wrote is backed by a passage: show the closest quotes instead, and say so.
        log.info("Model answer withheld (%s): none of its %d claims is backed", end.end, evidence.get("claims", 0))
        run.answer = None
        notice, details = end.withheld(resolved.text)
        quote(run, notice, details=details, withheld=True,
              extra={"withheld_text": resolved.text, "model": name, "ended": end.end.value},
              fast=end.end is End.STOPPED, incomplete=end.incomplete)
        return None
    kept = keep_backed(answer) if end.incomplete else None
    if kept is None or kept.text == answer.text:
        return None
    log.info("Kept %d backed claim(s) of an answer that %s; left out %d", kept.backed, end.end, kept.unbacked)
    notice, details = end.pruned(kept)
    finish(run, kept.text, AnswerMode.MODEL, citations=cites.resolve(kept.text, passages).citations, incomplete=True,
           notice=notice, extra={**extra, "left_out": kept.left_out, **details_extra(details)}, embedder=memo,
           **common)
    return None


def _refused(run: AnswerRun, raw: str, extra: dict[str, Any], common: dict[str, Any]) -> None:
    """The model says the passages lack the answer though the check before asking found them on topic: a quote
    that answers directly is shown (the model's words under details), else the plain not-found reply; the model's
    own unchecked words are never the reply."""
    _by_meaning(run)
    if not run.direct:
        finish(run, NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, notice=NOTICE_NOT_IN_SOURCES, extra=extra, **common)
        return
    quote(run, NOTICE_MODEL_FOUND_NONE, details=model_words(raw),
          extra={"withheld_text": raw, "model": extra["model"], "refused": True})


# --------------------------------------------------------------------------- Stop
def stopped(run: AnswerRun, text: str) -> bool:
    """A fact answer stopped while the model wrote: its text so far, checked like any other ending (True); False
    when there is none (the driver then gives the stopped notice)."""
    if run.prompt is None or not text.strip():
        return False
    conclude(run, ending(None, stopped=True), text)
    return True


FACTS = Chain("facts", (
    (rewrite, None),
    (retrieve, None),
    (decide, Step.READ),
    (quote_without_model, None),
    (prompt, None),
    (stream, Step.WAITING),
    (conclude_stream, None),
), stopped)
