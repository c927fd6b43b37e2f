"""Scanned PDFs in the real library: the recognised text is found by a question and stays marked as recognised from a
scan after the store round trip; a long scan is stopped at the per-file time limit with the library unchanged."""
from __future__ import annotations

import time

from scan_helpers import FACT, OTHER, needs_ocr
from scan_helpers import library_state as _state
from scan_helpers import scan as _scan

pytestmark = needs_ocr


def test_a_question_finds_the_scanned_page_and_its_passage_is_marked(library):
    assert library.ingest_bytes(OTHER.encode(), "bern.txt").status == "added"
    result = library.ingest_bytes(_scan([OTHER, FACT]), "scan.pdf")
    assert result.status == "added", result.error
    passages = library.search("When does the lighthouse keeper wind the clock?", k=3)
    top = [p for p in passages if "Tuesday" in p.chunk.text]
    assert top, [p.chunk.text for p in passages]
    chunk = top[0].chunk
    assert chunk.source.file_name == "scan.pdf" and (chunk.page_end or chunk.page_start) == 2
    assert chunk.from_scan and chunk.source.scanned_pages == "1-2"  # read back from the store's payload
    assert not next(p for p in library.search("Bern federal city Aare", k=5)
                    if p.chunk.source.file_name == "bern.txt").chunk.from_scan


def test_a_long_scan_is_stopped_at_the_time_limit_and_the_library_is_unchanged(library, settings):
    library.ingest_bytes(OTHER.encode(), "bern.txt")
    before = _state(library)
    data = _scan([f"Page {i}. " + FACT for i in range(30)], dpi=200)  # 30 pages to recognise: minutes of work
    library.settings = settings.with_overrides(ingest_timeout_s=3)
    try:
        started = time.perf_counter()
        result = library.ingest_bytes(data, "long-scan.pdf")
        took = time.perf_counter() - started
    finally:
        library.settings = settings
    assert result.status == "failed"
    assert result.error.startswith("“long-scan.pdf”: indexing it took longer than 3 seconds, so it was stopped")
    assert took < 3 + 1 + 3  # the limit, the reader's grace second, and slack for a loaded machine
    assert _state(library) == before
