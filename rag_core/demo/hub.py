"""Hosted demo mode: a private library per browser session, a shared read-only sample library, limits, idle cleanup.

Privacy is enforced here, in rag_core, not in the UI. A `SessionLibrary` is bound to one session id and is the only
object the demo pages talk to: every write carries owner=<session id>, every read filters owners=[<session id>,
SHARED_OWNER] inside Qdrant, deletes accept only the session's own documents, and the settings used for answers are
the server's (a visitor cannot point the app at another Ollama host). Library.ingest_document scopes document ids
per owner, so two visitors uploading the same file get two separate copies and neither can reach the other's.

One `DemoHub` per process (the app keeps it in st.cache_resource) holds the shared Library, each session's last
activity and client address, quota reservations, question and page-image times (`rag_core.demo.quotas`: per session, per
client address and for the whole demo, so new sessions get no more room); it is thread-safe, like Streamlit's
one-thread-per-session model needs. Idle sessions (settings.demo_session_idle_minutes) lose their documents via
`cleanup_idle()`, which a daemon thread started by `start_janitor()` calls every minute.
"""
from __future__ import annotations

import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from rag_core.answer.generation import start_answer
from rag_core.core.config import Settings
from rag_core.core.errors import DemoTrouble, DocChatError, DocumentNotFound, SampleReadOnly
from rag_core.core.models import Answer, ChatTurn, Document, DocumentInfo, IngestStatus, Passage, Progress
from rag_core.demo.answers import DemoAnswerStream, llm_mode
from rag_core.demo.quotas import Holdings, Ledger, Usage, visitors
from rag_core.demo.samples import PREPARING_SAMPLES, SAMPLES_DIR, SAMPLES_STOP_WAIT_S, Preparation, load_shared
from rag_core.ingest.loaders import load_bytes
from rag_core.retrieve.search import DEFAULT_METHOD, retrieve
from rag_core.service.library import IngestResult, Library, scoped_doc_id
from rag_core.service.wiki_sync import RefreshReport, WikiImportResult, import_article, refresh

log = logging.getLogger(__name__)

SHARED_OWNER = "shared"  # owner of the read-only sample library
SESSION_PREFIX = "s-"
_SESSION_RE = re.compile(r"^s-[A-Za-z0-9_-]{16,64}$")
JANITOR_INTERVAL_S = 60.0

def new_session_id() -> str:
    """A fresh unguessable session id (the UI keeps it in st.session_state)."""
    return SESSION_PREFIX + secrets.token_urlsafe(24)


def check_session_id(session_id: str) -> str:
    """The id itself when it is a well-formed session id; ValueError otherwise (never "shared" or empty)."""
    if not isinstance(session_id, str) or not _SESSION_RE.match(session_id):
        raise ValueError("not a demo session id (use new_session_id())")
    return session_id


def _safe_name(file_name: str) -> str:
    """The bare file name for messages: no folders, no control characters, at most 80 characters."""
    name = re.split(r"[\\/]", file_name or "")[-1]
    name = re.sub(r"[\x00-\x1f\x7f]", "", name).strip() or "file"
    return name if len(name) <= 80 else name[:77] + "…"


