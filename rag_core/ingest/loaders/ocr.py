"""OCR of scanned PDF pages, offline: PyMuPDF's Tesseract integration, used only for pages without a usable text layer.

`pdf.read_pdf` reads every page's text layer first; a page with (almost) no letters but an image on it is then
recognised here, inside the same child process and deadline as the rest of the file (rag_core.ingest.loaders._isolated), so
DOCCHAT_INGEST_TIMEOUT_S stops a long scan like any other file. Tesseract's language data ("tessdata") is found in
TESSDATA_PREFIX or the usual system folders; without it, or without the language pack asked for, scanned pages cannot
be read and a scan-only file is refused with a sentence saying how to enable OCR (errors.NoTextLayer).

A page is drawn for Tesseract at DOCCHAT_OCR_DPI, or lower when that would pass MAX_OCR_PIXELS (a poster-sized page).
A scan whose pages cannot all be read before the file's deadline is refused early (errors.ScanTooLong): before the
first page when even the least OCR can take is too long, else as soon as the pace of the pages read says so.
"""
from __future__ import annotations

import glob
import logging
import math
import os
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import pymupdf

from rag_core.core.deadline import Deadline
from rag_core.core.errors import ScanTooLong
from rag_core.core.models import Progress
from rag_core.core.text import TOKEN_RE
from rag_core.ingest.loaders._pdf_blocks import Page
from rag_core.ingest.loaders._pdf_layout import LETTER_RE
from rag_core.ingest.loaders._tesseract import tessdata_beside_program

log = logging.getLogger(__name__)

#: The progress stage while scanned pages are read ("Reading scanned pages (OCR)"): (STAGE, page, pages).
STAGE = "ocr"
#: A page whose text layer holds fewer letters than this (and that shows an image) is read by OCR.
MIN_LETTERS = 20
#: The most pixels a page is drawn with for Tesseract: A4 or Letter at 600 dpi, the highest DOCCHAT_OCR_DPI. A larger
#: page (a poster, a plan, a scan whose page size says metres) is read at the resolution that fits: at 300 dpi MuPDF
#: refuses to draw a page of PDF's largest size, 14,400 pt ("Overly large image": billions of pixels).
MAX_OCR_PIXELS = 36_000_000
#: The least OCR takes per megapixel drawn: a third of what a blank A4 page at 300 dpi took on the 2-core test
#: machine (0.6 s for 8.7 MP); pages with text took 1-12 s there. Refuses a scan that cannot fit before any OCR.
LEAST_S_PER_MEGAPIXEL = 0.02
#: ... plus at least this much a page whatever its size (a blank 15 x 15 pt page took 0.04 s here, and an image's
#: page 0.017 s more to be made): 3,000 frames of a tiny TIFF are refused at once, not after a minute of work.
LEAST_S_PER_PAGE = 0.03
#: The languages "auto" chooses from (those of them whose pack is installed); the Makefile installs these five.
AUTO_LANGUAGES = ("eng", "deu", "fra", "spa", "ara")
_TESSDATA_GLOBS = ("/usr/share/tesseract-ocr/*/tessdata", "/usr/share/tessdata", "/usr/local/share/tessdata",
                   "/opt/homebrew/share/tessdata", "/usr/local/share/tesseract-ocr/*/tessdata")
