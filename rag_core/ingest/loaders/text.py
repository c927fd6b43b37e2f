"""Plain text and Markdown: decoding without ever crashing on bytes, and ATX/setext heading sections."""
from __future__ import annotations

import codecs
import logging
import re

from rag_core.core.deadline import Deadline
from rag_core.core.errors import EmptyFile, UnsupportedFileType
from rag_core.ingest.loaders._common import (
    Extracted,
    HeadingStack,
    build_sections,
    choose_title,
    clean_text,
    collapse_ws,
    file_stem,
    trim_text,
)

log = logging.getLogger(__name__)

_BINARY_DETAIL = "it looks like binary data, not text"
_SNIFF_BYTES = 8192
_SAMPLE_CHARS = 65536
_MAX_BAD_SHARE = 0.08  # control characters / undecodable bytes tolerated in a text sample
_MIN_BAD_CHARS = 16  # ...and a few stray ones in a tiny file do not make it binary

# C0/C1 control characters other than \t \n \v \f \r, plus the replacement character.
_BAD_CHAR_RE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")
# Every pattern here runs in linear time on any line (no nested or lazy repeats that can backtrack over a long one):
# the closing "###" of an ATX heading is stripped in `_atx_heading`, not by the pattern.
_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH_RE = re.compile(r"^ {0,3}(?:[-*+>|]|\d{1,9}[.)])(?:\s|$)|^\s*$|^ {4}")
_LINK_RE = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_EMPHASIS_RE = re.compile(r"(\*\*|__|\*|`)(.+?)\1")
_FRONT_MATTER_TITLE_RE = re.compile(r"^title:(.*)$", re.IGNORECASE)


def decode_text(data: bytes, file_name: str) -> str:
    """Decode bytes to str: BOM-marked UTF-8/16/32, else strict UTF-8, else cp1252; refuse binary data."""
    if data.startswith(codecs.BOM_UTF8):
        text = data[len(codecs.BOM_UTF8):].decode("utf-8", errors="replace")
    elif data.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        text = data.decode("utf-32", errors="replace")
    elif data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
    else:
        encoding = _bomless_utf16(data)
        if encoding:
            text = data.decode(encoding, errors="replace")
        elif b"\x00" in data[:_SNIFF_BYTES]:
            raise UnsupportedFileType(file_name, _BINARY_DETAIL)
        else:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                log.info("%s is not valid UTF-8; decoding it as Windows-1252", file_name)
                text = data.decode("cp1252", errors="replace")
    if _looks_binary(text):
        raise UnsupportedFileType(file_name, _BINARY_DETAIL)
    return text


def _bomless_utf16(data: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' when the NUL bytes sit almost all on one side (mostly-ASCII UTF-16 text)."""
    sample = data[:_SNIFF_BYTES]
    if len(sample) < 4 or len(sample) % 2:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) // 2
    if odd_nuls >= 0.6 * half and even_nuls <= 0.02 * half:
        return "utf-16-le"
    if even_nuls >= 0.6 * half and odd_nuls <= 0.02 * half:
        return "utf-16-be"
    return None


def _looks_binary(text: str) -> bool:
    """True when a sample has too many control characters or undecodable bytes to be real text."""
    sample = text[:_SAMPLE_CHARS]
    if not sample:
        return False
    bad = len(_BAD_CHAR_RE.findall(sample))
    return bad >= _MIN_BAD_CHARS and bad / len(sample) > _MAX_BAD_SHARE


def load_text(data: bytes, file_name: str, kind: str, deadline: Deadline | None = None) -> Extracted:
    """Load a .txt ("txt": one section) or Markdown ("md": sections from headings) file; IngestTimedOut once
    `deadline` has passed (checked between steps and every few thousand lines)."""
    deadline = deadline or Deadline.never(file_name)
    text = decode_text(data, file_name)
    deadline.check()
    text = trim_text(clean_text(text))
    deadline.check()
    if not text.strip():
        raise EmptyFile(file_name)
    if kind == "md":
        heads, title = _markdown_headings(text, deadline)
        return Extracted(text, build_sections(text, heads), choose_title(file_name, title or ""))
    return Extracted(text, build_sections(text, ()), file_stem(file_name))


def _markdown_headings(text: str, deadline: Deadline) -> tuple[list[tuple[int, tuple[str, ...]]], str | None]:
    """Heading offsets and paths of ATX (#) and setext (===/---) headings outside fenced code blocks."""
    heads: list[tuple[int, tuple[str, ...]]] = []
    stack = HeadingStack()
    title: str | None = None
    front_title: str | None = None
    fence: str | None = None
    prev_start, prev_line, para_lines = 0, "", 0
    in_front_matter = text.startswith("---\n")
    pos = 0
    first = True
    for i, line in enumerate(text.split("\n")):
        if not i % 4096:
            deadline.check()
        start, pos = pos, pos + len(line) + 1
        if in_front_matter:
            if not first and line.strip() in ("---", "..."):
                in_front_matter = False
            elif m := _FRONT_MATTER_TITLE_RE.match(line):
                front_title = m.group(1).strip().strip("'\"") or None
            first = False
            para_lines = 0
            continue
        first = False
        if fence is not None:
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            para_lines = 0
            continue
        if m := _FENCE_RE.match(line):
            fence = m.group(1)
            para_lines = 0
            continue
        if m := _ATX_RE.match(line):
            heading = _plain_heading(_atx_heading(line[m.end():]))
            if heading:
                level = len(m.group(1))
                heads.append((start, stack.push(level, heading)))
                if level == 1 and title is None:
                    title = heading
            para_lines = 0
            continue
        if para_lines == 1 and (m := _SETEXT_RE.match(line)):
            heading = _plain_heading(prev_line)
            level = 1 if m.group(1).startswith("=") else 2
            heads.append((prev_start, stack.push(level, heading)))
            if level == 1 and title is None:
                title = heading
            para_lines = 0
            continue
        # Only a one-line paragraph directly above an underline becomes a setext heading (kept simple).
        para_lines = 0 if _NOT_PARAGRAPH_RE.match(line) else para_lines + 1
        prev_start, prev_line = start, line
    return heads, title or front_title


def _atx_heading(rest: str) -> str:
    """The text of an ATX heading line after its opening #s: blanks and a closing run of #s dropped ("a ##" -> "a")."""
    rest = rest.strip(" \t")
    bare = rest.rstrip("#")
    if bare != rest and (not bare or bare[-1] in " \t"):
        return bare.rstrip(" \t")
    return rest


def _plain_heading(raw: str) -> str:
    """Heading text for heading paths: links reduced to their text, emphasis and code marks dropped."""
    text = _EMPHASIS_RE.sub(r"\2", _LINK_RE.sub(r"\1", raw))
    return collapse_ws(text)
