"""Every kind of file in the words people use: where a passage sits ("slide 3 — Budget", "sheet Budget", "chapter
Two", "page 2"), what a document is ("PowerPoint", "12 slides"), and one list of accepted kinds that the upload box,
the command line, the MCP tool, the error messages and the README all show."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rag_core.adapters.cli.main import build_parser
from rag_core.adapters.mcp.files import SUPPORTED_SUFFIXES
from rag_core.core.errors import NotARegularFile, UnsupportedFileType
from rag_core.core.formats import ACCEPTED_EXTENSIONS, FORMATS, accepted_kinds, format_for_name, format_of
from rag_core.core.models import Chunk, DocKind, SourceMeta
from rag_core.service import render
from rag_core.service.library import expand_paths

ROOT = Path(__file__).resolve().parents[2]


def chunk(kind: str, page_start: int | None = None, page_end: int | None = None,
          heading: tuple[str, ...] = ()) -> Chunk:
    return Chunk(doc_id="d", index=0, text="x", char_start=0, char_end=1, page_start=page_start,
                 page_end=page_end or page_start, heading_path=heading,
                 source=SourceMeta(file_name="f", title="T", kind=kind, sha256="0"))


@pytest.mark.parametrize(("c", "label"), [
    (chunk("pptx", 3, heading=("Slide 3 — Budget overview",)), "slide 3 — Budget overview"),
    (chunk("pptx", 3, heading=("Slide 3",)), "slide 3"),  # an untitled slide: its number once
    (chunk("pptx", 3, 4, ("Slide 3 — Plan",)), "slides 3–4 — Plan"),
    (chunk("pptx", 5), "slide 5"),
    (chunk("odp", 2, heading=("Slide 2 — Agenda", "Notes")), "slide 2 — Agenda › Notes"),
    (chunk("xlsx", heading=("Budget",)), "sheet Budget"),
    (chunk("ods", heading=("Q1", "Travel")), "sheet Q1 › Travel"),
    (chunk("csv", heading=("expenses",)), "sheet expenses"),
    (chunk("epub", heading=("Part One", "Chapter 2: The Road")), "chapter Part One › Chapter 2: The Road"),
    (chunk("image", 2), "page 2"),
    (chunk("image", 1, 2), "pages 1–2"),
    (chunk("html", heading=("Pricing", "Plans")), "section Pricing › Plans"),
    (chunk("odt", heading=("Scope",)), "section Scope"),
    (chunk("rtf", heading=("Memo",)), "section Memo"),
    (chunk("pdf", 2, 3, ("Intro",)), "pages 2–3, section Intro"),  # as before
    (chunk("docx", heading=("Intro",)), "section Intro"),
    (chunk("wikipedia", heading=("History",)), "section History"),
    (chunk("somethingnew", 4, heading=("A",)), "page 4, section A"),  # a kind from a later release
    (chunk("xlsx"), ""),
])
def test_a_location_says_where_in_the_words_of_its_kind(c: Chunk, label: str) -> None:
    assert render.location_label(c) == label


def test_pages_are_named_for_their_kind() -> None:
    assert render.page_name("pptx", 3) == "slide 3" and render.page_name("odp", 1) == "slide 1"
    assert render.page_name("pdf", 3) == "page 3" and render.page_name("image", 2) == "page 2"
    assert render.page_name("", 7) == "page 7"
    assert render.pages_label("pptx", 12) == "12 slides" and render.pages_label("pptx", 1) == "1 slide"
    assert render.pages_label("pdf", 3) == "3 pages" and render.pages_label("image", 1) == "1 page"


def test_kinds_have_names() -> None:
    names = {k: render.kind_label(k) for k in ("pdf", "docx", "pptx", "xlsx", "csv", "html", "epub", "odt", "rtf",
                                              "image", "txt", "md", "wikipedia")}
    assert names == {"pdf": "PDF", "docx": "Word", "pptx": "PowerPoint", "xlsx": "Excel", "csv": "CSV",
                     "html": "Web page", "epub": "EPUB", "odt": "OpenDocument text", "rtf": "RTF", "image": "Image",
                     "txt": "Text", "md": "Markdown", "wikipedia": "Wikipedia"}
    assert render.kind_label("") == "Document"


def test_only_kinds_kept_as_a_pdf_offer_show_on_the_page() -> None:
    assert render.shows_pages("pdf") and render.shows_pages("image")  # an image is kept as the PDF it was read as
    assert not any(render.shows_pages(k) for k in ("pptx", "xlsx", "docx", "html", "wikipedia"))


def test_the_kinds_are_the_strings_saved_before() -> None:
    # SourceMeta.kind is stored with every passage: the enum must equal what earlier releases saved.
    assert [DocKind.PDF, DocKind.DOCX, DocKind.TXT, DocKind.MD, DocKind.WIKIPEDIA] == ["pdf", "docx", "txt", "md",
                                                                                      "wikipedia"]
    assert format_of("pptx") is not None and format_of("pptx").page == "slide"
    assert format_of("wikipedia") is None


# ------------------------------------------------------------------ one list of accepted kinds, shown everywhere


def test_every_extension_belongs_to_one_kind() -> None:
    assert len(ACCEPTED_EXTENSIONS) == len(set(ACCEPTED_EXTENSIONS))
    assert all(e.startswith(".") and e == e.lower() for e in ACCEPTED_EXTENSIONS)
    assert {".pptx", ".xlsx", ".csv", ".tsv", ".html", ".htm", ".epub", ".odt", ".rtf", ".png", ".jpg", ".jpeg",
            ".tiff", ".webp", ".pdf", ".docx", ".txt", ".md"} <= set(ACCEPTED_EXTENSIONS)
    assert format_for_name("Deck.PPTX").kind == DocKind.PPTX and format_for_name("a.gif") is None


def test_the_accepted_kinds_are_listed_everywhere() -> None:
    short, long = accepted_kinds(), accepted_kinds(extensions=True)
    assert short.startswith("PDF, Word, PowerPoint, Excel, CSV, web page, EPUB") and short.endswith("text or Markdown")
    assert "PowerPoint (.pptx)" in long and "image (.png, .jpg, .jpeg, .tif, .tiff, .webp)" in long
    # The command line's help, the MCP tool's folder check, the error messages and a folder walk.
    ingest = build_parser()._subparsers._group_actions[0].choices["ingest"]  # type: ignore[union-attr]
    assert "PowerPoint" in ingest.format_help() and ".xlsx" in ingest.format_help()
    assert set(ACCEPTED_EXTENSIONS) == SUPPORTED_SUFFIXES
    assert short in str(UnsupportedFileType("a.gif")) and short in str(NotARegularFile("fifo"))


def test_a_folder_walk_finds_every_kind(tmp_path: Path) -> None:
    for ext in ACCEPTED_EXTENSIONS + (".gif", ".doc", ".zip"):
        (tmp_path / f"file{ext}").write_bytes(b"x")
    found = {p.suffix for p in expand_paths([str(tmp_path)])}
    assert found == set(ACCEPTED_EXTENSIONS)


def test_the_readme_table_lists_every_kind() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## What DocChat reads", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| kind")]
    listed = set(re.findall(r"`(\.[a-z]+)`", "\n".join(rows)))
    assert listed == set(ACCEPTED_EXTENSIONS)
    for f in FORMATS:
        assert any(f.name in row for row in rows), f.name
