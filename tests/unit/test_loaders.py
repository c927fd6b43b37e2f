"""Loaders: real fixture files in, Documents (or friendly IngestErrors) out."""
from __future__ import annotations

import hashlib
import io
import os
import re
import time
import tracemalloc
import zipfile
from pathlib import Path

import pymupdf
import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import (
    CorruptFile,
    EmptyFile,
    EncryptedFile,
    FileTooLarge,
    IngestError,
    NoText,
    NoTextLayer,
    UnsupportedFileType,
)
from rag_core.core.models import Document
from rag_core.ingest.loaders import load_bytes, load_file, sniff_kind
from rag_core.ingest.loaders._pdf_layout import join_lines as _join_lines

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
SETTINGS = Settings()

GOOD_FIXTURES = [
    "pdf_text_4-pages_pdflatex.pdf",
    "pdf_text_multicolumn_3-pages.pdf",
    "pdf_text_outline-bookmarks_4-pages.pdf",
    "pdf_text_long_117-pages_german.pdf",
    "pdf_non-latin_arabic.pdf",
    "pdf_corrupt_damaged-xref-recoverable.pdf",
    "docx_headings-lists-tables-images.docx",
    "docx_headings_toc.docx",
    "docx_paragraphs-and-tables.docx",
    "docx_table_merged-cells.docx",
]

_CACHE: dict[str, Document] = {}


def load(name: str) -> Document:
    """Load a fixture once per test session (the 117-page PDF is reused by several tests)."""
    if name not in _CACHE:
        _CACHE[name] = load_bytes((DOCS / name).read_bytes(), name, SETTINGS)
    return _CACHE[name]


def load_data(data: bytes, name: str, settings: Settings = SETTINGS) -> Document:
    return load_bytes(data, name, settings)


def assert_sections_valid(doc: Document) -> None:
    """Sections tile the text in order, without gaps or overlaps, and none is empty."""
    assert doc.sections, "a document always has at least one section"
    pos = 0
    for s in doc.sections:
        assert s.char_start == pos
        assert s.char_end > s.char_start
        assert doc.text[s.char_start:s.char_end].strip()
        assert isinstance(s.heading_path, tuple)
        pos = s.char_end
    assert pos == len(doc.text)


def assert_clean(text: str) -> None:
    """No control characters other than \\n and \\t, no lone surrogates."""
    bad = re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]", text)
    assert not bad, f"control characters left in text: {sorted(set(bad))!r}"


def section_of(doc: Document, offset: int):
    return next(s for s in doc.sections if s.char_start <= offset < s.char_end)


# ------------------------------------------------------------------ every good fixture


@pytest.mark.parametrize("name", GOOD_FIXTURES)
def test_good_fixture_contract(name: str) -> None:
    doc = load(name)
    data = (DOCS / name).read_bytes()
    assert doc.text.strip()
    assert doc.text == doc.text.strip(), "no leading/trailing whitespace"
    assert_sections_valid(doc)
    assert_clean(doc.text)
    digest = hashlib.sha256(data).hexdigest()
    assert doc.source.sha256 == digest
    assert doc.doc_id == digest[:16]
    assert doc.source.file_name == name
    assert doc.source.kind == name.split("_")[0]
    assert doc.source.title
    if doc.source.kind == "pdf":
        assert doc.page_count == len(doc.page_starts)
        assert doc.page_starts[0] == 0
        assert list(doc.page_starts) == sorted(doc.page_starts)
        assert all(0 <= s <= len(doc.text) for s in doc.page_starts)
    else:
        assert doc.page_count is None and doc.page_starts == ()


# ------------------------------------------------------------------ PDF


def test_pdf_four_pages_page_starts_match_pymupdf_pages() -> None:
    doc = load("pdf_text_4-pages_pdflatex.pdf")
    assert doc.page_count == 4
    assert len(doc.page_starts) == 4
    assert doc.page_starts[0] == 0
    pdf = pymupdf.open(DOCS / "pdf_text_4-pages_pdflatex.pdf")
    for i, start in enumerate(doc.page_starts):
        first_line = pdf[i].get_text().strip().splitlines()[0]
        first_words = " ".join(first_line.split()[:6])
        assert doc.text[start:].startswith(first_words), (i, first_words, doc.text[start:start + 60])
        assert doc.page_at(start) == i + 1
        assert doc.page_at(start + 10) == i + 1
        if i:
            assert doc.text[start - 2:start] == "\n\n", "pages are joined with a blank line"
            assert doc.page_at(start - 3) == i


