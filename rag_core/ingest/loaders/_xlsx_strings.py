"""An Excel workbook's shared-strings table kept compact, so a huge one is read within the reader's memory ceiling.

openpyxl reads the whole table (xl/sharedStrings.xml) into a list of Python strings before any sheet, keeping every
parsed element until the end: a 280 MB table (a 36 MB file) took 222 s and 2.4 GB. `open_workbook` is openpyxl's
`load_workbook(read_only=True, data_only=True)` with one change: the table is parsed as a stream (lxml iterparse,
each string's elements dropped once read, entities and DTDs off) only as far as the rows read ask for, each string
cut to Excel's own 32,767 characters, and kept as UTF-8 in blocks of a few megabytes - about its size in the file,
plus 12 bytes a string. The sheets are read row by row as before, so the rows reach the usual limits and are cut
into passages like any sheet's.
"""
from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import IO, Any, overload

from lxml import etree
from openpyxl.reader.excel import ExcelReader
from openpyxl.utils.cell import range_boundaries
from openpyxl.worksheet._read_only import ReadOnlyWorksheet
from openpyxl.xml.constants import SHARED_STRINGS, SHEET_MAIN_NS

from rag_core.core.deadline import Deadline

MAX_CELL_CHARS = 32_767  # Excel's own limit on a cell's text: a longer shared string was not written by Excel
_BLOCK = 4 << 20  # bytes of strings per block
_CHECK_EVERY = 4096  # strings between two deadline checks
_SI, _T, _RPH = f"{{{SHEET_MAIN_NS}}}si", f"{{{SHEET_MAIN_NS}}}t", f"{{{SHEET_MAIN_NS}}}rPh"
_DIMENSION, _SHEET_DATA = f"{{{SHEET_MAIN_NS}}}dimension", f"{{{SHEET_MAIN_NS}}}sheetData"


class CompactStrings(Sequence[str]):
    """A list of strings stored as UTF-8 in blocks; item i is decoded when it is asked for. With `more` (an iterator
    of the strings still to come) they are read only as far as an item asked for: sheets name their strings mostly
    in order, so reading stops near where the rows stop (at the row limit) rather than at the end of the table."""

    def __init__(self, more: Iterator[str] = iter(())) -> None:
        self._blocks: list[bytes] = []
        self._current = bytearray()
        self._where = array("I")  # per string: block, start, end
        self._count = 0
        self._more = more

    def _read_to(self, index: int) -> None:
        """Read strings from `more` until item `index` exists (or there are no more)."""
        while self._count <= index:
            text = next(self._more, None)
            if text is None:
                self._more = iter(())
                return
            self.append(text)

    def append(self, text: str) -> None:
        raw = text.encode("utf-8", "surrogatepass")
        if self._current and len(self._current) + len(raw) > _BLOCK:
            self._blocks.append(bytes(self._current))
            self._current = bytearray()
        start = len(self._current)
        self._current += raw
        self._where.extend((len(self._blocks), start, start + len(raw)))
        self._count += 1

    def __len__(self) -> int:
        self._read_to(2**62)
        return self._count

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[str]: ...

    def __getitem__(self, index: int | slice) -> str | Sequence[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        self._read_to(index)
        if not 0 <= index < self._count:
            raise IndexError(f"shared string {index} does not exist")
        block, start, end = self._where[3 * index:3 * index + 3]
        data = self._current if block == len(self._blocks) else self._blocks[block]
        return data[start:end].decode("utf-8", "surrogatepass")


def read_shared_strings(source: IO[bytes], deadline: Deadline | None = None) -> CompactStrings:
    """The strings of a sharedStrings.xml stream (read as they are asked for, see CompactStrings), each the text of
    its <t> elements (phonetic runs left out) as openpyxl reads them, at most MAX_CELL_CHARS characters."""
    return CompactStrings(_strings(source, deadline))


def _strings(source: IO[bytes], deadline: Deadline | None) -> Iterator[str]:
    for n, (_, si) in enumerate(etree.iterparse(source, events=("end",), tag=_SI, resolve_entities=False,
                                                no_network=True, load_dtd=False, huge_tree=True,
                                                remove_comments=True, remove_pis=True), 1):
        if len(si) == 1 and si[0].tag == _T:  # the usual case: one plain run
            text = si[0].text or ""
        else:
            parts: list[str] = []
            size = 0
            for t in si.iter(_T):
                if size < MAX_CELL_CHARS and t.text and next(t.iterancestors(_RPH), None) is None:
                    parts.append(t.text)
                    size += len(t.text)
            text = "".join(parts)
        si.clear()
        while si.getprevious() is not None:  # the strings read so far are dropped from the tree too
            del si.getparent()[0]
        if deadline is not None and not n % _CHECK_EVERY:
            deadline.check()
        yield text[:MAX_CELL_CHARS].replace("x005F_", "")


class _CompactReader(ExcelReader):
    """openpyxl's workbook reader, its shared strings read by `read_shared_strings`."""

    def __init__(self, source: IO[bytes], deadline: Deadline | None) -> None:
        super().__init__(source, read_only=True, data_only=True, keep_links=False)
        self.deadline = deadline

    def read_strings(self) -> None:
        part = self.package.find(SHARED_STRINGS)
        if part is not None:  # left open: the strings are read as the sheets ask for them
            self.shared_strings = read_shared_strings(self.archive.open(part.PartName[1:]), self.deadline)


    def read_worksheets(self) -> None:
        """openpyxl's, each read-only sheet sized from its head only (see _HeadSizedSheet)."""
        for sheet, rel in self.parser.find_sheets():
            if rel.target not in self.valid_files:
                continue
            if "chartsheet" in rel.Type:
                self.read_chartsheet(sheet, rel)
                continue
            ws = _HeadSizedSheet(self.wb, sheet.name, rel.target, self.shared_strings)
            ws.sheet_state = sheet.state
            self.wb._sheets.append(ws)


class _HeadSizedSheet(ReadOnlyWorksheet):
    """A read-only sheet whose <dimension> is looked for before <sheetData> only. openpyxl's own search waits for
    the end of <sheetData> to give up, so a sheet without one was parsed whole just to open the workbook (a million
    rows: 100 s, before the first row was read)."""

    def _get_size(self) -> None:
        with self._get_source() as src:
            try:
                for _, el in etree.iterparse(src, events=("start",), resolve_entities=False, no_network=True,
                                             load_dtd=False, huge_tree=False):
                    if el.tag == _DIMENSION and el.get("ref"):
                        bounds = range_boundaries(el.get("ref"))
                        if None not in bounds:
                            self._min_column, self._min_row, self._max_column, self._max_row = bounds
                        return
                    if el.tag == _SHEET_DATA:
                        return
            except (etree.LxmlError, ValueError, TypeError):
                return  # no usable size: the rows say it as they are read


def open_workbook(source: IO[bytes], deadline: Deadline | None = None) -> Any:
    """A read-only, values-only openpyxl Workbook of `source` whose shared strings are kept compact."""
    reader = _CompactReader(source, deadline)
    reader.read()
    return reader.wb
