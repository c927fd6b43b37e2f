"""OpenDocument (.odt text, .odp presentation, .ods spreadsheet): content.xml read with lxml, in the reader process.

One reader for the three kinds: what office:body holds decides how it is read, whichever of load_odt/load_odp/load_ods
was called. Text: headings (text:h) as sections, lists as "- item" lines, tables as "cell | cell" rows under their
header as in Word (rag_core.ingest.loaders._odf). Presentation: a page and a section per slide, each beginning with
its line "Slide N — <title>", shapes top to bottom then left to right, tables in blocks that repeat their header, the
speaker notes after "Speaker notes:", as PowerPoint slides are read (rag_core.ingest.loaders.slides). Spreadsheet:
streamed row by row and read by the rules of Excel workbooks (rag_core.ingest.loaders._ods). The title is meta.xml's
dc:title, else the Title-style paragraph, else the first heading, else the file name. Neither LibreOffice nor odfpy
is needed: odfpy (last release 2020) parsed a 9.8 MB content.xml in 11.1 s and 274 MB against 4.0 s and 112 MB for
this whole reader (lxml), measured for issue 25.
"""
from __future__ import annotations

import enum
import io
import logging
import zipfile
from collections.abc import Iterable, Iterator
from typing import IO

from lxml import etree

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, EncryptedFile, NoText, TooManyPassages, UnsupportedFileType
from rag_core.core.models import Progress
from rag_core.ingest.chunking import MAX_PASSAGES
from rag_core.ingest.loaders._archive import check_inflated, read_head
from rag_core.ingest.loaders._blocks import Assembled, Block, BlockKind, assemble
from rag_core.ingest.loaders._common import (
    Extracted,
    build_sections,
    check_zip,
    choose_title,
    collapse_ws,
)
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders._odf import DRAW, NS, OFFICE, PRESENTATION, SVG, BodyReader, Styles, length_cm
from rag_core.ingest.loaders._ods import read_sheets
from rag_core.ingest.loaders._tables import block_budget, header_blocks

log = logging.getLogger(__name__)

_WHAT = "OpenDocument file"
_READER = "OpenDocument"
_MIMETYPES = {
    "application/vnd.oasis.opendocument.text": "odt",
    "application/vnd.oasis.opendocument.text-template": "odt",
    "application/vnd.oasis.opendocument.presentation": "odp",
    "application/vnd.oasis.opendocument.presentation-template": "odp",
    "application/vnd.oasis.opendocument.spreadsheet": "ods",
    "application/vnd.oasis.opendocument.spreadsheet-template": "ods",
}
_BODY_KINDS = {OFFICE + "text": "odt", OFFICE + "presentation": "odp", OFFICE + "spreadsheet": "ods"}
_SMALL_PART = 16 * 1024 * 1024  # meta.xml, styles.xml and the manifest are read only up to this size
_SNIFF_BYTES = 1 << 20  # content.xml read to tell the kind when there is no mimetype member
_MAX_HIDDEN = 2000  # hidden runs kept per document
NOTES_MARK = "Speaker notes:"  # as rag_core.ingest.loaders.slides marks a PowerPoint slide's notes
_ROW_BAND_CM = 0.635  # shapes whose tops are this close (a quarter inch) are one row, read left to right
# Placeholders repeated on every slide.
_BOILERPLATE = frozenset({"footer", "date-time", "page-number", "header", "page"})
_CHARS_PER_TOKEN = 10  # as rag_core.ingest.chunking: text longer than MAX_PASSAGES * budget * 10 cannot be indexed


class OdfKind(enum.StrEnum):
    """The three OpenDocument kinds DocChat reads (the SourceMeta.kind strings)."""

    ODT = "odt"
    ODP = "odp"
    ODS = "ods"


def _parser() -> etree.XMLParser:
    """No entities, no network, no huge tree (text nodes up to 10 MB, at most 256 elements deep)."""
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False,
                           remove_comments=True, remove_pis=True)


def odf_kind(data: bytes) -> str | None:
    """"odt", "odp" or "ods" for an OpenDocument text, presentation or spreadsheet (from its mimetype member, else
    from what its content.xml's body holds), None for anything else (not a ZIP, a damaged one, other ODF kinds)."""
    if not data.startswith(b"PK"):
        return None
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            if "mimetype" in names and zf.getinfo("mimetype").file_size <= 256:
                # 256 bytes: never more, whatever its header or its compression method says
                mimetype = read_head(data, zf, zf.getinfo("mimetype"), 256).decode("ascii", "replace").strip()
                return _MIMETYPES.get(mimetype)
            if "content.xml" in names:
                return _body_kind(io.BytesIO(read_head(data, zf, zf.getinfo("content.xml"), _SNIFF_BYTES)))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError, KeyError,
            etree.LxmlError) as e:
        log.debug("not an OpenDocument file: %s", e)
    return None