def _cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def test_pdf_117_pages_loads_quickly_with_correct_page_starts() -> None:
    data = (DOCS / "pdf_text_long_117-pages_german.pdf").read_bytes()
    # CPU time of this process and the reader it waits for, not the clock: a busy machine must not fail it
    t0 = _cpu_seconds()
    doc = load_bytes(data, "geotopo.pdf", SETTINGS)
    elapsed = _cpu_seconds() - t0
    assert elapsed < 5.0, f"took {elapsed:.2f} s of CPU"
    assert doc.page_count == 117
    assert len(doc.page_starts) == 117
    assert doc.source.title == "Geometrie und Topologie"  # from the PDF metadata
    assert "Einführung in die" in doc.text[: doc.page_starts[1]]
    assert len(doc.text) > 100_000


def test_pdf_117_pages_phrases_map_to_their_pages() -> None:
    doc = load("pdf_text_long_117-pages_german.pdf")
    pdf = pymupdf.open(DOCS / "pdf_text_long_117-pages_german.pdf")
    for page_no in (6, 13, 50, 77, 100):
        lines = [line.strip() for line in pdf[page_no - 1].get_text(flags=pymupdf.TEXT_MEDIABOX_CLIP).splitlines()]
        phrase = max((line for line in lines if len(line) > 30 and not line.endswith("-")), key=len)
        offset = doc.text.find(phrase)
        assert offset >= 0, phrase
        assert doc.page_at(offset) == page_no, phrase


def test_pdf_outline_headings_become_sections() -> None:
    doc = load("pdf_text_outline-bookmarks_4-pages.pdf")
    paths = [s.heading_path for s in doc.sections]
    assert paths == [
        (),
        ("1 Foo",), ("2 Bar",), ("3 Baz",), ("4 Foo",), ("5 Bar",),
        ("6 Baz",), ("7 Foo",), ("8 Bar",), ("9 Baz",),
    ]
    expected_pages = [2, 2, 2, 2, 3, 3, 3, 4, 4]  # from the outline
    for section, page in zip(doc.sections[1:], expected_pages):
        assert doc.text[section.char_start:].startswith(section.heading_path[-1])
        assert doc.page_at(section.char_start) == page
    # The printed table of contents on page 1 is body text before the first heading.
    assert doc.text[doc.sections[0].char_start:].startswith("Contents")


def test_pdf_nested_outline_gives_nested_heading_paths() -> None:
    doc = load("pdf_text_long_117-pages_german.pdf")
    by_path = {s.heading_path: s for s in doc.sections}
    section = by_path[("1 Topologische Grundbegriffe", "1.2 Metrische Räume")]
    assert doc.text[section.char_start:].startswith("1.2 Metrische Räume")
    assert doc.page_at(section.char_start) == 10
    assert ("4 Euklidische und nichteuklidische Geometrie", "4.2 Weitere Eigenschaften einer euklidischen Ebene",
            "4.2.1 Flächeninhalt") in by_path
    assert ("Stichwortverzeichnis",) in by_path
    # A phrase inside the section sits under that heading.
    offset = doc.text.find("Das Paar (X, d) heißt ein metrischer Raum.")
    assert section_of(doc, offset).heading_path[-1] == "1.2 Metrische Räume"


def test_pdf_font_size_headings_without_outline() -> None:
    doc = load("pdf_text_multicolumn_3-pages.pdf")
    paths = [s.heading_path for s in doc.sections]
    assert ("Two-Column Document with Lorem Ipsum",) in paths
    assert ("Two-Column Document with Lorem Ipsum", "Abstract") in paths


def test_pdf_multicolumn_reads_column_one_before_column_two() -> None:
    text = load("pdf_text_multicolumn_3-pages.pdf").text
    order = [
        "Two-Column Document with Lorem Ipsum",
        "Abstract",
        "This is a sample document with two columns filled with Lorem Ipsum text.",
        "Lorem ipsum dolor sit amet, consectetuer adipiscing elit.",
        "Nam dui ligula, fringilla a, euismod sodales",
        "Nulla malesuada porttitor diam.",
        # column 2 of page 1
        "Phasellus adipiscing semper elit.",
        "Quisque ullamcorper placerat ipsum.",
        "Fusce mauris. Vestibulum luctus nibh at lectus.",
        # page 2, column 1 then column 2
        "lacus vel est. Curabitur consectetuer.",
        "Morbi luctus, wisi viverra faucibus pretium",
        "luctus et ultrices posuere cubilia Curae;",
        "Suspendisse vitae elit.",
        # page 3 table
        "Austria | 8.9 | 83,879 | Vienna | German",
    ]
    positions = [text.find(p) for p in order]
    assert all(p >= 0 for p in positions), list(zip(order, positions))
    assert positions == sorted(positions)
    # A paragraph broken by the column break is rejoined.
    assert "Donec nonummy pellentesque ante." in text


def test_pdf_hyphenated_line_breaks_are_joined() -> None:
    text = load("pdf_text_multicolumn_3-pages.pdf").text
    assert "consectetuer adipiscing elit" in text  # "adip-" / "iscing"
    assert "Maecenas lacinia" in text  # "Maece-" / "nas"
    assert "adip-" not in text and "Maece-" not in text
    german = load("pdf_text_long_117-pages_german.pdf").text
    assert "Übungsaufgaben" in german
    assert not re.search(r"[a-zäöüß]-\n[a-zäöüß]", german)


