"""PowerPoint (rag_core.ingest.loaders.slides): a page and a section per slide, text in reading order, tables under
their header (also after chunking), speaker notes marked, titles, damaged files and zip bombs refused plainly."""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from pptx import Presentation
from pptx.util import Inches

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, NoText
from rag_core.core.models import Document, SourceMeta
from rag_core.ingest.chunking import chunk_document
from rag_core.ingest.loaders._common import Extracted
from rag_core.ingest.loaders.slides import NOTES_MARK, load_pptx, read_pptx

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
DECK = "office_slides_table-notes-untitled.pptx"
SETTINGS = Settings()


def pptx(name: str = DECK, data: bytes | None = None, settings: Settings = SETTINGS) -> Extracted:
    data = (DOCS / name).read_bytes() if data is None else data
    return read_pptx(data, name, settings, Deadline.never(name))


def document(ex: Extracted, name: str = DECK) -> Document:
    return Document(doc_id="d" * 16, text=ex.text, sections=ex.sections, page_count=ex.page_count,
                    page_starts=ex.page_starts, source=SourceMeta(file_name=name, title=ex.title, kind="pptx", sha256=""))


def deck_bytes(build) -> bytes:
    """A presentation made with python-pptx; `build(prs)` adds its slides."""
    prs = Presentation()
    build(prs)
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue()


def test_each_slide_is_a_page_and_a_section_with_its_number_and_title() -> None:
    ex = pptx()
    doc = document(ex)
    assert ex.title == "Project Aurora quarterly review"  # the core properties' title
    assert ex.page_count == 4 and len(ex.page_starts) == 4
    for n, label in enumerate(["Slide 1 — Project Aurora", "Slide 2 — Budget overview", "Slide 3",
                               "Slide 4 — Next steps"], 1):
        start = ex.text.index(label)
        assert start == ex.page_starts[n - 1]  # each slide begins with its heading line
        assert doc.page_at(start) == n
    paths = [s.heading_path for s in ex.sections]
    assert paths == [("Slide 1 — Project Aurora",), ("Slide 2 — Budget overview",), ("Slide 2 — Budget overview",),
                     ("Slide 3",), ("Slide 4 — Next steps",)]  # slide 2's table is a section of its own
    assert doc.page_at(ex.text.index("Travel | 12,000")) == 2
    assert doc.page_at(ex.text.index("Grouped first line")) == 3


def test_table_rows_are_lines_under_their_header() -> None:
    text = pptx().text
    i = text.index("Item | Budget (EUR) | Owner")
    assert text[i:].split("\n")[:4] == ["Item | Budget (EUR) | Owner", "Travel | 12,000 | Alice Martin",
                                        "Equipment | 8,500 | Bob Chen", "Training | 4,000 | Chloé Dubois"]


def test_text_boxes_are_read_top_to_bottom_then_left_to_right_and_groups_inside() -> None:
    text = pptx().text
    order = ["Left column: the pilot starts in April.", "Right column: the pilot runs in Lyon.",
             "Grouped first line: contracts are drafted.", "Grouped second line: suppliers sign in May.",
             "Risks are reviewed every month by the steering group."]
    positions = [text.index(line) for line in order]
    assert positions == sorted(positions)  # the file holds them as: risks, right, left, group (second, first)


def test_speaker_notes_are_kept_and_marked() -> None:
    ex = pptx()
    slide2 = ex.text[ex.page_starts[1]:ex.page_starts[2]]
    assert f"{NOTES_MARK}\nMention that travel was cut by ten percent after the spring audit." in slide2
    slide4 = ex.text[ex.page_starts[3]:]
    assert slide4.endswith(f"{NOTES_MARK}\nAsk finance to confirm the hiring budget.")
    assert "Hire two engineers\n  One for the data platform\nOrder the test rigs" in slide4  # outline levels


@pytest.mark.parametrize(("core_title", "expected"), [
    ("", "Roadmap"), ("PowerPoint Presentation", "Roadmap"), ("Plans for 2025", "Plans for 2025")])
def test_title_is_the_core_title_else_the_first_slide_title(core_title: str, expected: str) -> None:
    def build(prs):
        prs.core_properties.title = core_title
        prs.slides.add_slide(prs.slide_layouts[0]).shapes.title.text = "Roadmap"

    assert pptx("x.pptx", deck_bytes(build)).title == expected


