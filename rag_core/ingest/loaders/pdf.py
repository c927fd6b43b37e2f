"""PDF via PyMuPDF: open safely, running header/footer removal, pages joined, headings from the outline.

Page layout (rows, columns, reading order, paragraphs, font-size headings) lives in _pdf_layout; the lines, rows,
blocks and pages it works on in _pdf_blocks.
"""
from __future__ import annotations

import logging
import math
import re
import threading
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass

import pymupdf

from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, EncryptedFile, IngestTimedOut, NoText, NoTextLayer
from rag_core.core.models import Progress
from rag_core.ingest.loaders._common import (
    Extracted,
    HeadingStack,
    build_sections,
    choose_title,
    clean_text,
    collapse_ws,
)
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders._pdf_blocks import Line, Page, Row, TextBlock
from rag_core.ingest.loaders._pdf_layout import (
    LETTER_RE,
    RTL_RE,
    body_font_size,
    build_rows,
    clean_line,
    font_heading_levels,
    page_paragraphs,
    split_columns,
)
from rag_core.ingest.loaders._pdf_title import page_one_title
from rag_core.ingest.loaders.ocr import (
    MIN_LETTERS,
    OcrOptions,
    Recogniser,
    layer_letters,
    page_ranges,
    shows_image,
    split_at_gutters,
)

log = logging.getLogger(__name__)

# Clip to the media box; no TEXT_PRESERVE_LIGATURES ("ﬁ" -> "fi"); no TEXT_CID_FOR_UNKNOWN_UNICODE
# (unmappable glyphs become U+FFFD instead of random code points); no images (faster).
_FLAGS = pymupdf.TEXT_MEDIABOX_CLIP
MUPDF_LOCK = threading.Lock()
_BOLD = pymupdf.TEXT_FONT_BOLD
_MONO = pymupdf.TEXT_FONT_MONOSPACED
_MONO_FONT_RE = re.compile(r"mono|courier|consol|typewriter|cmtt|nimbusmon|menlo|inconsolata", re.I)
_MAX_RUNNING_ROWS = 2  # header/footer lines peeled from each page edge
_HIDDEN_SIZE = 1.5  # points: text smaller than this cannot be read on the page
_NEAR_WHITE = 0xF0  # every colour channel at least this: white text (the page is assumed white, not checked)
# A word OCR read cleanly enough for a title: two letters or more (a hyphen or apostrophe inside), or "A", "I", "&".
_OCR_WORD_RE = re.compile(r"[^\W\d_]{2,}(?:['’-][^\W\d_]+)*[:,]?|[AaI&]")
_MAX_HIDDEN = 2000  # hidden runs kept per document
_PAGE_WORDS = {"page", "seite", "p", "pg", "página", "pagina", "side", "sida", "strona"}
_NUMBERING_RE = re.compile(
    r"(?:chapter|kapitel|chapitre|section|abschnitt|part|teil|appendix|anhang)?[0-9ivxlcdm]*"
)


@dataclass
class _Para:
    page: int
    start: int
    text: str
    key: str


def load_pdf(data: bytes, file_name: str, deadline: Deadline | None = None, ocr: OcrOptions | None = None,
             progress: Progress | None = None) -> Extracted:
    """Extract a PDF: text in reading order, pages joined by blank lines, sections from outline or fonts; pages
    without a text layer read by OCR (`ocr`, rag_core.ingest.loaders.ocr); read in a child process that is stopped at
    `deadline` (IngestTimedOut), see rag_core.ingest.loaders._isolated; `progress` gets ("ocr", pages done, pages) while
    scanned pages are read."""
    return run_isolated(read_pdf, (data, file_name, ocr), deadline or Deadline.never(file_name), "PDF", progress)


def read_pdf(data: bytes, file_name: str, ocr: OcrOptions | None = None, *, deadline: Deadline,
             progress: Progress | None = None) -> Extracted:
    """`load_pdf` in this process, checking `deadline` between pages."""
    # PyMuPDF is not thread-safe (one global MuPDF context), and Streamlit serves sessions on threads.
    left = deadline.left()
    if not MUPDF_LOCK.acquire(timeout=-1 if left == math.inf else min(left, threading.TIMEOUT_MAX)):
        raise IngestTimedOut(file_name, deadline.seconds)
    try:
        # MuPDF reports repairs and syntax problems on stderr; collect them into the log instead.
        pymupdf.TOOLS.mupdf_display_errors(False)
        pymupdf.TOOLS.mupdf_display_warnings(False)
        pymupdf.TOOLS.reset_mupdf_warnings()
        try:
            return _load_locked(data, file_name, deadline, ocr or OcrOptions(), progress)
        finally:
            warnings = pymupdf.TOOLS.mupdf_warnings(reset=True)
            if warnings:
                log.debug("%s: MuPDF messages: %s", file_name, warnings.replace("\n", "; "))
    finally:
        MUPDF_LOCK.release()