def test_join_lines_rules() -> None:
    assert _join_lines("an exam-", "ple here") == "an example here"
    assert _join_lines("Schwarz-", "Weiß") == "Schwarz-Weiß"
    assert _join_lines("one line", "next line") == "one line next line"
    assert _join_lines("a dash -", "then") == "a dash - then"


def test_pdf_running_headers_and_page_numbers_are_removed() -> None:
    german = load("pdf_text_long_117-pages_german.pdf").text
    # Running head "<page> 1.2. METRISCHE RÄUME" printed on every page of that section.
    assert "METRISCHE RÄUME" not in german
    assert "TOPOLOGISCHE RÄUME" not in german
    assert "ÜBERLAGERUNGEN" not in german
    # The chapter headings themselves stay.
    assert german.count("1.2 Metrische Räume") >= 1
    for name in ("pdf_text_4-pages_pdflatex.pdf", "pdf_text_multicolumn_3-pages.pdf",
                 "pdf_text_outline-bookmarks_4-pages.pdf"):
        paragraphs = load(name).text.split("\n\n")
        assert not [p for p in paragraphs if p.strip().isdigit()], f"page numbers left in {name}"


def test_pdf_encrypted_raises_encrypted_file() -> None:
    name = "pdf_encrypted_user-password.pdf"
    with pytest.raises(EncryptedFile) as info:
        load_data((DOCS / name).read_bytes(), name)
    assert "password" in str(info.value)
    assert name in str(info.value)


@pytest.mark.parametrize("name", ["pdf_scanned_image-only_book-page.pdf", "pdf_scanned_image-only_two-columns.pdf"])
def test_pdf_scanned_without_text_layer_is_refused_when_ocr_is_off(name: str) -> None:
    with pytest.raises(NoTextLayer) as info:
        load_data((DOCS / name).read_bytes(), name, Settings(ocr=False))
    assert name in str(info.value)
    assert "OCR" in str(info.value)


def test_pdf_corrupt_header_only_raises_corrupt_file() -> None:
    name = "pdf_corrupt_header-and-eof-only.pdf"
    with pytest.raises(CorruptFile) as info:
        load_data((DOCS / name).read_bytes(), name)
    assert name in str(info.value)
    assert info.value.__cause__ is not None  # translated with "raise ... from"


def test_pdf_damaged_xref_is_recovered() -> None:
    doc = load("pdf_corrupt_damaged-xref-recoverable.pdf")
    assert doc.text == "Potato"
    assert doc.page_count == 1


def test_pdf_arabic_text_is_extracted() -> None:
    doc = load("pdf_non-latin_arabic.pdf")
    assert "حَبيبي" in doc.text  # with its fatha diacritic, in logical order
    assert "habibi" in doc.text
    assert len(re.findall("[\u0600-\u06ff]", doc.text)) >= 10
    assert doc.source.title == "habibi"


def test_pdf_without_any_text_or_image_is_no_text() -> None:
    pdf = pymupdf.open()
    pdf.new_page()
    pdf.new_page()
    data = pdf.tobytes()
    with pytest.raises(NoText):
        load_data(data, "blank.pdf")


def test_pdf_generated_pages_empty_page_and_control_chars() -> None:
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "First page text.")
    pdf.new_page()  # an empty page in the middle
    pdf.new_page().insert_text((72, 72), "Third page text.")
    pdf.set_metadata({"title": "Microsoft Word - Quarterly Report.docx"})
    doc = load_data(pdf.tobytes(), "gen.pdf")
    assert doc.text == "First page text.\n\nThird page text."
    assert doc.page_count == 3
    assert doc.page_at(doc.text.index("Third")) == 3
    assert doc.page_at(0) == 1
    assert doc.source.title == "Quarterly Report"


def test_pdf_generated_hyphenation_and_running_lines() -> None:
    pdf = pymupdf.open()
    words = ["apple", "birch", "cedar", "daisy", "elm"]
    for n, word in enumerate(words, 1):
        page = pdf.new_page()  # 595 x 842
        page.insert_text((72, 40), "ACME Corp - Internal Report", fontsize=9)
        page.insert_text((72, 100), f"The {word} sheet starts here. This sentence has an exam-", fontsize=11)
        page.insert_text((72, 114), f"ple of hyphenation about {word} and a Schwarz-", fontsize=11)
        page.insert_text((72, 128), f"Weiß compound word near the {word}.", fontsize=11)
        page.insert_text((280, 810), f"Page {n} of 5", fontsize=9)
    doc = load_data(pdf.tobytes(), "report.pdf")
    assert "ACME Corp" not in doc.text
    assert not re.search(r"Page \d of 5", doc.text)
    for n, (word, start) in enumerate(zip(words, doc.page_starts), 1):
        page_text = doc.text[start:doc.page_starts[n]] if n < 5 else doc.text[start:]
        assert page_text.strip() == (
            f"The {word} sheet starts here. This sentence has an example of hyphenation about {word} "
            f"and a Schwarz-Weiß compound word near the {word}."
        )