def _body_kind(f: IO[bytes], limit: int | None = None) -> str | None:
    """The kind from the first element inside office:body, reading content.xml only that far (and at most `limit`
    bytes of it)."""
    source: IO[bytes] = io.BytesIO(f.read(limit)) if limit is not None else f
    in_body = False
    try:
        for _, el in etree.iterparse(source, events=("start",), resolve_entities=False, no_network=True,
                                     huge_tree=False, load_dtd=False):
            if in_body:
                return _BODY_KINDS.get(el.tag)
            in_body = el.tag == OFFICE + "body"
    except etree.XMLSyntaxError:
        if limit is None:
            raise
    return None


def check_odf_zip(data: bytes, file_name: str, settings: Settings) -> None:
    """Refuse a broken ZIP, a zip bomb (over settings.max_docx_uncompressed_mb unpacked) or one without content.xml,
    without unpacking anything."""
    check_zip(data, file_name, settings, "content.xml", _WHAT)


def load_odt(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
             progress: Progress | None = None) -> Extracted:
    """Extract an OpenDocument file (text, presentation or spreadsheet: its content decides) in a child process that
    is stopped at `deadline` (IngestTimedOut), see rag_core.ingest.loaders._isolated."""
    check_odf_zip(data, file_name, settings)
    return run_isolated(read_odf, (data, file_name, settings), deadline or Deadline.never(file_name), _READER,
                        progress)


load_odp = load_odt  # the same reader: office:body says whether it holds text, slides or sheets
load_ods = load_odt


def read_odf(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
             progress: Progress | None = None) -> Extracted:
    """`load_odt` in this process, checking `deadline` between blocks, slides and rows."""
    check_odf_zip(data, file_name, settings)
    check_inflated(data, file_name, settings.ingest.max_docx_uncompressed_mb, _WHAT, deadline)
    max_chars = MAX_PASSAGES * settings.ingest.chunk_tokens * _CHARS_PER_TOKEN
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            _refuse_encrypted(zf, file_name)
            styles = Styles()
            styles_root = _small_part(zf, "styles.xml", file_name)
            styles.add_from(styles_root)
            meta_title = _meta_title(_small_part(zf, "meta.xml", file_name))
            with zf.open("content.xml") as f:
                kind = _body_kind(f)
            if kind == OdfKind.ODS:
                with zf.open("content.xml") as f:
                    return read_sheets(f, file_name, settings, choose_title(file_name, meta_title), deadline, progress)
            if kind in (OdfKind.ODT, OdfKind.ODP):
                deadline.check()
                root = etree.fromstring(zf.read("content.xml"), _parser())
                deadline.check()
                styles.add_from(root.find(OFFICE + "automatic-styles"))
                reader = BodyReader(styles, deadline)
                body = root.find(f"{OFFICE}body/{OFFICE}{'text' if kind == OdfKind.ODT else 'presentation'}")
                if body is None:
                    raise NoText(file_name)
                if kind == OdfKind.ODT:
                    blocks: Iterable[Block] = reader.blocks(body)
                else:
                    blocks = _slide_blocks(body, reader, block_budget(settings.ingest.chunk_tokens), progress)
                assembled = assemble(blocks, deadline, max_chars)
                hidden = tuple(reader.hidden[:_MAX_HIDDEN])
            else:
                raise UnsupportedFileType(file_name, "it is an OpenDocument drawing or formula, not text, slides or "
                                                     "a spreadsheet")
    except OverflowError as e:
        raise TooManyPassages(file_name, MAX_PASSAGES) from e
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, EOFError, OSError, ValueError) as e:
        raise CorruptFile(file_name, "the OpenDocument file's ZIP container or content is broken") from e
    except etree.LxmlError as e:
        raise CorruptFile(file_name, "its content could not be parsed as an OpenDocument file") from e
    return _extracted(assembled, kind, meta_title, hidden, file_name)


def _extracted(assembled: Assembled, kind: str, meta_title: str, hidden: tuple[str, ...],
               file_name: str) -> Extracted:
    text = assembled.text
    if not text.strip():
        raise NoText(file_name)
    log.debug("%s: %s, blocks %s", file_name, kind, assembled.stats)
    if kind == OdfKind.ODP:
        titles = [path[0].partition(" — ")[2] for _, path in assembled.heads if " — " in path[0]]
        stats = assembled.stats
        if not titles and stats.get("para", 0) + stats.get("list", 0) + stats.get("table", 0) <= stats.get("slide", 0):
            raise NoText(file_name)  # only "Slide N" lines: no slide has a title or any text
        first_slide_title = titles[0] if titles else ""
        title = choose_title(file_name, meta_title, first_slide_title)
        pages = assembled.page_starts
        return Extracted(text, build_sections(text, assembled.heads), title, len(pages), pages, hidden=hidden)
    title = choose_title(file_name, meta_title, assembled.first_title, heading=assembled.first_heading)
    return Extracted(text, build_sections(text, assembled.heads), title, hidden=hidden)


