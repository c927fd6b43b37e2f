"""RTF (.rtf): paragraphs, headings (heading styles or outline levels) as sections, lists, tables and footnotes.

The bytes are read once by the bounded tokenizer of rag_core.ingest.loaders._rtf_tokens (linear in the file's size
whatever its nesting); this module makes the document of what it reads. A paragraph in a style named "heading N" in
the stylesheet (or with \\outlinelevel) is a heading and opens a section; one in the "Title" style is the title line;
one that begins with \\listtext (or has \\ls) is a list item, "- item" indented by its \\ilvl; \\cell and \\row make
"cell | cell" lines under the table's first (header) row; a footnote becomes a "[n] note" paragraph after the one it
is in; hidden text (\\v) is kept and reported. The title is \\info's \\title, else the Title-style paragraph, else the
first heading, else the file name. striprtf gives plain text only (no headings, footnotes dropped) and took as long
on a 9.8 MB file (7.4 s of CPU against 6.5 s here, measured for issue 25), so it is not used.
"""
from __future__ import annotations

import logging
import re

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, NoText
from rag_core.core.models import Progress
from rag_core.ingest.loaders._blocks import Block, BlockKind, assemble
from rag_core.ingest.loaders._common import (
    Extracted,
    build_sections,
    choose_title,
    clean_text,
    collapse_ws,
)
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders._rtf_tokens import HID, ILVL, INTBL, LIST, OUTLINE, STYLE, D, Dest, RtfTokenizer

log = logging.getLogger(__name__)

_MAX_HIDDEN = 2000  # hidden runs kept per document
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def load_rtf(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
             progress: Progress | None = None) -> Extracted:
    """Extract an RTF document (paragraphs, headings as sections, lists, tables) in a child process that is stopped
    at `deadline` (IngestTimedOut), see rag_core.ingest.loaders._isolated."""
    if not _is_rtf(data):
        raise CorruptFile(file_name, "it does not start like an RTF document")
    return run_isolated(read_rtf, (data, file_name, settings), deadline or Deadline.never(file_name), "RTF", progress)


def read_rtf(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
             progress: Progress | None = None) -> Extracted:
    """`load_rtf` in this process, checking `deadline` every few thousand tokens."""
    if not _is_rtf(data):
        raise CorruptFile(file_name, "it does not start like an RTF document")
    reader = _Reader(deadline)
    reader.feed(data)
    assembled = assemble(reader.blocks, deadline)
    text = assembled.text
    if not text.strip():
        raise NoText(file_name)
    title = choose_title(file_name, reader.title(), assembled.first_title, heading=assembled.first_heading)
    log.debug("%s: RTF blocks %s, %d styles", file_name, assembled.stats, len(reader.styles))
    return Extracted(text, build_sections(text, assembled.heads), title, hidden=tuple(reader.hidden[:_MAX_HIDDEN]))


def _is_rtf(data: bytes) -> bool:
    """Does the file begin with "{\\rtf" (after a byte-order mark or blank space)?"""
    return data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf")


