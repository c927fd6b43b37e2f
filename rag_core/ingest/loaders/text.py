"""Plain text and Markdown: decoding without ever crashing on bytes, and ATX/setext heading sections."""
from __future__ import annotations

import logging
import re

from rag_core.core.deadline import Deadline
from rag_core.core.errors import EmptyFile
from rag_core.core.models import DocKind
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
from rag_core.ingest.loaders._decode import decode_text

log = logging.getLogger(__name__)

# Every pattern here runs in linear time on any line (no nested or lazy repeats that can backtrack over a long one):
# the closing "###" of an ATX heading is stripped in `_atx_heading`, not by the pattern.
_ATX_RE = re.compile(r"^ {0,3}(#{1,6})(?=[ \t]|$)")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT_RE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH_RE = re.compile(r"^ {0,3}(?:[-*+>|]|\d{1,9}[.)])(?:\s|$)|^\s*$|^ {4}")
_LINK_RE = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_EMPHASIS_RE = re.compile(r"(\*\*|__|\*|`)(.+?)\1")
_FRONT_MATTER_TITLE_RE = re.compile(r"^title:(.*)$", re.IGNORECASE)


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
    if kind == DocKind.MD:
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
