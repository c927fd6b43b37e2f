"""Blocks to text: the assembly shared by the OpenDocument and RTF loaders (the way docx.py joins its blocks).

A reader yields `Block`s in reading order (headings, paragraphs, list items, tables, and markers that open a slide or
a sheet); `assemble` joins them into the document text (list items one per line, other blocks set off by an empty
line) and returns the heading offsets `build_sections` needs and the offsets at which slides begin.
"""
from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders._common import HeadingStack, collapse_ws


class BlockKind(enum.Enum):
    """What a block is; SLIDE and SHEET carry the label of the section they open and add no text."""

    TITLE = "title"  # the document's title line ("Title" style): a section of its own
    HEADING = "heading"
    PARA = "para"
    LIST = "list"  # one list item line, already indented and marked "- "
    TABLE = "table"  # "cell | cell" lines, the header row first
    SLIDE = "slide"  # opens a page and a top-level section
    SHEET = "sheet"  # opens a top-level section


@dataclass(frozen=True)
class Block:
    """One unit of a document in reading order."""

    kind: BlockKind
    text: str
    level: int = 0  # heading level, 1 = top


@dataclass(frozen=True)
class Assembled:
    """The joined text with where its headings and pages begin."""

    text: str
    heads: tuple[tuple[int, tuple[str, ...]], ...]
    page_starts: tuple[int, ...] = ()
    first_title: str = ""  # the first TITLE block
    first_heading: str = ""  # the first HEADING block
    stats: dict[str, int] = field(default_factory=dict)  # blocks per kind (for logs and tests)


def assemble(blocks: Iterable[Block], deadline: Deadline | None = None, max_chars: int | None = None) -> Assembled:
    """Join blocks into text; `deadline` is checked every 256 blocks, and `max_chars` stops the text growing past
    that length (OverflowError, which the caller turns into its own error)."""
    parts: list[str] = []
    heads: list[tuple[int, tuple[str, ...]]] = []
    pages: list[int] = []
    stats: dict[str, int] = {}
    stack = HeadingStack()
    length = 0
    prev_list = False
    first_title = first_heading = ""
    pending: tuple[str, ...] | None = None  # section opened by a SLIDE/SHEET marker, placed at the next text
    for i, block in enumerate(blocks):
        if deadline is not None and not i % 256:
            deadline.check()
        stats[block.kind.value] = stats.get(block.kind.value, 0) + 1
        if block.kind in (BlockKind.SLIDE, BlockKind.SHEET):
            stack = HeadingStack()
            pending = (block.text,)
            if block.kind is BlockKind.SLIDE:
                pages.append(length + (2 if parts else 0))  # where its first block will start
            prev_list = False
            continue
        text = block.text
        if not text:
            continue
        is_list = block.kind is BlockKind.LIST
        if parts:
            sep = "\n" if is_list and prev_list else "\n\n"
            parts.append(sep)
            length += len(sep)
        if pending is not None:
            heads.append((length, pending))
            pending = None
        if block.kind is BlockKind.TITLE:
            stack = HeadingStack()
            label = collapse_ws(text)
            heads.append((length, (label,)))
            first_title = first_title or label
        elif block.kind is BlockKind.HEADING:
            label = collapse_ws(text)
            heads.append((length, stack.push(max(1, block.level), label)))
            first_heading = first_heading or label
        parts.append(text)
        length += len(text)
        if max_chars is not None and length > max_chars:
            raise OverflowError(f"text longer than {max_chars} characters")
        prev_list = is_list
    text = "".join(parts)
    # A slide with no text begins where the text ends (or where the next slide does): never past the end.
    page_starts = tuple(min(p, len(text)) for p in pages)
    return Assembled(text, tuple(heads), page_starts, first_title, first_heading, stats)
