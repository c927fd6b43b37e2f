"""E-books (.epub): the spine's documents in reading order, chapters from the book's table of contents as sections,
the title and author from its metadata.

An EPUB is a ZIP: META-INF/container.xml names the package (.opf) holding the metadata, the manifest and the spine;
the table of contents is the EPUB 3 navigation document (<nav epub:type="toc">) or else the EPUB 2 NCX. Each TOC entry
(a document, or a fragment inside one) opens a section whose heading path is the entry's place in the TOC ("Part
One", "Chapter 3"). A book without a usable TOC gets one section per spine document, named by its first <h1>/<h2>,
else "Chapter N". The XML is read with entities and DTDs off and nothing fetched; chapters are turned into text by
rag_core.ingest.loaders._html_text (lists, tables as "cell | cell" rows). Read with the standard library and lxml
rather than EbookLib or PyMuPDF: see docs/formats.md and benchmarks/epub_readers.py for the comparison.
"""
from __future__ import annotations

import io
import logging
import posixpath
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urldefrag

from lxml import etree

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, IngestError, NoText, TooManyPassages, UnsupportedFileType
from rag_core.core.models import Progress
from rag_core.ingest.chunking import MAX_PASSAGES
from rag_core.ingest.loaders._archive import check_inflated
from rag_core.ingest.loaders._blocks import Block, BlockKind
from rag_core.ingest.loaders._common import Extracted, build_sections, check_zip, choose_title, collapse_ws
from rag_core.ingest.loaders._html_text import blocks_of, tag_of
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders.web import decode_html, parse_html

log = logging.getLogger(__name__)

_READER = "EPUB"
_WHAT = "EPUB e-book"
_CONTAINER = "META-INF/container.xml"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
_ENC = "{http://www.w3.org/2001/04/xmlenc#}"
_EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"
_CHAPTER_TYPES = ("application/xhtml+xml", "text/html", "application/xml", "text/xml")
# Obfuscated fonts are "encrypted" in every other EPUB; only encrypted chapters mean DRM.
_FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")
_CHARS_PER_TOKEN = 10  # as rag_core.ingest.chunking: a text longer than MAX_PASSAGES * budget * 10 cannot be indexed
_MAX_TOC = 20_000  # TOC entries read
_MAX_AUTHORS = 3
_XML_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, remove_comments=True,
                              remove_pis=True, huge_tree=False)


@dataclass(frozen=True)
class TocEntry:
    """One entry of the table of contents: the spine document and fragment it points at, and its heading path."""

    path: str
    fragment: str
    heading_path: tuple[str, ...]


@dataclass(frozen=True)
class Package:
    """What the package document says: title, authors, spine documents (zip member names) and the TOC."""

    title: str
    authors: tuple[str, ...]
    spine: tuple[str, ...]
    toc: tuple[TocEntry, ...]


def check_epub_zip(data: bytes, file_name: str, settings: Settings) -> None:
    """Refuse a broken ZIP, a zip bomb (over settings.max_docx_uncompressed_mb unpacked) or one without
    META-INF/container.xml, without unpacking anything."""
    check_zip(data, file_name, settings, _CONTAINER, _WHAT)


def load_epub(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    """Extract an EPUB in a child process that is stopped at `deadline` (IngestTimedOut), see
    rag_core.ingest.loaders._isolated; `progress` gets ("reading", chapter, chapters)."""
    check_epub_zip(data, file_name, settings)
    return run_isolated(read_epub, (data, file_name, settings), deadline or Deadline.never(file_name), _READER,
                        progress)


def read_epub(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
              progress: Progress | None = None) -> Extracted:
    """`load_epub` in this process, checking `deadline` between and inside chapters."""
    check_epub_zip(data, file_name, settings)
    check_inflated(data, file_name, settings.ingest.max_docx_uncompressed_mb, _WHAT, deadline)
    max_chars = MAX_PASSAGES * settings.ingest.chunk_tokens * _CHARS_PER_TOKEN
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            package = read_package(zf, file_name)
            _refuse_drm(zf, package, file_name)
            text, heads = _read_spine(zf, package, file_name, deadline, progress, max_chars)
    except OverflowError as e:
        raise TooManyPassages(file_name, MAX_PASSAGES) from e
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, KeyError) as e:  # a member cut short
        raise CorruptFile(file_name, "a part of the e-book could not be unpacked") from e
    if not text.strip():
        raise NoText(file_name)
    title = choose_title(file_name, package.title)
    if package.authors:
        title = f"{title} — {', '.join(package.authors)}"
    return Extracted(text, build_sections(text, heads), title)


