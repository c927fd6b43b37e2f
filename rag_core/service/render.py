"""Display helpers that know nothing about Streamlit: escape untrusted text for Markdown, highlight a quote,
build safe source links, and render a PDF page with a passage highlighted (PyMuPDF)."""
from __future__ import annotations

import logging
import math
import re
import string
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from rag_core.answer.grounding.citations import renumbered
from rag_core.core.formats import FORMATS
from rag_core.core.formats import location_label as location_label  # "slide 3 — Budget", "sheet Budget"
from rag_core.core.formats import page_name as page_name  # "page 3", "slide 3"
from rag_core.core.formats import pages_label as pages_label  # "3 pages", "12 slides"
from rag_core.core.models import Answer, Chunk, DocKind
from rag_core.core.names import printable_text
from rag_core.core.text import plural as plural  # for the pages: "1 page", "3 passages"
from rag_core.core.text import sentences
from rag_core.ingest.originals import KINDS_KEPT
from rag_core.service.page_strips import STRIP_PT, one_wide_line, stacked_png

if TYPE_CHECKING:  # PyMuPDF and Tesseract only when a page is drawn
    from rag_core.core.config import Settings
    from rag_core.ingest.loaders.ocr import OcrOptions

log = logging.getLogger(__name__)

# Every ASCII punctuation character may be backslash-escaped in CommonMark, and an escaped character is always
# literal text. Escaping all of them defuses links, images, HTML, emphasis, lists, headings, tables, LaTeX ($),
# Streamlit's :colour[...] / :material/...: directives and emoji short codes in one rule.
_PUNCT = frozenset(string.punctuation)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
_WS = re.compile(r"\s+")
_MARKER = re.compile(r"\\\[(\d{1,3}(?:(?:\\[,;\-]|–|\s)+\d{1,3})*)\\\]")  # an escaped "[n]", "[1, 3]", "[2-4]"
HIGHLIGHT_COLOR = "orange"  # Streamlit's :orange-background[...] directive
WIKIPEDIA_HOST = re.compile(r"^[a-z][a-z0-9-]{1,30}\.(m\.)?wikipedia\.org$")


# Streamlit renders Markdown with react-markdown + remark-gfm, whose autolink-literal step turns bare "http(s)://…",
# "www.…" and "name@host.tld" into links *after* escapes are resolved, so escaping cannot stop it; an invisible WORD
# JOINER inside each pattern does: between ":" and "/", between "www" and ".", after "@" before a name. Nowhere else,
# so copied text and the reply's **[n]** markers (no joiner may touch their "**") stay as they are.
WORD_JOINER = "\u2060"
_TAIL = 3  # characters of context the joiner rule needs ("www")


def _joiner_before(before: str, ch: str) -> bool:
    """Would an autolink continue at `ch` after `before` (only its last three characters matter)?"""
    if ch == "/":
        return before.endswith(":")
    if ch == ".":
        return before[-_TAIL:].lower() == "www"
    return before.endswith("@") and (ch.isalnum() or ch in "-_")


def defuse_autolinks(text: str) -> str:
    """Break bare URLs and e-mail addresses with an invisible joiner so Markdown shows them as plain text."""
    return "".join(WORD_JOINER + ch if i and _joiner_before(text[max(0, i - _TAIL):i], ch) else ch
                   for i, ch in enumerate(text))


def escape_markdown(text: str, keep_newlines: bool = False) -> str:
    """Untrusted text -> Markdown that renders as exactly that text (inert: no links, images, HTML, formatting); a
    file name's bytes that are not UTF-8 show as U+FFFD (`printable_text`)."""
    text = defuse_autolinks(_CONTROL.sub("", printable_text(text or "")))
    if keep_newlines:
        paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text)]
        text = "\n\n".join(p for p in paragraphs if p)
    else:
        text = _WS.sub(" ", text).strip()
    return "".join("\\" + ch if ch in _PUNCT else ch for ch in text)


class StreamEscaper:
    """Escapes a streamed reply piece by piece: the pieces joined are the whole reply escaped, and an autolink cut
    across pieces ("ww" + "w.evil.example", "https:" + "//…", "me@" + "evil…") is still broken."""

    def __init__(self) -> None:
        self._tail = ""  # the last characters seen (control characters dropped), for the joiner rule

    def feed(self, delta: str) -> str:
        """The escaped Markdown of the next piece: every punctuation character backslash-escaped, line breaks kept
        as hard breaks (so the reply's lists and paragraphs still read as such), autolinks broken."""
        out: list[str] = []
        tail = self._tail
        for ch in _CONTROL.sub("", (delta or "").replace("\r", "")):
            if _joiner_before(tail, ch):
                out.append(WORD_JOINER)
            out.append("\\" + ch if ch in _PUNCT else "  \n" if ch == "\n" else ch)
            tail = (tail + ch)[-_TAIL:]
        self._tail = tail
        return "".join(out)