def _load_locked(data: bytes, file_name: str, deadline: Deadline, ocr: OcrOptions, progress: Progress | None
                 ) -> Extracted:
    try:
        doc = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:
        raise CorruptFile(file_name, "it could not be opened as a PDF") from e
    try:
        if doc.needs_pass:
            raise EncryptedFile(file_name)
        if doc.page_count == 0:
            raise CorruptFile(file_name, "the PDF has no pages")
        if doc.is_repaired:
            log.info("%s: damaged PDF structure was repaired while opening", file_name)
        return _extract(doc, file_name, deadline, Recogniser(ocr, file_name, progress))
    except pymupdf.mupdf.FzErrorBase as e:  # found while reading pages: a cycle in the page tree, a broken object
        raise CorruptFile(file_name, "part of the PDF's structure is broken") from e
    finally:
        doc.close()


def _read_pages(doc: pymupdf.Document, file_name: str, deadline: Deadline, reader: Recogniser) -> list[Page]:
    """Every page's text layer; a page without a usable one that shows an image is read by OCR when it can be."""
    pages = []
    scanned: list[tuple[int, pymupdf.Rect]] = []  # pages without a usable text layer that show an image
    for i in range(doc.page_count):
        deadline.check()
        pages.append(_read_page(doc, i, file_name))
        if layer_letters(pages[i]) < MIN_LETTERS and shows_image(pdf_page := doc[i]):
            scanned.append((i, pdf_page.rect))
    if scanned and reader.available:
        for n, (i, _) in enumerate(scanned):  # one page of OCR is the longest step between two checks
            deadline.check()
            reader.check_time([rect for _, rect in scanned[n:]], len(scanned), deadline)  # ScanTooLong: refused now
            textpage = reader.textpage(pdf_page := doc[i], doc.page_count)
            if textpage is not None:
                pages[i] = _read_page(doc, i, file_name, (pdf_page, textpage))
    if reader.pages:
        log.info("%s: %d scanned pages read by OCR (%s) in %.1f s", file_name, len(reader.pages), reader.language,
                 reader.seconds)
    return pages


def _extract(doc: pymupdf.Document, file_name: str, deadline: Deadline, reader: Recogniser) -> Extracted:
    pages = _read_pages(doc, file_name, deadline, reader)
    _remove_running_lines(pages)
    body_size = body_font_size(pages)
    heading_levels = font_heading_levels(pages, body_size)

    parts: list[str] = []
    length = 0
    page_starts: list[int] = []
    paras: list[_Para] = []
    font_heads: list[tuple[int, int, str]] = []  # (offset, level, label)
    for page in pages:
        deadline.check()
        page_texts = page_paragraphs(page, body_size, heading_levels)
        if page_texts and parts:
            parts.append("\n\n")
            length += 2
        page_starts.append(length)
        for i, (text, level) in enumerate(page_texts):
            if i:
                parts.append("\n\n")
                length += 2
            paras.append(_Para(page.index, length, text, _match_key(text)))
            if level is not None:
                font_heads.append((length, level, text))
            parts.append(text)
            length += len(text)
    text = "".join(parts)
    if not text.strip():
        for i in range(doc.page_count):
            deadline.check()
            if doc[i].get_images():
                raise NoTextLayer(file_name, "empty" if reader.pages else "failed" if reader.failed else reader.problem)
        raise NoText(file_name)

    heads = _outline_heads(doc, paras, page_starts, file_name)
    if not heads:
        stack = HeadingStack()
        heads = [(offset, stack.push(level, label)) for offset, level, label in font_heads]
    heading = _first_page_heading(heads, page_starts[1] if len(page_starts) > 1 else len(text), 0 in reader.pages)
    if 0 not in reader.pages:  # not a running header nor "Contents"; else what page 1 states in its largest type
        heading = page_one_title(doc, heading, file_name)
    title = choose_title(file_name, (doc.metadata or {}).get("title") or "", heading=heading)
    hidden = tuple(run for page in pages for run in page.hidden)[:_MAX_HIDDEN]
    if hidden:
        log.info("%s: %d runs of invisible text (white or tiny)", file_name, len(hidden))
    return Extracted(text, build_sections(text, heads), title, doc.page_count, tuple(page_starts),
                     page_ranges(i + 1 for i in reader.pages), hidden)