def read_package(zf: zipfile.ZipFile, file_name: str) -> Package:
    """The package document named by META-INF/container.xml: metadata, spine and table of contents."""
    container = _xml(zf, _CONTAINER, file_name)
    rootfile = next((el.get("full-path") for el in container.iter("{*}rootfile") if el.get("full-path")), None)
    if not rootfile:
        raise CorruptFile(file_name, "its META-INF/container.xml names no package document")
    opf = _xml(zf, rootfile, file_name)
    base = posixpath.dirname(rootfile)
    metadata = opf.find(f"{_OPF}metadata")
    title = authors = None
    if metadata is not None:
        title = next((t for t in (_clean(el) for el in metadata.iter(f"{_DC}title")) if t), None)
        names = [n for n in (_clean(el) for el in metadata.iter(f"{_DC}creator")) if n]
        authors = tuple(dict.fromkeys(names))[:_MAX_AUTHORS]
    manifest: dict[str, tuple[str, str, str]] = {}  # id -> (member, media type, properties)
    for item in opf.iter(f"{_OPF}item"):
        href = item.get("href")
        if item.get("id") and href:
            manifest[item.get("id", "")] = (_resolve(base, href), (item.get("media-type") or "").lower(),
                                            item.get("properties") or "")
    spine_el = opf.find(f"{_OPF}spine")
    spine: list[str] = []
    if spine_el is not None:
        for ref in spine_el.iter(f"{_OPF}itemref"):
            member, media, _ = manifest.get(ref.get("idref") or "", ("", "", ""))
            if member and (media in _CHAPTER_TYPES or member.lower().endswith((".xhtml", ".html", ".htm"))):
                spine.append(member)
    toc = _nav_toc(zf, manifest, file_name) or _ncx_toc(zf, manifest, spine_el, file_name)
    in_spine = set(spine)
    return Package(title or "", authors or (), tuple(dict.fromkeys(spine)),
                   tuple(e for e in toc if e.path in in_spine))


def _xml(zf: zipfile.ZipFile, member: str, file_name: str) -> etree._Element:
    """A member parsed as XML (no entities, no DTD, no network); CorruptFile when missing or malformed."""
    try:
        return etree.fromstring(zf.read(member), parser=_XML_PARSER)
    except KeyError as e:
        raise CorruptFile(file_name, f"the e-book names {member}, which it does not contain") from e
    except etree.XMLSyntaxError as e:
        raise CorruptFile(file_name, f"its {posixpath.basename(member)} is not well-formed XML") from e


def _clean(el: etree._Element) -> str:
    return collapse_ws("".join(el.itertext()))


def _resolve(base: str, href: str) -> str:
    """The zip member an href (relative to the folder `base`) points at, without its fragment."""
    path = unquote(urldefrag(href)[0])
    return posixpath.normpath(posixpath.join(base, path)) if path else ""


def _nav_toc(zf: zipfile.ZipFile, manifest: dict[str, tuple[str, str, str]], file_name: str) -> list[TocEntry]:
    """The EPUB 3 navigation document's table of contents (its <nav epub:type="toc">, else its first <nav>)."""
    nav_member = next((m for m, _, props in manifest.values() if "nav" in props.split()), None)
    if not nav_member or nav_member not in zf.namelist():
        return []
    doc = _xhtml(zf.read(nav_member), nav_member, file_name)
    if doc is None:
        return []
    navs = [el for el in doc.iter() if tag_of(el) == "nav"]
    nav = next((n for n in navs if "toc" in (n.get(_EPUB_TYPE) or n.get("epub:type") or "").split()), None)
    nav = nav if nav is not None else (navs[0] if navs else None)
    top = next((el for el in nav.iter() if tag_of(el) in ("ol", "ul")), None) if nav is not None else None
    return list(_nav_entries(top, (), posixpath.dirname(nav_member))) if top is not None else []


def _nav_entries(ol: etree._Element, parents: tuple[str, ...], base: str) -> Iterator[TocEntry]:
    for li in (c for c in ol.iterchildren() if tag_of(c) == "li"):
        label_el = next((c for c in li.iterchildren() if tag_of(c) in ("a", "span")), None)
        label = _clean(label_el) if label_el is not None else ""
        path = (*parents, label) if label else parents
        href = label_el.get("href") if label_el is not None else None
        if href and label:
            yield TocEntry(_resolve(base, href), unquote(urldefrag(href)[1]), path)
        for child in (c for c in li.iterchildren() if tag_of(c) in ("ol", "ul")):
            yield from _nav_entries(child, path, base)


def _xhtml(raw: bytes, member: str, file_name: str) -> etree._Element | None:
    """An XHTML document's tree: parsed as XML (no entities, no DTD, no network), or as HTML when it is not
    well-formed (HTML in an EPUB, or XHTML using HTML's named entities such as &nbsp;); None when unreadable."""
    try:
        return etree.fromstring(raw, parser=_XML_PARSER)
    except etree.XMLSyntaxError:
        pass
    try:
        return parse_html(decode_html(raw, file_name), file_name)
    except IngestError as e:
        log.info("%s: unreadable document %s (%s)", file_name, member, e)
        return None


