"""Hostile and odd files, second pass (issue 47): what benchmarks/hostile_probe.py found, each made here small
enough to be quick but through the same mechanism. Each ends in one sentence, or as a document with its text.
"""
from __future__ import annotations

import io
import json
import logging
import time
import tracemalloc
import zipfile

import pytest

from benchmarks import hostile_files as h
from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, EncryptedFile, IngestError, ScanTooLong
from rag_core.ingest.loaders import load_bytes, sniff_kind
from rag_core.ingest.loaders._archive import check_inflated, read_head
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders._xlsx_strings import open_workbook
from rag_core.ingest.loaders.opendocument import odf_kind

SETTINGS = Settings()


def one_sentence(error: IngestError, name: str) -> str:
    message = str(error)
    assert message.startswith(f"“{name}”: ") and "\n" not in message and "Traceback" not in message
    return message


def test_a_pdf_whose_page_tree_loops_is_one_sentence():
    with pytest.raises(CorruptFile) as caught:
        load_bytes(h.looping_pages_pdf(), "loop.pdf", SETTINGS, Deadline(60, "loop.pdf"))
    assert "structure is broken" in one_sentence(caught.value, "loop.pdf")


def test_pages_of_one_repeated_line_are_the_text_not_running_headers():
    """Every page holds the same single line: peeling running headers must not leave nothing."""
    doc = load_bytes(h.many_pages_pdf(4), "pages.pdf", SETTINGS, Deadline(60, "pages.pdf"))
    assert h.SENTENCE.decode().strip() in doc.text


def test_a_reader_failing_unforeseen_is_one_sentence_and_one_log_line(caplog):
    """A library's own exception in the reader child (here json.loads refusing the deadline keyword) becomes
    CorruptFile, with one warning line and the traceback only at debug level."""
    caplog.set_level(logging.WARNING, logger="rag_core.ingest.loaders._isolated")
    with pytest.raises(CorruptFile) as caught:
        run_isolated(json.loads, ("{}",), Deadline(60, "odd.txt"), "test")
    assert "the test reader could not make sense of it" in one_sentence(caught.value, "odd.txt")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "Traceback" not in warnings[0].getMessage() and warnings[0].exc_info is None


def _peak_mb(func) -> float:
    tracemalloc.start()
    try:
        func()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def test_a_bzip2_mimetype_is_sniffed_without_inflating_it():
    """bzip2 gives ~200 MB for 180 bytes, and zipfile inflates each 4 KB it reads whole: the app's own process
    (where kinds are sniffed) read 40 MB here to get the 200 bytes of a `mimetype` member."""
    epub = h.epub_bzip2_mimetype(40)
    assert _peak_mb(lambda: pytest.raises(CorruptFile, sniff_kind, epub, "book.epub")) < 5
    assert _peak_mb(lambda: odf_kind(epub)) < 5
    with zipfile.ZipFile(io.BytesIO(epub)) as zf:
        assert read_head(epub, zf, zf.getinfo("mimetype"), 200) == b"a" * 200


def test_a_bzip2_member_that_lies_about_its_size_is_refused_after_counting_it():
    data = h.docx_bzip2_member(40)
    peak = _peak_mb(lambda: pytest.raises(CorruptFile, check_inflated, data, "bz.docx", 300, "Word document"))
    assert peak < 5
    with pytest.raises(CorruptFile, match="word/document.xml, is not the size its header says"):
        check_inflated(data, "bz.docx", 300, "Word document")


@pytest.mark.parametrize(("name", "app"), [("locked.docx", "Word"), ("locked.xlsx", "Excel"),
                                           ("locked.pptx", "PowerPoint")])
def test_an_office_file_with_a_password_says_so(name, app):
    with pytest.raises(EncryptedFile) as caught:
        load_bytes(h.office_encrypted(), name, SETTINGS)
    assert f"password-protected. Open it in {app}" in one_sentence(caught.value, name)


