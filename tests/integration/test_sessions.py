"""Hosted demo mode (rag_core.demo.hub): private per-session libraries enforced in rag_core, the shared read-only
sample library, limits, idle cleanup and the demo's LLM mode. Real model, real Qdrant local mode, real sample files;
only Ollama is faked at the wire (tests/ollama_server.py)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from ollama_server import OllamaServer, Reply

from rag_core.core.config import Settings
from rag_core.core.errors import DemoTrouble, DocumentNotFound, LimitReached, SampleReadOnly
from rag_core.demo.answers import DEMO_NOTICE_LLM_DOWN, demo_banner, llm_mode
from rag_core.demo.hub import SHARED_OWNER, DemoHub, check_session_id, new_session_id
from rag_core.demo.samples import SAMPLES_DIR
from rag_core.service.jobs import IngestQueue
from rag_core.service.library import Library

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
MODEL = "llama3.2:3b"
HERON = b"Project Heron status report. The secret launch code of project Heron is 4471. The team meets on Mondays."
FALCON = b"Project Falcon status report. The secret launch code of project Falcon is 9902. The team meets on Fridays."


class Clock:
    """A wall clock the tests can move forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def demo_settings(data_dir: Path, **kw) -> Settings:
    base = dict(data_dir=data_dir, mode="demo", demo_max_files_per_session=3, demo_max_file_mb=1,
                demo_max_session_mb=2, demo_questions_per_minute=4, demo_session_idle_minutes=30)
    base.update(kw)
    return Settings(**base)


@pytest.fixture(scope="module")
def demo_lib(tmp_path_factory, embedder):
    """One demo library with the bundled samples loaded, shared by this module (each test uses fresh sessions)."""
    settings = demo_settings(tmp_path_factory.mktemp("demo") / "data")
    lib = Library(settings, embedder=embedder)
    results = DemoHub(lib).load_samples()
    assert [r.status for r in results] == ["added"] * 3, results
    yield lib
    lib.close()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def hub(demo_lib, clock):
    return DemoHub(demo_lib, clock=clock)


def _ids(passages) -> set[str]:
    return {p.chunk.doc_id for p in passages}


def _owner_of(lib: Library, doc_id: str) -> str | None:
    return lib.store.get(doc_id).owner


# --------------------------------------------------------------------------- the shared sample library
def test_samples_are_shared_read_only_and_idempotent(hub, demo_lib):
    shared = hub.shared_documents()
    assert sorted(d.kind for d in shared) == ["docx", "pdf", "wikipedia"]
    assert all(d.owner == SHARED_OWNER for d in shared)
    wiki = next(d for d in shared if d.kind == "wikipedia")
    assert wiki.title == "Python (programming language)"
    assert wiki.url == "https://en.wikipedia.org/wiki/Python_(programming_language)"
    pdf = next(d for d in shared if d.kind == "pdf")
    assert pdf.pages == 2

    again = hub.load_samples()  # a restart with the same files: nothing re-embedded
    assert [r.status for r in again] == ["unchanged"] * 3

    s = hub.session(new_session_id())
    assert {d.doc_id for d in shared} <= {d.doc_id for d in s.documents()}
    report = s.refresh_wikipedia()  # "check for updates" covers the session's own articles, never the sample's
    assert (report.unchanged, report.changed, report.removed_upstream, report.failed) == ((), (), (), ())
    with pytest.raises(SampleReadOnly):
        s.delete(pdf.doc_id)
    assert s.clear() == 0  # "remove all my documents" leaves the samples alone
    assert {d.doc_id for d in hub.shared_documents()} == {d.doc_id for d in shared}
    hits = s.search("Which is better, beautiful or ugly?", k=3)
    assert hits and hits[0].chunk.source.title == "The Zen of Python"