def test_pdf_monospaced_code_keeps_its_line_breaks() -> None:
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((72, 100), "Run the following commands to build it from source.", fontsize=11)
    for i, line in enumerate(["./configure --prefix=/usr", "make", "make install"]):
        page.insert_text((90, 116 + 12 * i), line, fontsize=10, fontname="cour")
    doc = load_data(pdf.tobytes(), "code.pdf")
    assert "./configure --prefix=/usr\nmake\nmake install" in doc.text


def test_pdf_generated_two_columns_with_full_width_title() -> None:
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((200, 60), "A Full Width Title Line", fontsize=20)
    left = ["alpha one left column text", "alpha two left column text", "alpha three left column"]
    right = ["beta one right column text", "beta two right column text", "beta three right column"]
    for i, (a, b) in enumerate(zip(left, right)):
        page.insert_text((72, 120 + 14 * i), a, fontsize=11)
        page.insert_text((320, 120 + 14 * i), b, fontsize=11)
    doc = load_data(pdf.tobytes(), "cols.pdf")
    order = ["A Full Width Title Line", *left, *right]
    positions = [doc.text.find(t) for t in order]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), doc.text
    assert doc.sections[0].heading_path == ("A Full Width Title Line",)


def _table_block(text: str, first_row: str) -> list[str]:
    """The contiguous " | " lines of `text` that contain `first_row`, checked to be set off by blank lines."""
    lines = text.split("\n")
    at = lines.index(first_row)
    start = at
    while start > 0 and " | " in lines[start - 1]:
        start -= 1
    end = at
    while end + 1 < len(lines) and " | " in lines[end + 1]:
        end += 1
    assert start == 0 or lines[start - 1] == "", lines[start - 1]
    assert end == len(lines) - 1 or lines[end + 1] == "", lines[end + 1]
    return lines[start:end + 1]


def test_pdf_table_header_row_joins_its_table_and_the_caption_stays_a_paragraph() -> None:
    # PyMuPDF puts the caption and the header row in one block, the body rows in the next.
    text = load("pdf_text_multicolumn_3-pages.pdf").text
    header = "Country | Population (millions) | Area (km2) | Capital | Official Language"
    assert f"\n\nTable 1: EU Countries Information\n\n{header}\nAustria | 8.9 | 83,879 | Vienna | German\n" in text
    table = _table_block(text, header)
    assert table[0] == header
    assert table[1:] == [
        "Austria | 8.9 | 83,879 | Vienna | German",
        "Belgium | 11.5 | 30,689 | Brussels | Dutch, French, German",
        "Czech Republic | 10.7 | 78,866 | Prague | Czech",
        "Denmark | 5.8 | 42,951 | Copenhagen | Danish",
        "Finland | 5.5 | 338,424 | Helsinki | Finnish, Swedish",
    ]
    assert "Information Country" not in text


def test_pdf_generated_table_header_and_a_line_that_does_not_line_up() -> None:
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((72, 72), "Results were measured on three machines by the team.", fontsize=10)
    page.insert_text((72, 84), "Table 2: Throughput", fontsize=10)
    columns = [72, 200, 330]
    for x, cell in zip(columns, ["Machine", "Cores", "Docs per second"]):
        page.insert_text((x, 96), cell, fontsize=10)
    body = [["alpha", "4", "12.5"], ["beta", "8", "22.0"], ["gamma", "16", "41.3"]]
    for i, row in enumerate(body):
        for x, cell in zip(columns, row):
            page.insert_text((x, 114 + 12 * i), cell, fontsize=10)
    # Page 2: two widely spaced pieces above a table, but not in its columns: not a header.
    page = pdf.new_page()
    page.insert_text((72, 72), "The results below were checked and signed off by the team.", fontsize=10)
    page.insert_text((72, 84), "Signed: J. Smith", fontsize=10)
    page.insert_text((420, 84), "Date: 2024-01-05", fontsize=10)
    for i, row in enumerate(body):
        for x, cell in zip(columns, row):
            page.insert_text((x, 102 + 12 * i), cell, fontsize=10)
    text = load_data(pdf.tobytes(), "tables.pdf").text
    assert _table_block(text, "Machine | Cores | Docs per second") == [
        "Machine | Cores | Docs per second", "alpha | 4 | 12.5", "beta | 8 | 22.0", "gamma | 16 | 41.3",
    ]
    assert "Table 2: Throughput\n\nMachine | Cores" in text
    second = text[text.index("The results below"):]
    assert "Signed: J. Smith Date: 2024-01-05\n\nalpha | 4 | 12.5\nbeta" in second, second


