"""The workspace the pages talk to, and the Library's ownership of saved PDF copies (CLI, demo expiry, Wikipedia).

Real library (bundled model, embedded Qdrant on a temp folder), real PDFs, the real CLI (run in this process).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_core.adapters.runtime import Runtime, session_settings
from rag_core.core.config import Settings
from rag_core.core.errors import LimitReached, SampleReadOnly
from rag_core.demo.hub import SHARED_OWNER, DemoHub
from rag_core.demo.workspace import DemoWorkspace
from rag_core.ingest.originals import originals_dir
from rag_core.service.library import Library
from rag_core.service.workspace import LocalWorkspace

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
PDF = DOCS / "pdf_text_4-pages_pdflatex.pdf"


def _kept(settings: Settings) -> list[str]:
    folder = originals_dir(settings)
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_cli_add_keeps_the_pdf_copy_and_cli_delete_removes_it(tmp_path, cli):
    data_dir = tmp_path / "data"
    env = {"DOCCHAT_DATA_DIR": str(data_dir)}
    p = cli("ingest", str(PDF), "--json", env=env)
    assert p.returncode == 0, p.stderr
    doc_id = json.loads(p.stdout)["results"][0]["doc_id"]
    settings = Settings(data_dir=data_dir)
    assert _kept(settings) == [f"{doc_id}.pdf"]  # "Show on the page" works for CLI-added PDFs too
    p = cli("delete", doc_id, env=env)
    assert p.returncode == 0, p.stderr
    assert _kept(settings) == []  # nothing of a deleted private document stays on disk


def test_every_way_of_adding_and_deleting_keeps_copies_in_step(library, settings):
    pdf = PDF.read_bytes()
    added = library.ingest_bytes(pdf, "report.pdf")
    assert library.original(added.doc_id) == pdf
    # A copy lost (or never made by an older version) is repaired when the same file is added again.
    originals_dir(settings).joinpath(f"{added.doc_id}.pdf").unlink()
    assert library.ingest_bytes(pdf, "again.pdf").status == "unchanged"
    assert library.original(added.doc_id) == pdf
    text = library.ingest_bytes(b"Tulips flower in spring.", "notes.txt")
    assert library.original(text.doc_id) is None  # only PDFs are kept (page images)
    library.delete(added.doc_id)
    library.delete(text.doc_id)
    assert _kept(settings) == [] and library.documents() == []


def test_original_is_only_readable_by_its_owner(library):
    pdf = PDF.read_bytes()
    mine = library.ingest_bytes(pdf, "a.pdf", owner="s-" + "a" * 20)
    assert library.original(mine.doc_id, owners=["s-" + "a" * 20]) == pdf
    assert library.original(mine.doc_id, owners=["s-" + "b" * 20]) is None


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_demo_expiry_and_samples_manage_their_copies(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path / "demo", mode="demo", demo_session_idle_minutes=1)
    lib = Library(settings, embedder=embedder)
    clock = _Clock()
    hub = DemoHub(lib, settings, clock=clock)
    try:
        samples = [r for r in hub.load_samples() if r.status == "added"]
        sample_pdf = next(d for d in hub.shared_documents() if d.kind == "pdf")
        assert lib.original(sample_pdf.doc_id) is not None  # "Show on the page" works for the demo's sample PDF
        assert samples
        sid = "s-" + "x" * 24
        session = hub.session(sid)
        mine = session.ingest_bytes(PDF.read_bytes(), "mine.pdf")
        assert mine.status == "added" and session.original(mine.doc_id) is not None
        clock.now += 61 * 60
        assert hub.cleanup_idle() == [sid]
        assert f"{mine.doc_id}.pdf" not in _kept(settings)  # expiry removes the private copy with the document
        assert f"{sample_pdf.doc_id}.pdf" in _kept(settings)
    finally:
        lib.close()


def test_local_workspace_adds_lists_deletes(library):
    from rag_core.service.jobs import IngestQueue

    queue = IngestQueue(library)
    try:
        ws = LocalWorkspace(library, queue)
        job = ws.add_file(PDF.read_bytes(), "report.pdf")
        assert queue.wait([job], 120)
        [view] = ws.jobs([job])
        assert view.result.status == "added"
        [doc] = ws.documents()
        assert not ws.is_read_only(doc) and ws.limits().usage_line is None
        assert ws.original(doc.doc_id) is not None
        assert ws.search("pdflatex", k=2)
        ws.delete(doc.doc_id)
        assert ws.documents() == [] and ws.original(doc.doc_id) is None
        # Too large for the upload limit: refused before any work, in one sentence naming the file.
        strict = Library(library.settings.with_overrides(max_upload_mb=1), embedder=library.embedder,
                         store=library.store)
        small = LocalWorkspace(strict, queue)
        job = small.add_file(b"x" * (1024 * 1024 + 1), "huge.txt")
        assert queue.wait([job], 30)
        [view] = small.jobs([job])
        assert view.result.status == "failed" and "huge.txt" in view.result.error
    finally:
        queue.close()


def test_demo_workspace_enforces_the_demo_rules(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path / "d", mode="demo", demo_max_files_per_session=1)
    rt = Runtime(settings, embedder=embedder)
    try:
        key = rt.new_session_key()
        ws = rt.workspace(key, {"ollama_host": "http://evil.example:1", "top_k": 3})
        assert isinstance(ws, DemoWorkspace) and ws.banner and not ws.model_choice
        assert ws.settings.llm.ollama_host == settings.llm.ollama_host  # a visitor never picks the host
        sample = next(d for d in ws.documents() if d.owner == SHARED_OWNER)
        assert ws.is_read_only(sample)
        with pytest.raises(SampleReadOnly):
            ws.delete(sample.doc_id)
        job = ws.add_file(b"Frank likes green fences.", "f.txt")
        assert rt.queue.wait([job], 60)
        assert "1 of 1 document" in (ws.limits().usage_line or "")
        with pytest.raises(LimitReached):
            ws.add_file(b"One more note.", "g.txt")
        with pytest.raises(LimitReached):
            ws.import_wikipedia("Tulip")
        other = rt.workspace(rt.new_session_key())
        assert {d.doc_id for d in other.documents()} == {d.doc_id for d in ws.documents() if d.owner == SHARED_OWNER}
        assert other.jobs([job]) == []  # another visitor cannot even see the job
    finally:
        rt.close()


def test_session_settings_apply_only_allowed_overrides():
    base = Settings(ollama_host="http://server:11434")
    local = session_settings(base, {"ollama_host": "http://mine:1", "top_k": 7, "data_dir": "/etc"})
    assert local.llm.ollama_host == "http://mine:1" and local.retrieval.top_k == 7 and str(local.library.data_dir) != "/etc"
    demo = session_settings(base.with_overrides(mode="demo"), {"ollama_host": "http://mine:1", "top_k": 7})
    assert demo.llm.ollama_host == "http://server:11434" and demo.retrieval.top_k == 7


def test_wikipedia_articles_keep_no_copy_and_delete_cleanly(tmp_path, embedder):
    """A Wikipedia import stores no private file; deleting it (or a PDF beside it) leaves nothing behind."""
    from rag_core.service import wiki_sync
    from tests.integration.test_wikipedia import PY_TITLE, python_body
    from tests.wiki_server import WikiReplayServer

    with WikiReplayServer() as server:
        settings = Settings(data_dir=tmp_path / "data", wikipedia_api=server.url_template, wikipedia_backoff_s=0.02)
        lib = Library(settings, embedder=embedder)
        try:
            server.respond({"titles": PY_TITLE, "prop": "extracts"}, python_body())
            article = wiki_sync.import_article(lib, settings, PY_TITLE)
            pdf = lib.ingest_bytes(PDF.read_bytes(), "report.pdf")
            assert article.status == "added" and pdf.status == "added"
            assert _kept(settings) == [f"{pdf.doc_id}.pdf"]  # the article has no original to keep
            lib.delete(article.doc_id)
            lib.delete(pdf.doc_id)
            assert lib.documents() == [] and _kept(settings) == []
        finally:
            lib.close()
