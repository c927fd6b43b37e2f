"""Scanned PDFs in the real library: the recognised text is found by a question and stays marked as recognised from a
scan after the store round trip; a long scan that OCR cannot read within the per-file time limit is refused
early (before any page, or after the first) with the library unchanged."""
from __future__ import annotations

import time

import pymupdf
from scan_helpers import FACT, OTHER, needs_ocr, repeated_scan
from scan_helpers import library_state as _state
from scan_helpers import scan as _scan

pytestmark = needs_ocr


def test_a_question_finds_the_scanned_page_and_its_passage_is_marked(library):
    # not the scan's exact words: a search keeps one of two identical passages
    assert library.ingest_bytes((OTHER + " The federal parliament meets there.").encode(), "bern.txt").status == "added"
    result = library.ingest_bytes(_scan([OTHER, FACT]), "scan.pdf")
    assert result.status == "added", result.error
    passages = library.search("When does the lighthouse keeper wind the clock?", k=3)
    top = [p for p in passages if "Tuesday" in p.chunk.text]
    assert top, [p.chunk.text for p in passages]
    chunk = top[0].chunk
    assert chunk.source.file_name == "scan.pdf" and (chunk.page_end or chunk.page_start) == 2
    assert chunk.from_scan and chunk.source.scanned_pages == "1-2"  # read back from the store's payload
    assert not next(p for p in library.search("Bern federal city Aare parliament", k=5)
                    if p.chunk.source.file_name == "bern.txt").chunk.from_scan


def test_a_scan_that_cannot_be_read_in_time_is_refused_before_any_page_is_recognised(library, settings):
    library.ingest_bytes(OTHER.encode(), "bern.txt")
    before = _state(library)
    data = repeated_scan(500, dpi=100, width=300, height=200)  # 500 small pages: even blank ones take longer than 5 s
    seen: list[tuple[str, int, int]] = []
    library.settings = settings.with_overrides(ingest_timeout_s=5)
    try:
        started = time.perf_counter()
        result = library.ingest_bytes(data, "long-scan.pdf", progress=lambda *report: seen.append(report))
        took = time.perf_counter() - started
    finally:
        library.settings = settings
    assert result.status == "failed"
    assert result.error.startswith("“long-scan.pdf”: reading its 500 scanned pages with OCR would take at least "), \
        result.error
    assert "than the 5 seconds one file may take" in result.error and "split it into parts of at most " in result.error
    assert [r for r in seen if r[0] == "ocr"] == []  # refused before recognising a single page
    assert took < 5  # not after the whole time limit
    assert _state(library) == before


def _dense_scan(pages: int) -> bytes:
    """An image-only PDF of `pages` A4 pages, each a 200 dpi picture of a page full of text (one image, stored once)."""
    src = pymupdf.open()
    page = src.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(50, 50, 545, 792), " ".join([FACT, OTHER] * 6), fontsize=11)
    png = page.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY).tobytes("png")
    out = pymupdf.open()
    xref = 0
    for _ in range(pages):
        scanned = out.new_page(width=595, height=842)
        xref = scanned.insert_image(scanned.rect, stream=png) if not xref else \
            scanned.insert_image(scanned.rect, xref=xref)
    return out.tobytes()


def test_a_500_page_scan_is_refused_after_one_page_instead_of_after_the_whole_time_limit(library):
    assert library.settings.ingest.timeout_s == 300  # the default limit
    before = _state(library)
    data = _dense_scan(500)
    seen: list[tuple[str, int, int]] = []
    started = time.perf_counter()
    result = library.ingest_bytes(data, "book-scan.pdf", progress=lambda *report: seen.append(report))
    took = time.perf_counter() - started
    pages_read = max((done for stage, done, total in seen if stage == "ocr"), default=0)
    print(f"500-page scan refused after {took:.1f} s, {pages_read} page(s) recognised: {result.error}")
    assert result.status == "failed"
    assert result.error.startswith("“book-scan.pdf”: reading its 500 scanned pages with OCR would take about ")
    assert "than the 5 minutes one file may take" in result.error
    assert pages_read <= 2  # the pace of the first page(s) tells it cannot finish: no more work is spent
    assert took < 60, took  # before: the whole 300 s
    assert _state(library) == before
