"""Spreadsheets: Excel workbooks (.xlsx, streamed with openpyxl) and CSV/TSV files (dialect and encoding detected).

Each sheet is a section named after it (a CSV file's one section after the file); each row is one line
"cell | cell | …" under its sheet's header row (the first row with two or more cells), cut into blocks that each
repeat the header (rag_core.ingest.loaders._tables), so a quoted row always shows what its columns are. Formulas give
the value Excel saved with them; numbers are written as their cell's number format shows them ("12,000", "17%").
Empty rows and columns are dropped. Hidden sheets are not read, and what was left out (hidden sheets, columns past
the 50th, rows past DOCCHAT_MAX_SHEET_ROWS) is said in the first lines of the text, in a section of its own.
"""
from __future__ import annotations

import csv
import datetime as dt
import functools
import io
import logging
import math
import operator
import re
import warnings
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from openpyxl.cell.read_only import EMPTY_CELL
from openpyxl.utils import get_column_letter
from openpyxl.utils.exceptions import InvalidFileException

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, DocChatError, NoText
from rag_core.core.models import Progress
from rag_core.ingest.loaders._archive import check_inflated
from rag_core.ingest.loaders._blocks import Block, BlockKind, assemble
from rag_core.ingest.loaders._common import Extracted, build_sections, check_zip, choose_title, collapse_ws, file_stem
from rag_core.ingest.loaders._decode import text_encoding
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders._tables import block_budget, cell_text, header_blocks, row_line
from rag_core.ingest.loaders._xlsx_strings import MAX_CELL_CHARS, open_workbook

log = logging.getLogger(__name__)

MAX_COLUMNS = 50  # columns read per sheet (A to AX); a wider row would not fit a passage with its header
MAX_TEXT_CHARS = 20_000_000  # text read from one file: about as much as chunking accepts (MAX_PASSAGES passages)
_CHECK_EVERY = 512  # rows between two deadline checks
_MAX_LISTED = 20  # hidden or left-out sheets named one by one in the notes
_SNIFF_CHARS = 65_536  # text the CSV dialect is guessed from
_MEANINGLESS_TITLES = {"", "untitled", "book1", "workbook", "sheet1", "microsoft excel worksheet", "excel"}
# Errors openpyxl raises on damaged workbooks (lxml's and ElementTree's parse errors are SyntaxErrors).
_XLSX_ERRORS = (InvalidFileException, KeyError, IndexError, ValueError, TypeError, AttributeError, SyntaxError,
                zipfile.BadZipFile, zlib.error, EOFError, OSError, OverflowError)


@dataclass
class SheetLimits:
    """What one file may still yield (rows and characters, all sheets together) and the notes on what was left out."""

    max_rows: int
    rows: int
    chars: int = MAX_TEXT_CHARS
    notes: list[str] = field(default_factory=list)
    full: bool = False  # a limit was reached: later sheets are not read

    def cut(self, where: str, row: int, declared: int | None) -> None:
        """Note that `where` was read up to the row before `row`."""
        self.full = True
        size = f" (it has {declared:,} rows)" if declared and declared >= row else ""
        why = (f"DocChat reads at most {self.max_rows:,} rows of a spreadsheet" if self.rows <= 0
               else "its text is as long as DocChat reads from one spreadsheet")
        self.notes.append(f"The rows of {where} from row {row:,} on were not read{size}: {why}.")


