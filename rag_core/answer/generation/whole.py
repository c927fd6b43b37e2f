"""Questions about whole documents or the library, inside an AnswerStream (the "host"): the same steps, the same
Answer, the same evidence check. `route` decides from the question's intent (rag_core.answer.intent): a fact question
goes the usual way (retrieval); a whole-document one is answered by WholeDocument: without a model (or when it fails
before reading anything) it quotes the document (rag_core.answer.summaries.digest); with one it reads the document part
by part (reading.py), each part's notes streamed as they come, then the whole; Stop keeps what was read. An outline
lists the headings; a comparison puts the documents side by side and adds what each says on the topics they share
(rag_core.answer.summaries.compare). A question about the library is answered from its listing and search."""
from __future__ import annotations

import logging
import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from rag_core.answer.generation import reading as mr
from rag_core.answer.generation.chat import backend_for
from rag_core.answer.generation.notices import DETAILS_NO_MODEL, details_extra
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
from rag_core.core.config import Settings
from rag_core.core.errors import LLMError
from rag_core.core.models import Answer, AnswerMode, DocumentInfo, Passage, Step

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

    from rag_core.service.library import Library

log = logging.getLogger(__name__)

DIGEST_PARTS = 14  # a quoted summary: the opening and at most this many parts (plus one per unquoted quarter)
COMPARE_PARTS = 5  # ... of each document in a comparison
MAX_COMPARED = 3  # documents compared at once


class Host(Protocol):
    """What a whole-document answer uses of the AnswerStream it runs in."""

    library: Library
    settings: Settings
    question: str
    owners: list[str | None] | None
    use_llm: bool
    chat_model: BaseChatModel | None
    passages: list[Passage]
    answer: Answer | None

    @property
    def writes_with_llm(self) -> bool: ...

    def _enter(self, step: Step, note: str = "") -> None: ...

    def _finish(self, text: str, mode: AnswerMode, embedder: Any = None, **kw: Any) -> Answer: ...