# --------------------------------------------------------------------------- the hub
class DemoHub:
    """Process-wide demo state around one Library: sessions, quotas, question rates, samples and cleanup."""

    def __init__(self, library: Library, settings: Settings | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.library = library
        self.settings = settings or library.settings
        self.clock = clock
        self.ledger = Ledger(self.settings, clock)  # activity and quota use per session, client and demo
        self._warned_no_address = False
        self._janitor: threading.Thread | None = None
        self._stop = threading.Event()
        self._samples = Preparation("docchat-demo-samples")
        self._stop_samples = threading.Event()  # set on close: the samples' preparation ends after its current file
        self._samples_missing = False  # True while prepare_samples() adds samples to a library that has none

    # -- sessions ------------------------------------------------------------
    def session(self, session_id: str, client: str | None = None) -> SessionLibrary:
        """The private library of one session (created on first use; every call counts as activity). `client` is
        the visitor's address (`quotas.client_address`): the session's documents, questions and page images also
        count against it; without one the session shares the single "unknown" bucket."""
        check_session_id(session_id)
        if client is None and not self._warned_no_address:
            self._warned_no_address = True
            log.warning("A demo visitor has no client address (a local connection, or a reverse proxy that is not "
                        "trusted: see DOCCHAT_DEMO_TRUST_PROXY); such visitors share one set of per-client limits")
        self.ledger.touch(session_id, client)
        return SessionLibrary(self, session_id)

    def active_sessions(self) -> list[str]:
        """Ids of the sessions seen within the idle limit."""
        return self.ledger.sessions()

    def _purge_owner(self, owner: str) -> int:
        if owner == SHARED_OWNER:
            raise ValueError("the shared library is never purged")
        removed = 0
        for d in self.library.documents(owners=[owner]):
            try:
                self.library.delete(d.doc_id, owners=[owner])
                removed += 1
            except DocumentNotFound:
                continue  # deleted concurrently
        return removed

    def cleanup_idle(self) -> list[str]:
        """Delete the documents of sessions idle longer than the limit, and of owners no live session holds
        (left over from a previous run) once their newest document is older than the limit; returns the owners."""
        limit_s = self.settings.demo.session_idle_minutes * 60
        now = self.clock()
        expired, live = self.ledger.expire(limit_s)
        newest: dict[str, float] = {}
        for d in self.library.documents():
            if d.owner in (None, SHARED_OWNER) or d.owner in live or d.owner in expired:
                continue
            newest[d.owner] = max(newest.get(d.owner, 0.0), _timestamp(d.added_at))
        orphans = [o for o, t in newest.items() if now - t > limit_s]
        gone = []
        for owner in expired + orphans:
            n = self._purge_owner(owner)
            log.info("Demo cleanup: removed %d document(s) of an idle session", n)
            gone.append(owner)
        return gone

    def start_janitor(self, interval_s: float = JANITOR_INTERVAL_S) -> None:
        """Run cleanup_idle() every `interval_s` seconds on a daemon thread (idempotent)."""
        if self._janitor is not None and self._janitor.is_alive():
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval_s):
                try:
                    self.cleanup_idle()
                except Exception:  # the janitor must survive a bad round; it retries next time
                    log.exception("Demo cleanup failed; retrying in %.0f s", interval_s)

        self._janitor = threading.Thread(target=loop, name="docchat-demo-janitor", daemon=True)
        self._janitor.start()

    def stop_janitor(self) -> None:
        """Stop the cleanup thread (and the preparation of the samples, after the file it is adding)."""
        self._stop.set()
        if self._janitor is not None:
            self._janitor.join(timeout=5)
            self._janitor = None
        self._stop_samples.set()
        self._samples.join(SAMPLES_STOP_WAIT_S)

    # -- shared samples ------------------------------------------------------
    def prepare_samples(self, folder: Path | None = None) -> None:
        """Start `load_samples` on a background thread (idempotent): the server answers pages meanwhile, and they say
        what is being prepared (`preparing()`) instead of waiting silently; after a restart with the samples already
        in the library, pages use them at once while they are checked."""
        self._samples_missing = not self.shared_documents()
        self._stop_samples.clear()
        self._samples.start(lambda: self.load_samples(folder, self._stop_samples))

    def preparing(self) -> str | None:
        """One plain sentence while the shared samples are being prepared; None once they are ready."""
        return PREPARING_SAMPLES if self._samples_missing and self._samples.running else None

    def wait_for_samples(self, timeout: float | None = None) -> bool:
        """Wait until the shared samples are ready (True), or `timeout` seconds have passed (False)."""
        return self._samples.wait(timeout)

    def load_samples(self, folder: Path | None = None, stop: threading.Event | None = None) -> list[IngestResult]:
        """Make the shared library hold exactly the files of `folder` (default: the bundled samples/): add new ones,
        keep unchanged ones, delete shared documents whose file is gone (stopping after a file once `stop` is set).
        Reads local files only, never the network."""
        return load_shared(self.library, self.settings, SHARED_OWNER,
                           Path(folder) if folder is not None else SAMPLES_DIR, stop)

    def shared_documents(self) -> list[DocumentInfo]:
        """The sample library."""
        return self.library.documents(owners=[SHARED_OWNER])

    def holdings(self) -> Holdings:
        """Every visitor's documents now in the library, by owner (the shared samples excluded)."""
        return visitors(((d.owner, d.doc_id) for d in self.library.documents()), SHARED_OWNER)

    def reserve(self, session_id: str, file_name: str, size: int) -> None:
        """Check and reserve room for one more document of a session, within its own, its client's and the whole
        demo's limits (LimitReached when it does not fit)."""
        self.ledger.reserve(session_id, _safe_name(file_name), size, self.holdings())


