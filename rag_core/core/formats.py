"""The kinds of file DocChat reads, in one table: the upload box, the command line, the MCP tool, the error messages
and the README's list all come from FORMATS, and `location_label` says where a passage is in the words of its kind
("slide 3 — Budget", "sheet Budget", "chapter Two"). The loaders (rag_core.ingest.loaders) decide a file's kind from
its content."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from rag_core.core.models import Chunk, DocKind


@dataclass(frozen=True)
class Format:
    """One kind of file DocChat reads."""

    kind: DocKind
    name: str  # for people, in the library list: "PowerPoint"
    family: str  # in lists of accepted kinds, before "file": "a PowerPoint file", "an image file"
    extensions: tuple[str, ...]  # lower case, with the dot; the usual one first
    page: str = "page"  # what one of its pages is called in a source's location ("slide 3")
    section: str = "section"  # what one of its sections is called ("sheet Budget", "chapter Two")


FORMATS: tuple[Format, ...] = (
    Format(DocKind.PDF, "PDF", "PDF", (".pdf",)),
    Format(DocKind.DOCX, "Word", "Word", (".docx",)),
    Format(DocKind.PPTX, "PowerPoint", "PowerPoint", (".pptx",), page="slide"),
    Format(DocKind.XLSX, "Excel", "Excel", (".xlsx",), section="sheet"),
    Format(DocKind.CSV, "CSV", "CSV", (".csv", ".tsv"), section="sheet"),
    Format(DocKind.HTML, "Web page", "web page", (".html", ".htm")),
    Format(DocKind.EPUB, "EPUB", "EPUB", (".epub",), section="chapter"),
    Format(DocKind.ODT, "OpenDocument text", "OpenDocument", (".odt",)),
    Format(DocKind.ODP, "OpenDocument presentation", "OpenDocument", (".odp",), page="slide"),
    Format(DocKind.ODS, "OpenDocument spreadsheet", "OpenDocument", (".ods",), section="sheet"),
    Format(DocKind.RTF, "RTF", "RTF", (".rtf",)),
    Format(DocKind.IMAGE, "Image", "image", (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")),
    Format(DocKind.TXT, "Text", "text", (".txt",)),
    Format(DocKind.MD, "Markdown", "Markdown", (".md", ".markdown")),
)
_BY_KIND = {f.kind.value: f for f in FORMATS}
_BY_EXTENSION = {ext: f for f in FORMATS for ext in f.extensions}

#: Every file name ending DocChat reads (".pdf", ".pptx", ...), for upload boxes and folder walks.
ACCEPTED_EXTENSIONS: tuple[str, ...] = tuple(_BY_EXTENSION)


def format_of(kind: str) -> Format | None:
    """The format of a document kind ("pptx"), or None (Wikipedia articles, unknown kinds)."""
    return _BY_KIND.get(kind)


def format_for_name(file_name: str) -> Format | None:
    """The format a file's name claims by its extension (case-insensitive), or None."""
    return _BY_EXTENSION.get(PurePath(file_name).suffix.lower())


def accepted_kinds(extensions: bool = False, last: str = "or") -> str:
    """The accepted kinds as a phrase for a sentence: "PDF, Word, …, text or Markdown" (each family once), with each
    family's extensions in brackets when `extensions` ("PDF (.pdf), Word (.docx), …")."""
    families: dict[str, list[str]] = {}
    for f in FORMATS:
        families.setdefault(f.family, []).extend(f.extensions)
    items = [f"{family} ({', '.join(exts)})" if extensions else family for family, exts in families.items()]
    return f"{', '.join(items[:-1])} {last} {items[-1]}"


# "Slide 3 — Budget", a slide's own heading: its number is what the location already says.
_SLIDE_HEADING = re.compile(r"^Slide \d+\s*(?:[—–-]\s*)?")


def page_name(kind: str, page: int) -> str:
    """A page of a document of `kind` for people: "page 3", or "slide 3" in a presentation."""
    fmt = format_of(kind)
    return f"{fmt.page if fmt else 'page'} {page}"


def location_label(chunk: Chunk) -> str:
    """Where in its document a chunk sits, for people, in the words of its kind: "page 3", "pages 3–4, section Foo ›
    Bar", "slide 3 — Budget", "sheet Budget", "chapter Two" or ""."""
    fmt = format_of(chunk.source.kind)
    page, section = (fmt.page, fmt.section) if fmt else ("page", "section")
    heading = list(chunk.heading_path)
    bits = []
    if chunk.page_start:
        if chunk.page_end and chunk.page_end != chunk.page_start:
            bits.append(f"{page}s {chunk.page_start}–{chunk.page_end}")
        else:
            bits.append(f"{page} {chunk.page_start}")
        if page == "slide" and heading:  # the slide's own heading: its title after the number the label says
            title = _SLIDE_HEADING.sub("", heading[0], count=1)
            heading = ([title] if title else []) + heading[1:]
            if heading:
                return f"{bits[0]} — {' › '.join(heading)}"
    if heading:
        bits.append(f"{section} {' › '.join(heading)}")
    return ", ".join(bits)


def pages_label(kind: str, pages: int) -> str:
    """How long a document is, in its own unit: "3 pages", "12 slides"."""
    fmt = format_of(kind)
    return f"{pages} {fmt.page if fmt else 'page'}{'' if pages == 1 else 's'}"
