"""Questions about whole documents or the library: other chains of steps over the same AnswerRun (run.py), ending in
the same Answer with the same evidence check (finish.py). `route` decides from the question's intent (rag_core.answer.intent): a fact question
goes the usual way (retrieval); a whole-document one is answered by WholeDocument: without a model (or when it fails
before reading anything) it quotes the document (rag_core.answer.summaries.digest); with one it reads the document part
by part (reading.py), each part's notes streamed as they come, then the whole; Stop keeps what was read. An outline
lists the headings; a comparison puts the documents side by side and adds what each says on the topics they share
(rag_core.answer.summaries.compare). A question about the library is answered from its listing and search."""
from __future__ import annotations

import logging
import math
from collections.abc import Generator, Iterator, Sequence
from typing import Any

from rag_core.answer.generation import reading as mr
from rag_core.answer.generation.finish import finish
from rag_core.answer.generation.notices import DETAILS_NO_MODEL, details_extra
from rag_core.answer.generation.run import AnswerRun, Chain
from rag_core.answer.grounding.citations import resolve
from rag_core.answer.intent import Intent, IntentKind, classify
from rag_core.answer.summaries import Shape
from rag_core.answer.summaries.compare import outline_lines, shared_topics, topic_lines
from rag_core.answer.summaries.digest import Numbered, choose_points, coverage, digest_lines, where
from rag_core.answer.summaries.document import DocText, find_document, load_document, plan_parts
from rag_core.answer.summaries.prompts import KEY_POINTS_TASK, SUMMARY_TASK
from rag_core.answer.summaries.text import (
    NOTICE_DIGEST_FALLBACK,
    NOTICE_DIGEST_NO_LLM,
    NOTICE_DIGEST_NO_MODEL,
    NOTICE_NO_HEADINGS,
    NOTICE_STOPPED,
    NOTICE_WITHHELD,
    digest_label,
    failed_notice,
    more_notice,
    plan_line,
    reading_line,
    renumber,
    sampled_notice,
    stopped_notice,
)
from rag_core.core.errors import LLMError
from rag_core.core.models import Answer, AnswerMode, DocumentInfo, Passage, Step
from rag_core.llm.chat import ChatBackend, backend_for

log = logging.getLogger(__name__)

DIGEST_PARTS = 14  # a quoted summary: the opening and at most this many parts (plus one per unquoted quarter)
COMPARE_PARTS = 5  # ... of each document in a comparison
MAX_COMPARED = 3  # documents compared at once


