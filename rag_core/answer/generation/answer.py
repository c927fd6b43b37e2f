"""Question -> grounded Answer: rewrite follow-ups, retrieve, budget the prompt, stream from a chat model (Ollama by
default) or quote the documents, then check every citation against its passage."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from rag_core.answer import widen
from rag_core.answer.generation.chat import ChatBackend, backend_for
from rag_core.answer.generation.extractive import EXTRACTIVE_PASSAGES, extractive_answer, tidy_answer_text
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
    NOTICE_UNEXPECTED,
    details_extra,
    fallback_notice,
    fault_sentence,
)
from rag_core.answer.generation.outcome import (
    NOTICE_STOPPED,
    End,
    Ending,
    MemoEncoder,
    ending,
    evidence_notice,
    keep_backed,
    model_words,
    read_stream,
    unchecked,
)
from rag_core.answer.generation.prompt import NOT_FOUND_REPLY, Prompt, build_prompt, fitted, standalone_question
from rag_core.answer.generation.whole import route
from rag_core.answer.grounding import answerability
from rag_core.answer.grounding import citations as cites
from rag_core.answer.grounding.answerability import Verdict
from rag_core.answer.grounding.evidence import verify_answer
from rag_core.answer.grounding.quotes import Candidate, rank_quotes
from rag_core.answer.injection.detect import mark_answer
from rag_core.answer.language import with_language_notice
from rag_core.answer.retrieval import embed_queries, phrase_in_library, retrieve_scored
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, LLMError
from rag_core.core.models import Answer, AnswerMode, ChatTurn, Passage, StageEvent, Step
from rag_core.core.text import is_refusal

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

    from rag_core.service.library import Library
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)

class AnswerStream:
    """Iterate to get the answer's text deltas as they stream; `answer` is set when iteration ends.

    `chat_model` is any LangChain chat model; without one, answers come from the ChatOllama of the settings
    (DOCCHAT_OLLAMA_MODEL), or are extractive when none is configured or `use_llm` is False."""

    def __init__(self, library: Library, question: str, settings: Settings,
                 history: Iterable[ChatTurn] = (), doc_ids: list[str] | None = None,
                 owners: list[str | None] | None = None, use_llm: bool = True, k: int | None = None,
                 chat_model: BaseChatModel | None = None) -> None:
        self.library = library
        self.question = question
        self.settings = settings
        self.history = list(history or ())
        self.doc_ids = None if doc_ids is None else list(doc_ids)
        self.owners = None if owners is None else list(owners)
        self.use_llm = use_llm
        self.k = k or settings.retrieval.top_k
        self.chat_model = chat_model
        self.answer: Answer | None = None
        self.passages: list[Passage] = []
        self.step = Step.SEARCHING  # what it is doing now; listeners get each step as a StageEvent
        self._listeners: list[Callable[[StageEvent], None]] = []
        self.prompt: Prompt | None = None
        self.timings: dict[str, float] = {}
        self._standalone = question
        self._ranked: list[Candidate] = []  # the quotable sentences of the top passages, best answer first
        self._direct = True  # False: no quote answers directly; extractive replies are labelled "closest passages"
        self._dense = False  # True once self._ranked was re-ranked by meaning (rag_core.answer.grounding.quotes SHORTLIST)
        self.checked: dict[str, Any] = {}  # what the evidence check before answering measured
        self._llm: tuple[str, np.ndarray, float] | None = None  # the chat model's name, query vector, relevance
        self._gen: Iterator[str] | None = None
        self._t0 = time.perf_counter()
        self.intent: Any = None  # what the question asks for (rag_core.answer.intent): set first, or classified
        self._whole: Any = None  # the run of a question about whole documents or the library (rag_core.answer.summaries)

    def __iter__(self) -> Iterator[str]:
        # Always the same generator: st.write_stream calls iter() once to check, then again to loop.
        if self._gen is None:
            self._gen = self._run()
        return self._gen

    def close(self) -> None:
        """Stop early (closes the HTTP stream); `answer` keeps the partial text, marked incomplete."""
        if self._gen is not None and hasattr(self._gen, "close"):
            self._gen.close()

    def listen(self, listener: Callable[[StageEvent], None]) -> None:
        """Call `listener` with every step from now on (on the thread that iterates), starting with the current one."""
        self._listeners.append(listener)
        listener(StageEvent(self.step, time.monotonic(), tuple(self.passages)))

    def _enter(self, step: Step, note: str = "") -> None:
        """Move to `step` (`note`: what a long run says of it) and tell the listeners (whose failures never stop it)."""
        self.step = step
        event = StageEvent(step, time.monotonic(), tuple(self.passages), note)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a page's bookkeeping must never end the answer (logged with its traceback)
                log.exception("A stage listener failed")

    # -- helpers -------------------------------------------------------------
    @property
    def writes_with_llm(self) -> bool:
        """True when a chat model is to write the answer (a given one, or a configured Ollama model)."""
        return self.use_llm and (self.chat_model is not None or bool(self.settings.chat_model_name))

    def _mark(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.timings[name] = round((now - since) * 1000, 2)
        return now

    def _finish(self, text: str, mode: AnswerMode, embedder: Embedder | MemoEncoder | None = None, **kw: Any) -> Answer:
        self.timings.setdefault("total", round((time.perf_counter() - self._t0) * 1000, 2))
        extra: dict[str, Any] = {"timings": dict(self.timings)}
        if self.prompt is not None:
            extra.update(num_ctx=self.prompt.num_ctx, prompt_tokens=self.prompt.tokens, dropped=self.prompt.dropped)
        extra.update(kw.pop("extra", {}))
        if self.checked:
            extra.setdefault("answerability", dict(self.checked))
        tidy = tidy_answer_text(text, mode)  # before verification: its offsets must index the final text
        if tidy != text:
            extra.setdefault("raw_text", text)
        answer = Answer(text=tidy, mode=mode, passages=tuple(self.passages), question=self.question,
                        standalone_question=self._standalone, extra=extra, **kw)
        if mode != AnswerMode.NOT_FOUND and tidy.strip() and answer.passages:
            self._enter(Step.CHECKING)
            # Check every [n] against its passage; uncited sentences get a matched source when one backs them.
            t = time.perf_counter()
            answer = verify_answer(answer, cast("Embedder", embedder or self.library.embedder))
            self.timings["verify"] = round((time.perf_counter() - t) * 1000, 2)
            if mode == AnswerMode.MODEL and not answer.incomplete:
                answer = replace(answer, notice=answer.notice or evidence_notice(answer))
            answer = mark_answer(answer)  # a cited passage with instructions addressed to an AI: say so
        answer = replace(answer, notice=with_language_notice(  # another language than its passages' or documents'
            answer.notice, self.question, answer.passages, self.library.store, self.owners, self.doc_ids))
        self.answer = answer
        return answer

    # -- the pipeline --------------------------------------------------------
    def _run(self) -> Iterator[str]:
        partial: list[str] = []
        mode, last = (AnswerMode.MODEL if self.writes_with_llm else AnswerMode.QUOTES), Step.DONE
        try:
            yield from self._pipeline(partial)
        except DocChatError as e:  # e.g. the library is busy or the vector database is unreachable
            log.info("Answering failed: %s", e)
            last = Step.FAILED
            self._finish("", mode, incomplete=True, notice=str(e), extra=details_extra(unchecked("".join(partial), e.details)))
        except Exception:  # logged with its traceback; the user gets one sentence
            log.exception("Unexpected failure while answering %r", self.question)
            last = Step.FAILED
            self._finish("", mode, incomplete=True, notice=NOTICE_UNEXPECTED, extra=details_extra(unchecked("".join(partial))))
        finally:
            if self.answer is None:  # the consumer stopped iterating (GeneratorExit): keep what of it is backed
                last = Step.STOPPED
                self._stopped("".join(partial), mode)
            self._enter(last)

    def _stopped(self, text: str, mode: AnswerMode) -> None:
        """The answer of a stream closed early (Stop): the model's text so far, checked like any other ending."""
        try:
            if self._whole is not None:  # a summary stopped part-way keeps what it read
                return self._whole.stopped()
            if self.prompt is not None and self._llm is not None and text.strip():
                return self._conclude(ending(None, stopped=True), text)
        except Exception:  # closing must never raise; the text is then not shown (it is unchecked)
            log.exception("Checking a stopped answer failed")
        self._finish("", mode, incomplete=True, notice=NOTICE_STOPPED, extra=details_extra(unchecked(text)),
                     context_passages=len(self.prompt.passages) if self.prompt is not None else 0)

    def _standalone_question(self, chat: ChatBackend | None) -> LLMError | None:
        """Step 1: a follow-up becomes a question that stands alone; the model's error when its rewrite failed."""
        t = time.perf_counter()
        rewritten = standalone_question(self.question, self.history, self.settings, chat)
        if rewritten is None:
            return None
        self._standalone, error = rewritten
        self._mark("rewrite", t)
        return error

    def _search(self, query: str) -> tuple[np.ndarray, float | None]:
        """Step 2: the passages nearest to the question; returns its vector and the best passage's cosine."""
        t = time.perf_counter()
        vectors = embed_queries(self.library.store, [query])[0]  # embedded once: relevance check and retrieval
        qvec = np.asarray(vectors.dense, dtype=np.float32)
        t = self._mark("embed_query", t)
        found = retrieve_scored(self.library.store, query, self.k, self.doc_ids, self.owners, vectors=vectors)
        self.passages = (widen.widen(self.library.store, found.passages, self.owners) if widen.WIDEN_READ
                         else found.passages)  # the small-to-large read, when on (rag_core/answer/widen.py)
        self._mark("retrieve", t)
        self._enter(Step.READ)
        return qvec, found.relevance  # the best chunk's dense cosine, from the same request as the passages

    def _pipeline(self, partial: list[str]) -> Iterator[str]:
        self.settings = s = fitted(self.settings, self.writes_with_llm and self.chat_model is None)  # server's window
        lib, self._whole = self.library, route(self)  # a question about whole documents or the library: from them
        if self._whole is not None:
            yield from self._whole.run(partial)
            return
        chat = backend_for(s, self.chat_model) if self.writes_with_llm else None
        unserved = chat.unserved() if chat else None  # a name the server does not serve: quote, rewrite without it
        llm_error = unserved or self._standalone_question(None if unserved else chat)
        query = self._standalone
        qvec, relevance = self._search(query)
        t = time.perf_counter()
        if not self.passages or relevance is None:
            empty = not lib.documents(self.owners)
            yield self._finish(NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, relevance=relevance,
                               notice=NOTICE_EMPTY if empty else NOTICE_NOT_RELEVANT,
                               extra=details_extra(DETAILS_EMPTY if empty else None)).text
            return
        if relevance < s.retrieval.min_relevance:
            log.info("Best passage cosine %.3f < %.3f: not in the documents", relevance, s.retrieval.min_relevance)
            yield self._finish(NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, relevance=relevance, notice=NOTICE_NOT_RELEVANT).text
            return
        # The quotes decide what can be answered. Quoting, the shortlist is re-ranked by meaning (one small encode);
        # with a model, by words only (names, numbers), so the model is asked without waiting for a busy embedder
        # again; the model's own answer is checked sentence by sentence afterwards.
        quoting = chat is None or llm_error is not None
        self._ranked = rank_quotes(query, self.passages[:EXTRACTIVE_PASSAGES], qvec if quoting else None,
                                   lib.embedder if quoting else None)
        self._dense = quoting
        verdict = self._answerable(query, relevance)
        t = self._mark("answerability", t)
        if not verdict.answerable:
            log.info("Not answerable from the documents (%s): %s", verdict.reason, verdict.missing)
            yield self._finish(NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, relevance=relevance,
                               notice=verdict.notice or NOTICE_NOT_RELEVANT, extra=details_extra(verdict.details)).text
            return
        self._direct = verdict.direct
        if chat is None or llm_error is not None:
            notice = (fallback_notice(llm_error) if llm_error
                      else NOTICE_NO_LLM if not self.use_llm else NOTICE_NO_MODEL)
            details = DETAILS_NO_MODEL if notice == NOTICE_NO_MODEL else None
            yield from self._extractive(qvec, relevance, notice, llm_error, details)
            return

        self.prompt = build_prompt(query, self.passages, s)
        t = self._mark("prompt_build", t)
        self._enter(Step.WAITING)
        yield from self._stream_llm(chat, qvec, relevance, partial, t)

    def _answerable(self, query: str, relevance: float) -> Verdict:
        """The evidence check before answering (rag_core.answer.grounding.answerability); what it measured goes to
        `self.checked` (Answer.extra["answerability"])."""
        lib, score = self.library, (self._best_score(query) if self._ranked else 0.0)
        # a follow-up searched with the question before it: its own words count too
        signals = answerability.gather((query, self.question), self._ranked, self.passages, relevance, score,
                                       EXTRACTIVE_PASSAGES)
        verdict = answerability.check(
            query, self.passages, lambda phrase: phrase_in_library(lib.store, phrase, self.doc_ids, self.owners),
            signals)
        self.checked = answerability.measured(verdict, signals)
        return verdict

    def _best_score(self, query: str) -> float:
        """The best quote's score; a follow-up searched together with the question before it is also scored on
        its own words (the joined question dilutes them)."""
        best = self._ranked[0].score
        if self._dense and self.question.strip() != query.strip():  # (with a model: words only, no encode)
            vec = np.asarray(self.library.embedder.encode([self.question])[0], dtype=np.float32)
            own = rank_quotes(self.question, self.passages[:EXTRACTIVE_PASSAGES], vec, self.library.embedder)
            best = max(best, own[0].score if own else 0.0)
        return best

    def _extractive(self, qvec: np.ndarray, relevance: float, notice: str,
                    fault: LLMError | None = None, details: str | None = None, extra: dict | None = None,
                    withheld: bool = False, fast: bool = False, incomplete: bool = False) -> Iterator[str]:
        """Quote the documents. `fast` (after Stop) keeps the quotes ranked by their words: no encode, no search."""
        t = time.perf_counter()
        if not fast:
            self._by_meaning(qvec, relevance)
        text, citations = extractive_answer(self._standalone, None if fast else qvec, self.passages,
                                            None if fast else self.library.embedder, ranked=self._ranked or None,
                                            direct=self._direct)
        self._mark("extractive", t)
        extra = {**(extra or {}), **({"fault": type(fault).__name__} if fault else {})}
        if not self._direct:  # say so first: the person judges the passages, DocChat does not claim an answer
            extra["closest"] = True
            notice = (f"{NOTICE_CLOSEST} {notice}" if withheld
                      else f"{NOTICE_CLOSEST} {fault_sentence(fault)}" if fault else NOTICE_CLOSEST)
        self._finish(text, AnswerMode.QUOTES, citations=citations, relevance=relevance, notice=notice,
                     incomplete=incomplete,
                     context_passages=min(EXTRACTIVE_PASSAGES, len(self.passages)),
                     extra={**extra, **details_extra(details or (fault.details if fault else None))})
        yield text

    def _by_meaning(self, qvec: np.ndarray, relevance: float) -> None:
        """Quotes ranked for the model's check (by words) are re-ranked by meaning once quotes are to be shown."""
        if not self._dense:
            self._ranked = rank_quotes(self._standalone, self.passages[:EXTRACTIVE_PASSAGES], qvec,
                                       self.library.embedder)
            self._dense = True
            self._direct = self._answerable(self._standalone, relevance).direct  # with the quotes' meaning

    def _refused(self, qvec: np.ndarray, relevance: float, raw: str, extra: dict, common: dict) -> None:
        """The model says the passages lack the answer though the check before asking found them on topic: a quote
        that answers directly is shown (the model's words under details), else the plain not-found reply; the
        model's own unchecked words are never the reply."""
        self._by_meaning(qvec, relevance)
        if not self._direct:
            self._finish(NOT_FOUND_REPLY, AnswerMode.NOT_FOUND, notice=NOTICE_NOT_IN_SOURCES, extra=extra, **common)
            return
        for _ in self._extractive(qvec, relevance, NOTICE_MODEL_FOUND_NONE, details=model_words(raw),
                                  extra={"withheld_text": raw, "model": extra["model"], "refused": True}):
            pass

    def _stream_llm(self, chat: ChatBackend, qvec: np.ndarray, relevance: float, partial: list[str],
                    t: float) -> Iterator[str]:
        assert self.prompt is not None
        self._llm = (chat.name, qvec, relevance)
        got = yield from read_stream(chat, self.prompt, self.settings.answer.answer_tokens, partial, self._first_token)
        self.prompt = got.prompt or self.prompt  # a smaller one after a refusal for size
        self._mark("llm", t)
        if got.fault is not None and not partial:  # nothing streamed yet: answer extractively instead
            yield from self._extractive(qvec, relevance, fallback_notice(got.fault), got.fault)
            return
        raw = "".join(partial)
        self._conclude(got.ending(self.settings.answer.answer_tokens), raw, got.kept(raw), got.done_reason)

    def _first_token(self) -> None:
        self._mark("first_token", self._t0)
        self._enter(Step.WRITING)

    def _conclude(self, end: Ending, raw: str, text: str | None = None, done_reason: str | None = None) -> None:
        """The model's text checked against the passages whatever ended it: one that did not finish keeps only its
        backed sentences; when nothing is backed, the closest quotes replace it (its text goes under details)."""
        assert self.prompt is not None and self._llm is not None
        passages, (name, qvec, relevance) = self.prompt.passages, self._llm
        resolved = cites.resolve(raw if text is None else text, passages)
        extra: dict[str, Any] = {"raw_text": raw, "done_reason": done_reason, "model": name, "ended": end.end.value}
        common: dict[str, Any] = dict(relevance=relevance, context_passages=len(passages),
                                      invalid_markers=len(resolved.invalid))
        if end.end not in (End.FAILED, End.STOPPED) and not resolved.citations and is_refusal(raw):
            return self._refused(qvec, relevance, raw, extra, common)
        memo = MemoEncoder(self.library.embedder)  # the kept part is checked again without a second encode
        answer = self._finish(resolved.text, AnswerMode.MODEL, citations=resolved.citations, incomplete=end.incomplete,
                              notice=end.notice, extra={**extra, **details_extra(end.details)}, embedder=memo, **common)
        evidence = answer.extra.get("evidence", {})
        if answer.text.strip() and not evidence.get("supported_claims") and (evidence.get("claims") or end.incomplete):
            # Nothing the model wrote is backed by a passage: show the closest quotes instead, and say so.
            log.info("Model answer withheld (%s): none of its %d claims is backed", end.end, evidence.get("claims", 0))
            self.answer = None
            notice, details = end.withheld(resolved.text)
            for _ in self._extractive(qvec, relevance, notice, details=details, withheld=True,
                                      extra={"withheld_text": resolved.text, "model": name, "ended": end.end.value},
                                      fast=end.end is End.STOPPED, incomplete=end.incomplete):
                pass
            return
        kept = keep_backed(answer) if end.incomplete else None
        if kept is None or kept.text == answer.text:
            return
        log.info("Kept %d backed claim(s) of an answer that %s; left out %d", kept.backed, end.end, kept.unbacked)
        notice, details = end.pruned(kept)
        self._finish(kept.text, AnswerMode.MODEL, citations=cites.resolve(kept.text, passages).citations, incomplete=True,
                     notice=notice, extra={**extra, "left_out": kept.left_out, **details_extra(details)}, embedder=memo,
                     **common)


def start_answer(library: Library, question: str, settings: Settings, history: Sequence[ChatTurn] = (),
                 doc_ids: list[str] | None = None, owners: list[str | None] | None = None,
                 use_llm: bool = True, k: int | None = None, chat_model: BaseChatModel | None = None) -> AnswerStream:
    """Rewrite follow-ups, retrieve, then stream an answer from `chat_model` (default: per the settings) or quotes."""
    return AnswerStream(library, question, settings, history, doc_ids, owners, use_llm, k, chat_model)


def answer(library: Library, question: str, settings: Settings, **kwargs: Any) -> Answer:
    """Non-streaming convenience: run the whole stream and return the Answer (same arguments as start_answer)."""
    stream = start_answer(library, question, settings, **kwargs)
    for _ in stream:
        pass
    assert stream.answer is not None
    return stream.answer