# Frequent short words per language: a few hits are enough to tell these five apart on one page.
_COMMON_WORDS: dict[str, frozenset[str]] = {
    "eng": frozenset([
        "the", "of", "and", "to", "in", "is", "that", "it", "was", "for", "on", "are", "with", "as", "by", "be", "this",
        "at", "from", "or", "an", "have", "not", "which", "his", "her", "he", "they", "you", "we"
    ]),
    "deu": frozenset([
        "der", "die", "und", "das", "ist", "nicht", "mit", "den", "von", "zu", "des", "sich", "auf", "für", "ein",
        "eine", "im", "dem", "auch", "es", "wird", "werden", "sind", "nach", "bei", "oder", "wie", "aus"
    ]),
    "fra": frozenset([
        "le", "la", "les", "et", "des", "est", "une", "un", "du", "dans", "en", "que", "qui", "pour", "pas", "sur",
        "au", "avec", "il", "elle", "sont", "ce", "par", "plus", "ne", "de", "aux"
    ]),
    "spa": frozenset([
        "el", "la", "los", "las", "y", "de", "que", "en", "del", "se", "por", "con", "una", "un", "para", "es", "no",
        "su", "al", "lo", "como", "más", "pero", "sus"
    ]),
    "ara": frozenset([
        "في", "من", "على", "إلى", "عن", "أن", "التي", "الذي", "هذا", "هذه", "مع", "كان", "لا", "ما", "هو", "هي", "و",
        "أو"
    ]),
}
#: A gap wider than this many font sizes between two words of an OCR line is a column gutter.
GUTTER_EM = 1.0
#: Two recognised lines this close (in font sizes) are lines of one block (see join_stacked_blocks); a wider gap is
#: left to the layout analysis, which ends a paragraph past 0.9 sizes.
JOIN_GAP_EM = 0.9
#: A recognised line this much larger than the page's body text is a heading: never joined to the lines around it.
HEADING_RATIO = 1.2
_JUNK_RE = re.compile(r"[\W_]{1,2}")  # one or two marks: maybe specks of the scan
# What Tesseract reads a list's bullet as, before the item's first word: marks it never starts a sentence with...
_BULLET_MARKS = frozenset("•·∙●○◦▪■□¢°*+@")
# ...and marks, letters or digits that can begin a line of text too ("© Oxford", "« Oui »") or are no word of their
# own there ("e Each", "0 One", "o Optional"): a bullet only before a capital where a new item starts (first line of
# its block, after a finished sentence, or set apart by a gap), and a guillemet only when the line has no other.
_BULLET_LOOKALIKES = frozenset({"©", "®", "«", "»", "e", "o", "O", "0", "c", "eo", "oe", "ee", "°e"})
_CLAUSE_END = ".!?:;"
#: The gap after a look-alike bullet ("e", "0"), in font sizes, that sets it apart from the item's first word.
BULLET_GAP_EM = 0.6
_MIN_COMMON_SHARE = 0.05  # below this share of common words the sample is not text in that language


class OcrOptions(NamedTuple):
    """How scanned pages are read (from Settings: DOCCHAT_OCR, DOCCHAT_OCR_LANGUAGE, DOCCHAT_OCR_DPI)."""

    enabled: bool = True
    language: str = "eng"  # Tesseract language codes joined by "+", or "auto"
    dpi: int = 300


def ocr_dpi(rect: pymupdf.Rect, dpi: int) -> int:
    """The resolution a page of `rect` (points) is drawn at for OCR: `dpi`, lowered so it has at most MAX_OCR_PIXELS."""
    inches = max(abs(rect.width * rect.height), 1.0) / 72**2
    return max(1, min(dpi, int(math.sqrt(MAX_OCR_PIXELS / inches))))


def ocr_megapixels(rect: pymupdf.Rect, dpi: int) -> float:
    """Megapixels of a page of `rect` drawn for OCR (at `ocr_dpi`)."""
    return abs(rect.width * rect.height) * (ocr_dpi(rect, dpi) / 72) ** 2 / 1e6


def find_tessdata() -> Path | None:
    """Tesseract's language-data folder: TESSDATA_PREFIX when set (and only it), else the first usual system folder
    that has language packs, else the one beside a Tesseract program (Homebrew, the Windows installer); None when
    there is none."""
    given = os.environ.get("TESSDATA_PREFIX")
    candidates = [given] if given else [
        folder for pattern in _TESSDATA_GLOBS for folder in sorted(glob.glob(pattern), reverse=True)]
    if not given:
        candidates += tessdata_beside_program()
    for folder in candidates:
        if folder and any(Path(folder).glob("*.traineddata")):
            return Path(folder)
    return None


def installed_languages(tessdata: Path | None) -> frozenset[str]:
    """The language packs in `tessdata` ("eng", "deu", ...; "osd" is not a language)."""
    if tessdata is None:
        return frozenset()
    return frozenset(p.name.removesuffix(".traineddata") for p in tessdata.glob("*.traineddata")) - {"osd"}