# --------------------------------------------------------------------------- Excel
def load_xlsx(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    """Extract an .xlsx workbook: a section per visible sheet, rows as lines under their header; zip-bomb checked
    here, read in a child process stopped at `deadline` (rag_core.ingest.loaders._isolated)."""
    check_zip(data, file_name, settings, "xl/workbook.xml", "Excel workbook")
    return run_isolated(read_xlsx, (data, file_name, settings), deadline or Deadline.never(file_name), "Excel",
                        progress)


def read_xlsx(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
              progress: Progress | None = None) -> Extracted:
    """`load_xlsx` in this process, checking `deadline` every few hundred rows."""
    check_zip(data, file_name, settings, "xl/workbook.xml", "Excel workbook")
    check_inflated(data, file_name, settings.ingest.max_docx_uncompressed_mb, "Excel workbook", deadline)
    limits = SheetLimits(settings.ingest.max_sheet_rows, settings.ingest.max_sheet_rows)
    budget = block_budget(settings.ingest.chunk_tokens)
    hidden: list[str] = []
    skipped: list[str] = []
    sheets: list[Block] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # openpyxl warns about every extension it does not read (data validation…)
        try:
            wb = open_workbook(io.BytesIO(data), deadline)  # openpyxl's, its shared strings kept compact
        except _XLSX_ERRORS as e:
            raise CorruptFile(file_name, "the Excel workbook could not be opened") from e
        try:
            title = _meaningful(collapse_ws(wb.properties.title or "")) if wb.properties else ""
            for ws in wb.worksheets:
                name = collapse_ws(str(ws.title)) or "Sheet"
                if ws.sheet_state != "visible":
                    hidden.append(name)
                elif limits.full or limits.rows <= 0:
                    skipped.append(name)
                else:
                    sheets += _xlsx_sheet(ws, name, limits, budget, deadline, progress)
        except DocChatError:
            raise
        except _XLSX_ERRORS as e:
            raise CorruptFile(file_name, "a sheet of the Excel workbook could not be read") from e
        finally:
            wb.close()
    if hidden:
        log.info("%s: %d hidden sheets not read", file_name, len(hidden))
    notes = [f"Sheet “{name}” is hidden in the workbook and was not read." for name in hidden[:_MAX_LISTED]]
    if len(hidden) > _MAX_LISTED:
        notes.append(f"{len(hidden) - _MAX_LISTED} more hidden sheets were not read.")
    notes += limits.notes
    if skipped:
        names = ", ".join(f"“{n}”" for n in skipped[:_MAX_LISTED]) + (", …" if len(skipped) > _MAX_LISTED else "")
        notes.append(f"Sheets not read, as the rows before them reached the limit: {names}.")
    return sheet_extracted(file_name, notes, sheets, choose_title(file_name, title), deadline)


def _xlsx_sheet(ws: Any, name: str, limits: SheetLimits, budget: int, deadline: Deadline,
                progress: Progress | None) -> list[Block]:
    """The blocks of one worksheet (openpyxl's read-only one: rows are parsed as they are read)."""
    declared = ws.max_row if isinstance(ws.max_row, int) else None
    ws.reset_dimensions()  # read every row there is, not only those the sheet's (often wrong) dimension names
    rows = collect_rows(_xlsx_rows(ws.iter_rows()), f"sheet “{name}”", limits, deadline, progress, declared)
    return sheet_blocks(name, rows, f"Sheet: {name}", budget)


_NOT_EMPTY = functools.partial(operator.is_not, EMPTY_CELL)


def _xlsx_rows(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[list[str], bool]]:
    """The texts of each row's first MAX_COLUMNS cells, and whether this row or one before had a value past them
    (looked for until one has: openpyxl pads a row with EMPTY_CELL up to its last cell, 16,384 of them for a cell
    in column XFD, which are skipped in C, from the end)."""
    wide = False
    for row in rows:
        if not wide:
            wide = any(getattr(c, "value", None) not in (None, "")
                       for c in filter(_NOT_EMPTY, reversed(row[MAX_COLUMNS:])))
        yield [_cell(c) for c in row[:MAX_COLUMNS]], wide


def _cell(cell: Any) -> str:
    """A cell's value as a person reads it in Excel."""
    value = getattr(cell, "value", None)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return format_number(value, getattr(cell, "number_format", "General") or "General")
    if isinstance(value, dt.datetime):
        if value.time() == dt.time():
            return value.date().isoformat()
        return value.isoformat(sep=" ", timespec="minutes" if not value.second else "seconds")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.isoformat(timespec="minutes" if not value.second else "seconds")
    return cell_text(str(value)[:MAX_CELL_CHARS])


# A number format's parts: "quoted text", \\x (an escaped character), _x / *x (padding), [brackets] (a colour, a
# condition, or [$€-407]: a currency sign), the number's digits ("#,##0.00", "0.0E+00"), or any other character.
_FORMAT_RE = re.compile(r'"([^"]*)"|\\(.)|[_*].?|\[([^\]]*)\]|([0#?][0#?,.]*(?:[Ee][+-][0#?]+)?)|(.)', re.S)


def format_number(value: float, number_format: str) -> str:
    """`value` written as Excel's number format shows it, for the common formats: decimals ("0.00"), thousands
    separators ("#,##0"), percentages ("0%"), scientific ("0.00E+00") and currency signs; else plainly."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    parsed = _parse_format(number_format)
    if parsed is None:  # General, text (@), or a format this does not know
        return _general(value)
    before, spec, after = parsed
    return (before + format(value * 100 if "%" in after else value, spec) + after).strip()


@functools.lru_cache(maxsize=256)
def _parse_format(number_format: str) -> tuple[str, str, str] | None:
    """(text before the number, Python format spec, text after it) of a number format's first section; None when it
    has no digit placeholders."""
    if number_format == "General":
        return None
    before: list[str] = []
    after: list[str] = []
    digits = ""
    for m in _FORMAT_RE.finditer(number_format.split(";")[0]):
        quoted, escaped, bracket, number, other = m.groups()
        if number is not None and not digits:
            digits = number
            continue
        if bracket is not None:
            piece = bracket[1:].split("-")[0] if bracket.startswith("$") else ""
        else:
            piece = quoted or escaped or other or number or ""
        (after if digits else before).append(piece)
    if not digits:
        return None
    whole, _, decimals = digits.partition(".")
    places = sum(1 for ch in decimals.upper().split("E")[0] if ch in "0#?")
    spec = f".{places}E" if "E" in digits.upper() else f"{',' if ',' in whole else ''}.{places}f"
    return "".join(before).lstrip(), spec, "".join(after).rstrip()


def _general(value: float) -> str:
    """A number in Excel's General format: integers whole, others with up to 15 significant digits."""
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return str(int(value))
    return f"{value:.15g}"


def _meaningful(title: str) -> str:
    return "" if title.lower() in _MEANINGLESS_TITLES else title


# --------------------------------------------------------------------------- CSV and TSV
def load_csv(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
             progress: Progress | None = None) -> Extracted:
    """Extract a .csv or .tsv file: one section named after the file, rows as lines under the header row; read in a
    child process stopped at `deadline` (rag_core.ingest.loaders._isolated)."""
    return run_isolated(read_csv, (data, file_name, settings), deadline or Deadline.never(file_name), "CSV", progress)


def read_csv(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
             progress: Progress | None = None) -> Extracted:
    """`load_csv` in this process: encoding (byte-order mark, UTF-8, else guessed) and dialect (delimiter and
    quoting, guessed from the first 64 KB) detected, then the rows read, checking `deadline` every few hundred. The
    encoding is the text decoder's choice (loaders/_decode.py: it looks at a bounded sample), and the text is decoded
    as the rows are read, stopping at the row limit: a file is never decoded whole."""
    text = io.TextIOWrapper(io.BytesIO(data), encoding=text_encoding(data, file_name), errors="replace", newline="")
    deadline.check()
    dialect = sniff_dialect(text.read(_SNIFF_CHARS + 1), file_name)
    text.seek(0)
    log.debug("%s: delimiter %r, quote %r", file_name, dialect.delimiter, dialect.quotechar)
    name = file_stem(file_name)
    line = [1]  # where the row being read starts
    for quoting in (dialect.quoting, csv.QUOTE_NONE):  # a stray quote: read again with quotes as characters
        limits = SheetLimits(settings.ingest.max_sheet_rows, settings.ingest.max_sheet_rows)
        text.seek(0)
        try:
            rows = collect_rows(_csv_rows(csv.reader(text, dialect, quoting=quoting), line), "this file", limits,
                                deadline, progress)
            break
        except csv.Error as e:
            if quoting == csv.QUOTE_NONE:
                raise CorruptFile(file_name, f"line {line[0]:,} could not be read: a field is longer than "
                                             f"{csv.field_size_limit():,} characters") from e
            log.info("%s: line %d could not be read (%s); reading quotes as ordinary characters", file_name,
                     line[0], e)
    blocks = sheet_blocks(name, rows, None, block_budget(settings.ingest.chunk_tokens))
    return sheet_extracted(file_name, limits.notes, blocks, name, deadline)


def _csv_rows(reader: Any, line: list[int]) -> Iterator[tuple[list[str], bool]]:
    """The rows of a csv.reader as `collect_rows` takes them; line[0] is the line the row being read starts on."""
    while True:
        line[0] = reader.line_num + 1
        row = next(reader, None)
        if row is None:
            return
        yield [cell_text(c) for c in row[:MAX_COLUMNS]], any(c.strip() for c in row[MAX_COLUMNS:])


def sniff_dialect(text: str, file_name: str) -> type[csv.Dialect] | csv.Dialect:
    """The CSV dialect of `text`, guessed from its first lines; a .tsv file is read as tab-separated."""
    sample = text[:_SNIFF_CHARS]
    if len(text) > _SNIFF_CHARS and "\n" in sample:
        sample = sample[:sample.rindex("\n")]
    tsv = file_name.lower().endswith(".tsv")
    try:
        return csv.Sniffer().sniff(sample, delimiters="\t" if tsv else ",;\t|")
    except csv.Error:
        return csv.excel_tab if tsv or ("\t" in sample and "," not in sample) else csv.excel


# --------------------------------------------------------------------------- rows to text
def collect_rows(rows: Iterable[tuple[list[str], bool]], where: str, limits: SheetLimits, deadline: Deadline,
             progress: Progress | None, declared: int | None = None) -> list[list[str]]:
    """The non-empty rows of one sheet, within the file's limits (noting where and why it stopped)."""
    kept: list[list[str]] = []
    wide = False
    for number, (cells, wider) in enumerate(rows, 1):
        if not number % _CHECK_EVERY:
            deadline.check()
            if progress is not None:
                progress("reading", limits.max_rows - limits.rows, limits.max_rows)
        wide = wide or wider
        if not any(cells):
            continue
        size = sum(len(c) + 3 for c in cells)
        if limits.rows <= 0 or size > limits.chars:
            limits.cut(where, number, declared)
            break
        kept.append(cells)
        limits.rows -= 1
        limits.chars -= size
    if wide:
        limits.notes.append(f"Only the first {MAX_COLUMNS} columns of {where} (A to {get_column_letter(MAX_COLUMNS)})"
                            " were read: DocChat leaves out the columns after them.")
    return kept


def sheet_blocks(name: str, rows: list[list[str]], label: str | None, budget: int) -> list[Block]:
    """One sheet as blocks: a section `name` with `label` and the lines above the table, then the table's rows in
    blocks of about a passage, each a section `name` of its own starting with the header row."""
    if not rows:
        return []
    width = max(len(r) for r in rows)
    used = [j for j in range(width) if any(j < len(r) and r[j] for r in rows)]
    rows = [[r[j] if j < len(r) else "" for j in used] for r in rows]
    head = next((i for i, r in enumerate(rows) if sum(1 for c in r if c) >= 2), None)
    above = rows if head is None else rows[:head]
    lines = ([label] if label else []) + [" ".join(c for c in r if c) for r in above]
    blocks = [Block(BlockKind.SHEET, name)]
    if lines:
        blocks.append(Block(BlockKind.PARA, "\n".join(lines)))
    if head is None:
        return blocks
    header = row_line(rows[head])
    table = header_blocks(header, (row_line(r) for r in rows[head + 1:]), budget) or [[header]]
    for i, block in enumerate(table):
        if i or above:  # lines above the table (other than the label) make a section of their own
            blocks.append(Block(BlockKind.SHEET, name))
        blocks.append(Block(BlockKind.TABLE, "\n".join(block)))
    return blocks


def sheet_extracted(file_name: str, notes: list[str], sheets: list[Block], title: str, deadline: Deadline) -> Extracted:
    """The document: the notes (what was left out) in a section of their own, then the sheets."""
    if not any(b.kind is not BlockKind.SHEET for b in sheets):
        raise NoText(file_name)
    blocks = ([Block(BlockKind.PARA, "\n".join(notes))] if notes else []) + sheets
    joined = assemble(blocks, deadline)
    return Extracted(joined.text, build_sections(joined.text, joined.heads), title)