def test_sample_folder_changes_are_synced(tmp_path, embedder):
    folder = tmp_path / "samples"
    folder.mkdir()
    for name in ("The Zen of Python.docx", "DocChat demo guide.pdf", "README.md"):
        (folder / name).write_bytes((SAMPLES_DIR / name).read_bytes())
    lib = Library(Settings(data_dir=tmp_path / "data", mode="demo"), embedder=embedder)
    try:
        hub = DemoHub(lib)
        assert [r.status for r in hub.load_samples(folder)] == ["added", "added"]  # README.md is not a sample
        (folder / "The Zen of Python.docx").unlink()
        assert [r.status for r in hub.load_samples(folder)] == ["unchanged"]
        assert [d.title for d in hub.shared_documents()] == ["DocChat demo guide"]
    finally:
        lib.close()


def test_session_ids_are_checked():
    assert check_session_id(new_session_id()).startswith("s-")
    assert new_session_id() != new_session_id()
    for bad in ("shared", "", "s-short", "s-" + "x" * 20 + "/..", None):
        with pytest.raises(ValueError):
            check_session_id(bad)


# --------------------------------------------------------------------------- privacy between sessions
def test_sessions_never_see_each_others_documents(hub, demo_lib):
    a, b = hub.session(new_session_id()), hub.session(new_session_id())
    ra = a.ingest_bytes(HERON, "heron.txt")
    rb = b.ingest_bytes(FALCON, "falcon.txt")
    assert ra.status == rb.status == "added"
    assert _owner_of(demo_lib, ra.doc_id) == a.session_id and _owner_of(demo_lib, rb.doc_id) == b.session_id

    # listing
    assert ra.doc_id in {d.doc_id for d in a.documents()} and rb.doc_id not in {d.doc_id for d in a.documents()}
    assert [d.doc_id for d in b.my_documents()] == [rb.doc_id]
    # search and answers: the question matches only B's document word for word
    q = "What is the secret launch code of project Falcon?"
    assert rb.doc_id in _ids(b.search(q))
    for method in ("zscore", "vector", "lexical", "rrf"):
        assert rb.doc_id not in _ids(a.search(q, k=10, method=method)), method
    ans = a.answer(q)
    assert rb.doc_id not in _ids(ans.passages) and "9902" not in ans.text
    assert all(c.passage.chunk.doc_id != rb.doc_id for c in ans.citations)
    # asking for B's document by id narrows, never widens
    assert a.search(q, doc_ids=[rb.doc_id]) == []
    assert rb.doc_id not in _ids(a.answer(q, doc_ids=[rb.doc_id]).passages)
    # get / original / delete of another session's document look exactly like a missing one
    assert a.get(rb.doc_id) is None and a.original(rb.doc_id) is None
    with pytest.raises(DocumentNotFound):
        a.delete(rb.doc_id)
    assert b.get(rb.doc_id) is not None
    assert b.delete(rb.doc_id).doc_id == rb.doc_id
    assert b.get(rb.doc_id) is None and a.get(ra.doc_id) is not None


def test_same_file_in_two_sessions_is_two_documents(hub):
    a, b = hub.session(new_session_id()), hub.session(new_session_id())
    data = (DOCS / "pdf_text_4-pages_pdflatex.pdf").read_bytes()
    ra, rb = a.ingest_bytes(data, "report.pdf"), b.ingest_bytes(data, "report.pdf")
    assert ra.status == rb.status == "added" and ra.doc_id != rb.doc_id
    assert a.ingest_bytes(data, "report.pdf").status == "unchanged"  # idempotent inside one session
    assert a.original(ra.doc_id) == data  # the PDF kept for page previews is reachable by its owner only
    assert b.original(ra.doc_id) is None
    a.delete(ra.doc_id)
    assert a.original(ra.doc_id) is None
    hits = b.search("what does a blind text give you information about", k=3)
    assert rb.doc_id in _ids(hits) and ra.doc_id not in _ids(hits)


def test_upload_work_runs_on_the_ingest_queue(hub, demo_lib):
    s = hub.session(new_session_id())
    queue = IngestQueue(demo_lib)
    try:
        job = queue.submit("heron.txt", s.upload_work(HERON, "heron.txt"), owner=s.session_id)
        assert queue.wait([job], timeout=60)
        (view,) = queue.jobs([job])
        assert view.result.status == "added"
        assert [d.doc_id for d in s.my_documents()] == [view.result.doc_id]
    finally:
        queue.close()


