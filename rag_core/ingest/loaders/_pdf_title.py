"""A PDF's title from the look of its first page: the line(s) in the largest type.

Used when the PDF names no title of its own (no metadata title, no usable first heading): a product sheet saved as
"some-product-spec.pdf" states "Acme Rotor Controller" in large type at its top. The largest size on page 1 must be
clearly larger than the page's body text (a page all in one size has no title this way); the lines in that size are
taken in reading order, joined while they follow each other closely (a title wrapped over two lines); a line that is
repeated on page 2 in the same size (a running header or footer; the title repeated in small type in the running
header of the next pages, as LaTeX sets it, is still the title), a page number, a generic section name ("Contents", "Abstract") or
a sentence is not a title. "" when nothing fits, and the file's name is kept.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import pymupdf

from rag_core.ingest.loaders._common import MAX_TITLE_CHARS, collapse_ws, heading_title, reads_as_text

_FLAGS = pymupdf.TEXT_MEDIABOX_CLIP
TITLE_RATIO = 1.15  # the title's size over the body text's, at least
_SAME_SIZE = 0.6  # points: two lines this close in size are one size (rounding, a bold cut)
_WRAP_GAP = 0.9  # the most space between two lines of one title, in sizes of its type
_MIN_CHARS = 3
_MAX_LINES = 4
_PAGE_NUMBER_RE = re.compile(r"(?:page|seite|p\.)?\s*[\divxlc]+(?:\s*(?:/|of|von)\s*\d+)?", re.IGNORECASE)
_GENERIC_RE = re.compile(r"(?:table of )?contents|abstract|summary|introduction|preface|foreword|index|"
                         r"inhalt(?:sverzeichnis)?|zusammenfassung|einleitung|vorwort|sommaire|r[ée]sum[ée]|"
                         r"[íi]ndice|resumen|contenido", re.IGNORECASE)


@dataclass(frozen=True)
class _Line:
    text: str
    size: float
    top: float
    bottom: float


def _lines(page: pymupdf.Page) -> list[_Line]:
    """The page's lines of text in reading order (top to bottom), each with its largest type size."""
    out: list[_Line] = []
    for block in page.get_text("dict", flags=_FLAGS).get("blocks", []):
        for line in block.get("lines", []):
            spans = [s for s in line.get("spans", []) if s.get("text", "").strip()]
            if spans:
                text = collapse_ws(" ".join(s["text"] for s in spans))
                out.append(_Line(text, max(float(s["size"]) for s in spans), line["bbox"][1], line["bbox"][3]))
    return sorted(out, key=lambda ln: ln.top)


def _body_size(lines: list[_Line]) -> float:
    """The size most of the page's characters are set in."""
    sizes: Counter[float] = Counter()
    for ln in lines:
        sizes[round(ln.size * 2) / 2] += len(ln.text)
    return sizes.most_common(1)[0][0]


def _page_two(doc: pymupdf.Document) -> list[_Line]:
    return _lines(doc[1]) if doc.page_count > 1 else []


def _repeated(doc: pymupdf.Document) -> set[str]:
    """The lines of page 2: one of page 1 that is there too is a running header or footer."""
    return {ln.text for ln in _page_two(doc)}


def _header_of(line: _Line, page_two: list[_Line]) -> bool:
    """`line` (of page 1) is on page 2 too, in the same size: a running header or footer."""
    return any(ln.text == line.text and abs(ln.size - line.size) <= _SAME_SIZE for ln in page_two)


def page_one_title(doc: pymupdf.Document, heading: str, file_name: str) -> str:
    """The title page 1 gives: `heading` (its first heading) when that can be a title and is neither a generic
    section name ("Contents") nor a running header (repeated on page 2); else `largest_type_title`; or ""."""
    text = collapse_ws(heading)
    if heading_title(text, file_name) and not _GENERIC_RE.fullmatch(text) and text not in _repeated(doc):
        return text
    return largest_type_title(doc, file_name)


def largest_type_title(doc: pymupdf.Document, file_name: str) -> str:
    """The title page 1 states in its largest type (see the module's text), or ""."""
    if doc.page_count == 0:
        return ""
    every, page_two = _lines(doc[0]), _page_two(doc)
    lines = [ln for ln in every if not _header_of(ln, page_two) and not _PAGE_NUMBER_RE.fullmatch(ln.text)]
    if not lines:
        return ""
    largest = max(ln.size for ln in lines)
    if largest < _body_size(every) * TITLE_RATIO:
        return ""  # one size throughout: no line stands out as the title
    big = [i for i, ln in enumerate(lines) if ln.size >= largest - _SAME_SIZE]
    title = [lines[big[0]]]
    for ln in lines[big[0] + 1:]:
        if ln.size < largest - _SAME_SIZE or ln.top - title[-1].bottom > _WRAP_GAP * largest \
                or len(title) == _MAX_LINES:
            break
        title.append(ln)
    text = collapse_ws(" ".join(ln.text for ln in title))
    if len(text) < _MIN_CHARS or len(text) > MAX_TITLE_CHARS or _GENERIC_RE.fullmatch(text) or reads_as_text(text):
        return ""
    return heading_title(text, file_name)
