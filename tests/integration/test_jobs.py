"""The background ingest queue and the private copies of originals, with the real library."""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from rag_core.errors import WikipediaTimeout
from rag_core.jobs import IngestQueue, JobView
from rag_core.library import IngestResult
from rag_core.originals import delete_original, load_original, original_path, originals_dir, save_original

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"


@pytest.fixture
def queue(library):
    q = IngestQueue(library)
    yield q
    q.close()


def test_files_are_added_in_the_background_with_stages(queue, library, settings):
    seen: list[str] = []
    pdf = (DOCS / "pdf_text_4-pages_pdflatex.pdf").read_bytes()
    gate = threading.Event()
    real_embed = library.store.embed_chunks

    def slow_embed(chunks, progress=None):  # hold the embedding stage until the test has seen it
        out = real_embed(chunks, progress)
        gate.wait(10)
        return out

    library.store.embed_chunks = slow_embed
    ids = [queue.submit_bytes(pdf, "report.pdf"),
           queue.submit_bytes((DOCS / "pdf_encrypted_user-password.pdf").read_bytes(), "locked.pdf"),
           queue.submit_bytes(pdf, "again.pdf")]
    while queue.busy():
        seen.extend(j.stage for j in queue.active() if j.state == "running")
        if "embedding" in seen:
            gate.set()
        if not queue.wait(ids, 0.01):
            continue
    gate.set()
    assert queue.wait(ids, 120)
    added, locked, again = (j.result for j in queue.jobs(ids))
    assert added.status == "added" and added.pages == 4 and added.chunks > 0
    assert locked.status == "failed" and "password-protected" in locked.error
    assert again.status == "unchanged" and again.doc_id == added.doc_id
    assert set(seen) <= {"", "reading", "chunking", "embedding", "saving"} and "embedding" in seen
    assert not queue.busy()
    # Only the added PDF gets a private copy, named by its id, owner-only.
    assert load_original(settings, added.doc_id) == pdf
    assert [p.name for p in originals_dir(settings).iterdir()] == [f"{added.doc_id}.pdf"]
    assert stat.S_IMODE(os.stat(original_path(settings, added.doc_id)).st_mode) == 0o600


def test_busy_is_per_owner_and_jobs_run_one_at_a_time(queue):
    gate = threading.Event()
    running = []

    def slow(progress):
        running.append(1)
        progress("embedding", 1, 2)
        gate.wait(10)
        return IngestResult("a", "added")

    first = queue.submit("a.pdf", slow, owner="s1")
    second = queue.submit("b.pdf", lambda p: IngestResult("b", "added"), owner="s1")
    try:
        assert not queue.wait([first], 0.3)
        assert queue.busy("s1") and not queue.busy("s2") and not queue.busy(None)
        a, b = queue.jobs([first, second])
        assert a.state == "running" and a.fraction == pytest.approx(2.5 / 4)
        assert b.state == "queued" and b.fraction == 0.0
    finally:
        gate.set()
    assert queue.wait([first, second], 10)
    assert [j.state for j in queue.jobs([first, second])] == ["done", "done"]
    assert len(running) == 1


def test_a_failing_job_becomes_a_sentence_and_the_worker_survives(queue):
    def boom(progress):
        raise RuntimeError("disk on fire")

    def wiki(progress):
        raise WikipediaTimeout(3)

    ids = [queue.submit("x.pdf", boom), queue.submit("Article", wiki, kind="wikipedia"),
           queue.submit("ok", lambda p: IngestResult("ok", "added"))]
    assert queue.wait(ids, 10)
    crash, timeout, ok = (j.result for j in queue.jobs(ids))
    assert crash.status == "failed" and "something unexpected went wrong" in crash.error
    assert "disk on fire" not in crash.error
    assert timeout.status == "failed" and "did not answer in time" in timeout.error
    assert ok.status == "added"
    queue.forget(ids)
    assert queue.jobs(ids) == []


def test_too_large_upload_is_refused_before_reading(library, settings):
    small = IngestQueue(library)
    library.settings = settings.with_overrides(max_upload_mb=0)
    try:
        job = small.submit_bytes(b"%PDF-1.4 tiny", "big.pdf")
        assert small.wait([job], 10)
        [view] = small.jobs([job])
        assert view.result.status == "failed" and "larger than the 0 MB limit" in view.result.error
    finally:
        library.settings = settings
        small.close()


def test_fraction_of_single_stage_jobs():
    assert JobView("j", "x", None, "running", stage="checking", done=1, total=4).fraction == 0.25
    assert JobView("j", "x", None, "running", stage="downloading", done=1, total=1).fraction == 0.25
    assert JobView("j", "x", None, "done").fraction == 1.0


@pytest.mark.parametrize("bad", ["../evil", "a/b", "", "x" * 200, "a.pdf", "..", "c:\\x"])
def test_original_paths_accept_only_plain_ids(settings, bad):
    with pytest.raises(ValueError):
        original_path(settings, bad)
    assert load_original(settings, bad) is None
    assert delete_original(settings, bad) is False


def test_originals_save_load_delete(settings):
    assert save_original(settings, "abc123", b"%PDF-x", "docx") is None  # only PDFs are kept
    path = save_original(settings, "abc123", b"%PDF-x", "pdf")
    assert path == original_path(settings, "abc123") and path.read_bytes() == b"%PDF-x"
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".upload-")]
    assert delete_original(settings, "abc123") is True
    assert load_original(settings, "abc123") is None and delete_original(settings, "abc123") is False


def test_close_then_submit_runs_the_next_job_at_once(library):
    """close() with no worker alive leaves nothing behind; a job submitted after a close runs straight away."""
    q = IngestQueue(library)
    q.close()  # no worker yet: nothing must be left in the queue to swallow the next job
    first = q.submit("a", lambda p: IngestResult("a", "added"))
    assert q.wait([first], 10)
    q.close()  # the worker stops after its jobs
    second = q.submit("b", lambda p: IngestResult("b", "added"))
    assert q.wait([second], 10), "a job submitted after close() waited for another one"
    [view] = q.jobs([second])
    assert view.result.status == "added"
    q.close()