# ------------------------------------------------------------------ DOCX


def test_docx_blocks_in_document_order() -> None:
    text = load("docx_paragraphs-and-tables.docx").text
    order = ["Lorem ipsum dolor sit amet", "Text before", "Table", "Between", "Text after", "Donec semper"]
    positions = [text.find(p) for p in order]
    assert all(p >= 0 for p in positions)
    assert positions == sorted(positions)


def test_docx_merged_cells_readable_and_not_repeated() -> None:
    text = load("docx_table_merged-cells.docx").text
    lines = text.split("\n")
    assert lines[0] == "0-0 | 0-12 | 0-3"
    assert "12-0 | 1-1 | 1-2 | 1-3" in lines
    assert "2-1 | 2-2 | 2-3" in lines
    for merged in ("0-12", "12-0", "34-123"):
        assert text.count(merged) == 1, merged
    # One line per row, header first; the last row (one cell beside a merged one) stays with its table.
    assert lines == ["0-0 | 0-12 | 0-3", "12-0 | 1-1 | 1-2 | 1-3", "2-1 | 2-2 | 2-3", "3-0 | 34-123", "4-0"]


def test_docx_headings_lists_and_nested_table() -> None:
    doc = load("docx_headings-lists-tables-images.docx")
    text = doc.text
    assert "- expect I\n  - expect A\n  - expect B" in text
    assert "- bullet no indent\n  - bullet indent 1\n    - bullet indent 2" in text
    assert "Nested | Table\nA | B" in text
    # The nested table inside the frame table is a block of its own lines.
    assert "Large Bold Italics Underlined\n\nNested | Table\nA | B\n\nTab\tdelimited\ttext" in text
    assert "Tab\tdelimited\ttext" in text
    assert text.index("10 < 20 and 20 > 10") < text.index("Text outside table")
    paths = [s.heading_path for s in doc.sections]
    assert paths == [(), ("Heading 1",), ("Heading 1", "Heading 2")]
    for s in doc.sections[1:]:
        assert text[s.char_start:].startswith(s.heading_path[-1])


def test_docx_toc_field_is_skipped() -> None:
    doc = load("docx_headings_toc.docx")
    assert doc.text.count("Beautiful is better than ugly.") == 1  # heading only, not its TOC entry
    assert "Contents" not in doc.text
    assert doc.sections[0].heading_path == ("Beautiful is better than ugly.",)
    assert "Namespaces are one honking great idea" in doc.text