# --------------------------------------------------------------------------- limits
def test_file_count_and_size_limits(hub):
    s = hub.session(new_session_id())
    big = b"x" * (1024 * 1024 + 1)
    with pytest.raises(LimitReached, match="up to 1 MB"):
        s.ingest_bytes(big, "/srv/uploads/../big.txt")
    assert s.my_documents() == []

    ids = [s.ingest_bytes(f"Note number {i}: the kettle is in cupboard {i}.".encode(), f"note{i}.txt").doc_id
           for i in range(3)]
    assert s.usage().files == 3
    with pytest.raises(LimitReached, match="3 files"):
        s.check_room("note3.txt")  # the UI can ask before it queues anything
    with pytest.raises(LimitReached, match="3 files"):
        s.ingest_bytes(b"one more", "note3.txt")
    s.delete(ids[0])
    assert s.ingest_bytes(b"Room again: the toaster is on the shelf.", "note3.txt").status == "added"

    # the per-session total: 2 MB in all (fresh session, files under the 1 MB per-file limit)
    t = hub.session(new_session_id())
    chunk = b"Quota test about owls." + b" " * 900_000  # 0.9 MB on the wire, one short sentence once loaded
    assert t.ingest_bytes(chunk, "part1.txt").status == "added"
    assert t.ingest_bytes(chunk + b" two", "part2.txt").status == "added"
    with pytest.raises(LimitReached, match="past 2 MB"):
        t.ingest_bytes(chunk + b" three", "part3.txt")
    assert t.usage().bytes == 2 * len(chunk) + 4


def test_reservations_count_work_not_yet_run(hub):
    s = hub.session(new_session_id())
    works = [s.upload_work(f"Queued note {i}.".encode(), f"q{i}.txt") for i in range(3)]  # nothing stored yet
    with pytest.raises(LimitReached):
        s.upload_work(b"fourth", "q3.txt")
    assert [w(None).status for w in works] == ["added"] * 3
    failed = hub.session(new_session_id())
    work = failed.upload_work(b"%PDF-1.3\nnot really a pdf\n%%EOF", "broken.pdf")
    result = work(None)
    assert result.status == "failed" and "broken.pdf" in result.error
    assert failed.usage().files == 0 and failed.upload_work(b"ok now", "ok.txt")(None).status == "added"


def test_question_rate_limit(hub, clock):
    s = hub.session(new_session_id())
    s.answer("Which is better, beautiful or ugly?")
    for _ in range(3):
        s.start_answer("Another question?")  # counted when asked, even if the answer is never read
    with pytest.raises(LimitReached, match=r"4 questions in the last minute.*wait about \d+ seconds"):
        s.start_answer("One more?")
    other = hub.session(new_session_id())
    assert other.answer("Which is better, explicit or implicit?").mode == "quotes"  # limits are per session
    clock.advance(61)
    assert s.answer("Which is better, simple or complex?").mode == "quotes"


# --------------------------------------------------------------------------- idle cleanup
def test_idle_sessions_are_removed(hub, demo_lib, clock):
    idle, busy = hub.session(new_session_id()), hub.session(new_session_id())
    r_idle = idle.ingest_bytes(HERON, "heron.txt")
    r_busy = busy.ingest_bytes(FALCON, "falcon.txt")
    clock.advance(20 * 60)
    busy.documents()  # activity
    assert not {idle.session_id, busy.session_id} & set(hub.cleanup_idle())
    clock.advance(11 * 60)  # idle: 31 min, busy: 11 min
    gone = hub.cleanup_idle()  # (also removes what earlier tests' sessions left in this shared library)
    assert idle.session_id in gone and busy.session_id not in gone
    assert demo_lib.store.get(r_idle.doc_id) is None
    assert idle.session_id not in hub.active_sessions()
    assert demo_lib.store.get(r_busy.doc_id) is not None
    assert len(hub.shared_documents()) == 3


def test_leftovers_of_a_previous_run_are_removed(hub, demo_lib, clock):
    ghost = new_session_id()  # a session of a process that has since restarted: no hub knows it
    r = demo_lib.ingest_bytes(HERON, "heron.txt", owner=ghost)
    assert ghost not in hub.cleanup_idle() and demo_lib.store.get(r.doc_id) is not None  # recent: kept for now
    clock.advance(31 * 60)
    assert ghost in hub.cleanup_idle()
    assert demo_lib.store.get(r.doc_id) is None
    assert len(hub.shared_documents()) == 3


