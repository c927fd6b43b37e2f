"""A question's query embedding goes before the upload batches waiting for the embedding model (issue 24): while
files are being added, a question waits for the one batch in progress at most, never for the next batch of another
upload that was waiting already (the hosted demo adds two people's files at once). Uploads still get their turn.

The real Embedder, its lock, the store's ingest embedding (Store.embed_chunks) and the answer's query embedding
(retrieval.embed_queries); only the model is a stand-in that holds each upload batch until the test lets it end,
so every hand-off is decided by the lock, not by timing.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from rag_core.core.models import Chunk, SourceMeta
from rag_core.retrieve.search import embed_queries
from rag_core.store.embeddings import URGENT_RUN, FairLock

WAIT_S = 10.0  # upper bound on any wait for a state: reached only when the test is failing
QUESTION = "What is the capital of France?"


def _until(condition: Callable[[], bool], what: str) -> None:
    """Wait for a state (polling an event, never a fixed sleep)."""
    pause = threading.Event()
    for _ in range(int(WAIT_S / 0.005)):
        if condition():
            return
        pause.wait(0.005)
    raise AssertionError(f"timed out waiting until {what}")


class GatedModel:
    """Stands in for the embedding model: records which thread called it, and holds every upload batch
    (a call from a thread named "upload-…") until the test lets that batch end."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.calls: list[str] = []
        self._changed = threading.Condition()
        self._ended = 0  # upload batches allowed to end, in the order they entered the model
        self._open = False

    def encode(self, texts: list[str], **kwargs: Any) -> np.ndarray:
        who = threading.current_thread().name
        with self._changed:
            self.calls.append(who)
            self._changed.notify_all()
            if who.startswith("upload"):
                number = sum(c.startswith("upload") for c in self.calls)
                assert self._changed.wait_for(lambda: self._open or self._ended >= number, WAIT_S)
        return np.zeros((len(texts), self.dim), dtype=np.float32)

    def run(self, ids: np.ndarray, mask: np.ndarray, last: bool = True) -> np.ndarray:
        """The ONNX runtime's call: one padded batch (`last`: the call's final one)."""
        return self.encode([""] * len(ids))

    def end_batch(self) -> None:
        """Let the upload batch in the model end."""
        with self._changed:
            self._ended += 1
            self._changed.notify_all()

    def open(self) -> None:
        """Let every batch run through."""
        with self._changed:
            self._open = True
            self._changed.notify_all()


def _chunks(n: int) -> list[Chunk]:
    src = SourceMeta(file_name="report.txt", title="Report", kind="txt", sha256="0" * 64,
                     added_at="2026-12-01T00:00:00+00:00")
    return [Chunk("doc", i, f"Passage {i} of the report.", 0, 10, None, None, (), src) for i in range(n)]


@pytest.fixture
def gated(library, monkeypatch) -> GatedModel:
    """The library's embedder with the stand-in model (the real one is put back after the test)."""
    model = GatedModel(library.embedder.dim)
    monkeypatch.setattr(library.embedder, "_model", model)
    return model


def _upload(library, name: str, done: list | None = None) -> threading.Thread:
    """Embed 24 passages as an upload does, on a thread named `name`; their vectors go to `done`."""
    def run() -> None:
        dense, _sparse = library.store.embed_chunks(_chunks(24))
        if done is not None:
            done.append(dense)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def _ask(library, got: list) -> threading.Thread:
    thread = threading.Thread(target=lambda: got.append(embed_queries(library.store, [QUESTION])), name="question",
                              daemon=True)
    thread.start()
    return thread


def test_a_question_goes_before_the_batch_of_another_upload_waiting(library, gated):
    lock, done = library.embedder._lock, []
    uploads = [_upload(library, "upload-1", done)]
    try:
        _until(lambda: gated.calls == ["upload-1"], "the first upload's batch is in the model")
        uploads.append(_upload(library, "upload-2", done))
        _until(lambda: lock.waiting == 1, "the second upload's batch waits")
        got: list = []
        question = _ask(library, got)
        _until(lambda: lock.waiting == 2, "the question waits too")
        gated.end_batch()
        _until(lambda: len(gated.calls) >= 2, "the model is handed on")
        assert gated.calls[1] == "question", f"the question waited for another upload's batch: {gated.calls}"
        question.join(WAIT_S)
        assert got and len(got[0]) == 1
    finally:
        gated.open()
        for t in uploads:
            t.join(WAIT_S)
    assert all(not t.is_alive() for t in uploads)
    assert [d.shape for d in done] == [(24, library.embedder.dim)] * 2  # both uploads went on to the end


def test_a_question_waits_for_the_batch_in_progress_only(library, gated):
    """One upload taking the model back batch after batch: the question is next as soon as the batch ends."""
    lock = library.embedder._lock
    upload = _upload(library, "upload-1")
    try:
        _until(lambda: gated.calls == ["upload-1"], "the upload's batch is in the model")
        got: list = []
        question = _ask(library, got)
        _until(lambda: lock.waiting == 1, "the question waits")
        gated.end_batch()
        _until(lambda: len(gated.calls) >= 2, "the model is handed on")
        assert gated.calls[1] == "question", f"the question waited for more than one batch: {gated.calls}"
        question.join(WAIT_S)
        assert got
    finally:
        gated.open()
        upload.join(WAIT_S)
    assert not upload.is_alive()


def test_questions_one_after_another_do_not_stop_an_upload_for_good():
    """A waiting upload batch gets its turn after at most URGENT_RUN hand-offs to questions in a row."""
    lock, order = FairLock(), []
    lock.acquire()

    def take(name: str, background: bool) -> threading.Thread:
        def run() -> None:
            assert lock.acquire(background=background)
            order.append(name)
            lock.release()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    threads = [take("batch", True)]
    _until(lambda: lock.waiting == 1, "the batch waits")
    for i in range(URGENT_RUN + 2):
        threads.append(take(f"q{i}", False))
        _until(lambda n=i + 2: lock.waiting == n, f"{i + 1} questions wait")
    lock.release()
    for t in threads:
        t.join(WAIT_S)
    questions = [f"q{i}" for i in range(URGENT_RUN + 2)]
    assert order == questions[:URGENT_RUN] + ["batch"] + questions[URGENT_RUN:]


def test_a_question_that_gives_up_leaves_its_line():
    lock = FairLock()
    lock.acquire()
    assert not lock.acquire(timeout=0.01)
    assert not lock.acquire(timeout=0.01, background=True)
    assert lock.waiting == 0
    lock.release()
    assert lock.acquire(timeout=0)
    lock.release()