# ---------------------------------------------------------------- reading a page


def _read_page(doc: pymupdf.Document, index: int, file_name: str,
               ocr: tuple[pymupdf.Page, pymupdf.TextPage] | None = None) -> Page:
    page = Page(index)
    try:
        raw = doc[index].get_text("dict", flags=_FLAGS) if ocr is None else \
            split_at_gutters(ocr[0].get_text("rawdict", textpage=ocr[1]))
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:
        log.warning("%s: page %d could not be read and is skipped (%s)", file_name, index + 1, e)
        return page
    rtl_chars = letters = 0
    for block in raw.get("blocks", ()):
        if block.get("type") != 0:
            continue
        lines: list[Line] = []
        for line in block.get("lines", ()):
            spans = [s for s in line.get("spans", ()) if s.get("text")]
            text = "".join(s["text"] for s in spans)
            if not text.strip():
                continue
            dx, dy = line.get("dir", (1.0, 0.0))
            if abs(dy) > 0.2 or dx < 0:  # rotated or vertical text: keep it, outside the layout analysis
                cleaned = clean_line(text)
                if cleaned:
                    page.rotated.append(cleaned)
                continue
            weights: Counter[float] = Counter()
            for s in spans:
                weights[round(float(s.get("size", 0.0)), 1)] += len(s["text"].strip())
            visible = [s for s in spans if s["text"].strip()]
            bold = ocr is None and all(int(s.get("flags", 0)) & _BOLD for s in visible)
            mono = ocr is None and all(
                int(s.get("flags", 0)) & _MONO or _MONO_FONT_RE.search(str(s.get("font", ""))) for s in visible
            )
            if ocr is None:
                invisible = "".join(s["text"] for s in spans if _invisible(s)).strip()
                if invisible:
                    page.hidden.append(invisible)
            x0, y0, x1, y1 = line["bbox"]
            lines.append(Line(x0, y0, x1, y1, text, weights.most_common(1)[0][0], bold, mono))
            if RTL_RE.search(text):
                rtl_chars += len(RTL_RE.findall(text))
                letters += len(LETTER_RE.findall(text))
            else:
                letters += len(text)  # upper bound is enough: only the RTL share matters
        for column in split_columns(lines):
            # OCR lines are Tesseract's own rows: their boxes overlap, so they are not merged by baseline
            rows = build_rows(column) if ocr is None else [r for line in column for r in build_rows([line])]
            if rows:
                page.blocks.append(TextBlock(rows))
    page.rtl = letters > 0 and rtl_chars > letters / 2
    return page


def _invisible(span: dict) -> bool:
    """A text span a reader cannot see: white (on the page's assumed white background), tiny, or fully transparent.
    Text in render mode 3 (the invisible layer of OCR'd scans) is not counted: it is the page's real text."""
    color = int(span.get("color", 0))
    white = min((color >> 16) & 0xFF, (color >> 8) & 0xFF, color & 0xFF) >= _NEAR_WHITE
    return white or float(span.get("size", 12.0)) < _HIDDEN_SIZE or int(span.get("alpha", 255)) == 0


# ---------------------------------------------------------------- running headers and footers


def _remove_running_lines(pages: list[Page]) -> None:
    """Mark rows repeated at the top or bottom of >= 50% of the pages (min 3), incl. page numbers.

    Rows are peeled from the page edge inwards: the outermost row first, then (only on pages where
    that one was a running line) the next one, so a two-line header goes but body text stays.
    """
    if len(pages) < 3:
        return
    threshold = max(3, math.ceil(0.5 * len(pages)))
    for zone in ("top", "bottom"):
        edge_rows: dict[int, list[Row]] = {}
        for page in pages:
            rows = [r for b in page.blocks for r in b.rows]
            rows.sort(key=(lambda r: r.y0) if zone == "top" else (lambda r: -r.y1))
            edge_rows[page.index] = rows[:_MAX_RUNNING_ROWS]
        active = set(edge_rows)
        for depth in range(_MAX_RUNNING_ROWS):
            candidates = {
                i: rows[depth] for i, rows in edge_rows.items()
                if i in active and depth < len(rows) and len(rows[depth].text) <= 150
            }
            removed = _mark_running(candidates, threshold)
            log.debug("running %s lines (depth %d): removed on %d pages", zone, depth, len(removed))
            active = removed
            if not active:
                break
    rows = [r for page in pages for b in page.blocks for r in b.rows]
    if rows and all(r.removed for r in rows):  # every line repeats (one line a page): it is the text, keep it
        for row in rows:
            row.removed = False