def test_title_falls_back_to_the_file_name_and_untitled_slides_are_numbered() -> None:
    def build(prs):
        slide = prs.slides.add_slide(prs.slide_layouts[6])
        slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "Only a text box"

    ex = pptx("decks/Kick-off.pptx", deck_bytes(build))
    assert ex.title == "Kick-off"
    assert ex.text == "Slide 1\n\nOnly a text box"


def test_a_deck_without_text_is_no_text() -> None:
    with pytest.raises(NoText):
        pptx("blank.pptx", deck_bytes(lambda prs: prs.slides.add_slide(prs.slide_layouts[6])))


def test_every_passage_of_a_long_table_starts_with_its_header(embedder) -> None:
    def build(prs):
        slide = prs.slides.add_slide(prs.slide_layouts[5])
        slide.shapes.title.text = "Suppliers"
        table = slide.shapes.add_table(61, 3, Inches(0.5), Inches(1.5), Inches(9), Inches(5)).table
        for c, head in enumerate(["Supplier", "Country", "Annual spend (EUR)"]):
            table.cell(0, c).text = head
        for r in range(1, 61):
            for c, value in enumerate([f"Supplier number {r}", f"Country {r % 9}", f"{r * 1000:,}"]):
                table.cell(r, c).text = value

    ex = pptx("suppliers.pptx", deck_bytes(build))
    chunks = chunk_document(document(ex, "suppliers.pptx"), embedder, SETTINGS.ingest.chunk_tokens)
    with_rows = [c for c in chunks if "Supplier number" in c.text]
    assert len(with_rows) > 2
    for chunk in with_rows:
        rows = [line for line in chunk.text.split("\n") if " | " in line]
        assert rows[0] == "Supplier | Country | Annual spend (EUR)", chunk.text[:200]
        assert chunk.page_start == chunk.page_end == 1 and chunk.heading_path == ("Slide 1 — Suppliers",)
    assert sum(c.text.count("Supplier number") for c in with_rows) == 60  # every row once


def _replace_member(data: bytes, member: str, content: bytes | None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != member:
                dst.writestr(info, src.read(info.filename))
            elif content is not None:
                dst.writestr(info, content)
    return out.getvalue()


def test_a_damaged_zip_is_one_sentence_before_any_reader_starts() -> None:
    data = (DOCS / DECK).read_bytes()
    with pytest.raises(CorruptFile) as e:
        load_pptx(data[: len(data) // 2], "deck.pptx", SETTINGS)
    assert e.value.message == ("“deck.pptx”: the file is damaged and could not be read (the PowerPoint file's ZIP "
                               "container is broken). Try re-downloading or re-exporting it, then upload it again.")


def test_a_damaged_slide_is_one_sentence() -> None:
    data = _replace_member((DOCS / DECK).read_bytes(), "ppt/slides/slide2.xml", b"<p:sld><broken")
    with pytest.raises(CorruptFile) as e:
        pptx("deck.pptx", data)
    assert e.value.message.startswith("“deck.pptx”: the file is damaged and could not be read (")
    assert "\n" not in e.value.message


def test_a_zip_of_something_else_is_refused_plainly() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("word/document.xml", "<w:document/>")
        zf.writestr("notes.txt", "not a presentation")
    with pytest.raises(CorruptFile) as e:
        load_pptx(out.getvalue(), "deck.pptx", SETTINGS)
    assert "the ZIP archive has no ppt/presentation.xml, so it is not a PowerPoint file" in e.value.message


def test_a_zip_bomb_is_refused_before_it_is_unpacked() -> None:
    bomb = _replace_member((DOCS / DECK).read_bytes(), "ppt/slides/slide3.xml", b" " * (3 * 1024 * 1024))
    with pytest.raises(CorruptFile, match="expands to more than 2 MB when unpacked"):
        load_pptx(bomb, "bomb.pptx", Settings(max_docx_uncompressed_mb=2))


def test_load_pptx_reads_in_the_child_process() -> None:
    assert load_pptx((DOCS / DECK).read_bytes(), DECK, SETTINGS) == pptx()