def test_janitor_thread_runs_cleanup(demo_lib, tmp_path):
    clock = Clock()
    hub = DemoHub(demo_lib, demo_settings(tmp_path, demo_session_idle_minutes=1), clock=clock)
    s = hub.session(new_session_id())
    r = s.ingest_bytes(HERON, "heron.txt")
    clock.advance(120)
    hub.start_janitor(interval_s=0.05)
    try:
        deadline = time.monotonic() + 10
        while demo_lib.store.get(r.doc_id) is not None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        hub.stop_janitor()
    assert demo_lib.store.get(r.doc_id) is None


# --------------------------------------------------------------------------- LLM mode and safe messages
def test_remote_llm_gets_the_api_key_as_bearer(demo_lib, tmp_path):
    with OllamaServer(models=[MODEL], token="demo-secret") as srv:
        srv.script(Reply("Beautiful is better than ugly [1]."))
        settings = demo_settings(tmp_path, ollama_host=srv.url, ollama_model=MODEL, ollama_api_key="demo-secret")
        assert llm_mode(settings) == "remote" and MODEL in demo_banner(settings)
        s = DemoHub(demo_lib, settings).session(new_session_id())
        ans = s.answer("Which is better, beautiful or ugly?")
        assert ans.mode == "model" and ans.citations
        chats = [r for r in srv.requests if r.path == "/api/chat"]
        assert chats and all(r.headers.get("authorization") == "Bearer demo-secret" for r in chats)


def test_without_api_key_the_demo_answers_extractively(demo_lib, tmp_path):
    with OllamaServer(models=[MODEL]) as srv:  # reachable, but the demo has no key for it: never used
        settings = demo_settings(tmp_path, ollama_host=srv.url, ollama_model=MODEL)
        assert llm_mode(settings) == "extractive" and "(quotes only)" in demo_banner(settings)
        ans = DemoHub(demo_lib, settings).session(new_session_id()).answer("Which is better, beautiful or ugly?")
        assert ans.mode == "quotes" and "Beautiful is better than ugly" in ans.text
        assert srv.chat_requests == []


def test_llm_trouble_is_explained_without_server_details(demo_lib, tmp_path):
    with OllamaServer(models=[MODEL], token="right-key") as srv:
        settings = demo_settings(tmp_path, ollama_host=srv.url, ollama_model=MODEL, ollama_api_key="wrong-key")
        s = DemoHub(demo_lib, settings).session(new_session_id())
        ans = s.answer("Which is better, beautiful or ugly?")
    assert ans.mode == "quotes" and ans.notice == DEMO_NOTICE_LLM_DOWN
    assert srv.url not in ans.notice and "OLLAMA" not in ans.notice
    assert "details" not in ans.extra  # the technical part of the notice is for whoever runs the server


def test_failures_never_show_paths_or_tracebacks(hub, demo_lib, monkeypatch):
    s = hub.session(new_session_id())
    bad = s.ingest_bytes((DOCS / "pdf_corrupt_header-and-eof-only.pdf").read_bytes(), "/home/alice/secret/x.pdf")
    assert bad.status == "failed" and "x.pdf" in bad.error and "/home/alice" not in bad.error
    assert bad.path == "x.pdf"

    def boom(*a, **kw):
        raise RuntimeError(f"disk error in {demo_lib.settings.library.data_dir}/qdrant/collection")

    monkeypatch.setattr(demo_lib.store, "run", boom)
    with pytest.raises(DemoTrouble) as err:
        s.search("anything")
    assert str(demo_lib.settings.library.data_dir) not in str(err.value) and "Traceback" not in str(err.value)
    stream = s.start_answer("Which is better, beautiful or ugly?")
    list(stream)  # the answer pipeline turns the failure into one safe sentence instead of raising
    ans = stream.answer
    assert ans.incomplete and ans.notice
    assert str(demo_lib.settings.library.data_dir) not in ans.notice + ans.text and "Traceback" not in ans.notice
