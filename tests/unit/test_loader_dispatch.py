"""Which reader a file goes to: its kind from the content (zip members, mimetypes, signatures, markup), names that
claim a kind the content is not, the shared zip-bomb check, and the dispatch table (every kind has a reader with the
one signature)."""
from __future__ import annotations

import inspect
import io
import subprocess
import sys
import zipfile

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import CorruptFile, UnsupportedFileType
from rag_core.core.formats import FORMATS
from rag_core.core.models import DocKind
from rag_core.ingest.loaders import READERS, load_bytes, sniff_kind
from rag_core.ingest.loaders._common import Extracted, build_sections, check_zip

SETTINGS = Settings()


def zip_of(members: dict[str, bytes | str], mimetype: str | None = None) -> bytes:
    """A ZIP with `members` (and a stored `mimetype` member first, as EPUB and OpenDocument write it)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        if mimetype is not None:
            zf.writestr(zipfile.ZipInfo("mimetype"), mimetype, compress_type=zipfile.ZIP_STORED)
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


PPTX = zip_of({"[Content_Types].xml": "<Types/>", "ppt/presentation.xml": "<p:presentation/>"})
XLSX = zip_of({"[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<workbook/>"})
DOCX = zip_of({"[Content_Types].xml": "<Types/>", "word/document.xml": "<w:document/>"})
EPUB = zip_of({"META-INF/container.xml": "<container/>", "OEBPS/content.opf": "<package/>"}, "application/epub+zip")
ODT = zip_of({"content.xml": "<office:document-content/>"}, "application/vnd.oasis.opendocument.text")
ODP = zip_of({"content.xml": "<office:document-content/>"}, "application/vnd.oasis.opendocument.presentation")
ODS = zip_of({"content.xml": "<office:document-content/>"}, "application/vnd.oasis.opendocument.spreadsheet")


@pytest.mark.parametrize(("data", "name", "kind"), [
    (PPTX, "deck.pptx", DocKind.PPTX),
    (PPTX, "deck", DocKind.PPTX),  # no extension: the content decides
    (XLSX, "Budget.XLSX", DocKind.XLSX),
    (DOCX, "a.docx", DocKind.DOCX),
    (EPUB, "book.epub", DocKind.EPUB),
    (EPUB, "book.zip", DocKind.EPUB),
    (ODT, "memo.odt", DocKind.ODT),
    (ODP, "talk.odp", DocKind.ODP),
    (ODS, "sums.ods", DocKind.ODS),
    (zip_of({"content.xml": '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0">'
                            "<office:body><office:text/></office:body></office:document-content>"}), "memo.odt",
     DocKind.ODT),  # no mimetype member (it is optional): the body says what it is
    (b"{\\rtf1\\ansi Hello}", "memo.rtf", DocKind.RTF),
    (b"\xef\xbb\xbf\r\n{\\rtf1 Hello}", "memo.txt", DocKind.RTF),
    (b"\x89PNG\r\n\x1a\n" + bytes(40), "scan.png", DocKind.IMAGE),
    (b"\xff\xd8\xff\xe0" + bytes(40), "photo.jpeg", DocKind.IMAGE),
    (b"\xff\xd8\xff\xe1" + bytes(40), "photo.png", DocKind.IMAGE),  # the content wins over a wrong image name
    (b"II*\x00" + bytes(40), "fax.tiff", DocKind.IMAGE),
    (b"MM\x00*" + bytes(40), "fax.tif", DocKind.IMAGE),
    (b"RIFF\x10\x00\x00\x00WEBPVP8 " + bytes(40), "page.webp", DocKind.IMAGE),
    (b"<!DOCTYPE html><html><body><p>Hi</p></body></html>", "page.html", DocKind.HTML),
    (b"\n  <!doctype HTML>\n<title>x</title>", "saved", DocKind.HTML),
    (b'<?xml version="1.0"?>\n<!-- saved from url=(0042)https://example.org/ -->\n<html xmlns="x">', "p.txt",
     DocKind.HTML),
    ("<!DOCTYPE html><p>é</p>".encode("utf-16"), "page.htm", DocKind.HTML),
    (b"<p>Just a fragment</p>", "fragment.htm", DocKind.HTML),
    (b"no markup at all, only words", "odd.html", DocKind.TXT),
    (b"# Notes\n\n```html\n<html><body>example</body></html>\n```\n", "notes.md", DocKind.MD),
    (b"a,b\n1,2\n", "table.csv", DocKind.CSV),
    (b"a\tb\n1\t2\n", "table.TSV", DocKind.CSV),
    (b"a,b\n1,2\n", "table.txt", DocKind.TXT),
])
def test_kind_comes_from_the_content(data: bytes, name: str, kind: DocKind) -> None:
    assert sniff_kind(data, name) == kind


@pytest.mark.parametrize(("data", "name", "says"), [
    (DOCX, "slides.pptx", "the name ends in .pptx but the content is not a PowerPoint presentation; it is a Word"),
    (PPTX, "sums.xlsx", "the name ends in .xlsx but the content is not an Excel workbook; it is a PowerPoint"),
    (zip_of({"a.txt": "hi"}), "deck.pptx", "not a PowerPoint presentation: the ZIP archive has no ppt/presentation"),
    (zip_of({"a.txt": "hi"}), "book.epub", "not an EPUB e-book: the ZIP archive has no META-INF/container.xml"),
    (ODS, "memo.odt", "the name ends in .odt but the content is not an OpenDocument text; it is an OpenDocument spr"),
    (b"Just some notes", "deck.pptx", "the name ends in .pptx but the content is not a PowerPoint presentation; it "
                                      "looks like plain text"),
    (b"<!DOCTYPE html><html>Sign in</html>", "sums.xlsx", "not an Excel workbook; it looks like a web page"),
    (b"Just some notes", "memo.rtf", "the name ends in .rtf but the content is not an RTF document"),
    (b"Just some notes", "scan.png", "the name ends in .png but the content is not an image"),
    (PPTX[: len(PPTX) // 2], "cut.pptx", "the PowerPoint presentation's ZIP container is broken"),
])
def test_a_name_that_claims_another_kind_is_refused_plainly(data: bytes, name: str, says: str) -> None:
    with pytest.raises(CorruptFile) as info:
        sniff_kind(data, name)
    assert says in str(info.value)
    assert name in str(info.value)


@pytest.mark.parametrize(("data", "says"), [
    (b"GIF89a" + bytes(40), "GIF image"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(100), "old-style Office file (.doc/.xls/.ppt); save it as .docx, "
                                                         ".xlsx or .pptx"),
    (b"\x00\x00\x00\x18ftypheic" + bytes(40), "save a photo as JPEG or PNG"),
    (b"RIFF\x10\x00\x00\x00WAVEfmt " + bytes(40), "WAV audio"),
    (zip_of({"xl/workbook.bin": b"\x00"}), "Excel binary workbook"),
    (zip_of({"content.xml": "<x/>"}, "application/vnd.oasis.opendocument.graphics"), "OpenDocument drawing"),
    (zip_of({"a.txt": "hi"}), "it is a ZIP archive"),
])
def test_formats_it_cannot_read_are_refused_with_what_they_are(data: bytes, says: str) -> None:
    with pytest.raises(UnsupportedFileType, match=".") as info:
        sniff_kind(data, "upload.bin")
    assert says in str(info.value)
    assert "PowerPoint, Excel" in str(info.value)  # the advice lists what it does read


# ------------------------------------------------------------------ the shared zip-bomb check


def test_check_zip_refuses_a_bomb_without_unpacking_it() -> None:
    bomb = zip_of({"ppt/presentation.xml": "<p/>", "ppt/media/zeros.bin": bytes(3 * 1024 * 1024)})
    assert len(bomb) < 20_000
    with pytest.raises(CorruptFile) as info:
        check_zip(bomb, "bomb.pptx", Settings(max_docx_uncompressed_mb=2), "ppt/presentation.xml", "PowerPoint file")
    assert "more than 2 MB when unpacked, more than DocChat allows for a PowerPoint file" in str(info.value)
    assert "ppt/presentation.xml" in check_zip(bomb, "bomb.pptx", Settings(max_docx_uncompressed_mb=4),
                                               "ppt/presentation.xml", "PowerPoint file")


def test_check_zip_wants_its_member_and_an_unbroken_container() -> None:
    with pytest.raises(CorruptFile, match="no xl/workbook.xml, so it is not an Excel file"):
        check_zip(PPTX, "a.xlsx", SETTINGS, "xl/workbook.xml", "Excel file")
    with pytest.raises(CorruptFile, match="the Excel file's ZIP container is broken"):
        check_zip(XLSX[:-30], "a.xlsx", SETTINGS, "xl/workbook.xml", "Excel file")


# ------------------------------------------------------------------ the dispatch table


def test_every_kind_of_file_has_a_reader_with_the_one_signature() -> None:
    assert {f.kind for f in FORMATS} == set(READERS) == set(DocKind) - {DocKind.WIKIPEDIA}
    for kind, function in READERS.items():
        assert inspect.isfunction(function), kind
        params = list(inspect.signature(function).parameters)
        assert params == ["data", "file_name", "settings", "deadline", "progress"], (kind, params)


def test_the_reader_table_imports_no_format_library() -> None:
    """Each reader imports its format's module when first called: importing the loaders loads none of them."""
    code = ("import sys, rag_core.ingest.loaders\n"
            "print(sorted(m for m in ('openpyxl', 'pptx', 'docx', 'pymupdf', 'lxml', 'markdown_it', 'PIL') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _fake_reader(data: bytes, file_name: str, settings: Settings, deadline=None, progress=None) -> Extracted:
    text = f"read {file_name} ({len(data)} bytes)"
    if progress:
        progress("ocr", 1, 1)
    return Extracted(text, build_sections(text, [(0, ("Slide 1 — Intro",))]), "Deck", page_count=1, page_starts=(0,))


def test_load_bytes_hands_the_file_to_its_kinds_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(READERS, DocKind.PPTX, _fake_reader)
    seen: list[tuple[str, int, int]] = []
    doc = load_bytes(PPTX, "deck.pptx", SETTINGS, progress=lambda *a: seen.append(a))
    assert doc.text == f"read deck.pptx ({len(PPTX)} bytes)"
    assert doc.source.kind == "pptx" and type(doc.source.kind) is str  # saved as the plain string
    assert doc.source.title == "Deck" and doc.page_count == 1 and doc.page_starts == (0,)
    assert doc.sections[0].heading_path == ("Slide 1 — Intro",)
    assert seen == [("ocr", 1, 1)]