def detect_language(text: str, candidates: Iterable[str]) -> tuple[str | None, float]:
    """The candidate whose common words make up the largest share of `text`'s words, with that share."""
    words = [w.casefold() for w in TOKEN_RE.findall(text) if not w.isdigit()]
    if not words:
        return None, 0.0
    best, share = None, 0.0
    for lang in candidates:
        common = _COMMON_WORDS.get(lang)
        if common:
            s = sum(w in common for w in words) / len(words)
            if s > share:
                best, share = lang, s
    return best, share


def page_ranges(pages: Iterable[int]) -> str:
    """1-based page numbers as compact ranges: [1, 2, 3, 7] -> "1-3,7"."""
    out: list[str] = []
    run: list[int] = []
    for p in sorted(set(pages)):
        if run and p == run[-1] + 1:
            run.append(p)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [p]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def split_at_gutters(raw: dict) -> dict:
    """Tesseract's lines (PyMuPDF "rawdict") cut where a gap of over GUTTER_EM font sizes separates two words, in the
    "dict" layout (one span per word): a line running across a column gutter becomes one line per column, so the
    layout analysis can split the columns. A lone mark in a gap that no other line of the block has a word in (a
    speck in the gutter read as "_", "|" or "—") is dropped."""
    blocks = []
    for block in raw.get("blocks", ()):
        if block.get("type") != 0:
            continue
        lines: list[dict] = []
        block_lines = [(line, _words(line)) for line in block.get("lines", ())]
        for line, words in block_lines:
            others = [o for other, found in block_lines if other is not line for o in found
                      if not _JUNK_RE.fullmatch(o.text)]
            after = lines[-1]["spans"][-1]["text"] if lines and lines[-1]["spans"] else ""
            words = bullet_fixed(words, first=not lines, after=after)
            kept = [w for i, w in enumerate(words) if w.text == "•" and not i or not (  # a speck of the scan read as
                _JUNK_RE.fullmatch(w.text)  # a mark, in an empty gutter
                and (words[i + 1].x0 if i + 1 < len(words) else math.inf) - (words[i - 1].x1 if i else -math.inf)
                > GUTTER_EM * max(w.size, 1.0)
                and not any(o.x0 < w.x1 and w.x0 < o.x1 for o in others))]
            pieces: list[list[_Word]] = []
            for i, word in enumerate(kept):
                if not pieces or (word.x0 - kept[i - 1].x1 > GUTTER_EM * max(word.size, 1.0)
                                  and not (i == 1 and kept[0].text == "•")):
                    pieces.append([])
                pieces[-1].append(word)
            for piece in pieces:
                spans = [{"text": (" " if i else "") + w.text, "size": w.size, "flags": 0, "font": "ocr"}
                         for i, w in enumerate(piece)]
                bbox = (piece[0].x0, min(w.y0 for w in piece), piece[-1].x1, max(w.y1 for w in piece))
                lines.append({"dir": line.get("dir", (1.0, 0.0)), "bbox": bbox, "spans": spans})
        blocks.append({"type": 0, "lines": lines})
    return {"blocks": join_stacked_blocks(blocks)}


def bullet_fixed(words: list[_Word], first: bool, after: str) -> list[_Word]:
    """An OCR line whose first "word" is a list bullet misread ("e", "¢", "«", "°", "©", "0"...) before a capitalised
    word, with that bullet written as "•"; other lines unchanged. A look-alike letter or digit counts only where an
    item can start: on the first line of its block (`first`), after a line that ends a sentence (`after`, the last
    word before), or set apart by a gap of BULLET_GAP_EM; a real word ("a", "A", "I") never counts."""
    if len(words) < 2 or not words[1].text[:1].isupper():
        return words
    mark, nxt = words[0], words[1]
    if mark.text in ("«", "»") and any(q in w.text for w in words[1:] for q in "«»"):
        return words  # a quotation: « Oui », »Ja«
    if mark.text not in _BULLET_MARKS and not (mark.text in _BULLET_LOOKALIKES and (
            first or after.rstrip()[-1:] in _CLAUSE_END or nxt.x0 - mark.x1 >= BULLET_GAP_EM * max(mark.size, 1.0))):
        return words
    return [mark._replace(text="•"), *words[1:]]


