"""OCR of scanned PDF pages (rag_core.ingest.loaders.ocr): only pages without a usable text layer are recognised, with the real
Tesseract through PyMuPDF; a scan-only file is refused with a sentence saying how to enable OCR when it is off, not
installed, or missing the language pack; recognised pages are marked on the document and on every chunk."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pymupdf
import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import NoTextLayer, SettingsError
from rag_core.core.models import Chunk, SourceMeta
from rag_core.ingest.chunking import chunk_document
from rag_core.ingest.loaders import load_bytes
from rag_core.ingest.loaders.ocr import detect_language, find_tessdata, installed_languages, page_ranges

needs_tesseract = pytest.mark.skipif("eng" not in installed_languages(find_tessdata()),
                                     reason="Tesseract with the English pack is not installed (make ocr)")

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
SCANNED = "The harbour master of Port Elspeth records every ship that enters the bay in a green ledger."
TYPED = ("This page has a real text layer that must be kept exactly as it is written. It holds three sentences so "
         "that it makes passages of its own. Nothing on it is a picture.")


def _text_page(doc: pymupdf.Document, text: str) -> None:
    page = doc.new_page(width=420, height=200)
    page.insert_textbox(pymupdf.Rect(20, 20, 400, 180), text, fontsize=14)


def _scan_page(doc: pymupdf.Document, text: str, dpi: int = 200) -> None:
    """A page that is only a picture of `text` (no text layer), like a scanner makes."""
    src = pymupdf.open()
    _text_page(src, text)
    pix = src[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
    page = doc.new_page(width=420, height=200)
    page.insert_image(page.rect, stream=pix.tobytes("png"))


def make_pdf(*pages: tuple[str, str]) -> bytes:
    """A PDF of ("text", words) and ("scan", words) pages."""
    doc = pymupdf.open()
    for kind, text in pages:
        (_text_page if kind == "text" else _scan_page)(doc, text)
    return doc.tobytes()


def test_page_ranges_and_scanned_pages_round_trip() -> None:
    assert page_ranges([7, 1, 2, 3, 3]) == "1-3,7"
    assert page_ranges([]) == ""
    src = SourceMeta("a.pdf", "A", "pdf", "0" * 64, scanned_pages=page_ranges([2, 3, 9]))
    assert [p for p in range(1, 12) if src.scanned(p, p)] == [2, 3, 9]
    assert src.scanned(4, 9) and src.scanned(1, 2) and not src.scanned(4, 8) and not src.scanned(None, None)
    chunk = Chunk("d", 0, "t", 0, 1, 4, 5, (), src)
    assert not chunk.from_scan and replace(chunk, page_end=9).from_scan
    assert not replace(chunk, source=SourceMeta("a.pdf", "A", "pdf", "0" * 64)).from_scan  # old documents: no mark


def test_the_language_of_recognised_text_is_told_from_its_common_words() -> None:
    langs = ["eng", "deu", "fra", "spa", "ara"]
    assert detect_language("The ship was in the bay and it is one of the largest of its kind.", langs)[0] == "eng"
    assert detect_language("Der Hafen ist nicht groß, und die Schiffe werden mit dem Kran entladen.", langs)[0] == "deu"
    assert detect_language("Le port est petit et les navires sont déchargés dans la baie avec une grue.", langs)[0] == "fra"
    assert detect_language("El puerto es pequeño y los barcos se descargan en la bahía con una grúa.", langs)[0] == "spa"
    assert detect_language("الميناء صغير في المدينة و السفن التي تصل من البحر", langs)[0] == "ara"
    assert detect_language("12 34 %%", langs) == (None, 0.0)


def test_the_ocr_settings_are_checked() -> None:
    assert (Settings().ingest.ocr, Settings().ingest.ocr_language, Settings().ingest.ocr_dpi) == (True, "eng", 300)
    assert Settings(ocr_language="deu+eng").ingest.ocr_language == "deu+eng"
    for bad in ("../etc", "eng+", "ENG", "eng deu", ""):
        with pytest.raises(SettingsError) as info:
            Settings(ocr_language=bad)
        assert "DOCCHAT_OCR_LANGUAGE" in str(info.value) and "auto" in str(info.value)
    with pytest.raises(SettingsError):
        Settings(ocr_dpi=50)


@pytest.mark.parametrize("why", ["off", "no-tesseract", "no-language:ita", "empty", None])
def test_each_refusal_is_one_sentence_that_says_how_to_get_the_text(why: str | None) -> None:
    message = str(NoTextLayer("scan.pdf", why))
    assert message.startswith("“scan.pdf”: ") and message.endswith(".") and "OCR" in message
    assert "\n" not in message and len(message) < 400, message
    if why == "off":
        assert "DOCCHAT_OCR=true" in message
    if why == "no-tesseract":
        assert "apt-get install tesseract-ocr" in message and "make ocr" in message
    if why == "no-language:ita":
        assert "tesseract-ocr-ita" in message


@pytest.mark.parametrize("name", ["pdf_scanned_image-only_book-page.pdf", "pdf_scanned_image-only_two-columns.pdf"])
def test_with_ocr_off_a_scan_is_refused_as_before(name: str) -> None:
    with pytest.raises(NoTextLayer) as info:
        load_bytes((DOCS / name).read_bytes(), name, Settings(ocr=False))
    assert name in str(info.value) and "OCR is turned off" in str(info.value) and info.value.why == "off"


def test_without_tesseract_a_scan_is_refused_with_how_to_install_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TESSDATA_PREFIX", str(tmp_path))  # an explicit folder without language packs
    with pytest.raises(NoTextLayer) as info:
        load_bytes(make_pdf(("scan", SCANNED)), "scan.pdf", Settings())
    assert info.value.why == "no-tesseract" and "apt-get install tesseract-ocr" in str(info.value)


@needs_tesseract
def test_without_the_language_pack_a_scan_is_refused_naming_it() -> None:
    assert "zzz" not in installed_languages(find_tessdata())
    with pytest.raises(NoTextLayer) as info:
        load_bytes(make_pdf(("scan", SCANNED)), "scan.pdf", Settings(ocr_language="zzz"))
    assert info.value.why == "no-language:zzz" and "tesseract-ocr-zzz" in str(info.value)


@needs_tesseract
def test_a_mixed_pdf_keeps_its_text_layer_and_only_the_scanned_page_is_recognised(embedder) -> None:
    doc = load_bytes(make_pdf(("text", TYPED), ("scan", SCANNED), ("text", TYPED + " Again.")), "mixed.pdf",
                     Settings(ocr_dpi=200))
    assert doc.source.scanned_pages == "2"
    page1 = doc.text[doc.page_starts[0]:doc.page_starts[1]]
    page2 = doc.text[doc.page_starts[1]:doc.page_starts[2]]
    assert " ".join(page1.split()) == TYPED  # kept exactly: not read again by OCR
    assert " ".join(page2.split()) == SCANNED  # a clean 200 dpi picture is read word for word
    chunks = chunk_document(doc, embedder, max_tokens=32)
    assert {c.from_scan for c in chunks} == {True, False}
    assert all(c.from_scan == (c.page_start <= 2 <= (c.page_end or c.page_start)) for c in chunks)


@needs_tesseract
def test_a_blank_scan_is_refused_as_having_no_text() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=200, height=200)
    pix = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 200, 200), False)
    pix.set_rect(pix.irect, (255,))
    page.insert_image(page.rect, pixmap=pix)
    with pytest.raises(NoTextLayer) as info:
        load_bytes(doc.tobytes(), "blank.pdf", Settings())
    assert info.value.why == "empty" and "found no text" in str(info.value)


@needs_tesseract
def test_auto_detects_a_german_scan() -> None:
    german = "Der Hafenmeister schreibt jedes Schiff, das in die Bucht einläuft, in ein grünes Buch und nicht auf Zettel."
    if "deu" not in installed_languages(find_tessdata()):
        pytest.skip("the German pack is not installed")
    doc = load_bytes(make_pdf(("scan", german)), "de.pdf", Settings(ocr_language="auto", ocr_dpi=200))
    assert "einläuft" in doc.text and "grünes" in doc.text  # umlauts: read with the German pack, not English


@needs_tesseract
def test_reading_scanned_pages_reports_progress_page_by_page_from_the_reader_process() -> None:
    seen: list[tuple[str, int, int]] = []
    doc = load_bytes(make_pdf(("text", TYPED), ("scan", SCANNED), ("scan", SCANNED)), "two-scans.pdf",
                     Settings(ocr_dpi=150), progress=lambda *report: seen.append(report))
    assert doc.source.scanned_pages == "2-3"
    assert seen == [("ocr", 1, 3), ("ocr", 2, 3), ("ocr", 2, 3), ("ocr", 3, 3)]  # before and after each scanned page
    seen.clear()
    load_bytes(make_pdf(("text", TYPED)), "typed.pdf", Settings(), progress=lambda *report: seen.append(report))
    assert seen == []  # nothing to recognise: no OCR stage


def _raw_line(words: list[tuple[str, float, float]], y: float, size: float = 10.0) -> dict:
    """A PyMuPDF "rawdict" line of (word, x0, x1), characters spread evenly, as Tesseract's text page has them."""
    chars = []
    for n, (word, x0, x1) in enumerate(words):
        if n:
            chars.append({"c": " ", "bbox": (x0 - 3, y, x0, y + size)})
        step = (x1 - x0) / len(word)
        chars += [{"c": c, "bbox": (x0 + i * step, y, x0 + (i + 1) * step, y + size)} for i, c in enumerate(word)]
    return {"dir": (1.0, 0.0), "spans": [{"size": size, "chars": chars}]}