def escape_stream(text: str) -> str:
    """Character-level escape of a whole text as a stream of one piece (see StreamEscaper for many pieces)."""
    return StreamEscaper().feed(text)


_LIST_ITEM = re.compile(r"^\s*(?:([-*•])|(\d{1,2})[.)])\s+(?=\S)")


#: Shown after a sentence of a reply that its cited passage does not back (Streamlit's badge directive).
UNBACKED_MARK = ":orange-badge[:material/warning: not backed by the cited passage]"
_SLOT = "\ue000"  # a private-use character standing for UNBACKED_MARK while the reply is escaped


def shown_answer(answer: Answer) -> Answer:
    """The answer as a reader sees it (the chat, the export): its sources numbered 1..k in the order they are met,
    the [n] markers of its text renumbered to match (rag_core.answer.grounding.citations.renumbered)."""
    return renumbered(answer)


def reply_markdown(text: str, marked: Iterable[tuple[int, int]] = ()) -> str:
    """A model's reply (untrusted: it echoes documents) as inert Markdown: its lines, bullet and numbered lists
    kept (only the list markers are Markdown), every other character literal, and [n] markers in bold.

    `marked` are (start, end) spans of `text` (e.g. evidence.unbacked_sentences) each followed by UNBACKED_MARK."""
    text = (text or "").replace(_SLOT, "\ufffd")  # same length: the spans still index it
    for end in sorted({e for s, e in marked if 0 <= s < e <= len(text)}, reverse=True):
        text = text[:end] + _SLOT + text[end:]
    lines = []
    text = _CONTROL.sub("", text.replace("\r", ""))
    for line in text.strip().split("\n"):
        m = _LIST_ITEM.match(line)
        if m:
            marker = "- " if m.group(1) else f"{m.group(2)}. "
            lines.append(marker + escape_stream(line[m.end():].rstrip()))
        elif line.strip():
            lines.append(escape_stream(line.strip()) + "  ")
        else:
            lines.append("")
    return _MARKER.sub(lambda m: f"**{m.group(0)}**", "\n".join(lines)).replace(_SLOT, " " + UNBACKED_MARK)


def _trim(text: str, limit: int, from_start: bool) -> str:
    """Cut `text` to about `limit` characters at a word boundary, marking the cut with an ellipsis."""
    if len(text) <= limit:
        return text
    if from_start:  # keep the end (text before a highlight)
        cut = text[-limit:]
        space = cut.find(" ")
        return "…" + (cut[space + 1:] if 0 <= space < 40 else cut)
    cut = text[:limit]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit - 40 else cut) + "…"


def highlight_markdown(text: str, start: int | None, end: int | None, context: int = 180) -> str:
    """Escaped passage with text[start:end] highlighted; long passages are trimmed around the highlight."""
    if start is None or end is None or not (0 <= start < end <= len(text)):
        return escape_markdown(_trim(" ".join(text.split()), 2 * context + 120, from_start=False))
    before = " ".join(text[:start].split())
    quote_ = " ".join(text[start:end].split())
    after = " ".join(text[end:].split())
    before = _trim(before, context, from_start=True)
    after = _trim(after, context, from_start=False)
    parts = []
    if before:
        parts.append(escape_markdown(before) + " ")
    parts.append(f":{HIGHLIGHT_COLOR}-background[**{escape_markdown(quote_)}**]")
    if after:
        parts.append(" " + escape_markdown(after))
    return "".join(parts)


def safe_wikipedia_url(url: str | None, anchor: str | None = None) -> str | None:
    """An https *.wikipedia.org link (with the section anchor when given), or None for anything else."""
    if not url:
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "https" or not WIKIPEDIA_HOST.match(parts.hostname or "") or parts.username or port:
        return None
    path = quote(parts.path, safe="/%:_-.,()'!~")
    link = f"https://{parts.hostname}{path}"
    anchor = anchor or parts.fragment
    if anchor:
        link += "#" + quote(anchor, safe="%:_-.")
    return link


def safe_source_url(chunk: Chunk) -> str | None:
    """The link to a chunk's Wikipedia section, or None if its URL is not a Wikipedia page."""
    return safe_wikipedia_url(chunk.source.url, chunk.anchor)


def link_markdown(label: str, url: str) -> str:
    """A Markdown link with an escaped label; `url` must already be vetted (see safe_source_url)."""
    return f"[{escape_markdown(label)}](<{url.replace('>', '%3E').replace('<', '%3C').replace(' ', '%20')}>)"