class WholeDocument:
    """One whole-document answer: `run` streams it into the host; `stopped` ends it after Stop, keeping what was read."""

    def __init__(self, host: Host, shape: Shape, doc_ids: Sequence[str]) -> None:
        self.host, self.shape, self.doc_ids = host, shape, list(doc_ids)[:MAX_COMPARED]
        self.more = more_notice(MAX_COMPARED, len(doc_ids)) if len(doc_ids) > MAX_COMPARED else None
        self.docs: list[DocText] = []
        self.notes: list[mr.Notes] = []
        self.shown: list[Passage] = []  # every passage the model was shown, numbered [1..] in this order
        self.calls = 0
        self.tokens_sent = 0
        self.model = ""

    # -- the run ---------------------------------------------------------------------------------------------
    def run(self, partial: list[str]) -> Iterator[str]:
        """Read the documents and stream the answer into the host (which keeps the Answer)."""
        host = self.host
        infos = host.library.documents(host.owners)
        self.docs = [load_document(host.library.store, find_document(infos, d), host.owners,
                                   vectors=self.shape is not Shape.OUTLINE) for d in self.doc_ids]
        if self.shape is Shape.OUTLINE:
            yield self._outline()
            return
        if not host.writes_with_llm:
            notice, details = ((NOTICE_DIGEST_NO_LLM, None) if not host.use_llm
                               else (NOTICE_DIGEST_NO_MODEL, DETAILS_NO_MODEL))
            yield self._digest(notice, details)
            return
        yield from self._read(partial)

    def _outline(self) -> str:
        doc = self.docs[0]
        lines = outline_lines(doc)
        text = (f"Outline of “{doc.title}” (its headings, with their pages):\n" + "\n".join(lines) if lines
                else NOTICE_NO_HEADINGS.format(title=doc.title))
        self.host._enter(Step.READ)
        self.host._finish(text, AnswerMode.QUOTES, extra={"summary": {"shape": self.shape.value,
                                                                      "headings": len(lines)}})
        return text

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
        host = self.host
        host.passages = list(numbered.passages)
        host._enter(Step.READ, "")
        extra = {"summary": {"shape": self.shape.value, "docs": docs_extra}, **details_extra(details)}
        if fault is not None:
            extra["fault"] = type(fault).__name__
        host._finish(text, AnswerMode.QUOTES, citations=tuple(numbered.citations), notice=_join(notice, self.more),
                     context_passages=len(numbered.passages), extra=extra)
        return text

    # -- with a model --------------------------------------------------------------------------------------------
    def _read(self, partial: list[str]) -> Iterator[str]:
        host, s = self.host, self.host.settings
        chat = backend_for(s, host.chat_model)
        self.model = chat.name
        per_doc = max(1, s.answer.summary_max_calls // len(self.docs))
        self.notes = [mr.Notes(mr.plan_reading(d, s, per_doc)) for d in self.docs]
        total = sum(len(n.plan.groups) for n in self.notes)
        host._enter(Step.READ, plan_line([n.plan for n in self.notes], self._seconds(0), chat.name))
        done = 0
        for notes in self.notes:
            doc = notes.plan.doc
            for group in notes.plan.groups:
                host._enter(Step.WAITING, reading_line(notes.plan, done, total, self._seconds(done), len(self.docs)))
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
                partial.append(piece)
                yield piece
                if notes.fault is not None:
                    break
            if notes.fault is None and len(notes.parts) > 1:
                host._enter(Step.WRITING, f"Writing the {_noun(self.shape)} of “{doc.title}” from its "
                                          f"{len(notes.parts)} {notes.plan.unit}s…")
                prompt = mr.reduce_prompt(self._notes_text(notes), KEY_POINTS_TASK if self.shape is Shape.KEY_POINTS
                                          else SUMMARY_TASK, s)
                call = mr.Call(chat, prompt, s.answer.answer_tokens)
                yield from call.wait()
                self._count(call, call.sent or prompt)
                notes.fault = call.fault()
                notes.whole = resolve(call.text, self.shown).text.strip()
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
            host.answer = None
            yield self._digest(NOTICE_WITHHELD)

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
        host = self.host
        text = self._compose()
        numbered = Numbered()
        if self.shape is Shape.COMPARE and len(self.docs) > 1 and not stopped and fault is None:  # quoted, numbered on
            for p in self.shown:
                numbered.passages.append(p)
            lines = topic_lines(self.docs, shared_topics(self.docs), _Continue(numbered, self.docs))
            text += "\n\n" + "\n".join(lines) if lines else ""
        text, passages = renumber(text, numbered.passages or self.shown)
        host.passages = list(passages)
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
        return host._finish(text, AnswerMode.MODEL, citations=resolve(text, list(passages)).citations,
                            context_passages=len(passages), incomplete=stopped or fault is not None,
                            notice=notice, extra=extra)

    def stopped(self) -> None:
        """End an answer stopped part-way (Stop): what was read is kept and checked like any answer."""
        if any(n.parts for n in self.notes):
            self._finish_model(stopped=True)
        else:
            self.host._finish("", AnswerMode.MODEL if self.notes else AnswerMode.QUOTES, incomplete=True,
                              notice=NOTICE_STOPPED)


class _Continue(Numbered):
    """Numbering that goes on after the passages the model was shown (a chunk shown keeps its number)."""

    def __init__(self, base: Numbered, docs: Sequence[DocText]) -> None:
        super().__init__()
        self.passages, self.citations = base.passages, base.citations
        for n, p in enumerate(base.passages, 1):
            self._n[(p.chunk.doc_id, p.chunk.index)] = n
        self._index = {(d.info.doc_id, c.index): i for d in docs for i, c in enumerate(d.chunks)}

    def n(self, doc: DocText, chunk: int, start: int = 0, end: int | None = None, score: float = 0.0) -> int:
        """The number of a chunk: the one it was shown with, else the next one."""
        key = (doc.info.doc_id, doc.chunks[chunk].index)
        if key in self._n:
            return self._n[key]
        self._n[key] = len(self.passages) + 1
        self.passages.append(doc.passage(chunk, score))
        return self._n[key]


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


class LibraryQuestion:
    """A question about the library itself, answered from its listing and search."""

    def __init__(self, host: Host, intent: Intent, scope: list[str] | None) -> None:
        self.host, self.intent, self.scope = host, intent, scope

    def run(self, partial: list[str]) -> Iterator[str]:
        """Answer it at once (nothing to stream) and hand the Answer to the host."""
        from rag_core.answer.library_answers import library_answer

        host = self.host
        answer = library_answer(self.intent, host.library, host.settings, self.scope, owners=host.owners,
                                question=host.question)
        host.passages = list(answer.passages)
        host._enter(Step.READ)
        host.answer = answer
        yield answer.text

    def stopped(self) -> None:
        """Nothing to keep: the answer is made in one step."""


class _Listing(Sequence[DocumentInfo]):
    """The documents this person sees, read from the library only if the question names one (a fact question
    reads nothing more than before)."""

    def __init__(self, host: Any) -> None:
        self._host = host
        self._docs: list[DocumentInfo] | None = None

    def _load(self) -> list[DocumentInfo]:
        if self._docs is None:
            self._docs = self._host.library.documents(self._host.owners)
        return self._docs

    def __getitem__(self, i: Any) -> Any:
        return self._load()[i]

    def __len__(self) -> int:
        return len(self._load())


def route(host: Any) -> WholeDocument | LibraryQuestion | None:
    """The run answering the host's question when it is about whole documents or the library; None for a fact
    question (the host's own retrieval path). The host's `intent`, when set, is used as given (`docchat
    summarize`); else the question is classified against the documents this person sees, in the chat's scope."""
    intent: Intent | None = getattr(host, "intent", None)
    if intent is None:
        intent = classify(host.question, _Listing(host), host.doc_ids)
        host.intent = intent
    if intent.kind in LIBRARY:
        return LibraryQuestion(host, intent, host.doc_ids)
    if intent.kind in WHOLE and intent.doc_ids:
        return WholeDocument(host, WHOLE[intent.kind], intent.doc_ids)
    return None
