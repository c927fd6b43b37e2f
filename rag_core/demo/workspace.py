"""The hosted demo's workspace: one visitor's own documents plus the shared samples, within the demo's limits."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from rag_core.core.models import ChatTurn, DocumentInfo, Passage
from rag_core.demo.answers import SAMPLE_QUESTIONS, demo_banner, llm_mode, usage_line
from rag_core.demo.hub import SHARED_OWNER, SessionLibrary
from rag_core.service.conversations import Conversations, MemoryConversations
from rag_core.service.jobs import IngestQueue, JobKind
from rag_core.service.workspace import AnswerStreamLike, Limits, Workspace

log = logging.getLogger(__name__)


class DemoWorkspace(Workspace):
    """One visitor of the hosted demo: their own documents and the shared samples, within the demo's limits."""

    model_choice = False
    settings_lifetime = "until you close or reload this browser tab"

    def __init__(self, session: SessionLibrary, queue: IngestQueue,
                 conversations: Conversations | None = None) -> None:
        super().__init__(session.settings, queue, owner=session.session_id)
        self.session = session
        self.conversations = conversations or MemoryConversations()
        self.banner = demo_banner(self.settings)
        # The banner above it already says who sees the files and when they are deleted.
        self.intro = "DocChat answers from the shared sample documents and the files you add here."
        self.hint = "Everyone can try the shared sample documents, for example with one of these questions. Add " \
                    "your own files on the Library page."
        self.suggestions = SAMPLE_QUESTIONS

    def documents(self) -> list[DocumentInfo]:
        """Own documents and the shared samples, newest first."""
        return self.session.documents()

    def search_ready(self) -> bool:
        """True once the embedding model is loaded."""
        return self.session.search_ready()

    def is_read_only(self, doc: DocumentInfo) -> bool:
        """The shared samples are read-only."""
        return doc.owner == SHARED_OWNER

    def delete(self, doc_id: str) -> DocumentInfo:
        """Delete one of this visitor's own documents (SampleReadOnly for a sample)."""
        return self.session.delete(doc_id)

    def original(self, doc_id: str) -> bytes | None:
        """The saved PDF of a document this visitor may see, or None."""
        return self.session.original(doc_id)

    def allow_page_render(self) -> None:
        """Count one page image against the per-minute limits of this visitor, their network and the demo
        (LimitReached with one sentence when one is reached)."""
        self.session.count_page_render()

    def limits(self) -> Limits:
        """The demo's per-file limit and this visitor's quota use (and their network's, when other sessions from
        the same address hold documents too)."""
        per_file = min(self.settings.ingest.max_upload_mb, self.settings.demo.max_file_mb)
        return Limits(per_file, usage_line(self.session.usage(), per_file))

    def add_file(self, data: bytes, file_name: str) -> str:
        """Check and reserve room now (LimitReached at once), then queue the file."""
        work = self.session.upload_work(data, file_name)
        return self.submit_job(file_name, work, JobKind.FILE)

    def import_wikipedia(self, title: str, lang: str = "en") -> str:
        """Check room now (LimitReached at once), then queue the import."""
        session = self.session
        session.check_room(title)

        def work(progress: Any) -> Any:
            return session.import_wikipedia(title, lang, progress)

        return self.submit_job(f"{title} (Wikipedia)", work, JobKind.WIKIPEDIA)

    def refresh_wikipedia(self) -> str:
        """Queue a check of this visitor's own articles (never the samples)."""
        session = self.session

        def work(progress: Any) -> Any:
            return session.refresh_wikipedia(progress)

        return self.submit_job("Wikipedia articles", work, JobKind.REFRESH)

    def answer_stream(self, question: str, history: Sequence[ChatTurn] = (),
                      doc_ids: Sequence[str] | None = None, use_llm: bool = True) -> AnswerStreamLike:
        """Count the question against the rate limit (LimitReached), then stream an answer."""
        return self.session.start_answer(question, history=history, doc_ids=doc_ids, k=self.settings.retrieval.top_k,
                                         use_llm=use_llm)

    def search(self, query: str, k: int = 5, doc_ids: Sequence[str] | None = None) -> list[Passage]:
        """Top-k passages from own and shared documents."""
        return self.session.search(query, k, doc_ids)

    def _test_search(self, question: str, k: int) -> list[Passage]:
        """Count the test against the question limits (LimitReached), then search own and shared documents."""
        return self.session.search(question, k, counted=True)

    def model_line(self, use_llm: bool) -> tuple[str, str] | None:
        """None: the demo banner already says who writes the answers."""
        return None

    def model_toggle(self) -> bool:
        """True when the demo has a model a visitor may switch off."""
        return llm_mode(self.settings) == "remote"
