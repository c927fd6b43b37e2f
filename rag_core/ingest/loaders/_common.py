"""Helpers shared by all loaders: text cleaning, section building, titles, ids."""
from __future__ import annotations

import hashlib
import io
import logging
import re
import unicodedata
import zipfile
from collections.abc import Iterable
from pathlib import PurePath, PureWindowsPath
from typing import NamedTuple

from rag_core.core.config import Settings
from rag_core.core.errors import CorruptFile
from rag_core.core.models import Section
from rag_core.core.text import with_article
from rag_core.ingest.loaders._archive import check_members

log = logging.getLogger(__name__)
_MB = 1024 * 1024

# Control characters (except \t and \n), soft hyphens, BOMs, non-characters and lone surrogates:
# none of them carry meaning in extracted text, and some break JSON payloads.
_JUNK_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u00ad\ufeff\ufffe\uffff\ud800-\udfff]")
_NEWLINES_RE = re.compile("\r\n?|[\u2028\u2029\x85]")
_LEADING_BLANK_LINES_RE = re.compile(r"\A(?:[ \t]*\n)+")


class Extracted(NamedTuple):
    """What a format loader hands back to `load_bytes`."""

    text: str
    sections: tuple[Section, ...]
    title: str
    page_count: int | None = None
    page_starts: tuple[int, ...] = ()
    scanned_pages: str = ""  # pages read by OCR, as ranges ("1-3,7"), see SourceMeta.scanned_pages
    hidden: tuple[str, ...] = ()  # runs of text drawn invisibly (see Document.hidden_text)


def check_zip(data: bytes, file_name: str, settings: Settings, required_member: str, what: str) -> list[str]:
    """The member names of a zip-based document (pptx, xlsx, epub, odt…), checked without unpacking anything:
    CorruptFile (one sentence naming `what`, e.g. "PowerPoint file") when the ZIP container is broken, when it would
    unpack to more than settings.max_docx_uncompressed_mb (a zip bomb), when it holds more members than a document
    has (rag_core.ingest.loaders._archive, checked before zipfile reads them), or when `required_member` is missing.
    The sizes checked here are what the headers declare: the reader checks the real ones (`check_inflated`)."""
    check_members(data, file_name, what)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as e:
        raise CorruptFile(file_name, f"the {what}'s ZIP container is broken") from e
    total = sum(max(info.file_size, 0) for info in infos)
    packed = sum(max(info.compress_size, 0) for info in infos)
    limit = settings.ingest.max_docx_uncompressed_mb
    log.debug("%s: %d zip entries, %d bytes packed, %d unpacked", file_name, len(infos), packed, total)
    if total > limit * _MB:
        log.warning("refusing %s: expands to %d bytes (ratio %.0f:1)", file_name, total, total / max(packed, 1))
        raise CorruptFile(file_name, f"it expands to more than {limit} MB when unpacked, more than DocChat allows "
                                     f"for {with_article(what)}")
    names = [info.filename for info in infos]
    if required_member not in names:
        raise CorruptFile(file_name, f"the ZIP archive has no {required_member}, so it is not {with_article(what)}")
    return names


def normalize_newlines(text: str) -> str:
    """Turn every newline convention (\\r\\n, \\r, U+2028, ...) into \\n."""
    return _NEWLINES_RE.sub("\n", text)


def clean_text(text: str) -> str:
    """Normalise newlines, drop control/junk characters (keeping \\n and \\t) and normalise to NFC."""
    text = _JUNK_RE.sub("", normalize_newlines(text))
    if not unicodedata.is_normalized("NFC", text):
        text = unicodedata.normalize("NFC", text)
    return text


def trim_text(text: str) -> str:
    """Drop leading blank lines and trailing whitespace (done before any offset is computed)."""
    return _LEADING_BLANK_LINES_RE.sub("", text).rstrip()


