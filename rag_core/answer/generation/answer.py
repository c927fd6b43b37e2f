"""Question -> grounded Answer. `drive` runs one chain of steps over an AnswerRun (run.py): the fact question's
(steps.py: rewrite the follow-up, retrieve, decide answerable, quote or build the prompt, stream, verify and
conclude), or one about whole documents or the library (whole.py). It emits the stage events and is the one place
that handles failures and Stop. `AnswerStream` is the iterator the callers hold; `start_answer` and `answer` make
one."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rag_core.answer.generation.finish import finish
from rag_core.answer.generation.notices import NOTICE_UNEXPECTED, details_extra
from rag_core.answer.generation.outcome import NOTICE_STOPPED, unchecked
from rag_core.answer.generation.prompt import Prompt, fitted
from rag_core.answer.generation.run import AnswerRequest, AnswerRun, Chain
from rag_core.answer.generation.steps import FACTS
from rag_core.answer.generation.whole import route
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError
from rag_core.core.models import Answer, AnswerMode, ChatTurn, Passage, StageEvent, Step

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

    from rag_core.answer.intent import Intent
    from rag_core.store.view import LibraryView

log = logging.getLogger(__name__)


def choose(run: AnswerRun) -> Chain:
    """The settings fitted to the model server's window, then the chain that answers the question: one about whole
    documents or the library answers from them, a fact question from the passages retrieved."""
    ask = run.ask
    run.settings = fitted(ask.settings, ask.writes_with_llm and ask.chat_model is None)
    return route(run) or FACTS


def drive(run: AnswerRun) -> Generator[str, None, None]:
    """Run the question's chain, step after step, yielding the answer's text as it comes; every ending sets
    `run.answer`: a failure says so, a stopped run (the consumer closed the iterator) keeps what of it is backed."""
    mode = AnswerMode.MODEL if run.ask.writes_with_llm else AnswerMode.QUOTES
    last, chain = Step.DONE, None
    try:
        chain = choose(run)
        for step, stage in chain.steps:
            if stage is not None:
                run.enter(stage)
            text = step(run)
            if text is not None:
                yield from text
            if run.answer is not None:
                break
    except DocChatError as e:  # e.g. the library is busy or the vector database is unreachable
        log.info("Answering failed: %s", e)
        last = Step.FAILED
        finish(run, "", mode, incomplete=True, notice=str(e),
               extra=details_extra(unchecked("".join(run.partial), e.details)))
    except Exception:  # logged with its traceback; the user gets one sentence
        log.exception("Unexpected failure while answering %r", run.ask.text)
        last = Step.FAILED
        finish(run, "", mode, incomplete=True, notice=NOTICE_UNEXPECTED,
               extra=details_extra(unchecked("".join(run.partial))))
    finally:
        if run.answer is None:  # the consumer stopped iterating (GeneratorExit): keep what of it is backed
            last = Step.STOPPED
            _stopped(run, chain, mode)
        run.enter(last)


def _stopped(run: AnswerRun, chain: Chain | None, mode: AnswerMode) -> None:
    """The answer of a run closed early (Stop): the chain keeps what it can, else the stopped notice."""
    text = "".join(run.partial)
    try:
        if chain is not None and chain.stopped(run, text):
            return
    except Exception:  # closing must never raise; the text is then not shown (it is unchecked)
        log.exception("Checking a stopped answer failed")
    finish(run, "", mode, incomplete=True, notice=NOTICE_STOPPED, extra=details_extra(unchecked(text)),
           context_passages=len(run.prompt.passages) if run.prompt is not None else 0)


class AnswerStream:
    """Iterate to get the answer's text deltas as they stream; `answer` is set when iteration ends.

    `chat_model` is any LangChain chat model; without one, answers come from the chat model of the settings, or are
    extractive when none is configured or `use_llm` is False."""

    def __init__(self, library: LibraryView, question: str, settings: Settings,
                 history: Iterable[ChatTurn] = (), doc_ids: list[str] | None = None,
                 owners: list[str | None] | None = None, use_llm: bool = True, k: int | None = None,
                 chat_model: BaseChatModel | None = None, intent: Intent | None = None) -> None:
        self.library = library  # what it reads (rag_core.service.live.drain)
        self.run = AnswerRun.of(AnswerRequest(
            library, question, settings, tuple(history or ()), None if doc_ids is None else tuple(doc_ids),
            None if owners is None else tuple(owners), use_llm, k or settings.retrieval.top_k, chat_model, intent))
        self._gen: Generator[str, None, None] | None = None

    def __iter__(self) -> Iterator[str]:
        # Always the same generator: st.write_stream calls iter() once to check, then again to loop.
        if self._gen is None:
            self._gen = drive(self.run)
        return self._gen

    def close(self) -> None:
        """Stop early (closes the HTTP stream); `answer` keeps the partial text, marked incomplete."""
        if self._gen is not None:
            self._gen.close()

    def listen(self, listener: Callable[[StageEvent], None]) -> None:
        """Call `listener` with every step from now on (on the thread that iterates), starting with the current one."""
        self.run.listeners.append(listener)
        listener(StageEvent(self.run.step, time.monotonic(), tuple(self.run.passages)))

    @property
    def answer(self) -> Answer | None:
        """The Answer (None until iteration ends)."""
        return self.run.answer

    @property
    def passages(self) -> list[Passage]:
        """The passages retrieved (or read) so far."""
        return self.run.passages

    @property
    def prompt(self) -> Prompt | None:
        """The model's prompt (None when no model was asked)."""
        return self.run.prompt

    @property
    def timings(self) -> dict[str, float]:
        """Milliseconds per step."""
        return self.run.timings


def start_answer(library: LibraryView, question: str, settings: Settings, history: Sequence[ChatTurn] = (),
                 doc_ids: list[str] | None = None, owners: list[str | None] | None = None,
                 use_llm: bool = True, k: int | None = None, chat_model: BaseChatModel | None = None) -> AnswerStream:
    """Rewrite follow-ups, retrieve, then stream an answer from `chat_model` (default: per the settings) or quotes."""
    return AnswerStream(library, question, settings, history, doc_ids, owners, use_llm, k, chat_model)


def answer(library: LibraryView, question: str, settings: Settings, **kwargs: Any) -> Answer:
    """Non-streaming convenience: run the whole stream and return the Answer (same arguments as start_answer)."""
    stream = start_answer(library, question, settings, **kwargs)
    for _ in stream:
        pass
    assert stream.answer is not None
    return stream.answer


__all__ = ["AnswerStream", "answer", "choose", "drive", "start_answer"]