def _ncx_toc(zf: zipfile.ZipFile, manifest: dict[str, tuple[str, str, str]], spine: etree._Element | None,
             file_name: str) -> list[TocEntry]:
    """The EPUB 2 NCX table of contents (the spine's toc="..." item, else any NCX in the manifest)."""
    ncx_id = spine.get("toc") if spine is not None else None
    member = manifest[ncx_id][0] if ncx_id in manifest else next(
        (m for m, media, _ in manifest.values() if media == "application/x-dtbncx+xml"), None)
    if not member or member not in zf.namelist():
        return []
    try:
        root = _xml(zf, member, file_name)
    except CorruptFile as e:
        log.info("%s: unreadable NCX %s (%s)", file_name, member, e)
        return []
    nav_map = root.find(f"{_NCX}navMap")
    return list(_ncx_entries(nav_map, (), posixpath.dirname(member))) if nav_map is not None else []


def _ncx_entries(parent: etree._Element, parents: tuple[str, ...], base: str) -> Iterator[TocEntry]:
    for point in parent.iterchildren(f"{_NCX}navPoint"):
        label_el = point.find(f"{_NCX}navLabel")
        label = _clean(label_el) if label_el is not None else ""
        content = point.find(f"{_NCX}content")
        src = content.get("src") if content is not None else None
        path = (*parents, label) if label else parents
        if src and label:
            yield TocEntry(_resolve(base, src), unquote(urldefrag(src)[1]), path)
        yield from _ncx_entries(point, path, base)


def _refuse_drm(zf: zipfile.ZipFile, package: Package, file_name: str) -> None:
    """UnsupportedFileType when META-INF/encryption.xml says chapters (not just fonts) are encrypted."""
    if "META-INF/encryption.xml" not in zf.namelist():
        return
    try:
        root = _xml(zf, "META-INF/encryption.xml", file_name)
    except CorruptFile:
        return
    chapters = set(package.spine)
    for data in root.iter(f"{_ENC}EncryptedData"):
        method = data.find(f"{_ENC}EncryptionMethod")
        ref = data.find(f".//{_ENC}CipherReference")
        algorithm = method.get("Algorithm", "") if method is not None else ""
        if ref is not None and algorithm not in _FONT_OBFUSCATION and _resolve("", ref.get("URI", "")) in chapters:
            raise UnsupportedFileType(file_name, "it is an e-book locked with DRM (copy protection), so its text "
                                                 "cannot be read; use a DRM-free copy")


def _read_spine(zf: zipfile.ZipFile, package: Package, file_name: str, deadline: Deadline,
                progress: Progress | None, max_chars: int) -> tuple[str, list[tuple[int, tuple[str, ...]]]]:
    """The text of the spine's documents in order, and where each TOC entry (or, without a TOC, each document)
    begins with its heading path."""
    by_doc: dict[str, list[TocEntry]] = {}
    for entry in package.toc[:_MAX_TOC]:
        by_doc.setdefault(entry.path, []).append(entry)
    parts: list[str] = []
    heads: list[tuple[int, tuple[str, ...]]] = []
    length = chapter = 0
    for n, member in enumerate(package.spine, 1):
        deadline.check()
        if progress is not None:
            progress("reading", n - 1, len(package.spine))
        entries = by_doc.get(member, [])
        blocks, found = _chapter_blocks(zf, member, {e.fragment for e in entries if e.fragment}, file_name, deadline,
                                        max_chars - length)
        if not blocks:
            continue
        chapter += 1
        marks: dict[int, tuple[str, ...]] = {}
        for entry in entries:  # the last entry at a block wins: a nested entry comes after (and names) its parent
            marks[found.get(entry.fragment, 0)] = entry.heading_path
        if not package.toc:
            marks[0] = (_first_heading(blocks) or f"Chapter {chapter}",)
        prev: BlockKind | None = None
        for i, block in enumerate(blocks):
            if parts:
                sep = "\n" if block.kind is BlockKind.LIST and prev is BlockKind.LIST else "\n\n"
                parts.append(sep)
                length += len(sep)
            if i in marks:
                heads.append((length, marks[i]))
            parts.append(block.text)
            length += len(block.text)
            prev = block.kind
            if length > max_chars:
                raise OverflowError(f"text longer than {max_chars} characters")
    if progress is not None:
        progress("reading", len(package.spine), len(package.spine))
    return "".join(parts), heads


def _chapter_blocks(zf: zipfile.ZipFile, member: str, anchors: set[str], file_name: str, deadline: Deadline,
                    max_chars: int) -> tuple[list[Block], dict[str, int]]:
    """The blocks of one spine document (none when it is missing or unreadable: one bad chapter does not lose the
    book) and the block index of each anchor found."""
    try:
        raw = zf.read(member)
    except KeyError:
        log.info("%s: the spine names %s, which is not in the archive", file_name, member)
        return [], {}
    root = _xhtml(raw, member, file_name)
    if root is None:
        return [], {}
    body = next((el for el in root.iter() if tag_of(el) == "body"), root)
    return blocks_of(body, deadline.check, frozenset(anchors), max_chars)  # OverflowError past max_chars


def _first_heading(blocks: list[Block]) -> str:
    """The text of the first <h1> or <h2> of a chapter, "" when it has none."""
    return next((b.text for b in blocks if b.kind is BlockKind.HEADING and b.level <= 2), "")