def doc_id_for(data: bytes) -> tuple[str, str]:
    """(doc_id, sha256): the id is the first 16 hex characters of the SHA-256 of the raw bytes."""
    digest = hashlib.sha256(data).hexdigest()
    return digest[:16], digest


def file_stem(file_name: str) -> str:
    """The file name without folders and without its extension ("a/b/Report.v2.pdf" -> "Report.v2")."""
    name = PureWindowsPath(PurePath(file_name).name).name  # strips both / and \\ folders
    stem = PurePath(name).stem if "." in name.lstrip(".") else name
    return stem.strip() or name.strip() or file_name


# A title that names no document: an application's default ("Untitled", "Presentation1", "Book1"), a placeholder
# ("Click to add title") or a style's name ("Heading 1"), whatever the case, spacing or trailing number.
_PLACEHOLDER_TITLE_RE = re.compile(
    r"(?:(?:untitled|new|blank|my)\s*)?(?:(?:microsoft\s+(?:office\s+)?)?(?:word|powerpoint|excel)\s*)?"
    r"(?:untitled|title|subtitle|heading|document|doc|presentation|workbook|worksheet|book|sheet|slide|page|file|"
    r"none|null|unknown|default|click to add title|excel|word)?[\s_-]*\d*", re.IGNORECASE)
# What a program puts around a file's name when it makes that the title: "Microsoft Word - report.docx".
_APP_PREFIX_RE = re.compile(r"^(?:microsoft\s+(?:office\s+)?(?:word|powerpoint|excel)|libreoffice\s+\w+)\s+-\s+",
                            re.IGNORECASE)
_FILE_EXTENSION_RE = re.compile(
    r"\.(?:docx?|pdf|tex|dvi|ps|rtf|odt|odp|ods|pptx?|xlsx?|csv|indd|qxd|txt|md|html?|epub|png|jpe?g|tiff?)$",
    re.IGNORECASE)
_TITLE_LETTER_RE = re.compile(r"[^\W\d_]")
_NUMBERED_HEADING_RE = re.compile(r"^(?:(?:chapter|section|part|kapitel|chapitre|cap[ií]tulo)\s+)?"
                                  r"(?:\d{1,2}(?:\.\d+)*[.):]?(?:\s|$)|[IVXLC]+[.):](?:\s|$))", re.IGNORECASE)
#: The longest heading taken as a document's title; a longer one is a sentence, not a name.
MAX_TITLE_CHARS = 150


# A line that starts like a list item: a bullet glyph (a middle dot, a dash, Symbol's private-use bullet too), or
# "1)", "(a)", "iv)".
_ITEM_START_RE = re.compile(r"^(?:[•◦▪▫‣∙●○■□➢➤✓✔·*\-–—►▸◆♦\uf0b7\uf0a7]|\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,5})\))\s")
# Where a line stops a sentence or a clause; a heading rarely ends like that.
_SENTENCE_END_RE = re.compile(r"[.!?;,]\W*$")


def reads_as_text(text: str) -> bool:
    """A line that is a list item or a sentence whatever its size, never a heading: it starts with a bullet or a list
    number ("•", "1)", "(a)"), ends a sentence or clause after five words or more, runs past 20 words, or lists
    (two commas or more in over ten words)."""
    words = text.split()
    if _ITEM_START_RE.match(text) or len(words) > 20:
        return True
    if len(words) >= 5 and _SENTENCE_END_RE.search(text):
        return True
    return len(words) > 10 and text.count(",") >= 2


