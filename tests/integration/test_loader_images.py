"""Images of pages read by the real Tesseract (rag_core.ingest.loaders.image): a PNG page added to the library, found by a
question, marked as recognised from a scan and shown highlighted on its page; a two-page TIFF is two pages; a WebP is
read; a photo tilted by 6 degrees is levelled and read; a damaged JPEG is one sentence from the reader process; a long
multi-page scan that cannot be read in time is refused before any page is converted."""
from __future__ import annotations

import difflib
import io
import re
import time
from pathlib import Path

import pymupdf
import pytest
from PIL import Image
from scan_helpers import needs_ocr

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, ScanTooLong
from rag_core.ingest.loaders.image import load_image, read_image
from rag_core.service import render

pytestmark = needs_ocr

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
FACT = "The lighthouse keeper of Port Elspeth winds the great clock every Tuesday at dawn."


def _read(name: str, settings: Settings | None = None):
    return read_image((DOCS / name).read_bytes(), name, settings or Settings(), deadline=Deadline.never(name))


def _orange_pixels(png: bytes) -> int:
    pix = pymupdf.Pixmap(png)
    return sum(1 for y in range(0, pix.height, 2) for x in range(0, pix.width, 2)
               if (lambda r, g, b: r > 230 and 130 < g < 190 and b < 90)(*pix.pixel(x, y)[:3]))


def word_accuracy(reference: str, read: str) -> float:
    """The share of the reference's words found, in order, in what was read (case and punctuation ignored)."""
    ref, got = (re.findall(r"[a-z0-9']+", t.casefold()) for t in (reference, read))
    return sum(b.size for b in difflib.SequenceMatcher(None, ref, got, autojunk=False).get_matching_blocks()) / len(ref)


def test_a_photographed_page_is_found_marked_as_a_scan_and_shown_highlighted_on_its_page(library):
    seen: list[tuple[str, int, int]] = []
    result = library.ingest_bytes((DOCS / "image_page_harbour.png").read_bytes(), "harbour.png",
                                  progress=lambda *report: seen.append(report))
    assert result.status == "added", result.error
    assert result.pages == 1 and result.title == "Port Elspeth Harbour"  # its heading
    assert ("ocr", 0, 1) in seen and ("ocr", 1, 1) in seen  # recognised in the reader process, page by page
    passages = library.search("When does the lighthouse keeper wind the great clock?", k=3)
    chunk = next(p.chunk for p in passages if "Tuesday at dawn" in p.chunk.text)
    assert chunk.source.kind == "image" and chunk.page_start == 1 and chunk.from_scan
    assert chunk.source.scanned_pages == "1"
    original = library.original(result.doc_id)
    assert original is not None and original.startswith(b"%PDF")  # kept as the PDF it was read as
    found = render.pdf_page_for(original, chunk.text, chunk.page_start, chunk.page_end, FACT)  # recognised again
    assert found is not None and found[0] == 1
    assert _orange_pixels(found[1]) > 200  # the cited sentence is highlighted on the picture


def test_a_two_page_tiff_is_two_pages_with_its_own_title():
    got = _read("image_two-pages_regulations.tiff")
    assert got.page_count == 2 and len(got.page_starts) == 2 and got.scanned_pages == "1-2"
    first, second = got.text[:got.page_starts[1]], got.text[got.page_starts[1]:]
    assert "report to the harbour master before noon" in first and "Rule two" not in first
    assert "moor at the north quay for no longer than three nights" in second
    assert got.title == "Harbour Regulations of Port Elspeth"  # its ImageDescription, not the file name


def test_a_webp_page_is_read():
    got = _read("image_page_ferry.webp")
    assert "The ferry to Saint Brannock leaves the west pier at half past nine" in got.text
    assert got.title == "image_page_ferry" and got.scanned_pages == "1"


def test_a_page_photographed_at_a_tilt_is_levelled_and_read():
    reference = (DOCS / "image_photo_skewed.reference.txt").read_text(encoding="utf-8")
    got = _read("image_photo_skewed.jpg")
    # Measured: 0.98 levelled, 0.82 as photographed (6 degrees clockwise), see make_images.py measure.
    assert word_accuracy(reference, got.text) >= 0.95, got.text


def test_a_damaged_jpeg_is_one_sentence_from_the_reader_process():
    page = Image.open(DOCS / "image_page_harbour.png").convert("L")
    out = io.BytesIO()
    page.save(out, "JPEG", quality=80)
    cut = out.getvalue()[: len(out.getvalue()) * 2 // 3]  # a download cut short
    with pytest.raises(CorruptFile) as info:
        load_image(cut, "photo.jpg", Settings(), Deadline(60, "photo.jpg"))
    assert str(info.value) == ("“photo.jpg”: the file is damaged and could not be read (the picture is damaged or cut "
                               "short). Try re-downloading or re-exporting it, then upload it again.")


def test_a_long_scan_that_cannot_be_read_in_time_is_refused_before_any_page_is_converted():
    a4 = Image.new("1", (2480, 3508), 1)  # A4 at 300 dpi, black and white: 12 take 2 s of OCR at the very least
    out = io.BytesIO()
    a4.save(out, "TIFF", save_all=True, append_images=[a4] * 11, compression="group4", dpi=(300, 300))
    started = time.perf_counter()
    with pytest.raises(ScanTooLong) as info:  # converting them first would have run into the deadline instead
        read_image(out.getvalue(), "archive.tiff", Settings(), deadline=Deadline(1, "archive.tiff"))
    assert time.perf_counter() - started < 1  # from the pages' headers: not one of them decoded
    assert str(info.value).startswith("“archive.tiff”: reading its 12 scanned pages with OCR would take at least ")
