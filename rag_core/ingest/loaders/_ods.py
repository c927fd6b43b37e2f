"""OpenDocument spreadsheets (.ods): content.xml streamed row by row, read by the same rules as Excel workbooks.

The rows of each sheet go through rag_core.ingest.loaders.sheets (header row, empty columns dropped, blocks that
repeat the header, DOCCHAT_MAX_SHEET_ROWS for the whole file, the notes saying what was left out), so an .ods and an
.xlsx of the same table read the same. Rows are parsed one at a time and freed once read; repeated rows and cells
(LibreOffice writes `number-rows-repeated="1048553"` for the empty rest of a sheet) are written out only when
something follows them, and reading a sheet stops at the row limit.
"""
from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterator
from typing import IO

from lxml import etree

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.models import Progress
from rag_core.ingest.loaders import sheets
from rag_core.ingest.loaders._blocks import Block
from rag_core.ingest.loaders._common import Extracted, clean_text, collapse_ws
from rag_core.ingest.loaders._odf import OFFICE, STYLE, TABLE, TEXT, BodyReader, Styles
from rag_core.ingest.loaders._tables import block_budget

log = logging.getLogger(__name__)

_P = TEXT + "p"
_TABLE, _ROW = TABLE + "table", TABLE + "table-row"
_CELLS = (TABLE + "table-cell", TABLE + "covered-table-cell")
_TAGS = (_TABLE, _ROW, OFFICE + "automatic-styles")
_MAX_LISTED = 20  # hidden or left-out sheets named one by one
_SHEET_START_RE = re.compile(rb"<table:table(\s[^>]{0,4000})>")  # a sheet's start tag, as every ODF writer spells it
_ATTR_RE = re.compile(rb'([\w:.-]+)\s*=\s*"([^"]*)"')
_TAG_MAX = 4096  # bytes kept from one piece to the next, so that a start tag cut in two is found


def read_sheets(f: IO[bytes], file_name: str, settings: Settings, title: str, deadline: Deadline,
                progress: Progress | None = None) -> Extracted:
    """The spreadsheet in content.xml (`f`): a section per visible sheet, its rows under their header row."""
    limits = sheets.SheetLimits(settings.ingest.max_sheet_rows, settings.ingest.max_sheet_rows)
    budget = block_budget(settings.ingest.chunk_tokens)
    stream = _Stream(f, deadline)
    blocks: list[Block] = []
    hidden: list[str] = []
    skipped: list[str] = []
    for name, is_hidden, rows in stream.sheets():
        if is_hidden:
            hidden.append(name)
            continue
        kept = sheets.collect_rows(rows, f"sheet “{name}”", limits, deadline, progress)
        blocks += sheets.sheet_blocks(name, kept, f"Sheet: {name}", budget)
        if limits.full:  # the rest is not read: only the names of the sheets after it are looked for
            for later, later_hidden in stream.later_sheets(name):
                (hidden if later_hidden else skipped).append(later)
            break
    if hidden:
        log.info("%s: %d hidden sheets not read", file_name, len(hidden))
    notes = [f"Sheet “{name}” is hidden in the workbook and was not read." for name in hidden[:_MAX_LISTED]]
    if len(hidden) > _MAX_LISTED:
        notes.append(f"{len(hidden) - _MAX_LISTED} more hidden sheets were not read.")
    notes += limits.notes
    if skipped:
        names = ", ".join(f"“{n}”" for n in skipped[:_MAX_LISTED]) + (", …" if len(skipped) > _MAX_LISTED else "")
        notes.append(f"Sheets not read, as the rows before them reached the limit: {names}.")
    return sheets.sheet_extracted(file_name, notes, blocks, title, deadline)