def test_an_ocr_line_across_a_column_gutter_is_cut_there_and_a_speck_in_the_gutter_dropped() -> None:
    from rag_core.ingest.loaders.ocr import split_at_gutters

    block = {"type": 0, "lines": [
        _raw_line([("press", 0, 30), ("PLAY,", 33, 60), ("_", 64, 68), ("find", 74, 95), ("the", 98, 110)], 0),
        _raw_line([("then", 0, 25), ("play", 28, 55), ("The", 74, 92), ("INSERT", 95, 130)], 12),
        _raw_line([("Kjift", 0, 25), ("—", 29, 35), ("not", 39, 53)], 24),  # a real dash: words above share its x
    ]}
    lines = split_at_gutters({"blocks": [block, {"type": 1}]})["blocks"][0]["lines"]
    texts = ["".join(s["text"] for s in line["spans"]) for line in lines]
    assert texts == ["press PLAY,", "find the", "then play", "The INSERT", "Kjift — not"]
    assert [round(line["bbox"][0]) for line in lines[:2]] == [0, 74]


def _poster(width: float = 14_400, height: float = 10_000, fontsize: float = 100, dpi: int = 20) -> bytes:
    """One image-only page of PDF's largest size (14,400 pt = 200 inches) showing SCANNED in big letters."""
    src = pymupdf.open()
    page = src.new_page(width=width, height=height)
    page.insert_textbox(pymupdf.Rect(200, 200, width - 200, height - 200), SCANNED, fontsize=fontsize)
    png = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes("png")
    out = pymupdf.open()
    out.new_page(width=width, height=height).insert_image(pymupdf.Rect(0, 0, width, height), stream=png)
    return out.tobytes()