def join_stacked_blocks(blocks: list[dict]) -> list[dict]:
    """Recognised blocks joined again where one's first line sits right under the other's last: MuPDF starts a new
    block for a line whose estimated size differs ("at dawn." has no tall letters), which cut a sentence into two
    paragraphs. A block is joined to the one before when its first line starts under that block's last line (left
    edges within two sizes), less than JOIN_GAP_EM sizes below it, and neither line is larger than the page's body
    text (a heading keeps its own block)."""
    sizes = sorted(float(s.get("size", 0.0)) for b in blocks for line in b["lines"] for s in line["spans"][:1])
    body = sizes[len(sizes) // 2] if sizes else 0.0
    out: list[dict] = []
    for block in blocks:
        prev = out[-1]["lines"][-1] if out and out[-1]["lines"] and block["lines"] else None
        if prev is not None:
            first = block["lines"][0]
            (px0, _, px1, py1), (fx0, fy0, fx1, _) = prev["bbox"], first["bbox"]
            size = max(_line_size(prev), _line_size(first), 1.0)
            if (0 <= fy0 - py1 < JOIN_GAP_EM * size and abs(fx0 - px0) < 2 * size and fx0 < px1 and px0 < fx1
                    and max(_line_size(prev), _line_size(first)) <= HEADING_RATIO * body):
                out[-1] = {"type": 0, "lines": out[-1]["lines"] + block["lines"]}
                continue
        out.append(block)
    return out


def _line_size(line: dict) -> float:
    return max((float(s.get("size", 0.0)) for s in line["spans"]), default=0.0)


class _Word(NamedTuple):
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float


def _words(line: dict) -> list[_Word]:
    """The words of a rawdict line, with their boxes, left to right."""
    words: list[_Word] = []
    current: list[tuple[dict, float]] = []

    def flush() -> None:
        if current:
            boxes = [c["bbox"] for c, _ in current]
            words.append(_Word(min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes),
                               max(b[3] for b in boxes), "".join(c["c"] for c, _ in current), current[0][1]))
            current.clear()

    for span in line.get("spans", ()):
        for char in span.get("chars", ()):
            if char["c"].isspace():
                flush()
            else:
                current.append((char, float(span.get("size", 0.0))))
    flush()
    return sorted(words, key=lambda w: w.x0)


def layer_letters(page: Page) -> int:
    """Letters in a page's text layer (running headers included): fewer than MIN_LETTERS is no usable text."""
    rows = sum(len(LETTER_RE.findall(r.text)) for b in page.blocks for r in b.rows)
    return rows + sum(len(LETTER_RE.findall(t)) for t in page.rotated)


def shows_image(page: pymupdf.Page) -> bool:
    """The page draws at least one image (a scan is one image per page)."""
    try:
        return bool(page.get_images())
    except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase):
        return False


