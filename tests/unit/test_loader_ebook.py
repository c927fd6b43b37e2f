"""E-books (rag_core.ingest.loaders.ebook): chapters from the table of contents (EPUB 3 nav or EPUB 2 NCX) as sections
in spine order, title and author from the metadata, a book without a TOC sectioned by its chapters' headings;
damaged books, zip bombs and DRM refused in one sentence; nothing fetched."""
from __future__ import annotations

import io
import socket
import zipfile
from pathlib import Path

import pytest
from fixtures.documents.make_web_books import CHAPTERS, CONTAINER, NAV, NCX, STAMP, chapter, opf

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, IngestTimedOut, NoText, UnsupportedFileType
from rag_core.ingest.loaders._common import Extracted
from rag_core.ingest.loaders.ebook import load_epub, read_epub

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
WITH_TOC = "epub_toc_three-chapters.epub"
NO_TOC = "epub_no-toc.epub"
SETTINGS = Settings()
TITLE = "The Keeper of Skerry Light — Ishbel MacLeod"


def read(name: str, data: bytes | None = None, settings: Settings = SETTINGS) -> Extracted:
    data = (DOCS / name).read_bytes() if data is None else data
    return read_epub(data, name, settings, Deadline.never(name))


def heads(ex: Extracted) -> list[tuple[tuple[str, ...], str]]:
    """(heading path, first line) of each section."""
    return [(s.heading_path, ex.text[s.char_start:s.char_end].split("\n", 1)[0]) for s in ex.sections]