def test_a_huge_page_is_drawn_for_ocr_within_the_pixel_budget() -> None:
    from rag_core.ingest.loaders.ocr import MAX_OCR_PIXELS, ocr_dpi

    a4 = pymupdf.Rect(0, 0, 595, 842)
    assert ocr_dpi(a4, 300) == 300 and ocr_dpi(a4, 600) == 600  # ordinary pages: the resolution set, untouched
    for rect in (pymupdf.Rect(0, 0, 14_400, 14_400), pymupdf.Rect(0, 0, 14_400, 200), a4 * 20):
        dpi = ocr_dpi(rect, 300)
        assert 1 <= dpi < 300
        pixels = math.ceil(rect.width * dpi / 72) * math.ceil(rect.height * dpi / 72)
        assert pixels <= MAX_OCR_PIXELS * 1.01, (rect, dpi, pixels)


@needs_tesseract
def test_a_scanned_page_of_the_largest_pdf_size_is_read_by_ocr() -> None:
    # At 300 dpi this page would be a 2.6-gigapixel image, which MuPDF refuses ("Overly large image"); the file was
    # then refused with "Run it through OCR" although OCR is installed.
    doc = load_bytes(_poster(), "poster.pdf", Settings())
    assert doc.source.scanned_pages == "1"
    assert " ".join(doc.text.split()) == SCANNED


@needs_tesseract
def test_when_ocr_fails_on_every_scanned_page_the_refusal_says_so(monkeypatch) -> None:
    from rag_core.core.deadline import Deadline
    from rag_core.ingest.loaders.pdf import read_pdf

    def broken(*args, **kwargs):
        raise RuntimeError("code=5: Overly large image")

    monkeypatch.setattr(pymupdf.Page, "get_textpage_ocr", broken)  # read in this process, so the patch holds
    with pytest.raises(NoTextLayer) as info:
        read_pdf(make_pdf(("scan", SCANNED)), "scan.pdf", deadline=Deadline.never("scan.pdf"))
    message = str(info.value)
    assert info.value.why == "failed" and "OCR could not read" in message
    assert "Run it through OCR" not in message  # OCR is installed here: that advice would not be true
