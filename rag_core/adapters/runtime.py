"""What one server process shares between browser sessions (`Runtime`), and how a session's settings are made.

The Streamlit glue keeps one `Runtime` in `st.cache_resource`; each browser session asks it for its `Workspace`.
It sits above the service and the demo (it chooses between a `LocalWorkspace` and the hosted demo's `DemoWorkspace`),
so neither has to know the other's way round: the one module of `adapters/` that pages and ui/ use (.importlinter).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rag_core.core.config import Settings
from rag_core.demo.quotas import client_address
from rag_core.service import live
from rag_core.service.conversations import SessionConversations
from rag_core.service.jobs import IngestQueue
from rag_core.service.workspace import OVERRIDABLE, SERVER_ONLY, LocalWorkspace, Workspace

if TYPE_CHECKING:
    from rag_core.demo.hub import DemoHub
    from rag_core.service.library import Library
    from rag_core.service.reembed import Reembed
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)

__all__ = ["OVERRIDABLE", "Runtime", "client_address", "first_start_model", "load_embedder", "runtime_key",
           "session_settings"]

SHUTDOWN_WAIT_S = 5.0  # on close, answers and ingests still running may finish within this
SHUTDOWN_GRACE_S = 2.0  # then they are stopped, and get this long to let go before the store closes


def first_start_model(settings: Settings) -> str:
    """The embedding model the app's library opens with; a new local library is made with "Many languages" where it
    runs and DOCCHAT_EMBEDDING_MODEL was not set (rag_core.service.embedding_choice.first_start_model)."""
    from rag_core.service.embedding_choice import first_start_model as choose

    return choose(settings)


def load_embedder(model_name: str) -> Embedder | None:
    """The embedding model, loading on a background thread (a page paints and lists the library meanwhile); None for
    a model server's ("ollama:…", "openai:…": nothing to load, the library builds it from the settings; issue 46)."""
    from rag_core.store.embeddings import Embedder
    from rag_core.store.server_embeddings import EmbeddingProvider, provider_of

    if provider_of(model_name) is not EmbeddingProvider.LOCAL:
        return None
    return Embedder(model_name, background=True)


def session_settings(base: Settings, overrides: Mapping[str, Any]) -> Settings:
    """Settings for one browser session: `base` plus what the person changed on the Settings page.

    In the hosted demo a visitor's Ollama host and model are ignored: the server never calls a host a visitor chose.
    """
    allowed = [k for k in OVERRIDABLE if not (base.mode == "demo" and k in SERVER_ONLY)]
    changes = {k: v for k, v in overrides.items() if k in allowed and v is not None}
    return base.with_overrides(**changes) if changes else base


def runtime_key(settings: Settings) -> tuple:
    """What identifies a runtime: where the library is stored, how it is embedded, and the mode."""
    return (str(settings.library.data_dir.resolve()), settings.library.qdrant_url, settings.library.collection, settings.library.embedding_model,
            settings.mode)


class Runtime:
    """What one server process shares between browser sessions: the library, the ingest queue and (demo) the hub."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None, load_samples: bool = True,
                 samples_in_background: bool = False) -> None:
        """Open the library; in the demo, add the shared samples now, or (`samples_in_background`, the app) on a
        thread while pages are served (`preparing()` says so meanwhile)."""
        from rag_core.service.library import Library

        self.settings = settings
        self.reembed: Reembed | None = None  # issue 46: the background re-embedding, when the model was switched
        if settings.mode == "demo":
            self.library: Library = Library(settings, embedder=embedder)
        else:  # issue 46: a library of another embedding model is opened with it and re-embedded in the background
            from rag_core.service.reembed import open_for_model

            self.library, self.reembed = open_for_model(settings, embedder)
        self.queue = IngestQueue(self.library)
        self.hub: DemoHub | None = None
        self.demo_conversations = SessionConversations()  # the demo's, per browser session
        if settings.mode == "demo":
            from rag_core.demo.hub import DemoHub

            self.hub = DemoHub(self.library, settings)
            if load_samples and samples_in_background:
                self.hub.prepare_samples()
            elif load_samples:
                self.hub.load_samples()
            self.hub.start_janitor()
        else:  # linked folders are checked on this interval (a badge on the Library page; nothing is applied)
            from rag_core.service.folder_watch import watch_for

            watch_for(self.library).start(settings.ingest.folder_recheck_s)

    def preparing(self) -> str | None:
        """One plain sentence while something every visitor needs is still being prepared (the demo's samples)."""
        return self.hub.preparing() if self.hub is not None else None

    def wait_prepared(self, timeout: float | None = None) -> bool:
        """Wait until what `preparing()` names is ready (True), or `timeout` seconds have passed (False)."""
        return self.hub.wait_for_samples(timeout) if self.hub is not None else True

    def new_session_key(self) -> str:
        """A fresh, unguessable id for one browser session (the demo keys its private library by it)."""
        from rag_core.demo.hub import new_session_id

        return new_session_id()

    def workspace(self, session_key: str, overrides: Mapping[str, Any] | None = None,
                  base: Settings | None = None, client: str | None = None) -> Workspace:
        """The workspace of one browser session (its id from `new_session_key`), with its Settings-page changes on
        top of `base` (the settings as read now; default: those the runtime started with). `client` is the
        visitor's address from `quotas.client_address` (the demo's per-address limits; None: the "unknown" bucket)."""
        if self.hub is not None:
            session = self.hub.session(session_key, client)
            self.demo_conversations.keep_only(self.hub.active_sessions())
            from rag_core.demo.workspace import DemoWorkspace

            return DemoWorkspace(session, self.queue, self.demo_conversations.for_session(session_key))
        return LocalWorkspace(self.library, self.queue, session_settings(base or self.settings, overrides or {}))

    def _stop_reembed(self, end: float, grace: float) -> None:
        """Issue 46: the re-embedding (started at open or from the Settings page) stops between two batches; the next
        start resumes it."""
        if self.hub is not None:
            return
        from rag_core.service.reembed import current

        job = current(self.library) or self.reembed
        if job is not None:
            job.stop()
            job.wait(max(0.0, end - time.monotonic()) + grace)

    def close(self, timeout: float = SHUTDOWN_WAIT_S, grace: float = SHUTDOWN_GRACE_S) -> None:
        """Stop background threads and release the library: answers and ingests still running get up to `timeout`
        seconds to finish, then are stopped and get `grace` more to let go, so the store is not closed under them."""
        end = time.monotonic() + timeout
        if self.hub is not None:
            self.hub.stop_janitor()
        else:
            from rag_core.service.folder_watch import watch_for

            watch_for(self.library).stop()
        self._stop_reembed(end, grace)
        answers = live.drain(self.library, timeout, grace)
        jobs_ended = self.queue.close(max(0.0, end - time.monotonic()), grace)
        if answers or not jobs_ended:
            log.warning("Closing the library with work still running (%d answer(s)%s)", answers,
                        "" if jobs_ended else ", ingest jobs")
        self.library.close()