# --------------------------------------------------------------------------- one session's view
class SessionLibrary:
    """One visitor's library: their own documents plus the shared samples; nothing else is reachable from here."""

    def __init__(self, hub: DemoHub, session_id: str) -> None:
        self._hub = hub
        self.session_id = check_session_id(session_id)

    @property
    def settings(self) -> Settings:
        """The server's settings (never a visitor's overrides)."""
        return self._hub.settings

    @property
    def owners(self) -> list[str]:
        """Whose documents this session reads: its own and the shared samples."""
        return [self.session_id, SHARED_OWNER]

    @property
    def _library(self) -> Library:
        return self._hub.library

    def _touch(self) -> None:
        self._hub.ledger.touch(self.session_id)

    # -- listing ---------------------------------------------------------------
    def documents(self) -> list[DocumentInfo]:
        """Own documents and the shared samples, newest first."""
        self._touch()
        return self._library.documents(owners=self.owners)

    def my_documents(self) -> list[DocumentInfo]:
        """Only the documents this session added."""
        self._touch()
        return self._library.documents(owners=[self.session_id])

    def get(self, doc_id: str) -> DocumentInfo | None:
        """A visible document by id, or None (another session's id looks exactly like a missing one)."""
        return self._library.store.get(doc_id, owners=self.owners)

    def is_shared(self, doc_id: str) -> bool:
        """True for a sample document."""
        return self._library.store.get(doc_id, owners=[SHARED_OWNER]) is not None

    def search_ready(self) -> bool:
        """True once the embedding model is loaded."""
        return self._library.embedder.ready

    def usage(self) -> Usage:
        """Files, bytes and questions used of this session's limits (and of its client's)."""
        return self._hub.ledger.usage(self.session_id, self._hub.holdings(), sweep_s=JANITOR_INTERVAL_S)

    def count_page_render(self) -> None:
        """Count one page image against the per-minute limits (LimitReached, one sentence, when one is reached)."""
        self._touch()
        self._hub.ledger.count_render(self.session_id)

    def original(self, doc_id: str) -> bytes | None:
        """The stored PDF of a visible document (to show a cited page), or None."""
        return self._library.original(doc_id, owners=self.owners)

    # -- reading ---------------------------------------------------------------
    def search(self, query: str, k: int = 5, doc_ids: Sequence[str] | None = None, method: str = DEFAULT_METHOD,
               counted: bool = False) -> list[Passage]:
        """Top-k passages from own and shared documents (doc_ids narrows, never widens); `counted`: as a question."""
        self._touch()
        if counted:
            self._hub.ledger.count_question(self.session_id)
        try:
            return retrieve(self._library.store, query, k, doc_ids, self.owners, method)
        except DocChatError:
            raise
        except Exception as e:  # no traceback or server detail reaches the visitor
            log.exception("Search failed in a demo session")
            raise DemoTrouble("searching your documents") from e

    def start_answer(self, question: str, history: Sequence[ChatTurn] = (),
                     doc_ids: Sequence[str] | None = None, k: int | None = None,
                     use_llm: bool = True) -> DemoAnswerStream:
        """Count the question against the rate limit (LimitReached when over), then stream an answer from own and
        shared documents: written by the remote model when the demo has an API key (and the visitor did not switch
        it off with use_llm=False), extractive otherwise."""
        self._touch()
        self._hub.ledger.count_question(self.session_id)
        s = self.settings
        owners: list[str | None] = list(self.owners)
        inner = start_answer(self._library, question, s, history, None if doc_ids is None else list(doc_ids),
                             owners, use_llm=use_llm and llm_mode(s) == "remote", k=k)
        return DemoAnswerStream(inner)

    def answer(self, question: str, history: Sequence[ChatTurn] = (),
               doc_ids: Sequence[str] | None = None, k: int | None = None, use_llm: bool = True) -> Answer:
        """Non-streaming start_answer()."""
        stream = self.start_answer(question, history, doc_ids, k, use_llm)
        for _ in stream:
            pass
        assert stream.answer is not None
        return stream.answer

    # -- writing ---------------------------------------------------------------
    def upload_work(self, data: bytes, file_name: str) -> Callable[[Progress | None], IngestResult]:
        """Check the limits now (LimitReached at once) and reserve room; the returned function does the ingest and
        can run on the IngestQueue worker (IngestQueue.submit(name, work, owner=session_id))."""
        self._touch()
        size = len(data)
        self._hub.reserve(self.session_id, file_name, size)
        done = threading.Event()

        def work(progress: Progress | None = None) -> IngestResult:
            if done.is_set():
                raise RuntimeError("upload work runs once")
            done.set()
            doc_id = None
            try:
                result = self._ingest(data, file_name, progress)
                if result.status in ("added", "unchanged"):
                    doc_id = result.doc_id
                return result
            finally:
                self._hub.ledger.settle(self.session_id, size, doc_id)

        return work

    def ingest_bytes(self, data: bytes, file_name: str, progress: Progress | None = None) -> IngestResult:
        """Add one uploaded file to this session's library (LimitReached when a limit is hit)."""
        return self.upload_work(data, file_name)(progress)

    def _ingest(self, data: bytes, file_name: str, progress: Progress | None) -> IngestResult:
        name = _safe_name(file_name)
        try:
            if progress:
                progress("reading", 0, 1)
            self._library.check_size(name, len(data))
            deadline = self._library.deadline(name)  # the file's time budget covers reading it too
            doc = load_bytes(data, name, self.settings, deadline, progress)  # ingest_document scopes the id to the owner
            result = self._library.ingest_document(doc, owner=self.session_id, progress=progress, label=name,
                                                   original=data, deadline=deadline)
        except DocChatError as e:
            log.info("Demo upload failed: %s", e)
            return IngestResult(name, IngestStatus.FAILED, error=str(e))
        except Exception:  # the visitor gets a sentence, the log gets the traceback
            log.exception("Unexpected failure in a demo upload")
            return IngestResult(name, IngestStatus.FAILED, error=str(DemoTrouble(f"adding “{name}”")))
        return result

    def import_wikipedia(self, title: str, lang: str = "en", progress: Progress | None = None) -> WikiImportResult:
        """Import one Wikipedia article into this session's library: it counts as one document of the size of its
        text, checked once the article is fetched and before it is stored (LimitReached now when no document fits;
        a failed result saying which limit when the text does not)."""
        self._touch()
        hub, sid = self._hub, self.session_id
        hub.reserve(sid, title, 0)
        counted = 0
        doc_id = None

        def check(doc: Document) -> None:
            nonlocal counted
            if self._library.store.get(scoped_doc_id(doc.doc_id, sid)) is not None:
                return  # this revision is already here and counted
            size = len(doc.text.encode("utf-8"))
            hub.ledger.grow(sid, _safe_name(doc.source.title), size, hub.holdings())
            counted = size

        try:
            result = import_article(self._library, self.settings, title, lang, owner=sid, progress=progress,
                                    check=check)
            if result.status == "added":
                doc_id = result.doc_id
            return result
        finally:
            hub.ledger.settle(sid, counted, doc_id)

    def check_room(self, file_name: str = "document", size: int = 0) -> None:
        """Raise LimitReached now if one more document of `size` bytes would not fit (nothing is reserved)."""
        self._hub.reserve(self.session_id, file_name, size)
        self._hub.ledger.settle(self.session_id, size, None)

    def refresh_wikipedia(self, progress: Progress | None = None) -> RefreshReport:
        """Check this session's own Wikipedia articles for newer revisions; the shared samples are never touched."""
        self._touch()
        report = refresh(self._library, self.settings, owners=[self.session_id], progress=progress)
        for item in report.changed:  # the new revision is counted at the size of the one it replaced
            if item.new_doc_id:
                self._hub.ledger.renamed(self.session_id, item.doc_id, item.new_doc_id)
        return report

    def delete(self, doc_id: str) -> DocumentInfo:
        """Delete one of this session's own documents (SampleReadOnly for a sample; DocumentNotFound otherwise)."""
        self._touch()
        try:
            info = self._library.delete(doc_id, owners=[self.session_id])
        except DocumentNotFound:
            if self.is_shared(doc_id):
                raise SampleReadOnly() from None
            raise
        return info

    def clear(self) -> int:
        """Delete all of this session's documents (the shared samples stay); returns how many."""
        self._touch()
        return self._hub._purge_owner(self.session_id)


def _timestamp(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except (TypeError, ValueError):
        return 0.0