def epub(members: dict[str, str | bytes], mimetype: bool = True) -> bytes:
    """An EPUB of these members (the mimetype first, stored)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        if mimetype:
            zf.writestr(zipfile.ZipInfo("mimetype", STAMP), "application/epub+zip")
        for name, content in members.items():
            zf.writestr(zipfile.ZipInfo(name, STAMP), content, compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def book(nav: bool = True, ncx: bool = True, chapters: dict[str, tuple[str, str]] | None = None,
         extra: dict[str, str | bytes] | None = None) -> bytes:
    """The fixture book, with or without its nav document and NCX, other chapters or extra members."""
    package = opf(with_toc=True)
    if not nav:
        package = package.replace(' properties="nav"', "")
    if not ncx:
        package = package.replace(' toc="ncx"', "").replace('<item id="ncx" href="toc.ncx" '
                                                             'media-type="application/x-dtbncx+xml"/>', "")
    members: dict[str, str | bytes] = {"META-INF/container.xml": CONTAINER, "OEBPS/content.opf": package,
                                       "OEBPS/nav.xhtml": NAV}
    if ncx:
        members["OEBPS/toc.ncx"] = NCX
    for name, (title, body) in (chapters or CHAPTERS).items():
        members[f"OEBPS/{name}"] = chapter(title, body)
    members.update(extra or {})
    return epub(members)


EXPECTED_TOC = [
    (("The Storm",), "Chapter One: The Storm"),
    (("The Logbook",), "Chapter Two: The Logbook"),
    (("The Relief Boat",), "Chapter Three: The Relief Boat"),
    (("The Relief Boat", "Leaving the Skerry"), "Leaving the Skerry"),
]


def test_chapters_are_sections_named_by_the_toc_in_spine_order() -> None:
    ex = read(WITH_TOC)
    assert heads(ex) == EXPECTED_TOC  # spine order c, a, b: not the order of the file names
    assert ex.title == TITLE
    assert ex.page_count is None


@pytest.mark.parametrize(("nav", "ncx"), [(True, False), (False, True)], ids=["epub3-nav", "epub2-ncx"])
def test_toc_is_read_from_the_nav_document_or_the_ncx(nav: bool, ncx: bool) -> None:
    assert heads(read("x.epub", book(nav=nav, ncx=ncx))) == EXPECTED_TOC


def test_tables_and_lists_of_a_chapter_are_kept() -> None:
    text = read(WITH_TOC).text
    assert "Ship | Flag | Heading\nMarguerite | French | north-east\nHope of Leith | Scottish | south" in text
    assert "- lamp oil for six weeks\n- ship's biscuit and salt fish\n- a spare set of wicks" in text


def test_book_without_a_toc_is_sectioned_by_its_chapters_first_headings() -> None:
    ex = read(NO_TOC)
    assert heads(ex) == [(("Chapter One: The Storm",), "Chapter One: The Storm"),
                         (("Chapter Two: The Logbook",), "Chapter Two: The Logbook"),
                         (("Chapter Three: The Relief Boat",), "Chapter Three: The Relief Boat")]
    assert ex.text == read(WITH_TOC).text


def test_chapters_without_toc_or_headings_are_numbered() -> None:
    plain = {name: (title, f"<p>Text of {title}.</p>") for name, (title, _) in CHAPTERS.items()}
    ex = read("x.epub", book(nav=False, ncx=False, chapters=plain))
    assert heads(ex) == [(("Chapter 1",), "Text of The Storm."), (("Chapter 2",), "Text of The Logbook."),
                         (("Chapter 3",), "Text of The Relief Boat.")]


def test_title_without_author_and_file_name_without_title() -> None:
    with zipfile.ZipFile(io.BytesIO(book())) as zf:  # re-zipped below without dc:creator, then without dc:title
        members = {n: zf.read(n) for n in zf.namelist() if n != "mimetype"}
    members["OEBPS/content.opf"] = members["OEBPS/content.opf"].replace(b"<dc:creator>Ishbel MacLeod</dc:creator>", b"")
    assert read("x.epub", epub(members)).title == "The Keeper of Skerry Light"
    members["OEBPS/content.opf"] = members["OEBPS/content.opf"].replace(
        b"<dc:title>The Keeper of Skerry Light</dc:title>", b"")
    assert read("books/skerry.epub", epub(members)).title == "skerry"


def test_chapter_with_html_entities_is_read_as_html_and_entity_bombs_stay_unexpanded() -> None:
    lol = ('<?xml version="1.0"?><!DOCTYPE html [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
           '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><html xmlns="http://www.w3.org/1999/xhtml"><body>'
           "<p>Before &c; after.</p></body></html>")
    chapters = {"c.xhtml": ("Storm", "<p>Wind&nbsp;and&nbsp;rain.</p>"), "a.xhtml": CHAPTERS["a.xhtml"],
                "b.xhtml": CHAPTERS["b.xhtml"]}
    data = book(chapters=chapters)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {n: zf.read(n) for n in zf.namelist() if n != "mimetype"}
    members["OEBPS/a.xhtml"] = lol.encode()
    text = read("x.epub", epub(members)).text
    assert text.startswith("Wind and rain.") and "aaaaaaaaaa" not in text and "after." in text


def test_damaged_epub_is_one_sentence() -> None:
    data = (DOCS / WITH_TOC).read_bytes()
    with pytest.raises(CorruptFile) as err:
        load_epub(data[: len(data) // 2], "cut.epub", SETTINGS)
    message = str(err.value)
    assert message.startswith("“cut.epub”: the file is damaged") and "Try re-downloading" in message
    assert message.count(". ") == 1  # one sentence of problem, one of advice


def test_corrupted_chapter_data_is_damaged_not_a_crash() -> None:
    data = bytearray(book())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo("OEBPS/a.xhtml")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start:start + 40] = b"\xff" * 40  # the deflated bytes of a chapter, garbled
    with pytest.raises(CorruptFile):
        read("x.epub", bytes(data))


def test_missing_package_document_is_damaged() -> None:
    with pytest.raises(CorruptFile, match="does not contain"):
        read("x.epub", epub({"META-INF/container.xml": CONTAINER}))


def test_zip_bomb_is_refused_before_unpacking() -> None:
    bomb = book(extra={"OEBPS/images/huge.svg": b"\0" * (3 * 1024 * 1024)})
    assert len(bomb) < 20_000
    with pytest.raises(CorruptFile, match="expands to more than 2 MB"):
        load_epub(bomb, "bomb.epub", Settings(max_docx_uncompressed_mb=2))


def test_drm_locked_chapters_are_refused_but_obfuscated_fonts_are_not() -> None:
    def encryption(algorithm: str, uri: str) -> str:
        return ('<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod '
                f'Algorithm="{algorithm}"/><enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData>'
                "</enc:EncryptedData></encryption>")

    locked = book(extra={"META-INF/encryption.xml": encryption("http://www.w3.org/2001/04/xmlenc#aes128-cbc",
                                                                "OEBPS/a.xhtml")})
    with pytest.raises(UnsupportedFileType, match="DRM"):
        read("locked.epub", locked)
    fonts = book(extra={"META-INF/encryption.xml": encryption("http://www.idpf.org/2008/embedding",
                                                               "OEBPS/fonts/f.otf")})
    assert heads(read("fonts.epub", fonts)) == EXPECTED_TOC


def test_book_without_text_is_refused_in_one_sentence() -> None:
    empty = {name: (title, '<div><img src="cover.jpg" alt=""/></div>') for name, (title, _) in CHAPTERS.items()}
    with pytest.raises(NoText):
        read("pictures.epub", book(chapters=empty))


def test_nothing_is_fetched_for_external_entities_or_dtds() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.setblocking(False)
        url = f"http://127.0.0.1:{server.getsockname()[1]}"
        hostile = (f'<?xml version="1.0"?><!DOCTYPE html SYSTEM "{url}/x.dtd" [<!ENTITY ext SYSTEM "{url}/e">]>'
                   f'<html xmlns="http://www.w3.org/1999/xhtml"><body><p>Entity &ext; here.</p></body></html>')
        data = book(extra={"OEBPS/a.xhtml": hostile})
        text = read("x.epub", data).text
        with pytest.raises(BlockingIOError):
            server.accept()  # no connection was made
    assert "Entity" in text and "here." in text


def test_progress_and_deadline_are_checked_per_chapter() -> None:
    seen: list[tuple[str, int, int]] = []
    read_epub((DOCS / WITH_TOC).read_bytes(), WITH_TOC, SETTINGS, Deadline.never(WITH_TOC),
              progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert seen == [("reading", 0, 3), ("reading", 1, 3), ("reading", 2, 3), ("reading", 3, 3)]
    ticks = iter(range(10**9))
    deadline = Deadline(2, "slow.epub", clock=lambda: float(next(ticks)))  # passes at the third check
    with pytest.raises(IngestTimedOut):
        read_epub((DOCS / WITH_TOC).read_bytes(), "slow.epub", SETTINGS, deadline)


def test_book_is_read_in_the_reader_process_like_in_this_one() -> None:
    data = (DOCS / WITH_TOC).read_bytes()
    assert load_epub(data, WITH_TOC, SETTINGS) == read(WITH_TOC)