def real_title(raw: str, file_name: str) -> str:
    """`raw` (a metadata title), cleaned, when it names the document; "" when it is empty, a placeholder ("Untitled",
    "Presentation1", "Heading 1") or a file name ("Microsoft Word - x.doc", "report_v2_final", the file's own stem).
    "Microsoft Word - Quarterly Report.docx" gives "Quarterly Report"."""
    raw_title = collapse_ws(clean_text(raw))
    title = collapse_ws(_FILE_EXTENSION_RE.sub("", _APP_PREFIX_RE.sub("", raw_title)))
    if not _TITLE_LETTER_RE.search(title) or _PLACEHOLDER_TITLE_RE.fullmatch(title):
        return ""
    one_word = not any(c.isspace() for c in title)
    if one_word and (title != raw_title or "_" in title or "/" in title or "\\" in title or title.count("-") >= 2):
        return ""  # "Microsoft Word - x.doc", "pdf_text_3-pages", "scan-2024-01-03": a file's name, not a title
    if title == file_stem(file_name):
        return ""  # the file's own name copied into its properties: the file name says it already
    return title


def heading_title(heading: str, file_name: str) -> str:
    """A first heading as the document's title: not a numbered chapter or section ("1 Introduction", "2.3 Costs",
    "Chapter 4"), nor longer than MAX_TITLE_CHARS; "" otherwise."""
    heading = collapse_ws(heading)
    if len(heading) > MAX_TITLE_CHARS or _NUMBERED_HEADING_RE.match(heading):
        return ""
    return real_title(heading, file_name)


def choose_title(file_name: str, *candidates: str, heading: str = "") -> str:
    """The document's title: the first of `candidates` (metadata, a Title-style line) that is a real title (see
    real_title); else the file's name when a person wrote it as one ("The Zen of Python.docx"); else the first
    `heading` when it can be a title (see heading_title); else the file's name without its extension."""
    stem = file_stem(file_name)
    named = stem if any(c.isspace() for c in stem) and "_" not in stem and real_title(stem, "") else ""
    found = (real_title(c, file_name) for c in candidates if c)
    return next((t for t in found if t), "") or named or heading_title(heading, file_name) or stem


def collapse_ws(text: str) -> str:
    """Collapse runs of whitespace into single spaces."""
    return " ".join(text.split())


def build_sections(text: str, heads: Iterable[tuple[int, tuple[str, ...]]]) -> tuple[Section, ...]:
    """Sections that tile `text` exactly: one per heading offset, plus a () section for text before the first.

    `heads` are (char offset where the heading line starts, heading path). Offsets outside the text are
    ignored; when several headings start at the same offset the last one wins.
    """
    if not text:
        return ()
    starts: dict[int, tuple[str, ...]] = {}
    for offset, path in heads:
        if 0 <= offset < len(text):
            starts[offset] = tuple(path)
    if 0 not in starts:
        starts[0] = ()
    offsets = sorted(starts)
    sections: list[Section] = []
    for i, start in enumerate(offsets):
        end = offsets[i + 1] if i + 1 < len(offsets) else len(text)
        sections.append(Section(heading_path=starts[start], char_start=start, char_end=end))
    _check_sections(text, sections)
    return tuple(sections)


def _check_sections(text: str, sections: list[Section]) -> None:
    """Internal invariant: sections tile the text in order with non-empty ranges."""
    pos = 0
    for s in sections:
        if s.char_start != pos or s.char_end <= s.char_start:
            raise AssertionError(f"sections do not tile the text at {pos}: {s}")
        pos = s.char_end
    if pos != len(text):
        raise AssertionError("sections do not reach the end of the text")


class HeadingStack:
    """Turns a sequence of (level, title) headings into heading paths."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def push(self, level: int, title: str) -> tuple[str, ...]:
        """Register a heading of `level` (1 = top) and return its full path."""
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, title))
        return tuple(t for _, t in self._stack)


def add_lines(lines: list[str], new: list[str]) -> None:
    """Append `new` to `lines`, skipping an empty line at the start or right after another (Word and ODF tables)."""
    for line in new:
        if line or (lines and lines[-1]):
            lines.append(line)


def flatten_cell(item: str | list[str]) -> str:
    """A table cell's items on one line: a nested table's rows as "a, b; c, d"."""
    return item if isinstance(item, str) else "; ".join(line.replace(" | ", ", ") for line in item if line)