class _Stream:
    """The sheets of content.xml, each with an iterator of its rows, from one pass of lxml's iterparse."""

    def __init__(self, f: IO[bytes], deadline: Deadline) -> None:
        self.source = _Tee(f)
        self.deadline = deadline
        self.events = etree.iterparse(self.source, events=("start", "end"), tag=_TAGS, resolve_entities=False,
                                      no_network=True, huge_tree=False, load_dtd=False, remove_comments=True,
                                      remove_pis=True)
        self.reader = BodyReader(Styles(), deadline)
        self.hidden_styles: set[str] = set()
        self.skipping = False  # the current sheet's reader has stopped: drop its other rows unread

    def sheets(self) -> Iterator[tuple[str, bool, Iterator[tuple[list[str], bool]]]]:
        """(name, hidden, rows) per sheet; rows left unread when the next sheet is asked for are skipped."""
        count = 0
        for event, el in self.events:
            if event == "end" and el.tag == OFFICE + "automatic-styles":
                self.hidden_styles = _hidden_table_styles(el)
            elif event == "start" and el.tag == _TABLE and _parent_tag(el) == OFFICE + "spreadsheet":
                count += 1
                name = collapse_ws(el.get(TABLE + "name") or "") or f"Sheet {count}"
                is_hidden = (el.get(TABLE + "style-name") or "") in self.hidden_styles
                self.skipping = is_hidden
                rows = self._rows(el)
                yield name, is_hidden, rows
                self.skipping = True
                for _ in rows:  # to the end of this sheet
                    pass

    def later_sheets(self, current: str) -> Iterator[tuple[str, bool]]:
        """(name, hidden) of the sheets after `current`, found in the XML not parsed yet by a plain search for their
        start tags (far faster than parsing the rows between them)."""
        tail = b""
        seen = {current}
        chunk = self.source.last
        while chunk:
            self.deadline.check()
            text = tail + chunk
            end = 0
            for m in _SHEET_START_RE.finditer(text):
                end = m.end()
                attrs = dict(_ATTR_RE.findall(m.group(1)))
                name = collapse_ws(clean_text(_unescape(attrs.get(b"table:name", b""))))
                if name and name not in seen:
                    seen.add(name)
                    yield name, _unescape(attrs.get(b"table:style-name", b"")) in self.hidden_styles
            tail = text[max(end, len(text) - _TAG_MAX):]
            chunk = self.source.read(1 << 20)

    def _rows(self, sheet: etree._Element) -> Iterator[tuple[list[str], bool]]:
        """(cells, has cells past sheets.MAX_COLUMNS) per row of `sheet`; empty rows only before a non-empty one."""
        empty = 0  # empty rows waiting for a non-empty one below them
        for event, el in self.events:
            if event == "start":
                continue
            if el is sheet:
                _drop(el)
                return
            if el.tag != _ROW or _sheet_of(el) is not sheet:
                continue  # a table inside a cell: read with its cell
            if self.skipping:
                _drop(el)
                continue
            cells, wider = _row_cells(el, self.reader)
            repeat = el.get(TABLE + "number-rows-repeated") or "1"
            count = int(repeat) if repeat.isdigit() else 1
            _drop(el)
            if not cells:
                empty += count
                continue
            for _ in range(empty):
                yield [], False
                if self.skipping:
                    break
            empty = 0
            for _ in range(count):
                if self.skipping:
                    break
                yield cells, wider


class _Tee:
    """A stream that keeps the last piece it gave the parser (which may not be parsed yet)."""

    def __init__(self, f: IO[bytes]) -> None:
        self.f = f
        self.last = b""

    def read(self, size: int = -1) -> bytes:
        """The next `size` bytes."""
        self.last = self.f.read(size)
        return self.last


def _unescape(value: bytes) -> str:
    """An attribute's value as text (XML's five entities and character references)."""
    return html.unescape(value.decode("utf-8", "replace"))


def _row_cells(row: etree._Element, reader: BodyReader) -> tuple[list[str], bool]:
    """The texts of a row's first sheets.MAX_COLUMNS cells (without empty ones at the end), and whether it has text
    past them; repeated cells written out."""
    cells: list[str] = []
    empty = 0  # empty cells waiting for a non-empty one to their right
    for cell in row.iterchildren(*_CELLS):
        repeat = cell.get(TABLE + "number-columns-repeated") or "1"
        count = int(repeat) if repeat.isdigit() else 1
        text = _cell_text(cell, reader)
        if not text:
            empty += count
            continue
        if empty >= sheets.MAX_COLUMNS - len(cells):  # the text is past the last column read
            return cells, True
        cells.extend([""] * empty)
        empty = 0
        room = sheets.MAX_COLUMNS - len(cells)
        cells.extend([text] * min(count, room))
        if count > room:
            return cells, True
    return cells, False


def _cell_text(cell: etree._Element, reader: BodyReader) -> str:
    """A cell's text on one line: its paragraphs (one plain text:p read directly, the common case), else its value
    (office:value and kin, for files written without a text:p)."""
    if len(cell) == 1:
        p = cell[0]
        if p.tag == _P and not len(p):
            text = p.text or ""
            return collapse_ws(text if text.isascii() else clean_text(text))
    text = collapse_ws(" ".join(b.text for b in reader.blocks(cell) if b.text)) if len(cell) else ""
    if text:
        return text
    for attr in ("string-value", "value", "date-value", "time-value", "boolean-value"):
        value = cell.get(OFFICE + attr)
        if value:
            return collapse_ws(value)
    return ""


def _hidden_table_styles(styles: etree._Element) -> set[str]:
    """Names of the table styles that hide a sheet (table:display="false")."""
    out = set()
    for style in styles.iterchildren(STYLE + "style"):
        props = style.find(STYLE + "table-properties")
        if props is not None and props.get(TABLE + "display") == "false":
            out.add(style.get(STYLE + "name") or "")
    return out


def _parent_tag(el: etree._Element) -> str:
    parent = el.getparent()
    return parent.tag if parent is not None else ""


def _sheet_of(row: etree._Element) -> etree._Element | None:
    """The table a row belongs to (the nearest one: rows of a table inside a cell are not the sheet's)."""
    return next(row.iterancestors(_TABLE), None)


def _drop(el: etree._Element) -> None:
    """Free a read element and the siblings before it."""
    el.clear(keep_tail=False)
    parent = el.getparent()
    if parent is not None:
        while el.getprevious() is not None:
            del parent[0]