# -- PDF pages ----------------------------------------------------------------
def _needles(text: str, words: int = 8, min_chars: int = 4) -> list[str]:
    """Search strings for PyMuPDF: table cells and lines, whole sentences if short, else runs of a few words."""
    out: list[str] = []
    for segment in re.split(r"\s*\|\s*|\n", text):
        for sentence in sentences(" ".join(segment.split())):
            tokens = sentence.split()
            if not tokens:
                continue
            if len(tokens) <= words + 4:
                out.append(sentence)
            else:
                out.extend(" ".join(tokens[i:i + words]) for i in range(0, len(tokens), words)
                           if len(tokens[i:i + words]) >= 3)
    return [n for n in dict.fromkeys(out) if len(n) >= min_chars]


PASSAGE_COLOR = (1.0, 0.93, 0.55)  # light yellow: the whole passage
EVIDENCE_COLOR = (1.0, 0.65, 0.2)  # orange: the cited sentence
CROP_MARGIN_PT = 24
FOCUS_WIDTH_PX, FOCUS_MAX_ZOOM = 1200, 5.0  # the evidence alone ("focus"): drawn this wide, enlarged at most 5x


def _highlight(pg, needles: list[str], color: tuple[float, float, float], textpage: Any = None) -> list:
    """Add highlight annotations for every occurrence of the needles (in `textpage`, e.g. a scan's recognised
    words, else the page's text layer); returns their rectangles."""
    rects: list = []
    for needle in needles:
        quads = pg.search_for(needle, quads=True, textpage=textpage)
        if quads:
            annot = pg.add_highlight_annot(quads)
            annot.set_colors(stroke=color)
            annot.update()
            rects.extend(q.rect for q in quads)
    return rects


def _scan_textpage(pg, text: str, ocr: OcrOptions | None) -> Any:
    """A scanned page's words recognised again (with the loader's helpers and DPI), to find a passage on it; None
    when the page has a text layer, OCR is off or unavailable, or recognition fails. The language is the one the
    passage's own words belong to ("auto"), or the one set."""
    import pymupdf

    from rag_core.ingest.loaders.ocr import (
        AUTO_LANGUAGES,
        MIN_LETTERS,
        OcrOptions,
        detect_language,
        find_tessdata,
        installed_languages,
        ocr_dpi,
        shows_image,
    )

    ocr = ocr or OcrOptions()
    if not ocr.enabled or len(re.findall(r"[^\W\d_]", pg.get_text("text"))) >= MIN_LETTERS or not shows_image(pg):
        return None
    tessdata = find_tessdata()
    installed = installed_languages(tessdata)
    language = ocr.language
    if language == "auto":
        language = detect_language(text, [c for c in AUTO_LANGUAGES if c in installed])[0] or "eng"
    if tessdata is None or any(code not in installed for code in language.split("+")):
        return None
    try:
        return pg.get_textpage_ocr(language=language, dpi=ocr_dpi(pg.rect, ocr.dpi), full=True, tessdata=str(tessdata))
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:
        log.warning("Cannot recognise the scanned page %d to highlight it: %s", pg.number + 1, type(e).__name__)
        return None


MAX_PAGE_PIXELS = 4_000_000
MAX_SPAN_PAGES = 8  # pages of one passage searched for its evidence (a passage spans one or two pages)  # a page image never exceeds 4 megapixels (memory and time stay bounded)


def ocr_options(settings: Settings) -> OcrOptions:
    """How scanned pages are read again to find a passage on them (the settings the loader used)."""
    from rag_core.ingest.loaders.ocr import OcrOptions

    return OcrOptions(settings.ingest.ocr, settings.ingest.ocr_language, settings.ingest.ocr_dpi)


