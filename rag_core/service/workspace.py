"""The one interface the pages talk to: documents, add files, import Wikipedia, delete, ask, limits, conversations,
the language model's status. Pages and ui/ import only this module (and the data contract in rag_core.core); the
types they need from the rooms behind it are re-exported here (import-linter checks it: `make lint`).

Two implementations: `LocalWorkspace` (one person's library on this computer) and `DemoWorkspace` (one visitor of the
hosted demo: their own documents plus the shared samples, with the demo's limits). The demo's rules live here and in
`rag_core.demo.hub`, never in the pages: a page asks a `Workspace` and shows what it says.

`rag_core.adapters.runtime.Runtime` holds what one server process shares (library, ingest queue, demo hub) and hands each
browser session its workspace.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from rag_core.core.config import Provider, Settings
from rag_core.core.models import Answer, ChatTurn, DocKind, DocumentInfo, Passage, RetrievalTest
from rag_core.llm.ollama import OllamaStatus, PullProgress
from rag_core.service.conversations import (
    Conversation,
    Conversations,
    FileConversations,
    Listing,
    export_markdown,
    file_name_for,
    title_for,
)
from rag_core.service.embedding_choice import EmbeddingChoices, EmbeddingOption
from rag_core.service.folder_sync import Bucket, FileChange, FolderDiff
from rag_core.service.folder_watch import FolderCheck
from rag_core.service.folder_workspace import Applied, LinkedFolders, LocalLinkedFolders
from rag_core.service.jobs import IngestQueue, JobKind, JobView, Work
from rag_core.service.linked_folders import LinkedFolder
from rag_core.service.live import LiveAnswer
from rag_core.service.preferences import SETTING_CHOICES, FilePreferences, MemoryPreferences, Preferences
from rag_core.service.reembed import ReembedState, ReembedStatus
from rag_core.service.wiki_sync import RefreshReport, WikiImportResult

if TYPE_CHECKING:
    from rag_core.service.library import Library

log = logging.getLogger(__name__)

__all__ = ["Applied", "Bucket", "Conversation", "EmbeddingChoices", "EmbeddingOption", "FileChange", "FolderCheck",
           "FolderDiff", "JobKind", "JobView", "Limits", "LinkedFolder", "Listing", "LiveAnswer", "LocalWorkspace",
           "OllamaStatus", "PullProgress", "ReembedState", "ReembedStatus", "RefreshReport", "ServerAnswers",
           "WikiImportResult", "Workspace"]

OVERRIDABLE = SETTING_CHOICES  # what the Settings page may change for one session
# in the hosted demo only the server decides these
SERVER_ONLY = ("ollama_host", "ollama_model", "chat_model", "openai_base_url")
MODEL_OFF = "The AI model that writes answers is not running, or DocChat cannot reach it."  # the chat's model line
# The Settings page's retrieval test, when there is nothing to rank:
TEST_NO_QUESTION = "Type a question to see which passages DocChat would read for it, and why."
TEST_EMPTY_LIBRARY = "Your library is empty: add documents on the Library page, then test a question here."
TEST_NOTHING_FOUND = "No passage of your documents could be found for this question."
SERVER_ANSWER_MAX_AGE_S = 300.0  # a Settings page left open this long asks the model servers again
T = TypeVar("T")


class AnswerStreamLike(Protocol):
    """What the chat page iterates: text pieces, then `answer` (None until finished), `close()` to stop early."""

    def __iter__(self) -> Any: ...

    @property
    def answer(self) -> Answer | None: ...

    def close(self) -> None: ...


class ServerAnswers:
    """What the model servers said (their status, their models), kept so the Settings page asks them once per visit
    instead of on every rerun. An answer is asked again when its key changes (the provider, the server's address),
    once it is `max_age_s` old, or after `forget()` (the page's "Check again", a download)."""

    def __init__(self, max_age_s: float = SERVER_ANSWER_MAX_AGE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_age_s = max_age_s
        self._clock = clock
        self._kept: dict[tuple[object, ...], tuple[float, object]] = {}

    def get(self, key: tuple[object, ...], ask: Callable[[], T]) -> T:
        """The answer kept under `key`, else `ask()`'s (then kept)."""
        now = self._clock()
        kept = self._kept.get(key)
        if kept is not None and now - kept[0] < self._max_age_s:
            return cast(T, kept[1])
        answer = ask()
        self._kept[key] = (now, answer)
        return answer

    def forget(self) -> None:
        """Ask every server again next time."""
        self._kept.clear()


@dataclass(frozen=True)
class Limits:
    """What one person may add: the largest file, and (in the demo) how much of their quota is used."""

    max_file_mb: int
    usage_line: str | None = None  # one sentence, e.g. "Your demo space: 2 of 10 documents, …"; None = no quota


class Workspace(LinkedFolders):
    """What a page can do, for one browser session; subclasses decide whose documents and which limits apply (linked
    folders: rag_core.service.folder_workspace)."""

    #: One plain sentence or two shown as a banner on every page (None: no banner).
    banner: str | None = None
    #: A line under the Library page title.
    intro: str = ""
    #: A suggested first question, shown on an empty chat (None: none).
    hint: str | None = None
    #: Questions offered as buttons on an empty chat (the hosted demo's, about its sample documents).
    suggestions: tuple[str, ...] = ()
    #: True when the person may choose the Ollama address and model on the Settings page.
    model_choice: bool = True
    #: How long changes on the Settings page last, in words.
    settings_lifetime: str = "until you close or reload this browser tab"
    conversations: Conversations  # this person's conversations (saved in the data dir, or with the demo session)

    def __init__(self, settings: Settings, queue: IngestQueue, owner: str | None) -> None:
        self.settings = settings
        self.queue = queue
        self.owner = owner

    # -- documents ---------------------------------------------------------------
    def documents(self) -> list[DocumentInfo]:
        """The documents this person sees, newest first."""
        raise NotImplementedError

    def is_read_only(self, doc: DocumentInfo) -> bool:
        """True for a document this person may read but not delete (the demo's shared samples)."""
        return False

    def has_own_articles(self, docs: Iterable[DocumentInfo]) -> bool:
        """True when some of `docs` are Wikipedia articles this person imported (and may check for updates)."""
        return any(d.kind == DocKind.WIKIPEDIA and not self.is_read_only(d) for d in docs)

    def delete(self, doc_id: str) -> DocumentInfo:
        """Delete one document with its chunks and saved original (SampleReadOnly / DocumentNotFound)."""
        raise NotImplementedError

    def original(self, doc_id: str) -> bytes | None:
        """The saved PDF of a visible document (to show a cited page), or None."""
        raise NotImplementedError

    def preferences(self) -> Preferences:
        """Where the Settings page's choices are kept beyond this run (the demo: nowhere, the session holds them)."""
        return MemoryPreferences(self.settings)

    def allow_page_render(self) -> None:
        """Count one page image against the demo's render limit (LimitReached when over); free locally."""
        return None

    def limits(self) -> Limits:
        """The largest file accepted and, in the demo, how much of the quota is used."""
        return Limits(self.settings.ingest.max_upload_mb)

    # -- adding (in the background queue) -------------------------------------------
    def submit_job(self, label: str, work: Work, kind: JobKind) -> str:
        """Queue `work` as one of this person's jobs (the subclasses' add_file and imports); returns the job id."""
        return self.queue.submit(label, work, owner=self.owner, kind=kind)

    def add_file(self, data: bytes, file_name: str) -> str:
        """Queue one uploaded file; returns the job id (LimitReached at once when a demo limit is hit)."""
        raise NotImplementedError

    def import_wikipedia(self, title: str, lang: str = "en") -> str:
        """Queue one Wikipedia article import; returns the job id (LimitReached at once when full)."""
        raise NotImplementedError

    def refresh_wikipedia(self) -> str:
        """Queue a check of this person's imported articles against Wikipedia; returns the job id."""
        raise NotImplementedError

    def search_wikipedia(self, words: str, lang: str = "en", limit: int = 8) -> list[Any]:
        """Wikipedia's search results for `words` (WikiHit objects)."""
        from rag_core.sources.wikipedia import search

        return list(search(self.settings, words, lang=lang, limit=limit))

    def jobs(self, job_ids: Iterable[str] | None = None) -> list[JobView]:
        """Snapshots of this person's jobs: the ones asked for, in that order, or (None) every one still to show,
        oldest first: queued, running, and finished ones not yet dismissed, whichever tab or session started them."""
        if job_ids is None:
            return self.queue.owner_jobs(self.owner)
        return [j for j in self.queue.jobs(job_ids) if j.owner == self.owner]

    def active_jobs(self) -> list[JobView]:
        """This person's files still queued or being added, oldest first."""
        return self.queue.active(self.owner)

    def cancel_job(self, job_id: str) -> bool:
        """Stop one of this person's queued or running jobs (the Stop button), library unchanged; False if it
        is not theirs or has finished."""
        return self.queue.cancel(job_id, owner=self.owner)

    def forget_jobs(self, job_ids: Iterable[str]) -> None:
        """Dismiss finished jobs of this person: no session lists them any more (running ones stay)."""
        self.queue.forget([j.id for j in self.jobs(job_ids)])

    # -- asking ----------------------------------------------------------------------
    def ask(self, question: str, history: Sequence[ChatTurn] = (), doc_ids: Sequence[str] | None = None,
            use_llm: bool = True) -> LiveAnswer:
        """Start answering on a thread: the run reports each step (StageEvent), streams its text, can be stopped."""
        return LiveAnswer(self.answer_stream(question, history, doc_ids, use_llm))

    def answer_stream(self, question: str, history: Sequence[ChatTurn] = (),
                      doc_ids: Sequence[str] | None = None, use_llm: bool = True) -> AnswerStreamLike:
        """The answer as a stream iterated by the caller (the command line, benchmarks): text, then `answer`."""
        raise NotImplementedError

    # -- conversations -------------------------------------------------------------------
    def save_conversation(self, conv: Conversation) -> str | None:
        """Keep `conv` as it is now, titled by its first question unless the person named it; returns one sentence
        when it could not be saved (a full disk), else None."""
        if not conv.titled_by_user:
            conv.title = title_for(next((t["text"] for t in conv.turns if t.get("role") == "user"), ""))
        try:
            self.conversations.save(conv)
        except OSError as e:
            log.warning("Cannot save conversation %s: %s", conv.id, e)
            return (f"This conversation could not be saved ({e.strerror or 'disk error'}); free some disk space and "
                    "it will be saved with the next question.")
        return None

    def export_conversation(self, conv: Conversation) -> tuple[str, str]:
        """(the conversation as Markdown, a file name for it)."""
        return export_markdown(conv), file_name_for(conv.title)

    # -- the language model -------------------------------------------------------------
    def model_status(self, settings: Settings | None = None, answers: ServerAnswers | None = None) -> OllamaStatus:
        """Whether the model server (Ollama or an OpenAI-compatible one) answers and which models it has (never
        raises); with `answers`, the one kept for this provider and address when there is one."""
        from rag_core.llm.ollama import model_status

        current = settings or self.settings
        if answers is None:
            return model_status(current)
        llm = current.llm
        address = llm.ollama_host if current.chat_provider == Provider.OLLAMA else llm.openai_base_url
        return answers.get(("model status", current.chat_provider, address), lambda: model_status(current))

    def pull_model(self, name: str, settings: Settings | None = None) -> Iterable[PullProgress]:
        """Download a model into the model server, yielding progress (an LLMError on failure)."""
        from rag_core.llm.ollama import pull_model

        return pull_model(settings or self.settings, name)

    def search(self, query: str, k: int = 5, doc_ids: Sequence[str] | None = None) -> list[Passage]:
        """Top-k passages from this person's documents."""
        raise NotImplementedError

    def search_ready(self) -> bool:
        """False while the embedding model is still loading (the first question then waits a few seconds)."""
        raise NotImplementedError

    def test_retrieval(self, question: str) -> RetrievalTest:
        """The passages a question would read (DOCCHAT_TOP_K of this person's documents), ranked, each with why it was
        chosen, without asking a model; one friendly sentence when there is no question or no document."""
        from rag_core.retrieve.search import level_bounds

        question = " ".join(question.split())
        low_below, high_from = level_bounds(self.settings.retrieval.min_relevance)
        if not question:
            return RetrievalTest(question, message=TEST_NO_QUESTION, low_below=low_below, high_from=high_from)
        if not self.documents():
            return RetrievalTest(question, message=TEST_EMPTY_LIBRARY, low_below=low_below, high_from=high_from)
        found = tuple(self._test_search(question, self.settings.retrieval.top_k))
        return RetrievalTest(question, found, None if found else TEST_NOTHING_FOUND, low_below, high_from)

    def _test_search(self, question: str, k: int) -> list[Passage]:
        """The retrieval test's search: the one a question makes (the demo also counts it as a question)."""
        return self.search(question, k)

    # -- the embedding model (issue 46) ---------------------------------------------------
    def embedding_choices(self, answers: ServerAnswers | None = None) -> EmbeddingChoices | None:
        """The embedding models the Settings page offers for the library; None where the person does not choose it
        (the hosted demo). With `answers`, the model servers' lists kept for their addresses when there are some."""
        return None

    def choose_embedding_model(self, model: str) -> None:
        """Re-embed the library with `model` in the background; searches keep the old vectors until the switch."""
        raise NotImplementedError

    def stop_embedding_switch(self) -> None:
        """Stop the re-embedding under way: the library keeps its model."""
        raise NotImplementedError

    def embedding_switch(self) -> ReembedStatus | None:
        """Where the re-embedding of the library is (documents done of all), if one was started; None otherwise."""
        return None

    def model_toggle(self) -> bool:
        """True when there is a language model the person may switch off (answers then quote the documents)."""
        return True

    def model_line(self, use_llm: bool) -> tuple[str, str] | None:
        """("ok"|"warn", one calm sentence about who writes the answers), or None when the banner says it."""
        model = self.settings.chat_model_name
        if not use_llm:
            return "ok", "Answers quote your documents directly (the language model is switched off in Settings)."
        status = self.model_status()
        if not status.reachable:
            return "warn", (f"{MODEL_OFF} Meanwhile, answers quote your documents directly. The Settings page "
                            "shows how to turn it on.")
        if not model:
            return "warn", "No model is chosen yet, so answers quote your documents directly. Pick one in Settings."
        if not status.has_model(model):
            where = "installed in Ollama yet" if status.provider == Provider.OLLAMA else "offered by the model server"
            fix = ("You can download it in Settings." if status.provider == Provider.OLLAMA
                   else "Pick one of its models in Settings.")
            return "warn", f"The model “{model}” is not {where}, so answers quote your documents directly. {fix}"
        return "ok", f"Answers are written by {model} from your documents, with sources beside each reply."


class LocalWorkspace(LocalLinkedFolders, Workspace):
    """One person's library on their own computer: every document, no quotas."""

    intro = ("DocChat answers from the documents you add here. Files are read on this computer and stay in your "
             "library.")

    settings_lifetime = "until you change them again: DocChat keeps them on this computer"

    def __init__(self, library: Library, queue: IngestQueue, settings: Settings | None = None) -> None:
        super().__init__(settings or library.settings, queue, owner=None)
        self.library = library
        self.conversations = FileConversations(library.settings.library.data_dir / "conversations")

    def preferences(self) -> Preferences:
        """The Settings page's choices, saved in the data dir."""
        return FilePreferences(self.library.settings)

    def documents(self) -> list[DocumentInfo]:
        """Every document in the library, newest first."""
        return self.library.documents()

    def search_ready(self) -> bool:
        """True once the embedding model is loaded."""
        return self.library.embedder.ready

    def delete(self, doc_id: str) -> DocumentInfo:
        """Delete a document, its chunks and its saved original."""
        return self.library.delete(doc_id)

    def original(self, doc_id: str) -> bytes | None:
        """The saved PDF of a document, or None."""
        return self.library.original(doc_id)

    def add_file(self, data: bytes, file_name: str) -> str:
        """Queue one uploaded file (its size is checked by the library before any work)."""
        library = self.library

        def work(progress: Any) -> Any:
            return library.ingest_bytes(data, file_name, progress=progress)

        return self.submit_job(file_name, work, JobKind.FILE)

    def import_wikipedia(self, title: str, lang: str = "en") -> str:
        """Queue one article import."""
        from rag_core.service.wiki_sync import import_article

        library, settings = self.library, self.settings

        def work(progress: Any) -> Any:
            return import_article(library, settings, title, lang=lang, progress=progress)

        return self.submit_job(f"{title} (Wikipedia)", work, JobKind.WIKIPEDIA)

    def refresh_wikipedia(self) -> str:
        """Queue a check of every imported article."""
        from rag_core.service.wiki_sync import refresh

        library, settings = self.library, self.settings

        def work(progress: Any) -> Any:
            return refresh(library, settings, progress=progress)

        return self.submit_job("Wikipedia articles", work, JobKind.REFRESH)

    def answer_stream(self, question: str, history: Sequence[ChatTurn] = (),
                      doc_ids: Sequence[str] | None = None, use_llm: bool = True) -> AnswerStreamLike:
        """Stream an answer written by the configured model (or quoted, without one)."""
        from rag_core.answer.generation import start_answer

        return start_answer(self.library, question, self.settings, history=history,
                            doc_ids=None if doc_ids is None else list(doc_ids), use_llm=use_llm,
                            k=self.settings.retrieval.top_k)

    def search(self, query: str, k: int = 5, doc_ids: Sequence[str] | None = None) -> list[Passage]:
        """Top-k passages from the whole library (or the chosen documents)."""
        return self.library.search(query, k, doc_ids)

    def embedding_choices(self, answers: ServerAnswers | None = None) -> EmbeddingChoices | None:
        """The bundled models, the model servers' embedding models (kept in `answers`, if given), and the
        re-embedding under way."""
        from rag_core.service.embedding_choice import embedding_choices, server_models

        settings = self.library.settings  # the addresses the library's model server calls use
        served = None if answers is None else answers.get(
            ("embedding models", settings.llm.ollama_host, settings.llm.openai_base_url), lambda: server_models(settings))
        return embedding_choices(self.library, served=served)

    def choose_embedding_model(self, model: str) -> None:
        """Start re-embedding the library with `model` (ReembedBusy, or the model's own sentence)."""
        from rag_core.service.reembed import switch_model

        switch_model(self.library, model)

    def stop_embedding_switch(self) -> None:
        """Stop the re-embedding; what it built is removed and the library keeps its model."""
        from rag_core.service.reembed import cancel_switch

        cancel_switch(self.library)

    def embedding_switch(self) -> ReembedStatus | None:
        """The re-embedding's status, read without asking any server (the page redraws it every few seconds)."""
        from rag_core.service.reembed import current

        job = current(self.library)
        return job.status() if job is not None else None