class _Reader(RtfTokenizer):
    """The document the tokens make: `blocks` in reading order and the runs of hidden text."""

    def __init__(self, deadline: Deadline) -> None:
        super().__init__(deadline)
        self.out: list[str] = []  # text of the paragraph being read
        self.props: tuple[int, int, bool, int, bool] | None = None  # its properties at its last text
        self.blocks: list[Block] = []
        self.table: list[str] = []  # rows of the table being read
        self.row: list[str] = []  # cells of the row being read
        self.cell: list[str] = []  # paragraphs of the cell being read
        self.notes: list[str] = []  # footnotes waiting for their paragraph to end
        self.note_number = 0
        self.note_out: list[str] = []
        self.hidden: list[str] = []
        self.hidden_run: list[str] = []

    def text(self, dest: Dest, text: str) -> None:
        """Main text goes to the paragraph (its properties noted), a footnote's to the note."""
        if dest != Dest.MAIN:
            self.note_out.append(text)
            return
        self.out.append(text)
        s = self.state
        self.props = (s[STYLE], s[OUTLINE], s[INTBL], s[ILVL], s[LIST])
        if s[HID]:
            self.hidden_run.append(text)
        elif self.hidden_run:
            self._end_hidden_run()

    def note_closed(self) -> None:
        """Keep the note for after the paragraph it is in."""
        note = collapse_ws("".join(self.note_out))
        self.note_out = []
        if note:
            self.notes.append(note)

    def paragraph_break(self) -> None:
        """End the paragraph (in a footnote: a space)."""
        dest = self.state[D]
        if dest == Dest.MAIN:
            self._end_paragraph()
        elif dest == Dest.NOTE:
            self.note_out.append(" ")

    def finish(self) -> None:
        """The last paragraph and table."""
        self._end_paragraph()
        self._end_table()

    def title(self) -> str:
        """The \\info title, cleaned."""
        return collapse_ws(clean_text(super().title()))

    def _take_paragraph(self) -> tuple[str, tuple[int, int, bool, int, bool] | None]:
        text = "".join(self.out)
        self.out = []
        props, self.props = self.props, None
        if self.hidden_run:
            self._end_hidden_run()
        if _SURROGATE_RE.search(text):  # \u pairs for characters beyond U+FFFF
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        lines = (line.strip() for line in clean_text(text).split("\n"))
        return "\n".join(line for line in lines if line), props

    def _end_paragraph(self) -> None:
        text, props = self._take_paragraph()
        is_list, self.list_mark = self.list_mark, False
        if props is None or not text:
            self._flush_notes()
            return
        style, outline, intbl, ilvl, in_list = props
        if intbl:
            self.cell.append(collapse_ws(text))
            return
        self._end_table()
        level = outline + 1 if outline >= 0 else self.styles.get(style)
        if level == 0:
            self.blocks.append(Block(BlockKind.TITLE, collapse_ws(text)))
        elif level is not None:
            self.blocks.append(Block(BlockKind.HEADING, collapse_ws(text), level))
        elif is_list or in_list:
            self.blocks.append(Block(BlockKind.LIST, "  " * ilvl + "- " + collapse_ws(text)))
        else:
            self.blocks.append(Block(BlockKind.PARA, text))
        self._flush_notes()

    def _flush_notes(self) -> None:
        for note in self.notes:
            self.note_number += 1
            self.blocks.append(Block(BlockKind.PARA, f"[{self.note_number}] {note}"))
        self.notes = []

    def end_cell(self, nested: bool) -> None:
        """End a cell: its paragraphs joined (a nested table's cells flattened into the cell around it)."""
        if self.state[D] != Dest.MAIN:
            return
        text, _ = self._take_paragraph()
        if text:
            self.cell.append(collapse_ws(text))
        content = " ".join(self.cell)
        self.cell = []
        if nested:  # a cell of a table inside a cell: flattened into it
            self.cell.append(content + ",")
        elif content:
            self.row.append(content.rstrip(",;"))

    def end_row(self, nested: bool) -> None:
        """End a row: one "cell | cell" line (a nested table's row, whose \\nestrow is in \\nesttableprops: a ";")."""
        if nested:
            if self.cell:
                self.cell[-1] = self.cell[-1].rstrip(",") + ";"
            return
        if self.state[D] != Dest.MAIN:
            return
        if self.row:
            self.table.append(" | ".join(self.row))
        self.row = []
        self.list_mark = False
        self._flush_notes()

    def _end_table(self) -> None:
        if self.cell or self.row:
            self.row.extend([" ".join(self.cell)] if self.cell else [])
            self.cell = []
            self.end_row(False)
        if self.table:
            self.blocks.append(Block(BlockKind.TABLE, "\n".join(self.table)))
            self.table = []

    def _end_hidden_run(self) -> None:
        run = collapse_ws("".join(self.hidden_run))
        self.hidden_run = []
        if run and len(self.hidden) < _MAX_HIDDEN:
            self.hidden.append(run)
