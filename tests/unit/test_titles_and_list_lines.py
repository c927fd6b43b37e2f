"""Document titles (issue 28): the document's own title (metadata when it is a real one, else its first heading),
the file name only when it has none; list items and sentences in a large font are not headings; bullets misread
by OCR ("e Each…", "¢ One…") become "•"."""
from __future__ import annotations

import io
from pathlib import Path

import docx
import pymupdf
import pytest
from docx.oxml.ns import qn

from rag_core.core.config import Settings
from rag_core.ingest.loaders import load_bytes
from rag_core.ingest.loaders._common import heading_title, reads_as_text, real_title
from rag_core.ingest.loaders.ocr import _Word, bullet_fixed, find_tessdata, installed_languages

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
SETTINGS = Settings()
BODY = ("The harbour ferry leaves the west pier every morning at half past nine. It returns in the evening when the "
        "tide allows, and the timetable changes in winter.")


def _pdf(metadata_title: str, heading: str | None = None, lines: tuple[str, ...] = ()) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    y = 80.0
    if heading:
        page.insert_text((72, y), heading, fontsize=22, fontname="hebo")
        y += 50
    for line in lines:
        page.insert_text((72, y), line, fontsize=16, fontname="hebo")
        y += 30
    page.insert_textbox(pymupdf.Rect(72, y, 523, y + 200), BODY * 2, fontsize=11)
    doc.set_metadata({"title": metadata_title})
    return doc.tobytes()


def _docx(core_title: str, heading: str | None, outlined: tuple[str, ...] = ()) -> bytes:
    d = docx.Document()
    d.core_properties.title = core_title
    d.add_paragraph("A first paragraph of body text before anything else.")
    if heading:
        d.add_heading(heading, level=1)
    for text in outlined:  # body text given an outline level (as some converters do), no heading style
        para = d.add_paragraph(text)
        level = para._p.get_or_add_pPr().makeelement(qn("w:outlineLvl"), {qn("w:val"): "1"})
        para._p.get_or_add_pPr().append(level)
    d.add_paragraph(BODY)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


@pytest.mark.parametrize(("meta", "heading", "expected"), [
    ("Harbour Ferry Timetable", "Winter Sailings", "Harbour Ferry Timetable"),  # a real metadata title wins
    ("Microsoft Word - x.doc", "Winter Sailings", "Winter Sailings"),  # the program's file name: the heading
    ("untitled", "Winter Sailings", "Winter Sailings"),
    ("", "Winter Sailings", "Winter Sailings"),
    ("ferry_timetable_v2", "Winter Sailings", "Winter Sailings"),  # a file-name-like string
    ("", None, "ferry"),  # nothing else: the file name
    ("", "1 Introduction", "ferry"),  # a numbered chapter is not the document's title
])
def test_a_pdf_is_titled_by_its_metadata_else_its_first_heading(meta: str, heading: str | None, expected: str):
    doc = load_bytes(_pdf(meta, heading), "ferry.pdf", SETTINGS)
    assert doc.source.title == expected and doc.source.file_name == "ferry.pdf"


@pytest.mark.parametrize(("core", "heading", "expected"), [
    ("Ferry Handbook", "Winter Sailings", "Ferry Handbook"),
    ("", "Winter Sailings", "Winter Sailings"),
    ("Document1", "Winter Sailings", "Winter Sailings"),  # Word's default: not a title
    ("", "Heading 1", "notes"),  # a style's name left as the heading's text
    ("", None, "notes"),
])
def test_a_word_document_is_titled_by_its_properties_else_its_first_heading(core: str, heading: str | None,
                                                                            expected: str):
    assert load_bytes(_docx(core, heading), "notes.docx", SETTINGS).source.title == expected


def test_a_file_name_a_person_wrote_as_a_title_comes_before_a_heading():
    assert load_bytes(_docx("", "Winter Sailings"), "The Ferry Handbook.docx", SETTINGS).source.title == \
        "The Ferry Handbook"
    assert load_bytes(_docx("Ferry Handbook 2025", "Winter Sailings"), "The Ferry Handbook.docx",
                      SETTINGS).source.title == "Ferry Handbook 2025"  # its properties still come first
    assert load_bytes(_docx("", "Winter Sailings"), "ferry_handbook.docx", SETTINGS).source.title == "Winter Sailings"


@pytest.mark.parametrize(("name", "expected"), [
    ("pdf_text_multicolumn_3-pages.pdf", "Two-Column Document with Lorem Ipsum"),
    ("docx_headings_toc.docx", "Beautiful is better than ugly."),
    ("pdf_text_outline-bookmarks_4-pages.pdf", "pdf_text_outline-bookmarks_4-pages"),  # only "1 Foo", page 2
    ("pdf_text_long_117-pages_german.pdf", "Geometrie und Topologie"),
])
def test_real_fixtures_get_the_title_they_show(name: str, expected: str):
    assert load_bytes((DOCS / name).read_bytes(), name, SETTINGS).source.title == expected


