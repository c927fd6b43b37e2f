"""Switching a library's embedding model (issue 46): re-embed it in the background, then switch in one step.

`open_for_model(settings)` opens the library with the model that made its vectors (rag_core.store.model_record) and,
when DOCCHAT_EMBEDDING_MODEL names another, starts a `Reembed`: on its own thread it copies every document into a
side library (the same point ids, texts, metadata and lexical vectors; dense vectors from the new model), document
by document, each written whole before its registry entry, while searches and uploads keep using the old library.
Progress is (documents done, documents); `stop()` ends it between two batches and keeps what is built (the next
start resumes it). When every document is there, a last pass (with the old library's writes paused and searches
held for a moment) copies what was added or removed meanwhile, the pointer file is written atomically, and the
Library's store and embedder are swapped in the same step; the old folder is then removed.

A kill -9 at any moment leaves the pointer, so the old library, whole: before the pointer is written nothing of
the old library changed, after it the new one is complete. The next `open_for_model` resumes the plan when the same
model is asked for (documents already in the side library are skipped; a half-written one is removed by the side
store's repair and done again) and discards it otherwise.

A library on a Qdrant server (QDRANT_URL) is re-embedded the same way into a side collection on the same server,
with the plan in the library's collection metadata and a collection alias as the one-step switch
(rag_core.store.server_model); rag_core.service.reembed_places holds what differs between the two.
"""
from __future__ import annotations

import logging
import threading
import weakref
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, EmbeddingModelMismatch, ReembedBusy
from rag_core.service.reembed_places import EdgePlaces, Places, ServerPlaces, places_of
from rag_core.store.backends import COMPLETE, RawPoint, Scope
from rag_core.store.backends.layout import chunk_from_payload
from rag_core.store.context import indexed_text
from rag_core.store.model_record import ModelRecord, ReembedPlan, active_folder, drop_plan, wanted_model, write_choice
from rag_core.store.server_embeddings import open_embedder
from rag_core.store.vector_store import Store

if TYPE_CHECKING:
    from collections.abc import Callable

    from rag_core.service.library import Library
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)

STAGE = "re-embedding"
BATCH = 32  # passages per model call between two Stop checks
CATCH_UP_PASSES = 3  # passes while uploads go on before the last one with writes paused