@pytest.mark.parametrize("name", ["notes.txt", "notes.md"])
def test_a_note_quoting_the_pdf_signature_is_text(name):
    doc = load_bytes(h.text_mentioning_pdf_header(), name, SETTINGS)
    assert doc.text.startswith("Notes on the file format: every file starts with %PDF-1.7")


def test_a_pdf_after_some_junk_is_still_a_pdf():
    pdf = b"From: scanner@example.org\r\n\r\n" + h.text_page_pdf()
    assert sniff_kind(pdf, "scan.pdf") == sniff_kind(pdf, "scan.bin") == sniff_kind(pdf[:-60], "scan.pdf") == "pdf"


def test_a_tiff_of_thousands_of_tiny_frames_is_refused_before_any_is_converted():
    """Frames of 64 x 64 pixels: each page costs OCR a fixed least time whatever its size, so the scan is refused
    while its frames are listed (3,000 of them took 67 s of converting frames into pages before, past a 60 s
    deadline; here 600 against 10 s)."""
    data = h.tiff_frames(600)
    started = time.perf_counter()
    with pytest.raises(ScanTooLong) as caught:
        load_bytes(data, "frames.tif", SETTINGS, Deadline(10, "frames.tif"))
    one_sentence(caught.value, "frames.tif")
    assert time.perf_counter() - started < 10


@pytest.mark.parametrize("encoding", ["utf-32-le", "utf-32-be", "utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("text", ["The harbour inspections are listed by month. ", "Привет, мир! Как дела? ",
                                  "Καλημέρα κόσμε, τι κάνεις; ", "日本語のテキストです。"])
def test_wide_text_without_a_byte_order_mark_is_read(encoding, text):
    doc = load_bytes((text * 20).encode(encoding), "wide.txt", SETTINGS)
    assert doc.text.strip() == (text * 20).strip()


@pytest.mark.parametrize(("name", "page"), [("deep.html", lambda: h.html_deep(5000)),
                                            ("attribute.html", lambda: h.html_attribute(11))])
def test_a_page_whose_tree_cannot_be_built_is_read_as_text(name, page):
    """lxml stops at 256 levels of nesting and at a 10 MB attribute, and drops the rest: the text was lost and the
    page said to have none."""
    doc = load_bytes(page(), name, SETTINGS, Deadline(60, name))
    assert doc.text == h.SENTENCE.decode().strip()


def test_a_sheet_without_a_dimension_is_not_parsed_whole_to_open_the_workbook():
    """openpyxl looked for <dimension> until the end of <sheetData>, parsing a sheet of a million rows whole before
    the first row was read (the file was then stopped at the deadline instead of read to the row limit). Here the
    sheet is cut short after its first rows: opening it must not notice."""
    data = h.xlsx_rows(50)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        sheet = zf.read("xl/worksheets/sheet1.xml")
    cut = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(cut, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, sheet[:len(sheet) // 2] if info.filename.endswith("sheet1.xml")
                         else src.read(info))
    wb = open_workbook(io.BytesIO(cut.getvalue()))
    assert wb.worksheets[0].max_row is None
    wb.close()
    wb = open_workbook(io.BytesIO(h.xlsx_lying_dimension()))  # a dimension before <sheetData> is still read
    assert wb.worksheets[0].max_row == 1_048_576 and wb.worksheets[0].max_column == 16_384
    wb.close()


def test_rows_padded_to_column_xfd_are_read_quickly_and_noted():
    """Each row holds a cell in A and one in XFD: openpyxl pads every row to 16,384 cells, and each was looked
    through for a value past the columns read (20,000 rows: 70 s; now 12 s)."""
    started = time.perf_counter()
    doc = load_bytes(h.xlsx_wide_sparse(3000), "sparse.xlsx", SETTINGS, Deadline(60, "sparse.xlsx"))
    assert time.perf_counter() - started < 15
    assert "Only the first 50 columns" in doc.text and "row 3000" in doc.text
