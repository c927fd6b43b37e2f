"""The state of one answer: the question's frozen inputs (`AnswerRequest`) and the typed fields its steps fill in
(`AnswerRun`), plus what a chain of steps is (`Chain`). The steps of a fact question are in steps.py, those of a
question about whole documents or the library in whole.py; answer.py drives a chain over one run."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from rag_core.core.config import Settings
from rag_core.core.models import Answer, ChatTurn, Passage, StageEvent, Step

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel

    from rag_core.answer.generation.outcome import Streamed
    from rag_core.answer.generation.prompt import Prompt
    from rag_core.answer.grounding.quotes import Candidate
    from rag_core.answer.intent import Intent
    from rag_core.core.errors import LLMError
    from rag_core.llm.chat import ChatBackend
    from rag_core.store.view import LibraryView

log = logging.getLogger(__name__)

Listener = Callable[[StageEvent], None]


@dataclass(frozen=True)
class AnswerRequest:
    """What was asked, and how: fixed for the whole run."""

    library: LibraryView
    text: str
    settings: Settings  # as given (the run fits them to the model server's window)
    history: tuple[ChatTurn, ...] = ()
    doc_ids: tuple[str, ...] | None = None  # the chat's scope (None: the whole library)
    owners: tuple[str | None, ...] | None = None  # whose documents this person sees (None: everyone's)
    use_llm: bool = True
    k: int = 5
    chat_model: BaseChatModel | None = None
    intent: Intent | None = None  # given (`docchat summarize`), else classified by the run

    @property
    def scope(self) -> list[str] | None:
        """The chat's scope as the search functions take it."""
        return None if self.doc_ids is None else list(self.doc_ids)

    @property
    def seen_by(self) -> list[str | None] | None:
        """The owners as the search functions take them."""
        return None if self.owners is None else list(self.owners)

    @property
    def writes_with_llm(self) -> bool:
        """True when a chat model is to write the answer (a given one, or a configured model)."""
        return self.use_llm and (self.chat_model is not None or bool(self.settings.chat_model_name))


@dataclass
class AnswerRun:
    """One answer as it is made: each step reads the fields before it and fills its own."""

    ask: AnswerRequest
    settings: Settings  # fitted to the model server's window (the first thing the driver does)
    step: Step = Step.SEARCHING  # what it is doing now; the listeners get each step as a StageEvent
    listeners: list[Listener] = field(default_factory=list)
    intent: Intent | None = None  # what the question asks for: given, or classified when the chain is chosen
    # rewrite the follow-up
    chat: ChatBackend | None = None  # the model that writes (None: the answer quotes)
    llm_error: LLMError | None = None  # why the model cannot write it (the answer then quotes)
    standalone: str = ""  # the question as searched
    # retrieve
    qvec: np.ndarray | None = None  # the searched question's vector
    relevance: float | None = None  # the best passage's cosine
    passages: list[Passage] = field(default_factory=list)
    rerank_notice: str | None = None  # the reranker was late or failed: said in the reply's notice (finish.py)
    # decide answerable
    ranked: list[Candidate] = field(default_factory=list)  # quotable sentences of the top passages, best first
    dense: bool = False  # True once `ranked` was ranked by meaning (rag_core.answer.grounding.quotes SHORTLIST)
    direct: bool = True  # False: no quote answers directly; quotes are labelled "closest passages"
    checked: dict[str, object] = field(default_factory=dict)  # what the evidence check before answering measured
    # build the prompt, stream
    prompt: Prompt | None = None
    partial: list[str] = field(default_factory=list)  # the model's text as it streamed
    streamed: Streamed | None = None  # how the model's stream ended
    # conclude
    answer: Answer | None = None
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)
    lap: float = field(default_factory=time.perf_counter)  # when the last timing was taken

    @classmethod
    def of(cls, ask: AnswerRequest) -> AnswerRun:
        """A run that has not started."""
        return cls(ask=ask, settings=ask.settings, intent=ask.intent, standalone=ask.text)

    @property
    def model_name(self) -> str:
        """The name of the model that writes ("" when none does)."""
        return self.chat.name if self.chat is not None else ""

    def mark(self, name: str, since: float | None = None) -> float:
        """Time `name` from `since` (default: the last mark) in milliseconds; the next mark times from now."""
        now = time.perf_counter()
        self.timings[name] = round((now - (self.lap if since is None else since)) * 1000, 2)
        self.lap = now
        return now

    def mark_since_start(self, name: str) -> None:
        """Time `name` from the start of the run (the last mark stays where it was)."""
        self.timings[name] = round((time.perf_counter() - self.started) * 1000, 2)

    def enter(self, step: Step, note: str = "") -> None:
        """Move to `step` (`note`: what a long run says of it) and tell the listeners (whose failures never stop it)."""
        self.step = step
        event = StageEvent(step, time.monotonic(), tuple(self.passages), note)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:  # a page's bookkeeping must never end the answer (logged with its traceback)
                log.exception("A stage listener failed")


StepFn = Callable[[AnswerRun], "Iterator[str] | None"]  # a step: fills the run; a step that speaks returns its text


@dataclass(frozen=True)
class Chain:
    """The steps of one kind of question, in order (the driver stops after the one that sets the answer), and how
    it ends when stopped part-way (`stopped(run, text so far)`; it returns True when it set the answer)."""

    name: str
    steps: tuple[tuple[StepFn, Step | None], ...]  # each step and the stage it enters first (None: no new stage)
    stopped: Callable[[AnswerRun, str], bool]
