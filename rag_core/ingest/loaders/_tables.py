"""Table rows as text, cut into blocks that each start with the table's header row and fit one passage.

A row is one line, "cell | cell | cell" (as docx.py and pdf.py write tables). Chunking never joins two sections and
cuts a long section between lines, so a table longer than a passage would leave its later rows without their header;
`header_blocks` cuts the rows into blocks of about a passage each, every block starting with the header line, and
the loader makes each block a section of its own. Then every passage of a table holds its header, and a quoted row
(rag_core.answer.grounding.quotes reads a run of "|" lines as a table whose first line is the header) shows it:
"Item | Budget (EUR)" above "Travel | 12,000".
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from rag_core.ingest.loaders._common import clean_text, collapse_ws

# About one word piece each: a run of up to 3 digits, of up to 5 Latin letters, one letter of another script (the
# model's vocabulary splits Cyrillic, Greek, Arabic, Hebrew and CJK words into about one piece a letter, a Hangul
# syllable into two: counted again by _TWO_PIECES_RE), or one other sign. Measured against the bundled model's
# tokenizer on mixed table rows (numbers with separators, dates, codes, words): 0.9 real tokens per estimated one in
# all, up to 1.6 for a single row of rare words; blocks of rows filled to FILL of the budget never went over it.
_PIECE_RE = re.compile(r"\d{1,3}|[A-Za-z\u00c0-\u024f]{1,5}|[^\W\d_]|[^\w\s]")
_TWO_PIECES_RE = re.compile("[\uac00-\ud7a3]")
FILL = 0.8  # share of a passage's token budget a block of rows is filled to (the rest is slack for the estimate)
_SPECIAL_TOKENS = 2  # [CLS] and [SEP], as in rag_core.ingest.chunking


def cell_text(text: str) -> str:
    """A cell's text on one line: junk characters dropped, whitespace (line breaks too) collapsed."""
    return collapse_ws(clean_text(text))


def row_line(cells: Sequence[str]) -> str:
    """One table row as a line: "a | b | c" (empty cells kept, so columns line up with the header)."""
    return " | ".join(cells)


def estimate_tokens(text: str) -> int:
    """About how many word pieces `text` makes (see _PIECE_RE); cheap, no tokenizer."""
    return len(_PIECE_RE.findall(text)) + len(_TWO_PIECES_RE.findall(text))


def block_budget(chunk_tokens: int) -> int:
    """Estimated tokens a block of rows may hold for passages of `chunk_tokens` (settings.chunk_tokens)."""
    return max(8, int((chunk_tokens - _SPECIAL_TOKENS) * FILL))


def header_blocks(header: str, rows: Iterable[str], budget: int) -> list[list[str]]:
    """`rows` cut into blocks of lines, each starting with `header`, of at most `budget` estimated tokens (a block
    always holds at least one row, however long)."""
    head_tokens = estimate_tokens(header)
    blocks: list[list[str]] = []
    block: list[str] = []
    size = head_tokens
    for row in rows:
        tokens = estimate_tokens(row) + 1  # the line break
        if block and size + tokens > budget:
            blocks.append([header, *block])
            block, size = [], head_tokens
        block.append(row)
        size += tokens
    if block:
        blocks.append([header, *block])
    return blocks