def _make_docx(build) -> bytes:
    import docx

    document = docx.Document()
    build(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_docx_generated_title_styles_and_core_title() -> None:
    def build(d):
        d.core_properties.title = "Field Guide"
        d.add_paragraph("The Guide", style="Title")
        d.add_paragraph("Intro text.")
        d.add_heading("Part A", level=1)
        d.add_paragraph("A text.")
        d.add_heading("Detail", level=2)
        d.add_paragraph("first item", style="List Bullet")
        d.add_paragraph("second item", style="List Bullet")
        table = d.add_table(rows=2, cols=3)
        merged = table.cell(0, 0).merge(table.cell(0, 1))
        merged.text = "wide"
        table.cell(0, 2).text = "c"
        table.cell(1, 0).text = "x"
        table.cell(1, 1).text = "y"
        table.cell(1, 2).text = "z"
        d.add_heading("Part B", level=1)
        d.add_paragraph("B text.")

    doc = load_data(_make_docx(build), "guide.docx")
    assert doc.source.title == "Field Guide"
    assert doc.source.kind == "docx"
    assert "- first item\n- second item" in doc.text
    assert "wide | c\nx | y | z" in doc.text
    assert doc.text.count("wide") == 1
    by_path = {s.heading_path: doc.text[s.char_start:s.char_end] for s in doc.sections}
    assert by_path[("The Guide",)].startswith("The Guide\n\nIntro text.")
    assert by_path[("Part A",)].startswith("Part A")
    assert by_path[("Part A", "Detail")].startswith("Detail")
    assert "wide | c" in by_path[("Part A", "Detail")]
    assert by_path[("Part B",)] == "Part B\n\nB text."
    assert_sections_valid(doc)


def test_docx_generated_table_rows_form_one_block_under_their_header() -> None:
    def build(d):
        d.add_paragraph("Facts about EU members.")
        d.add_paragraph("Table 1: EU Countries Information")
        table = d.add_table(rows=5, cols=3)
        title = table.cell(0, 0).merge(table.cell(0, 2))
        title.text = "Selected members"
        for r, values in enumerate(
            [("Country", "Population (millions)", "Capital"), ("Austria", "8.9", "Vienna"), ("Belgium", "11.5", "")],
            start=1,
        ):
            for c, value in enumerate(values):
                table.cell(r, c).text = value
        table.cell(3, 2).paragraphs[0].add_run("Brussels").add_break()
        table.cell(3, 2).paragraphs[0].add_run("(de facto)")
        table.cell(4, 0).text = "Czech Republic"
        d.add_paragraph("Source: national statistics offices.")

    text = load_data(_make_docx(build), "eu.docx").text
    assert text == (
        "Facts about EU members.\n\nTable 1: EU Countries Information\n\nSelected members\n\n"
        "Country | Population (millions) | Capital\nAustria | 8.9 | Vienna\nBelgium | 11.5 | Brussels (de facto)\n"
        "Czech Republic\n\nSource: national statistics offices."
    ), text


def test_docx_tracked_changes_text() -> None:
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    def build(d):
        para = d.add_paragraph("Kept text ")
        inserted = para.add_run("inserted words")
        ins = OxmlElement("w:ins")
        ins.set(qn("w:id"), "1")
        ins.set(qn("w:author"), "Ed")
        inserted._r.addprevious(ins)
        ins.append(inserted._r)
        deleted = para.add_run(" removed words")
        dele = OxmlElement("w:del")
        dele.set(qn("w:id"), "2")
        dele.set(qn("w:author"), "Ed")
        deleted._r.addprevious(dele)
        dele.append(deleted._r)
        para.add_run().add_break()
        para.add_run("second line")

    doc = load_data(_make_docx(build), "tracked.docx")
    assert doc.text == "Kept text inserted words\nsecond line"


def test_docx_text_box_content_is_kept_once() -> None:
    from docx.oxml import parse_xml

    w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    mc = "http://schemas.openxmlformats.org/markup-compatibility/2006"
    wps = "http://schemas.microsoft.com/office/word/2010/wordprocessingShape"
    box = (
        f'<w:r xmlns:w="{w}" xmlns:mc="{mc}" xmlns:wps="{wps}"><mc:AlternateContent>'
        '<mc:Choice Requires="wps"><wps:txbx><w:txbxContent><w:p><w:r><w:t>Sidebar note</w:t></w:r></w:p>'
        '</w:txbxContent></wps:txbx></mc:Choice>'
        '<mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>Sidebar note</w:t></w:r></w:p></w:txbxContent>'
        '</w:pict></mc:Fallback></mc:AlternateContent></w:r>'
    )

    def build(d):
        para = d.add_paragraph("Anchor paragraph.")
        para._p.append(parse_xml(box))
        d.add_paragraph("After the box.")

    doc = load_data(_make_docx(build), "box.docx")
    assert doc.text == "Anchor paragraph.\n\nSidebar note\n\nAfter the box."


def test_docx_without_text_is_no_text() -> None:
    with pytest.raises(NoText) as info:
        load_data(_make_docx(lambda d: d.add_paragraph("")), "blank.docx")
    assert "blank.docx" in str(info.value)


def test_docx_zip_bomb_is_refused_without_unpacking() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        with zf.open("word/document.xml", "w", force_zip64=True) as member:
            chunk = b" " * (8 * 1024 * 1024)
            for _ in range(48):  # 384 MiB of spaces, streamed; over the 300 MB default limit
                member.write(chunk)
    data = buf.getvalue()
    assert len(data) < 5 * 1024 * 1024
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(CorruptFile) as info:
            load_data(data, "bomb.docx")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - t0 < 2.0
    assert peak < 30 * 1024 * 1024, f"peak {peak / 1e6:.0f} MB: the archive was unpacked"
    message = str(info.value)
    assert "bomb.docx" in message
    assert "expands to more than 300 MB when unpacked" in message


def test_docx_uncompressed_limit_comes_from_settings() -> None:
    data = (DOCS / "docx_headings-lists-tables-images.docx").read_bytes()  # ~0.8 MB unpacked
    with pytest.raises(CorruptFile, match="more than 0 MB"):
        load_data(data, "x.docx", Settings(max_docx_uncompressed_mb=0))


# ------------------------------------------------------------------ sniffing and refusals


def test_text_renamed_pdf_is_refused_as_not_a_pdf() -> None:
    with pytest.raises(CorruptFile) as info:
        load_data(b"Just some notes, not a PDF at all.\n", "notes.pdf")
    message = str(info.value)
    assert "notes.pdf" in message
    assert "the name ends in .pdf but the content is not a PDF" in message
    assert "plain text" in message


def test_html_renamed_pdf_is_explained() -> None:
    with pytest.raises(CorruptFile, match="web page"):
        load_data(b"<!DOCTYPE html><html><body>Please log in</body></html>", "paper.pdf")


def test_pdf_content_wins_over_extension() -> None:
    data = (DOCS / "pdf_text_4-pages_pdflatex.pdf").read_bytes()
    doc = load_data(data, "misnamed.txt")
    assert doc.source.kind == "pdf"
    assert doc.page_count == 4


def test_non_zip_docx_is_refused() -> None:
    with pytest.raises(CorruptFile) as info:
        load_data(b"this is plain text pretending to be Word", "report.docx")
    assert "report.docx" in str(info.value)
    assert "not a Word document" in str(info.value)


def test_zip_without_word_document_named_docx_is_refused() -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("hello.txt", "hi")
    with pytest.raises(CorruptFile, match="no word/document.xml"):
        load_data(buf.getvalue(), "report.docx")
    with pytest.raises(UnsupportedFileType, match="ZIP archive"):
        load_data(buf.getvalue(), "archive.zip")


def test_truncated_docx_is_corrupt() -> None:
    data = (DOCS / "docx_paragraphs-and-tables.docx").read_bytes()
    with pytest.raises(CorruptFile) as info:
        load_data(data[: len(data) // 2], "cut.docx")
    assert "cut.docx" in str(info.value)


def test_random_binary_named_txt_is_refused() -> None:
    with pytest.raises(UnsupportedFileType) as info:
        load_data(os.urandom(64 * 1024), "random.txt")
    assert "binary data, not text" in str(info.value)
    assert "random.txt" in str(info.value)


def test_binary_without_nul_bytes_is_refused_by_control_share() -> None:
    data = bytes(b for b in os.urandom(20000) if b != 0)
    with pytest.raises(UnsupportedFileType, match="binary"):
        load_data(data, "noise.txt")


def test_gif_is_unsupported() -> None:  # PNG, JPEG, TIFF and WebP are images of pages (test_loader_formats.py)
    data = b"GIF89a" + os.urandom(100)
    with pytest.raises(UnsupportedFileType, match="GIF image") as info:
        load_data(data, "photo.txt")
    assert "photo.txt" in str(info.value)


def test_text_resembling_a_signature_is_still_text() -> None:
    for data in (b"Convert WEBP images to PNG", b"ID3 tags explained", b"The ftyp box"):
        assert load_data(data, "notes.txt").text == data.decode()


def test_old_word_doc_is_unsupported_with_advice() -> None:
    data = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(500)
    with pytest.raises(UnsupportedFileType, match=r"save it as \.docx"):
        load_data(data, "old.doc")


@pytest.mark.parametrize("name", ["a.pdf", "a.docx", "a.txt", "a.md", "a.markdown", "noext"])
def test_empty_files(name: str) -> None:
    with pytest.raises(EmptyFile) as info:
        load_data(b"", name)
    assert name in str(info.value)


@pytest.mark.parametrize("data", [b"   \n\t\r\n  ", b"\xef\xbb\xbf  \n", "\ufeff \n  ".encode("utf-16"), b"\x01\x02\n"])
def test_whitespace_only_files_are_empty(data: bytes) -> None:
    with pytest.raises(EmptyFile):
        load_data(data, "blank.txt")


def test_oversize_file_refused_before_parsing() -> None:
    settings = Settings(max_upload_mb=1)
    data = b"%PDF-1.4\n" + b"x" * (2 * 1024 * 1024)  # would be a corrupt PDF if it were parsed
    with pytest.raises(FileTooLarge) as info:
        load_data(data, "big.pdf", settings)
    assert "big.pdf" in str(info.value)
    assert "1 MB" in str(info.value)
    # Exactly at the limit is fine.
    doc = load_data(b"a" * (1024 * 1024), "limit.txt", settings)
    assert len(doc.text) == 1024 * 1024


def test_load_file_checks_size_and_uses_file_name(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\n\nhello\n", encoding="utf-8")
    doc = load_file(path, SETTINGS)
    assert doc.source.file_name == "notes.md"
    assert doc.source.kind == "md"
    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * (1024 * 1024 + 1))
    with pytest.raises(FileTooLarge):
        load_file(big, Settings(max_upload_mb=1))


def test_sniff_kind() -> None:
    assert sniff_kind(b"%PDF-1.7 ...", "x.bin") == "pdf"
    assert sniff_kind(b"garbage" * 10 + b"%PDF-1.4", "x.pdf") == "pdf"  # header within 1024 bytes
    assert sniff_kind(b"hello", "x.MD") == "md"
    assert sniff_kind(b"hello", "x.markdown") == "md"
    assert sniff_kind(b"hello", "x.csv") == "csv"
    assert sniff_kind(b"hello", "README") == "txt"


# ------------------------------------------------------------------ text and Markdown


def test_ten_megabyte_single_line_text_loads_fast() -> None:
    data = (b"lorem ipsum dolor sit amet " * 400_000)[: 10 * 1024 * 1024]
    t0 = time.perf_counter()
    doc = load_data(data, "huge.txt")
    elapsed = time.perf_counter() - t0
    assert elapsed < 3.0, f"took {elapsed:.2f}s"
    assert len(doc.text) == len(data.rstrip())
    assert doc.sections == (doc.sections[0],)
    assert doc.sections[0].heading_path == ()
    assert doc.page_starts == () and doc.page_at(5) is None
    md = load_data(data, "huge.md")
    assert len(md.sections) == 1


def test_utf16_with_bom() -> None:
    text = "Grüße aus Köln – 東京\nzweite Zeile"
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):
        raw = text.encode(encoding)
        if encoding != "utf-16":
            raw = ("\ufeff" + text).encode(encoding)
        doc = load_data(raw, "greeting.txt")
        assert doc.text == text, encoding


def test_utf16_without_bom_mostly_ascii() -> None:
    doc = load_data("Plain ASCII text saved as UTF-16.\nLine two.".encode("utf-16-le"), "w.txt")
    assert doc.text == "Plain ASCII text saved as UTF-16.\nLine two."


def test_utf8_bom_and_crlf() -> None:
    doc = load_data(b"\xef\xbb\xbfline one\r\nline two\rline three\r\n", "crlf.txt")
    assert doc.text == "line one\nline two\nline three"


def test_cp1252_fallback() -> None:
    doc = load_data(b"caf\xe9 cr\xe8me \x93quoted\x94 \x80", "menu.txt")
    assert doc.text == "café crème “quoted” €"


def test_control_characters_are_stripped_and_nfc() -> None:
    doc = load_data("a\x07b\x1bc\u00add e\u0301\tf\n".encode("utf-8"), "ctl.txt")
    assert doc.text == "abcd é\tf"
    assert_clean(doc.text)


def test_markdown_headings_become_sections() -> None:
    md = (
        "Intro before any heading.\n\n"
        "# Guide\n\nWelcome.\n\n"
        "## Install\n\nRun this:\n\n"
        "```bash\n# not a heading\nmake install\n```\n\n"
        "### Linux ###\n\napt.\n\n"
        "## Use\n\nText.\n\n"
        "Setext Part\n===========\n\nBody.\n\n"
        "Sub part\n--------\n\nMore.\n\n"
        "#hashtag is not a heading\n"
    )
    doc = load_data(md.encode(), "guide.md")
    assert doc.source.kind == "md"
    assert doc.source.title == "Guide"
    paths = [s.heading_path for s in doc.sections]
    assert paths == [
        (),
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Use"),
        ("Setext Part",),
        ("Setext Part", "Sub part"),
    ]
    install = doc.sections[2]
    assert "# not a heading" in doc.text[install.char_start:install.char_end]
    assert doc.text[doc.sections[3].char_start:].startswith("### Linux ###")
    assert doc.text[doc.sections[5].char_start:].startswith("Setext Part\n===")
    assert "#hashtag is not a heading" in doc.text[doc.sections[-1].char_start:]
    assert_sections_valid(doc)


def test_markdown_heading_markup_is_dropped_from_paths() -> None:
    doc = load_data(b"# The **Big** [Guide](http://x.org)\n\ntext\n\n## `code` *style*\n\nmore\n", "m.md")
    assert [s.heading_path for s in doc.sections] == [("The Big Guide",), ("The Big Guide", "code style")]
    assert doc.source.title == "The Big Guide"
    assert doc.text.startswith("# The **Big** [Guide](http://x.org)")  # the text itself is untouched


def test_markdown_front_matter_and_title_fallback() -> None:
    doc = load_data(b"---\ntitle: From Front Matter\n---\n\nNo level-one heading here.\n", "fm.md")
    assert doc.source.title == "From Front Matter"
    assert [s.heading_path for s in doc.sections] == [()]
    doc = load_data(b"just text", "folder/My Notes.md")
    assert doc.source.title == "My Notes"


def test_txt_hash_lines_are_not_headings() -> None:
    doc = load_data(b"# looks like a heading\nbut this is a .txt file\n", "plain.txt")
    assert doc.source.kind == "txt"
    assert [s.heading_path for s in doc.sections] == [()]
    assert doc.source.title == "plain"


# ------------------------------------------------------------------ all errors name the file


@pytest.mark.parametrize(
    ("data", "name", "error"),
    [
        (b"", "empty.md", EmptyFile),
        (b"hello", "wrong.pdf", CorruptFile),
        (b"hello", "wrong.docx", CorruptFile),
        (b"GIF87a" + bytes(10), "image.gif", UnsupportedFileType),
        (bytes(100), "zeros.txt", UnsupportedFileType),
        (b"%PDF-1.4\n%%EOF", "tiny.pdf", CorruptFile),
    ],
)
def test_every_error_names_the_file(data: bytes, name: str, error: type[IngestError]) -> None:
    with pytest.raises(error) as info:
        load_data(data, name)
    assert isinstance(info.value, IngestError)
    assert info.value.file_name == name
    assert name in str(info.value)