def test_what_is_and_is_not_a_title():
    for junk in ("", "Untitled-3", "Presentation1", "Book1", "Click to add title", "Microsoft Word - x.doc",
                 "Microsoft Word - report.doc", "notes.txt", "pdf_text_multicolumn_3-pages", "2024", "report"):
        assert real_title(junk, "report.pdf") == "", junk
    assert real_title("Microsoft Word - Quarterly Report.docx", "q.pdf") == "Quarterly Report"
    for kept in ("Self-Reliance", "COVID-19 in Europe", "habibi", "I am Legend"):
        assert real_title(kept, "x.pdf") == kept
    assert [heading_title(h, "x.pdf") for h in ("2.3 Costs", "Chapter 4", "IV. Results", "2024 Annual Report")] == [
        "", "", "", "2024 Annual Report"]


def test_list_items_and_sentences_in_a_large_font_are_not_headings():
    item = "Operation is similar to a tape recorder with PLAY, STOP, RECORD, FAST"
    doc = load_bytes(_pdf("", "Sequencer Manual", (item, "• Each sequence holds tracks", "The tool is simple to use.",
                                                   "Recording a Sequence")), "m.pdf", SETTINGS)
    headings = {s.heading_path[-1] for s in doc.sections if s.heading_path}
    assert headings == {"Sequencer Manual", "Recording a Sequence"}, headings
    assert doc.source.title == "Sequencer Manual"
    outlined = ("• Each sequence holds tracks", "The tool is simple to use, and fast.", "Recording a Sequence")
    word = load_bytes(_docx("", "Sequencer Manual", outlined), "m.docx", SETTINGS)
    assert {s.heading_path[-1] for s in word.sections if s.heading_path} == {"Sequencer Manual", "Recording a Sequence"}
    assert reads_as_text("(a) Each of the items") and reads_as_text("1) First step")
    assert not reads_as_text("Results and Discussion") and not reads_as_text("3.2 Metric spaces")


def _words(*texts: str, gap: float = 3.0) -> list[_Word]:
    out, x = [], 10.0
    for t in texts:
        out.append(_Word(x, 0.0, x + 6.0 * len(t), 10.0, t, 10.0))
        x += 6.0 * len(t) + gap
    return out


def test_ocr_bullets_before_a_capital_become_bullets_and_real_words_stay():
    def fixed(*texts: str, first: bool = False, after: str = "", gap: float = 3.0) -> str:
        return " ".join(w.text for w in bullet_fixed(_words(*texts, gap=gap), first=first, after=after))

    assert fixed("¢", "One", "or", "all") == "• One or all"  # a mark that never starts a sentence
    assert fixed("e", "Each", "of", "the", after="include:") == "• Each of the"  # after a finished line
    assert fixed("©", "Optional", "remote", first=True) == "• Optional remote"
    assert fixed("0", "Operation", "is", gap=8.0) == "• Operation is"  # set apart by a gap
    assert fixed("e", "Roma", "sono", after="Milano") == "e Roma sono"  # mid-sentence: a word ("and" in Italian)
    assert fixed("a", "Tale", first=True) == "a Tale" and fixed("A", "Tale", first=True) == "A Tale"
    assert fixed("I", "Went", first=True) == "I Went"
    assert fixed("¢", "one", first=True) == "¢ one"  # not before a capital: left alone
    assert fixed("«", "Oui", "»", first=True) == "« Oui »"  # a quotation, not a bullet


needs_tesseract = pytest.mark.skipif("eng" not in installed_languages(find_tessdata()),
                                     reason="Tesseract with the English pack is not installed (make ocr)")


@needs_tesseract
def test_a_scanned_bulleted_list_reads_with_bullets_not_letters():
    items = ["Each of the sequences contains many tracks.", "One or all tracks may be transposed.",
             "Optional remote control is available."]
    src = pymupdf.open()
    page = src.new_page(width=420, height=220)
    page.insert_text((30, 40), "Features of the recorder:", fontsize=13)
    for i, item in enumerate(items):
        y = 75 + 32 * i
        page.draw_circle((38, y - 4), 3.2, color=(0, 0, 0), fill=(0, 0, 0))
        page.insert_text((52, y), item, fontsize=13)
    pix = page.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY)
    out = pymupdf.open()
    out.new_page(width=420, height=220).insert_image(pymupdf.Rect(0, 0, 420, 220), stream=pix.tobytes("png"))
    doc = load_bytes(out.tobytes(), "scan.pdf", Settings(ocr_dpi=200))
    lines = [line.strip() for line in doc.text.splitlines() if line.strip()]
    for item in items:
        line = next(line for line in lines if item.split()[-1] in line)
        assert line.startswith(("• ", item.split()[0])), lines  # a bullet, or nothing: never "e " or "¢ "
    assert not any(s.heading_path and s.heading_path[-1].startswith(("•", "e ")) for s in doc.sections)


@needs_tesseract
@pytest.mark.slow
def test_the_scanned_brochure_has_its_title_bullets_and_no_bullet_heading():
    name = "pdf_scanned_image-only_two-columns.pdf"  # the LinnSequencer brochure of issue 28, about 30 s of OCR
    doc = load_bytes((DOCS / name).read_bytes(), name, SETTINGS)
    assert doc.source.title == "The LinnSequencer"
    items = [line for line in doc.text.splitlines() if "Optional remote control" in line or "One or all" in line]
    assert items and all(line.startswith("• ") for line in items), items
    assert not any(line[:2] in ("e ", "¢ ", "© ", "« ", "° ") for line in doc.text.splitlines())
    assert all(len(s.heading_path[-1].split()) < 10 for s in doc.sections if s.heading_path)  # no item as a section