class WholeDocument:
    """The reading of one whole-document answer (what was read, the model's notes) and the steps of its chain:
    load the documents → outline, or quote them (no model), or read them with the model; `stopped` ends it after
    Stop, keeping what was read."""

    def __init__(self, run: AnswerRun, shape: Shape, doc_ids: Sequence[str]) -> None:
        self.run, self.shape, self.doc_ids = run, shape, list(doc_ids)[:MAX_COMPARED]
        self.more = more_notice(MAX_COMPARED, len(doc_ids)) if len(doc_ids) > MAX_COMPARED else None
        self.docs: list[DocText] = []
        self.notes: list[mr.Notes] = []
        self.shown: list[Passage] = []  # every passage the model was shown, numbered [1..] in this order
        self.calls = 0
        self.tokens_sent = 0
        self.model = ""

    def chain(self) -> Chain:
        """The steps of this answer, in order."""
        return Chain(f"whole:{self.shape.value}", ((self.load, None), (self.outline, None),
                                                  (self.quote_without_model, None), (self.read, None)),
                     self.stopped)

    # -- the steps -------------------------------------------------------------------------------------------
    def load(self, run: AnswerRun) -> None:
        """Load the documents asked about (their vectors too, but for an outline)."""
        ask = run.ask
        infos = ask.library.documents(ask.seen_by)
        self.docs = [load_document(ask.library.store, find_document(infos, d), ask.seen_by,
                                   vectors=self.shape is not Shape.OUTLINE) for d in self.doc_ids]

    def outline(self, run: AnswerRun) -> Iterator[str] | None:
        """An outline lists the document's headings."""
        if self.shape is not Shape.OUTLINE:
            return None
        doc = self.docs[0]
        lines = outline_lines(doc)
        text = (f"Outline of “{doc.title}” (its headings, with their pages):\n" + "\n".join(lines) if lines
                else NOTICE_NO_HEADINGS.format(title=doc.title))
        run.enter(Step.READ)
        finish(run, text, AnswerMode.QUOTES, extra={"summary": {"shape": self.shape.value, "headings": len(lines)}})
        return iter((text,))

    def quote_without_model(self, run: AnswerRun) -> Iterator[str] | None:
        """Without a model, the answer quotes the documents."""
        if run.ask.writes_with_llm:
            return None
        notice, details = ((NOTICE_DIGEST_NO_LLM, None) if not run.ask.use_llm
                           else (NOTICE_DIGEST_NO_MODEL, DETAILS_NO_MODEL))
        return iter((self._digest(notice, details),))

    def _digest(self, notice: str, details: str | None = None, fault: LLMError | None = None) -> str:
        """The answer quoted from the documents (no model); returns its text."""
        numbered, lines, docs_extra = Numbered(), [digest_label(self.shape, [d.title for d in self.docs])], []
        cap = DIGEST_PARTS if len(self.docs) == 1 else COMPARE_PARTS
        for doc in self.docs:
            parts = plan_parts(doc, cap)
            points = choose_points(doc, parts)
            if len(self.docs) > 1:
                lines.append(f"“{doc.title}”{_pages(doc)}:")
            lines += digest_lines(doc, parts, points, numbered, headed=self.shape is Shape.SUMMARY)
            docs_extra.append(_doc_extra(doc, parts=len(parts), cited=coverage(
                doc, [(p.chunk, p.start, p.end) for p in points])))
        if self.shape is Shape.COMPARE and len(self.docs) > 1:
            lines += topic_lines(self.docs, shared_topics(self.docs), numbered)
        text = "\n".join(lines)
        run = self.run
        run.passages = list(numbered.passages)
        run.enter(Step.READ, "")
        extra = {"summary": {"shape": self.shape.value, "docs": docs_extra}, **details_extra(details)}
        if fault is not None:
            extra["fault"] = type(fault).__name__
        finish(run, text, AnswerMode.QUOTES, citations=tuple(numbered.citations), notice=_join(notice, self.more),
               context_passages=len(numbered.passages), extra=extra)
        return text

    # -- with a model --------------------------------------------------------------------------------------------
    def read(self, run: AnswerRun) -> Iterator[str]:
        """Read the documents part by part with the model, each part's notes streamed as they come, then write the
        whole of each; the answer quotes the documents when the model failed before reading anything, or when
        nothing it wrote is backed."""
        s = run.settings
        chat = backend_for(s, run.ask.chat_model)
        self.model = chat.name
        per_doc = max(1, s.answer.summary_max_calls // len(self.docs))
        self.notes = [mr.Notes(mr.plan_reading(d, s, per_doc)) for d in self.docs]
        total = sum(len(n.plan.groups) for n in self.notes)
        run.enter(Step.READ, plan_line([n.plan for n in self.notes], self._seconds(0), chat.name))
        done = 0
        for notes in self.notes:
            done = yield from self._read_document(chat, notes, done, total)
            if notes.fault is not None:
                break
        fault = next((n.fault for n in self.notes if n.fault is not None), None)
        if not any(n.parts for n in self.notes):  # the model failed before reading anything: quote instead
            assert fault is not None
            yield self._digest(NOTICE_DIGEST_FALLBACK.format(error=str(fault)), fault.details, fault)
            return
        answer = self._finish_model(fault=fault)
        evidence = answer.extra.get("evidence", {})
        if evidence.get("claims") and not evidence.get("supported_claims"):  # nothing written is backed: quotes
            log.info("Summary withheld: none of its %d claims is backed", evidence["claims"])
            run.answer = None
            yield self._digest(NOTICE_WITHHELD)

    def _read_document(self, chat: ChatBackend, notes: mr.Notes, done: int, total: int) -> Generator[str, None, int]:
        """One document read part by part (`done` of `total` parts read before it), then its whole written from
        the parts' notes; returns how many parts are read now."""
        run, s, doc = self.run, self.run.settings, notes.plan.doc
        for group in notes.plan.groups:
            run.enter(Step.WAITING, reading_line(notes.plan, done, total, self._seconds(done), len(self.docs)))
            prompt, passages = mr.map_prompt(notes.plan, group, s)
            call = mr.Call(chat, prompt, min(s.answer.answer_tokens, mr.MAP_REPLY_TOKENS))
            yield from call.wait()
            prompt = call.sent or prompt  # fewer passages after a refusal for size
            passages = prompt.passages
            self._count(call, prompt)
            notes.fault = call.fault()
            if notes.fault is not None and not call.text.strip():
                break
            text = mr.shift(call.text, passages, len(self.shown)).strip()
            self.shown.extend(passages)
            notes.parts.append(text)
            done += 1
            piece = f"{_group_label(doc, group, notes.plan)}:\n{text}\n\n"
            run.partial.append(piece)
            yield piece
            if notes.fault is not None:
                break
        if notes.fault is None and len(notes.parts) > 1:
            run.enter(Step.WRITING, f"Writing the {_noun(self.shape)} of “{doc.title}” from its "
                                    f"{len(notes.parts)} {notes.plan.unit}s…")
            prompt = mr.reduce_prompt(self._notes_text(notes), KEY_POINTS_TASK if self.shape is Shape.KEY_POINTS
                                      else SUMMARY_TASK, s)
            call = mr.Call(chat, prompt, s.answer.answer_tokens)
            yield from call.wait()
            self._count(call, call.sent or prompt)
            notes.fault = call.fault()
            notes.whole = resolve(call.text, self.shown).text.strip()
        return done

    def _seconds(self, done: int) -> float:
        left, seen = 0.0, 0
        for n in self.notes:
            k = max(0, min(len(n.plan.groups), done - seen))
            left += n.plan.seconds(self.model, k)
            seen += len(n.plan.groups)
        return left

    def _count(self, call: mr.Call, prompt: mr.Prompt) -> None:
        self.calls += 1
        self.tokens_sent += prompt.tokens
        if call.first_at is not None and call.ended_at is not None:
            mr.learn_speed(self.model, prompt.tokens, call.first_at - call.started, mr.estimate_tokens(call.text),
                           call.ended_at - call.first_at)

    def _notes_text(self, notes: mr.Notes) -> str:
        groups = notes.plan.groups
        return "\n\n".join(f"{_group_label(notes.plan.doc, g, notes.plan)}:\n{t}"
                           for g, t in zip(groups, notes.parts, strict=False))

    def _compose(self) -> str:
        """The answer's text from what was read (numbered over `shown`)."""
        out: list[str] = []
        for notes in self.notes:
            if not notes.parts:
                continue
            doc = notes.plan.doc
            if len(self.docs) > 1:
                out.append(f"“{doc.title}”{_pages(doc)}:")
            if len(notes.plan.groups) == 1:  # read in one call: its notes are the summary
                out += [f"{_noun(self.shape).capitalize()} of “{doc.title}”:", notes.parts[0], ""]
                continue
            if notes.whole:
                out += [f"{_noun(self.shape).capitalize()} of “{doc.title}”:", notes.whole, ""]
                if self.shape in (Shape.KEY_POINTS, Shape.COMPARE):  # the whole only: the parts' notes made it
                    continue
                out.append(f"{notes.plan.unit.capitalize()} by {notes.plan.unit}:")
            out += [self._notes_text(notes), ""]
        return "\n".join(out).strip()

    def _finish_model(self, fault: LLMError | None = None, stopped: bool = False) -> Answer:
        run = self.run
        text = self._compose()
        numbered = Numbered()
        if self.shape is Shape.COMPARE and len(self.docs) > 1 and not stopped and fault is None:  # quoted, numbered on
            for p in self.shown:
                numbered.passages.append(p)
            lines = topic_lines(self.docs, shared_topics(self.docs), _Continue(numbered, self.docs))
            text += "\n\n" + "\n".join(lines) if lines else ""
        text, passages = renumber(text, numbered.passages or self.shown)
        run.passages = list(passages)
        done = sum(len(n.parts) for n in self.notes)
        total = sum(len(n.plan.groups) for n in self.notes)
        unit = self.notes[0].plan.unit if self.notes else "part"
        notice = _join(stopped_notice(done, total, unit) if stopped else failed_notice(fault, done, total, unit) if fault
                       else sampled_notice([n.plan for n in self.notes]), self.more)
        extra: dict[str, Any] = {"summary": {
            "shape": self.shape.value, "model_calls": self.calls, "prompt_tokens": self.tokens_sent,
            "plan": plan_line([n.plan for n in self.notes], self._seconds(0), self.model),
            "docs": [_doc_extra(n.plan.doc, groups=len(n.plan.groups), read=len(n.parts), shown=coverage(
                n.plan.doc, [(i, 0, len(n.plan.doc.chunks[i].text)) for g in n.plan.groups[:len(n.parts)]
                             for i in g.shown])) for n in self.notes]},
            "model": self.model, "ended": "stopped" if stopped else "failed" if fault else "finished"}
        if fault is not None:
            extra.update(fault=type(fault).__name__, **details_extra(fault.details))
        return finish(run, text, AnswerMode.MODEL, citations=resolve(text, list(passages)).citations,
                      context_passages=len(passages), incomplete=stopped or fault is not None, notice=notice,
                      extra=extra)

    def stopped(self, run: AnswerRun, text: str) -> bool:
        """End an answer stopped part-way (Stop): what was read is kept and checked like any answer."""
        if any(n.parts for n in self.notes):
            self._finish_model(stopped=True)
        else:
            finish(run, "", AnswerMode.MODEL if self.notes else AnswerMode.QUOTES, incomplete=True,
                   notice=NOTICE_STOPPED)
        return True


class _Continue(Numbered):
    """Numbering that goes on after the passages the model was shown (a chunk shown keeps its number)."""

    def __init__(self, base: Numbered, docs: Sequence[DocText]) -> None:
        super().__init__()
        self.passages, self.citations = base.passages, base.citations
        for n, p in enumerate(base.passages, 1):
            self.numbers[(p.chunk.doc_id, p.chunk.index)] = n
        self._index = {(d.info.doc_id, c.index): i for d in docs for i, c in enumerate(d.chunks)}

    def n(self, doc: DocText, chunk: int, start: int = 0, end: int | None = None, score: float = 0.0) -> int:
        """The number of a chunk: the one it was shown with, else the next one."""
        key = (doc.info.doc_id, doc.chunks[chunk].index)
        if key in self.numbers:
            return self.numbers[key]
        self.numbers[key] = len(self.passages) + 1
        self.passages.append(doc.passage(chunk, score))
        return self.numbers[key]


def _join(*notices: str | None) -> str | None:
    return " ".join(n for n in notices if n) or None


def _noun(shape: Shape) -> str:
    return "key points" if shape is Shape.KEY_POINTS else "summary"


def _pages(doc: DocText) -> str:
    pages = doc.info.pages
    return f" ({pages} pages)" if pages and pages > 1 else ""


def _group_label(doc: DocText, group: mr.Group, plan: mr.Plan) -> str:
    index = plan.groups.index(group)
    return where(doc, group.part, len(plan.groups), index)


def _doc_extra(doc: DocText, **more: Any) -> dict[str, Any]:
    return {"doc_id": doc.info.doc_id, "title": doc.title, "pages": doc.info.pages, "chunks": len(doc.chunks),
            "sections": len(doc.sections()), "quarters": 4 if doc.length else 0,
            **{k: (round(v, 3) if isinstance(v, float) and not math.isnan(v) else v) for k, v in more.items()}}


# --------------------------------------------------------------------------- which path a question takes
WHOLE = {IntentKind.SUMMARY: Shape.SUMMARY, IntentKind.KEY_POINTS: Shape.KEY_POINTS,
         IntentKind.OUTLINE: Shape.OUTLINE, IntentKind.COMPARE: Shape.COMPARE}
LIBRARY = (IntentKind.LIBRARY_LIST, IntentKind.LIBRARY_TOPIC)


def library_chain(intent: Intent) -> Chain:
    """A question about the library itself, answered from its listing and search (one step, nothing to stream)."""

    def answer_library(run: AnswerRun) -> Iterator[str]:
        from rag_core.answer.library_answers import library_answer

        ask = run.ask
        answer = library_answer(intent, ask.library, run.settings, ask.scope, owners=ask.seen_by, question=ask.text)
        run.passages = list(answer.passages)
        run.enter(Step.READ)
        run.answer = answer
        return iter((answer.text,))

    return Chain("library", ((answer_library, None),), lambda run, text: True)  # made in one step: nothing to keep


class _Listing(Sequence[DocumentInfo]):
    """The documents this person sees, read from the library only if the question names one (a fact question
    reads nothing more than before)."""

    def __init__(self, run: AnswerRun) -> None:
        self._run = run
        self._docs: list[DocumentInfo] | None = None

    def _load(self) -> list[DocumentInfo]:
        if self._docs is None:
            self._docs = self._run.ask.library.documents(self._run.ask.seen_by)
        return self._docs

    def __getitem__(self, i: Any) -> Any:
        return self._load()[i]

    def __len__(self) -> int:
        return len(self._load())


def route(run: AnswerRun) -> Chain | None:
    """The chain answering the run's question when it is about whole documents or the library; None for a fact
    question (steps.FACTS). The intent given (`docchat summarize`) is used as given; else the question is classified
    against the documents this person sees, in the chat's scope."""
    intent = run.intent
    if intent is None:
        intent = classify(run.ask.text, _Listing(run), run.ask.scope)
        run.intent = intent
    if intent.kind in LIBRARY:
        return library_chain(intent)
    if intent.kind in WHOLE and intent.doc_ids:
        return WholeDocument(run, WHOLE[intent.kind], intent.doc_ids).chain()
    return None