def render_pdf_page(pdf: bytes, page: int, passage: str, evidence: str | None = None, zoom: float = 2.0,
                    crop: bool = True, ocr: OcrOptions | None = None, focus: bool = False) -> bytes | None:
    """PNG of page `page` (1-based) with the passage (light) and the evidence (strong) highlighted.

    Works on an in-memory copy of the PDF. With `crop`, the image is cut to the area around the highlights
    (so a small passage is readable in a narrow column); with `focus` too, around the evidence only, drawn at least
    FOCUS_WIDTH_PX wide, a wide line in stacked strips (rag_core.service.page_strips): readable on a phone. A scanned page (no text layer) is recognised again with
    `ocr` (default: English, 300 dpi, as the loader's defaults) to find the words. Returns None when the page
    cannot be drawn.
    """
    import pymupdf

    try:
        doc = pymupdf.open(stream=pdf, filetype="pdf")
    except (pymupdf.FileDataError, RuntimeError, ValueError) as e:
        log.warning("Cannot open PDF for rendering: %s", e)
        return None
    try:
        if doc.needs_pass or not (1 <= page <= doc.page_count):
            return None
        pg = doc[page - 1]
        textpage = _scan_textpage(pg, evidence or passage, ocr)
        rects = _highlight(pg, _needles(passage, min_chars=6), PASSAGE_COLOR, textpage)
        strong = _highlight(pg, _needles(evidence), EVIDENCE_COLOR, textpage) if evidence else []
        focus, rects = focus and bool(strong), (strong if focus and strong else rects + strong)
        clip = None
        if crop and rects:
            box = pymupdf.Rect(rects[0])
            for r in rects[1:]:
                box |= r
            full = pg.rect
            if box.height < 0.7 * full.height or focus:
                clip = pymupdf.Rect(max(full.x0, box.x0 - CROP_MARGIN_PT), max(full.y0, box.y0 - CROP_MARGIN_PT),
                                    min(full.x1, box.x1 + CROP_MARGIN_PT), min(full.y1, box.y1 + CROP_MARGIN_PT))
        area = (clip or pg.rect).width * (clip or pg.rect).height
        if area <= 0:
            return None
        strips = focus and clip is not None and one_wide_line(clip, box)  # a wide line: in strips, one under another
        if focus and clip is not None:  # the cited words enlarged: readable on a phone
            zoom = max(zoom, min(FOCUS_MAX_ZOOM, FOCUS_WIDTH_PX / max(STRIP_PT if strips else clip.width, 1.0)))
        zoom = min(zoom, math.sqrt(MAX_PAGE_PIXELS / area))  # a huge page is drawn smaller, never bigger than the cap
        try:
            if strips:
                return stacked_png(doc, page - 1, clip, zoom)
            return pg.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), annots=True, clip=clip).tobytes("png")
        except Exception as e:  # noqa: BLE001 - MuPDF raises its own kinds on hostile pages: no image, one log line
            log.warning("Cannot draw page %d: %s", page, type(e).__name__)
            return None
    finally:
        doc.close()


def pdf_page_for(pdf: bytes, text: str, page_start: int | None, page_end: int | None = None,
                 evidence: str | None = None, ocr: OcrOptions | None = None,
                 focus: bool = False) -> tuple[int, bytes] | None:
    """Render the page of a passage (the one holding its evidence when it spans pages) with it highlighted (with
    `focus`: cut to the evidence and enlarged, see render_pdf_page).

    Returns (page number, PNG bytes), or None when the passage has no page or the PDF cannot be drawn.
    """
    if not page_start:
        return None
    pages = list(range(page_start, (page_end or page_start) + 1))
    page = pages[0]
    if evidence and len(pages) > 1:
        import pymupdf

        needles = _needles(evidence)
        try:
            with pymupdf.open(stream=pdf, filetype="pdf") as doc:
                hits = {}
                for p in pages[:MAX_SPAN_PAGES]:
                    if 1 <= p <= doc.page_count:
                        tp = _scan_textpage(doc[p - 1], evidence, ocr)  # a scanned page: its recognised words
                        hits[p] = sum(len(doc[p - 1].search_for(n, textpage=tp)) for n in needles)
        except (pymupdf.FileDataError, RuntimeError, ValueError):
            return None
        if hits and max(hits.values()) > 0:
            page = max(hits, key=lambda p: (hits[p], -p))
    png = render_pdf_page(pdf, page, text, evidence, ocr=ocr, focus=focus)
    return (page, png) if png else None


# -- our own messages and labels -------------------------------------------------
_CODE_SPAN = re.compile(r"(`[^`\n]+`)")
KIND_LABELS = {f.kind.value: f.name for f in FORMATS} | {DocKind.WIKIPEDIA.value: "Wikipedia"}


def message_markdown(text: str) -> str:
    """A DocChat message (which may quote a file name) as Markdown: escaped, except `code` spans stay code."""
    return "".join(part if _CODE_SPAN.fullmatch(part) else escape_stream(part)
                   for part in _CODE_SPAN.split(text or ""))


def kind_label(kind: str) -> str:
    """A document kind for people ("pdf" -> "PDF", "pptx" -> "PowerPoint")."""
    return KIND_LABELS.get(kind, kind.upper() if kind else "Document")


def shows_pages(kind: str) -> bool:
    """Whether a cited page of a document of `kind` can be drawn ("Show on the page"): the kinds whose original is
    kept as a PDF (rag_core.ingest.originals)."""
    return kind in KINDS_KEPT


def date_label(iso: str) -> str:
    """An ISO-8601 timestamp as "29 Nov 2026, 17:55" in the server's local time ("" if unreadable)."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return ""
    if when.tzinfo is not None:
        when = when.astimezone()
    return f"{when.day} {when:%b %Y, %H:%M}"
