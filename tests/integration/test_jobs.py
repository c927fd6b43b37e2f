"""The background ingest queue and the private copies of originals, with the real library."""
from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from rag_core.core.errors import WikipediaTimeout
from rag_core.ingest.originals import delete_original, load_original, original_path, originals_dir, save_original
from rag_core.service.jobs import IngestQueue, JobView
from rag_core.service.library import IngestResult

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


# --------------------------------------------------------------------------- fair scheduling (hosted demo)
def _blocker(gate: threading.Event, started: threading.Event | None = None, name: str = "big"):
    def work(progress):
        if started is not None:
            started.set()
        progress("embedding", 1, 4)
        assert gate.wait(60), "the test never released the blocking job"
        return IngestResult(name, "added")

    return work


def test_a_second_owners_small_file_is_added_while_the_first_owners_big_one_runs(queue, library):
    gate, started = threading.Event(), threading.Event()
    big = queue.submit("big.pdf", _blocker(gate, started), owner="alice")
    try:
        assert started.wait(10)
        small = queue.submit_bytes(b"Bern is the federal city of Switzerland.", "bern.txt", owner="bob")
        assert queue.wait([small], 60), "bob's file waited for alice's"
        [done] = queue.jobs([small])
        assert done.result.status == "added" and done.result.chunks == 1
        assert [d.title for d in library.documents(owners=["bob"])] == ["bern"]
        [running] = queue.jobs([big])
        assert running.state == "running"
    finally:
        gate.set()
    assert queue.wait([big], 10)


def test_one_owner_never_holds_every_worker(library):
    q = IngestQueue(library, workers=2)
    gate = threading.Event()
    a1_started = threading.Event()
    try:
        a1 = q.submit("a1", _blocker(gate, a1_started, "a1"), owner="alice")
        a2 = q.submit("a2", _blocker(gate, None, "a2"), owner="alice")
        assert a1_started.wait(10)
        b1 = q.submit("b1", lambda p: IngestResult("b1", "added"), owner="bob")
        assert q.wait([b1], 10), "bob waited although a worker was free"
        assert [j.state for j in q.jobs([a1, a2])] == ["running", "queued"]  # alice's second job waits for her first
    finally:
        gate.set()
    assert q.wait([a1, a2], 10)
    q.close()


def test_owners_take_turns_and_each_owners_jobs_keep_their_order(library):
    q = IngestQueue(library, workers=1)
    gate, started = threading.Event(), threading.Event()
    order: list[str] = []

    def job(name):
        def work(progress):
            order.append(name)
            return IngestResult(name, "added")

        return work

    try:
        first = q.submit("a1", _blocker(gate, started, "a1"), owner="alice")
        assert started.wait(10)
        ids = [first] + [q.submit(n, job(n), owner=o) for n, o in
                         [("a2", "alice"), ("a3", "alice"), ("b1", "bob"), ("b2", "bob"), ("c1", None)]]
    finally:
        gate.set()
    assert q.wait(ids, 10)
    assert order == ["b1", "c1", "a2", "b2", "a3"]  # alice just had her turn: bob and the owner None go first
    q.close()


def test_no_more_jobs_run_at_once_than_workers(library):
    q = IngestQueue(library, workers=2)
    lock = threading.Lock()
    running, peak = [0], [0]
    gate = threading.Event()

    def work(progress):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        gate.wait(0.3)
        with lock:
            running[0] -= 1
        return IngestResult("x", "added")

    ids = [q.submit(f"f{i}", work, owner=f"owner{i % 4}") for i in range(8)]
    assert q.wait(ids, 30)
    assert peak[0] == 2
    q.close()
    assert IngestQueue(library).workers == library.settings.ingest.workers == 2


@pytest.mark.timeout(180, func_only=True)
def test_two_owners_files_are_indexed_at_the_same_time_safely(library):
    """Two workers really run at once (reading, splitting, embedding), saving one at a time under the store's lock."""
    q = IngestQueue(library, workers=2)
    pdf = (DOCS / "pdf_text_4-pages_pdflatex.pdf").read_bytes()
    columns = (DOCS / "pdf_text_multicolumn_3-pages.pdf").read_bytes()
    overlap = threading.Event()
    real_embed = library.store.embed_chunks

    def embed(chunks, progress=None):  # note when both owners' files are past reading at the same moment
        running = [j for j in q.active("alice") + q.active("bob") if j.state == "running"]
        if len(running) == 2:
            overlap.set()
        return real_embed(chunks, progress)

    library.store.embed_chunks = embed
    try:
        ids = {"alice": [q.submit_bytes(pdf, "report.pdf", owner="alice"),
                         q.submit_bytes(b"Alice's own notes. Nothing more.", "notes.txt", owner="alice")],
               "bob": [q.submit_bytes(columns, "columns.pdf", owner="bob"), q.submit_bytes(pdf, "report.pdf", owner="bob")]}
        all_ids = ids["alice"] + ids["bob"]
        assert q.wait(all_ids, 170)
    finally:
        library.store.embed_chunks = real_embed
        q.close()
    results = {owner: [j.result for j in q.jobs(job_ids)] for owner, job_ids in ids.items()}
    assert all(r.status == "added" for rs in results.values() for r in rs), results
    assert overlap.is_set(), "the two owners' files never ran at the same time"
    for owner, rs in results.items():
        assert sorted(d.doc_id for d in library.documents(owners=[owner])) == sorted(r.doc_id for r in rs)
    assert results["alice"][0].doc_id != results["bob"][1].doc_id  # the same file, two private copies
    assert library.store.count_chunks() == sum(r.chunks for rs in results.values() for r in rs)
    assert all(library.store.intact(r.doc_id) for rs in results.values() for r in rs)