class Recogniser:
    """Reads scanned pages of one file; checks once, on the first scanned page, that Tesseract and the language pack
    are there (`problem` says what is missing, for the refusal sentence)."""

    def __init__(self, options: OcrOptions, file_name: str, progress: Progress | None = None) -> None:
        self.options = options
        self.file_name = file_name
        self.progress = progress
        self.problem: str | None = None if options.enabled else "off"
        self.language: str | None = None if options.language == "auto" else options.language
        self._tessdata: Path | None = None
        self._checked = not options.enabled
        self._told = False
        self.pages: list[int] = []  # 0-based indexes of the pages read by OCR
        self.failed: list[int] = []  # ... and of those OCR could not read (an error from MuPDF or Tesseract)
        self.seconds = 0.0
        self.passes = 0  # Tesseract runs: one a page, two or three for the page "auto" chooses the language on

    @property
    def available(self) -> bool:
        """Tesseract and the needed language pack(s) are installed, and OCR is on."""
        if not self._checked:
            self._checked = True
            self._tessdata = find_tessdata()
            installed = installed_languages(self._tessdata)
            if not installed:
                self.problem = "no-tesseract"
            elif self.language is not None:
                missing = [code for code in self.language.split("+") if code not in installed]
                if missing:
                    self.problem = "no-language:" + "+".join(missing)
            elif "eng" not in installed:
                self.problem = "no-language:eng"  # "auto" reads its sample in English
        if self.problem is not None and not self._told:
            self._told = True
            log.log(logging.INFO if self.problem == "off" else logging.WARNING,
                    "%s: scanned pages are skipped (OCR: %s)", self.file_name, self.problem)
        return self.problem is None

    def textpage(self, page: pymupdf.Page, pages: int) -> pymupdf.TextPage | None:
        """The page's text recognised by Tesseract (None when recognition failed: the page is skipped); reports
        (STAGE, page number, `pages`) before and after."""
        if self.progress is not None:
            self.progress(STAGE, page.number, pages)
        started = time.monotonic()
        try:
            if self.language is None:
                textpage = self._detect(page)
            else:
                textpage = self._ocr(page, self.language)
        except (RuntimeError, ValueError, pymupdf.mupdf.FzErrorBase) as e:
            log.warning("%s: page %d could not be read by OCR and is skipped (%s)", self.file_name, page.number + 1, e)
            self.failed.append(page.number)
            return None
        finally:
            self.seconds += time.monotonic() - started
        self.pages.append(page.number)
        if self.progress is not None:
            self.progress(STAGE, page.number + 1, pages)
        return textpage

    def check_time(self, todo: Sequence[pymupdf.Rect], pages: int, deadline: Deadline) -> None:
        """Raise ScanTooLong now when the scanned pages still to read (`todo`, their sizes; `pages` in all) cannot be
        read before `deadline`: before the first one by the least OCR takes (LEAST_S_PER_PAGE and LEAST_S_PER_MEGAPIXEL), then at the
        pace of the pages read so far."""
        left = deadline.left()
        if not todo or left == math.inf:
            return
        at_least = self.passes == 0
        if at_least:
            needed = sum(LEAST_S_PER_PAGE + LEAST_S_PER_MEGAPIXEL * ocr_megapixels(rect, self.options.dpi)
                         for rect in todo)
        else:
            needed = len(todo) * self.seconds / self.passes
        if needed > left:
            per_page = (self.seconds + needed) / pages
            log.info("%s: %d scanned pages would take %s%.0f s of OCR, %.0f s are left: refused", self.file_name,
                     pages, "at least " if at_least else "", self.seconds + needed, left)
            raise ScanTooLong(self.file_name, pages, self.seconds + needed, deadline.seconds, per_page, at_least)

    def _ocr(self, page: pymupdf.Page, language: str) -> pymupdf.TextPage:
        self.passes += 1
        return page.get_textpage_ocr(language=language, dpi=ocr_dpi(page.rect, self.options.dpi), full=True,
                                     tessdata=str(self._tessdata))

    def _detect(self, page: pymupdf.Page) -> pymupdf.TextPage:
        """"auto": read the first scanned page in English, pick the language its words belong to, read it again in
        that language when it is another one (Arabic is tried when no Latin-script language fits)."""
        installed = installed_languages(self._tessdata)
        candidates = [code for code in AUTO_LANGUAGES if code in installed]
        textpage = self._ocr(page, "eng")
        lang, share = detect_language(page.get_text("text", textpage=textpage), [c for c in candidates if c != "ara"])
        if (lang is None or share < _MIN_COMMON_SHARE) and "ara" in candidates:
            arabic = self._ocr(page, "ara")
            _, ara_share = detect_language(page.get_text("text", textpage=arabic), ["ara"])
            if ara_share >= _MIN_COMMON_SHARE and ara_share > share:
                lang, textpage = "ara", arabic
        self.language = lang if lang is not None and (share >= _MIN_COMMON_SHARE or lang == "ara") else "eng"
        log.info("%s: scanned pages read as %s (common-word share %.2f)", self.file_name, self.language, share)
        if self.language not in ("eng", "ara"):
            textpage = self._ocr(page, self.language)
        return textpage