def _refuse_encrypted(zf: zipfile.ZipFile, file_name: str) -> None:
    """EncryptedFile when the manifest says content.xml is encrypted (a password-protected document)."""
    manifest = _small_part(zf, "META-INF/manifest.xml", file_name)
    if manifest is None:
        return
    for entry in manifest.iter(f"{{{NS['manifest']}}}file-entry"):
        if entry.get(f"{{{NS['manifest']}}}full-path") == "content.xml" and \
                entry.find(f"{{{NS['manifest']}}}encryption-data") is not None:
            raise EncryptedFile(file_name, "LibreOffice")


def _small_part(zf: zipfile.ZipFile, name: str, file_name: str) -> etree._Element | None:
    """A small optional part parsed, or None when it is missing, too large or not XML (logged)."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        return None
    if info.file_size > _SMALL_PART:
        log.info("%s: %s is %d bytes, not read", file_name, name, info.file_size)
        return None
    try:
        return etree.fromstring(zf.read(info), _parser())
    except etree.LxmlError as e:
        log.info("%s: unreadable %s (%s)", file_name, name, e)
        return None


def _meta_title(meta: etree._Element | None) -> str:
    if meta is None:
        return ""
    title = meta.find(f"{OFFICE}meta/{{{NS['dc']}}}title")
    return collapse_ws("".join(title.itertext())) if title is not None else ""


# -- presentations ----------------------------------------------------------------------------------------------------
def _slide_blocks(body: etree._Element, reader: BodyReader, budget: int,
                  progress: Progress | None) -> Iterator[Block]:
    """Per slide: a SLIDE marker and the line "Slide N — <title>", the other shapes in reading order, the notes."""
    pages = list(body.iterchildren(DRAW + "page"))
    for n, page in enumerate(pages, 1):
        reader.deadline.check()
        if progress is not None:
            progress("reading", n - 1, len(pages))
        frames = [f for f in _frames(page) if f.get(PRESENTATION + "class") not in _BOILERPLATE]
        title_frame = next((f for f in frames if f.get(PRESENTATION + "class") == "title"), None)
        title = collapse_ws(" ".join(b.text for b in reader.element(title_frame))) if title_frame is not None else ""
        label = f"Slide {n} — {title}" if title else f"Slide {n}"
        yield Block(BlockKind.SLIDE, label)
        yield Block(BlockKind.PARA, label)
        for frame in _reading_order(f for f in frames if f is not title_frame):
            for block in reader.element(frame):
                if block.kind is BlockKind.TABLE:
                    yield from _table_blocks(block.text, label, budget)
                else:
                    yield Block(BlockKind.PARA, block.text) if block.kind in (BlockKind.HEADING, BlockKind.TITLE) \
                        else block
        notes = page.find(PRESENTATION + "notes")
        if notes is not None:
            texts = [b.text for f in _frames(notes) if f.get(PRESENTATION + "class") == "notes"
                     for b in reader.element(f) if b.text]
            if texts:
                yield Block(BlockKind.PARA, NOTES_MARK + "\n" + "\n".join(texts))


def _table_blocks(text: str, label: str, budget: int) -> Iterator[Block]:
    """A slide's table in blocks that each start with its header row, each a section `label` of its own."""
    lines = [line for line in text.split("\n") if line]
    for rows in header_blocks(lines[0], lines[1:], budget) or [lines[:1]]:
        yield Block(BlockKind.SHEET, label)
        yield Block(BlockKind.TABLE, "\n".join(rows))


def _frames(page: etree._Element) -> Iterator[etree._Element]:
    """The shapes of a slide, without the notes page and thumbnails."""
    for child in page.iterchildren(tag=etree.Element):
        if child.tag.startswith(DRAW) and child.tag != DRAW + "page-thumbnail":
            yield child


def _reading_order(frames: Iterable[etree._Element]) -> list[etree._Element]:
    """Shapes top to bottom; those whose tops are within _ROW_BAND_CM of a row's first one, left to right."""
    by_top = sorted(frames, key=lambda f: (length_cm(f.get(SVG + "y")), length_cm(f.get(SVG + "x"))))
    rows: list[list[etree._Element]] = []
    for frame in by_top:
        if rows and length_cm(frame.get(SVG + "y")) - length_cm(rows[-1][0].get(SVG + "y")) <= _ROW_BAND_CM:
            rows[-1].append(frame)
        else:
            rows.append([frame])
    return [f for row in rows for f in sorted(row, key=lambda f: length_cm(f.get(SVG + "x")))]