def _mark_running(candidates: dict[int, Row], threshold: int) -> set[int]:
    """Mark candidate rows whose text (digits ignored) or page number repeats; return their pages."""
    key_pages: dict[str, set[int]] = defaultdict(set)
    offset_pages: dict[int, set[int]] = defaultdict(set)
    for index, row in candidates.items():
        key_pages[_running_key(row.text)].add(index)
        for number in _edge_numbers(row.text):
            offset_pages[number - index].add(index)
    repeated = {k for k, found in key_pages.items() if len(found) >= threshold}
    offsets = {o for o, found in offset_pages.items() if len(found) >= threshold}
    removed: set[int] = set()
    for index, row in candidates.items():
        numbered = len(row.text) <= 100 and any(n - index in offsets for n in _edge_numbers(row.text))
        if numbered or _running_key(row.text) in repeated:
            row.removed = True
            removed.add(index)
    return removed


def _running_key(text: str) -> str:
    return collapse_ws(re.sub(r"\d+", "#", text.casefold()))


def _edge_numbers(text: str) -> set[int]:
    """Integers at the very start or end of a row ("12", "- 12 -", "Page 12", "12 / 40")."""
    tokens = text.split()
    if not tokens:
        return set()
    picks = [tokens[0], tokens[-1]]
    if len(tokens) >= 2 and tokens[0].casefold().rstrip(":.") in _PAGE_WORDS:
        picks.append(tokens[1])
    numbers: set[int] = set()
    for tok in picks:
        tok = tok.strip("-–—()[]|·•").split("/")[0]
        if tok.isascii() and tok.isdigit() and len(tok) <= 5:
            numbers.add(int(tok))
    return numbers


# ---------------------------------------------------------------- headings from the outline


def _match_key(text: str) -> str:
    """Text reduced to lower-case letters and digits, for comparing outline titles with paragraphs."""
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", text).casefold())


def _outline_heads(
    doc: pymupdf.Document, paras: list[_Para], page_starts: list[int], file_name: str
) -> list[tuple[int, tuple[str, ...]]]:
    """Headings from the PDF outline, each placed at the paragraph on its page that carries its title."""
    try:
        toc = doc.get_toc(simple=True)
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:
        log.info("%s: unreadable outline (%s)", file_name, e)
        return []
    by_page: dict[int, list[_Para]] = defaultdict(list)
    for para in paras:
        by_page[para.page].append(para)
    stack = HeadingStack()
    heads: list[tuple[int, tuple[str, ...]]] = []
    last = -1
    for entry in toc:
        level, title, page_no = int(entry[0]), collapse_ws(clean_text(str(entry[1]))), int(entry[2])
        key = _match_key(title)
        if not key or not 1 <= page_no <= len(page_starts):
            continue
        hit = next((p for p in by_page[page_no - 1] if p.start > last and _title_matches(p.key, key)), None)
        if hit is not None:
            label = collapse_ws(hit.text) if len(hit.text) <= len(title) + 20 else title
            path = stack.push(level, label)
            heads.append((hit.start, path))
            last = hit.start
        else:
            path = stack.push(level, title)
            start = page_starts[page_no - 1]
            if start > last and by_page[page_no - 1]:
                heads.append((start, path))
                last = start
            log.debug("%s: outline entry %r not found on page %d", file_name, title, page_no)
    return heads


def _title_matches(para_key: str, title_key: str) -> bool:
    """The paragraph is the heading: same words, or the title behind a number ("1.2 Foo" for "Foo")."""
    if para_key == title_key:
        return True
    if para_key.endswith(title_key):
        prefix = para_key[: len(para_key) - len(title_key)]
        return len(prefix) <= 12 and bool(_NUMBERING_RE.fullmatch(prefix))
    return len(title_key) >= 12 and para_key.startswith(title_key)


def _first_page_heading(heads: list[tuple[int, tuple[str, ...]]], page_end: int, scanned: bool = False) -> str:
    """The top heading of page 1 (the highest level there, the first of those) when it can be the title, else "";
    on a scanned page only when every word of it was read cleanly (OCR misreads a running head as "habter H-")."""
    first_page = [path for offset, path in heads if offset < page_end and path]
    top = min((len(path) for path in first_page), default=0)
    heading = next((path[-1] for path in first_page if len(path) == top), "")
    if scanned and not all(_OCR_WORD_RE.fullmatch(word) for word in heading.split()):
        return ""
    return heading
