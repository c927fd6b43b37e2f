"""The per-file time budget (DOCCHAT_INGEST_TIMEOUT_S) with the real library: a file past it is stopped, reported in
one sentence, and the library is left exactly as it was (no entry, no points, no private copy) - whether it was
stopped while being read, split, embedded or saved, or refused up front because it could not finish in time."""
from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

import pymupdf
import pytest

import rag_core.store.vector_store as store_module
from rag_core.core.deadline import Deadline
from rag_core.core.errors import IngestTimedOut
from rag_core.ingest.loaders import load_bytes
from rag_core.ingest.originals import originals_dir
from rag_core.service.jobs import IngestQueue
from rag_core.service.library import IngestResult

SMALL = b"Bern is the federal city of Switzerland. It lies on the Aare."


def _prose(paragraphs: int) -> bytes:
    return "\n\n".join(
        f"Paragraph {i} explains how item {i} relates to topic {i % 13}, and why that matters for readers. "
        f"It adds a second sentence about detail {i * 7 % 101} so the text reads like a report."
        for i in range(paragraphs)).encode()


def _state(library) -> tuple:
    """Everything a failed ingest must leave as it was."""
    folder = originals_dir(library.settings)
    return (library.store.count_chunks(), [d.doc_id for d in library.documents()],
            sorted(p.name for p in folder.iterdir()) if folder.exists() else [])


def _one_sentence(message: str, name: str) -> None:
    assert message.startswith(f"“{name}”") and "\n" not in message and "Traceback" not in message
    assert message.count(". ") == 0 and message.endswith(".") and len(message) < 300


@pytest.fixture
def seeded(library):
    """A library holding one small document already, so "left as it was" is not just "empty"."""
    assert library.ingest_bytes(SMALL, "bern.txt").status == "added"
    return library


@pytest.mark.timeout(120, func_only=True)
def test_a_file_over_its_budget_is_stopped_in_time_and_the_library_left_as_it_was(seeded, settings):
    library = seeded
    before = _state(library)
    library.settings = settings.with_overrides(ingest_timeout_s=1)
    queue = IngestQueue(library)
    try:
        data = _prose(1500)  # ~290 KB: too small to be refused up front, far too slow to embed in 1 s
        t = time.perf_counter()
        job = queue.submit_bytes(data, "report.txt")
        assert queue.wait([job], 60)
        took = time.perf_counter() - t
        [view] = queue.jobs([job])
        result: IngestResult = view.result
        assert result.status == "failed"
        assert result.error == ("“report.txt”: indexing it took longer than 1 second, so it was stopped and your "
                                "library was left as it was; split it into smaller files and add them one at a time.")
        _one_sentence(result.error, "report.txt")
        assert took < 1 + 8  # the budget plus the longest single step (one batch of 8 chunks on a loaded machine)
        assert _state(library) == before
        # The worker is free again at once.
        library.settings = settings
        again = queue.submit_bytes(b"Geneva lies on the lake. It hosts many organisations.", "geneva.txt")
        assert queue.wait([again], 60)
        assert queue.jobs([again])[0].result.status == "added"
    finally:
        library.settings = settings
        queue.close()


@pytest.mark.timeout(120, func_only=True)
def test_stopped_while_saving_every_written_point_is_rolled_back(seeded, monkeypatch):
    library = seeded
    monkeypatch.setattr(store_module, "UPSERT_BATCH", 4)  # many saving batches from a small document
    before = _state(library)
    doc = load_bytes(_prose(60), "saving.txt", library.settings)
    now = [0.0]
    deadline = Deadline(60, "saving.txt", clock=lambda: now[0])
    stored_while_saving: list[int] = []

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "saving":
            stored_while_saving.append(library.store.count_chunks())
            now[0] = 61  # the budget runs out after the first batch is written

    with pytest.raises(IngestTimedOut) as e:
        library.ingest_document(doc, progress=progress, deadline=deadline)
    _one_sentence(str(e.value), "saving.txt")
    assert "took longer than 60 seconds" in str(e.value)
    assert stored_while_saving and stored_while_saving[0] > before[0]  # points were written...
    assert _state(library) == before  # ...and every one of them is gone, with the registry entry
    assert library.store.get(doc.doc_id) is None
    # Nothing is left to block adding it again.
    added = library.ingest_document(doc)
    assert added.status == "added" and library.store.count_chunks() == before[0] + added.chunks


@pytest.mark.timeout(120, func_only=True)
def test_a_file_that_cannot_finish_in_time_is_refused_before_chunking(seeded, settings):
    library = seeded
    before = _state(library)
    library.settings = settings.with_overrides(ingest_timeout_s=5)
    data = (b"lorem ipsum " * 200_000)[:2 * 1024 * 1024]  # one line, no sentence end: ~3,500 passages
    t = time.perf_counter()
    try:
        result = library.ingest_bytes(data, "lorem.txt")
    finally:
        library.settings = settings
    took = time.perf_counter() - t
    assert result.status == "failed"
    assert "would take longer than 5 seconds" in result.error
    _one_sentence(result.error, "lorem.txt")
    assert took < 5  # decided from samples, not after chunking 2 MB
    assert _state(library) == before


def _dense_one_page_pdf(ops: int) -> bytes:
    """One page with `ops` text-showing operators: a few hundred KB that MuPDF needs seconds to read, in one step."""
    doc = pymupdf.open()
    page = doc.new_page(width=600, height=800)
    page.insert_text((10, 10), "x", fontsize=1)
    font = page.get_fonts()[0][4].encode()
    body = b"".join(b"BT /%s 1 Tf %d %d Td (lorem ipsum dolor sit amet) Tj ET\n" % (font, i * 7 % 590, i // 84 % 790)
                    for i in range(ops))
    doc.update_stream(page.get_contents()[0], body, compress=True)
    return doc.tobytes(deflate=True)


@pytest.mark.timeout(120, func_only=True)
def test_a_pdf_page_that_takes_too_long_is_stopped_mid_page(settings):
    data = _dense_one_page_pdf(100_000)  # ~260 KB; reading it in one go takes ~10 s
    t = time.perf_counter()
    with pytest.raises(IngestTimedOut) as e:
        load_bytes(data, "dense.pdf", settings, Deadline(1, "dense.pdf"))
    took = time.perf_counter() - t
    _one_sentence(str(e.value), "dense.pdf")
    assert took < 1 + 3  # its reader process is killed a second past the deadline, mid-page
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("docchat-")]


def test_a_script_without_a_main_guard_is_not_run_again_by_the_pdf_reader(tmp_path):
    """The PDF reader's child process is a fresh interpreter: a user's script is never re-imported by it."""
    import subprocess
    import sys

    pdf = Path(__file__).resolve().parents[1] / "fixtures" / "documents" / "pdf_text_multicolumn_3-pages.pdf"
    runs = tmp_path / "runs.txt"
    script = tmp_path / "user_script.py"
    script.write_text(
        "from pathlib import Path\n"
        f"with open({str(runs)!r}, 'a') as f:\n    f.write('run\\n')\n"
        "from rag_core.core.config import Settings\nfrom rag_core.ingest.loaders import load_bytes\n"
        f"doc = load_bytes(Path({str(pdf)!r}).read_bytes(), 'a.pdf', Settings())\n"
        "print(doc.page_count)\n", encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "3"
    assert runs.read_text().splitlines() == ["run"]