class ReembedState(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class ReembedStatus:
    """Where a re-embedding is: documents done of all, and its state (`error`: the sentence when it failed)."""

    model: str
    state: ReembedState
    done: int = 0
    total: int = 0
    error: str = ""


class Stopped(Exception):
    """Raised inside the job when Stop was pressed."""


def recorded_model(settings: Settings) -> ModelRecord | None:
    """The record of the library these settings open (Edge only), read without any model; None: no library yet."""
    if settings.library.qdrant_url:
        return None
    folder = active_folder(settings)
    if not folder.is_dir():
        return None
    from rag_core.store.backends.edge import EdgeBackend

    backend = EdgeBackend(folder)
    try:
        meta = backend.read_meta()
    finally:
        backend.close()
    return None if meta is None else ModelRecord.from_meta(meta)


def resume_or_discard(settings: Settings, wanted: str | None = None) -> ReembedPlan | None:
    """At start: keep a re-embedding under way for the model asked for (`wanted`, default `wanted_model`), else
    discard it; remove the side folders nothing uses (a discarded plan's, the old library after a switch). Returns
    the plan kept."""
    return _resume_or_discard(EdgePlaces(settings), wanted or wanted_model(settings))


def _resume_or_discard(places: Places, wanted: str) -> ReembedPlan | None:
    plan = places.read_plan()
    if plan is not None and plan.model != wanted:
        log.warning("Discarding the unfinished re-embedding with %s (the model asked for is now %s)", plan.model,
                    wanted)
        places.drop_plan()
        plan = None
    places.tidy(plan)
    return plan


def open_for_model(settings: Settings, embedder: Embedder | None = None) -> tuple[Library, Reembed | None]:
    """The library, opened with the model that made its vectors (rag_core.store.model_record) and, when the model
    asked for (`wanted_model`: DOCCHAT_EMBEDDING_MODEL, or the Settings page's choice) is another, the re-embedding
    to it, started; (library, None) when they agree or the library is new. `embedder` is used for whichever of the
    two models it is. An unfinished re-embedding with another model is discarded first."""
    from rag_core.service.library import Library

    wanted = wanted_model(settings)

    def model(name: str) -> Embedder:
        return embedder if embedder is not None and embedder.name == name else open_embedder(settings, name)

    if settings.library.qdrant_url:
        return _open_on_server(settings, wanted, model)
    plan = resume_or_discard(settings, wanted)
    target = model(wanted)
    if plan is None:
        try:
            return Library(settings, embedder=target), None
        except EmbeddingModelMismatch:  # the library is another model's: opened with that one, re-embedded below
            pass
    record = recorded_model(settings)
    if record is None or record.name == target.name:
        drop_plan(settings)  # a kill after the switch, before the plan was dropped: the switch is done
        return Library(settings, embedder=target), None
    log.warning("Your library was built with %s; re-embedding it with %s in the background (searches use the "
                "old vectors until it is done)", record.name, target.name)
    library = Library(settings, embedder=model(record.name))
    return library, Reembed(library, target).start()


def _open_on_server(settings: Settings, wanted: str, model: Callable[[str], Embedder]
                    ) -> tuple[Library, Reembed | None]:
    """open_for_model for a library on a Qdrant server: one connection, whose library metadata holds the plan."""
    from rag_core.service.library import Library
    from rag_core.store import server_model
    from rag_core.store.backends import closed_on_error
    from rag_core.store.backends.client import connect

    backend = connect(settings)
    collection = settings.library.collection
    with closed_on_error(backend):
        if server_model.finish_switch(backend, collection):  # a first switch cut short by a kill: the new library
            now = backend.sibling(backend.alias_target(collection) or collection)
            backend.close()
            backend = now
    with closed_on_error(backend):
        places = ServerPlaces(settings, backend)
        _resume_or_discard(places, wanted)
        meta = backend.read_meta()
        target = model(wanted)
        record = None if meta is None else ModelRecord.from_meta(meta)
        if record is None or record.name == target.name:
            places.drop_plan()
            return Library(settings, embedder=target, store=Store(backend, settings, target)), None
        log.warning("Your library was built with %s; re-embedding it with %s in the background (searches use the "
                    "old vectors until it is done)", record.name, target.name)
        old = model(record.name)
        library = Library(settings, embedder=old, store=Store(backend, settings, old))
    return library, Reembed(library, target).start()


# -- the re-embedding of each open library (the Settings page's choice, its progress and Stop) ----------------------
_JOBS: weakref.WeakKeyDictionary[Library, Reembed] = weakref.WeakKeyDictionary()
_JOBS_GUARD = threading.Lock()
STOP_WAIT_S = 30.0  # how long a new choice waits for the re-embedding it replaces to stop


def current(library: Library) -> Reembed | None:
    """The re-embedding of `library` started in this process (running, stopped, done or failed), if any."""
    with _JOBS_GUARD:
        return _JOBS.get(library)


def switch_model(library: Library, name: str) -> Reembed | None:
    """The Settings page's choice: re-embed `library` with the model `name` in the background (searches keep the
    old vectors until the switch) and remember the choice for the next start. Choosing the library's own model
    stops a re-embedding under way and returns None. ReembedBusy when the one under way does not stop in time."""
    settings = library.settings
    running = current(library)
    if running is not None and running.status().state is ReembedState.RUNNING:
        if running.embedder.name == name:
            return running
        running.stop()
        if running.wait(STOP_WAIT_S).state is ReembedState.RUNNING:
            raise ReembedBusy(running.embedder.name)
    target = None if name == library.embedder.name else open_embedder(settings, name, background=True)
    places = places_of(library)
    places.drop_plan()  # (a model that cannot be opened raised above: nothing changed)
    write_choice(settings, name)
    _resume_or_discard(places, name)  # the stopped re-embedding's side folder (or collection) goes
    if target is None:
        with _JOBS_GUARD:
            _JOBS.pop(library, None)
        return None
    log.warning("Re-embedding the library with %s in the background (chosen in Settings)", name)
    return Reembed(library, target).start()


def cancel_switch(library: Library) -> None:
    """The Settings page's Stop: the library keeps its model (the choice goes back to it) and what the re-embedding
    built is removed."""
    running = current(library)
    if running is not None:
        running.stop()
        running.wait(STOP_WAIT_S)
    switch_model(library, library.embedder.name)


class Reembed:
    """One background re-embedding of `library` with `embedder`; `status()`, `stop()`, `wait()`."""

    def __init__(self, library: Library, embedder: Embedder) -> None:
        self.library, self.embedder = library, embedder
        self.settings = library.settings
        self.places = places_of(library)
        self.plan = ReembedPlan(self.places.side_name(embedder.name), embedder.name)
        self._stop = threading.Event()
        self._status = ReembedStatus(embedder.name, ReembedState.RUNNING)
        self._thread = threading.Thread(target=self._run, name="docchat-reembed", daemon=True)

    def start(self) -> Reembed:
        current = self.places.read_plan()
        if current is not None and current != self.plan:
            raise ReembedBusy(current.model)
        self.places.write_plan(self.plan)
        with _JOBS_GUARD:
            _JOBS[self.library] = self
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop between two batches; what is built stays for the next start."""
        self._stop.set()

    def status(self) -> ReembedStatus:
        return self._status

    def wait(self, timeout: float | None = None) -> ReembedStatus:
        self._thread.join(timeout)
        return self._status

    # -- the job -----------------------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            side = self.places.open_side(self.plan, self.embedder)
        except DocChatError as e:
            self._status = replace(self._status, state=ReembedState.FAILED, error=str(e))
            return
        try:
            self._copy_all(side)
            self._switch(side)
        except Stopped:
            side.close()
            self._status = replace(self._status, state=ReembedState.STOPPED)
        except DocChatError as e:
            side.close()
            self._status = replace(self._status, state=ReembedState.FAILED, error=str(e))
        except Exception as e:  # the sentence for the page; the traceback in the log
            log.exception("Re-embedding failed")
            side.close()
            self._status = replace(self._status, state=ReembedState.FAILED,
                                   error=f"Re-embedding the library stopped on an unexpected error ({type(e).__name__}); "
                                         "your library is unchanged.")

    def _copy_all(self, side: Store) -> None:
        """Passes until the side library holds what the old one holds (uploads may go on meanwhile)."""
        for _ in range(CATCH_UP_PASSES):
            if not self._sync(side):
                return

    def _sync(self, side: Store) -> int:
        """Copy the documents the side library lacks, drop those the old one lost; how many changed."""
        old = self.library.store
        wanted = {d.doc_id for d in old.list_documents()}
        have = {d.doc_id for d in side.list_documents()}
        missing, gone = sorted(wanted - have), sorted(have - wanted)
        total = len(wanted)
        self._status = replace(self._status, done=total - len(missing), total=total)
        for doc_id in gone:
            side.delete(doc_id)
        for doc_id in missing:
            if self._stop.is_set():
                raise Stopped
            self._copy(old, side, doc_id)
            self._status = replace(self._status, done=self._status.done + 1)
            log.info("Re-embedding with %s… %d/%d documents", self.embedder.name, self._status.done, total)
        return len(missing) + len(gone)

    def _copy(self, old: Store, side: Store, doc_id: str) -> None:
        """One document: its points with new dense vectors (same ids, payloads, lexical vectors), then its entry."""
        entry = old.backend.get_entry(doc_id)
        if entry is None or entry.status != COMPLETE:
            return  # removed or not finished meanwhile: the next pass sees it
        points = [p for batch in old.backend.points(True, BATCH, Scope(doc_ids=(doc_id,))) for p in batch]
        new: list[RawPoint] = []
        for i in range(0, len(points), BATCH):
            if self._stop.is_set():
                raise Stopped
            part = points[i:i + BATCH]
            texts = [indexed_text(chunk_from_payload(p.payload)) for p in part]
            dense = self.embedder.encode(texts, background=True)  # questions go first
            new.extend(RawPoint(p.id, dense[j].tolist(), p.sparse, p.payload) for j, p in enumerate(part))
        side.import_points(new, status=COMPLETE)
        side.import_entry(entry)  # written after every point: a document without its entry is removed on resume

    def _switch(self, side: Store) -> None:
        """The last pass with the old library's writes paused, then the pointer and the swap, in one step."""
        old = self.library.store
        with old.writes_paused():  # no upload lands between the last pass and the switch
            self._sync(side)
            record = ModelRecord(self.embedder.name, self.embedder.dim)
            with old.gate.swapping():
                self.places.switch(self.plan, record)
                self.library.store, self.library.embedder = side, self.embedder
        places = places_of(self.library)  # the new library's (on a server: its collection's metadata)
        places.drop_plan()
        self._status = replace(self._status, state=ReembedState.DONE)
        log.warning("Your library is now searched with %s (%d documents)", self.embedder.name, self._status.total)
        old.close()
        places.tidy(None)  # the old library goes


__all__ = ["Reembed", "ReembedState", "ReembedStatus", "cancel_switch", "current", "open_for_model", "recorded_model",
           "resume_or_discard", "switch_model"]
