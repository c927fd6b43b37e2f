"""OpenDocument XML to blocks: paragraphs, headings, lists, tables, text boxes and notes of content.xml.

Used by rag_core.ingest.loaders.opendocument for text documents (.odt) and the text frames of slides (.odp). The tree
is parsed by lxml without entities, network or huge-tree mode, so it is at most 256 elements deep and the recursion
here stays shallow.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from lxml import etree

from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders._blocks import Block, BlockKind
from rag_core.ingest.loaders._common import add_lines as _add_lines
from rag_core.ingest.loaders._common import clean_text, collapse_ws
from rag_core.ingest.loaders._common import flatten_cell as _flatten

log = logging.getLogger(__name__)

NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "style": "urn:oasis:names:tc:opendocument:xmlns:style:1.0",
    "fo": "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0",
    "svg": "urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
}
OFFICE, TEXT, TABLE, DRAW = (f"{{{NS[p]}}}" for p in ("office", "text", "table", "draw"))
STYLE, FO, SVG, PRESENTATION = (f"{{{NS[p]}}}" for p in ("style", "fo", "svg", "presentation"))

_H, _P, _LIST, _ITEM, _HEADER = TEXT + "h", TEXT + "p", TEXT + "list", TEXT + "list-item", TEXT + "list-header"
_TBL, _ROW, _CELL, _COVERED = TABLE + "table", TABLE + "table-row", TABLE + "table-cell", TABLE + "covered-table-cell"
_ROW_GROUPS = frozenset({TABLE + "table-header-rows", TABLE + "table-rows", TABLE + "table-row-group"})
_NOTE, _NOTE_BODY, _NUMBER = TEXT + "note", TEXT + "note-body", TEXT + "number"
# Generated indexes (a table of contents repeats the headings), tracked deletions, comments, declarations, forms.
_SKIP_BLOCKS = frozenset({
    TEXT + "table-of-content", TEXT + "illustration-index", TEXT + "table-index", TEXT + "object-index",
    TEXT + "user-index", TEXT + "alphabetical-index", TEXT + "bibliography", TEXT + "tracked-changes",
    TEXT + "sequence-decls", TEXT + "variable-decls", TEXT + "user-field-decls", TEXT + "dde-connection-decls",
    OFFICE + "forms", OFFICE + "annotation", OFFICE + "annotation-end", TABLE + "table-columns",
    TABLE + "table-column", TABLE + "table-column-group", TABLE + "table-header-columns", TABLE + "shapes",
})
# Inside a paragraph: not part of its visible flow (comments, ruby annotations, image titles, note bodies).
_SKIP_INLINE = frozenset({
    OFFICE + "annotation", OFFICE + "annotation-end", TEXT + "ruby-text", SVG + "title", SVG + "desc",
    TEXT + "tracked-changes", _NOTE_BODY, _NUMBER,
})
_SPACES_RE = re.compile(r"[ \t\r\n]+")
_SPACE, _TAB, _BREAK = "\x01", "\x02", "\x03"  # characters XML 1.0 text cannot hold
_MARKS = str.maketrans({_SPACE: " ", _TAB: "\t", _BREAK: "\n"})
_MAX_SPACES = 64  # text:s c="1000000" is one run of spaces, not a megabyte of them
_MAX_REPEAT = 64  # a repeated table column or row of a text table is written at most this often
_SIZE_RE = re.compile(r"^\s*([0-9.]+)\s*(pt|px|cm|mm|in|pc|%)?\s*$")
_HIDDEN_PT = 1.5  # points: text this small cannot be read
_TO_CM = {"cm": 1.0, "mm": 0.1, "in": 2.54, "pt": 2.54 / 72, "pc": 2.54 / 6, "px": 2.54 / 96}


@dataclass(frozen=True)
class StyleInfo:
    """What the readers need of one style."""

    parent: str = ""
    display: str = ""  # display name or name, lower case
    outline_level: int = 0  # style:default-outline-level
    hidden: bool = False  # text:display="none", white or tiny text


@dataclass
class Styles:
    """Named styles of content.xml and styles.xml (automatic and common), resolved through their parents."""

    by_name: dict[str, StyleInfo] = field(default_factory=dict)

    def add_from(self, root: etree._Element | None) -> None:
        """Read every style:style of `root` (a parsed content.xml or styles.xml)."""
        if root is None:
            return
        for el in root.iter(STYLE + "style"):
            name = el.get(STYLE + "name") or ""
            props = el.find(STYLE + "text-properties")
            level = el.get(STYLE + "default-outline-level") or ""
            self.by_name[name] = StyleInfo(
                parent=el.get(STYLE + "parent-style-name") or "",
                display=(el.get(STYLE + "display-name") or name).lower(),
                outline_level=int(level) if level.isdigit() else 0,
                hidden=props is not None and _props_hidden(props),
            )

    def chain(self, name: str) -> Iterator[StyleInfo]:
        """The style and its ancestors (at most 10)."""
        seen = 0
        while name and name in self.by_name and seen < 10:
            info = self.by_name[name]
            yield info
            name, seen = info.parent, seen + 1

    def is_title(self, name: str) -> bool:
        """Is this paragraph style the "Title" style or based on it?"""
        return any(info.display == "title" for info in self.chain(name))

    def outline_level(self, name: str) -> int:
        """The style's default outline level (0 if none)."""
        return next((info.outline_level for info in self.chain(name) if info.outline_level), 0)

    def hidden(self, name: str) -> bool:
        """Does text in this style not show (hidden, white or tiny)?"""
        return any(info.hidden for info in self.chain(name))


def _props_hidden(props: etree._Element) -> bool:
    if (props.get(TEXT + "display") or "") == "none":
        return True
    if (props.get(FO + "color") or "").lower() in ("#ffffff", "#fefefe", "#fdfdfd"):
        return True
    m = _SIZE_RE.match(props.get(FO + "font-size") or "")
    return bool(m and m.group(2) == "pt" and float(m.group(1) or 0) <= _HIDDEN_PT)


def length_cm(value: str | None) -> float:
    """An ODF length ("2.5cm", "1in", "72pt") in centimetres; 0 when missing or unreadable."""
    m = _SIZE_RE.match(value or "")
    if not m or m.group(2) == "%":
        return 0.0
    try:
        return float(m.group(1)) * _TO_CM.get(m.group(2) or "cm", 1.0)
    except ValueError:
        return 0.0


class BodyReader:
    """Turns ODF body elements into Blocks; collects hidden runs on the way."""

    def __init__(self, styles: Styles, deadline: Deadline) -> None:
        self.styles = styles
        self.deadline = deadline
        self.hidden: list[str] = []
        self._count = 0

    def _tick(self) -> None:
        self._count += 1
        if not self._count % 512:
            self.deadline.check()

    # -- blocks ---------------------------------------------------------------------------------------------------
    def blocks(self, parent: etree._Element) -> Iterator[Block]:
        """The blocks of `parent`'s children in document order."""
        for child in parent.iterchildren(tag=etree.Element):
            yield from self.element(child)

    def element(self, el: etree._Element) -> Iterator[Block]:
        """The blocks of one body element."""
        self._tick()
        tag = el.tag
        if tag in _SKIP_BLOCKS:
            return
        if tag in (_H, _P):
            yield from self._paragraph(el)
        elif tag == _LIST:
            yield from self._list(el, 0)
        elif tag == TEXT + "numbered-paragraph":
            level = el.get(TEXT + "level") or "1"
            yield from self._list_item(el, max(0, int(level) - 1) if level.isdigit() else 0)
        elif tag == _TBL:
            lines = self.table_lines(el)
            if lines:
                yield Block(BlockKind.TABLE, "\n".join(lines))
        else:  # text:section, draw:frame, draw:text-box, change markers...: look inside
            yield from self.blocks(el)

    def _paragraph(self, el: etree._Element) -> Iterator[Block]:
        extras: list[etree._Element] = []
        text = self.paragraph_text(el, extras)
        style = el.get(TEXT + "style-name") or ""
        if text:
            if self.styles.is_title(style):
                yield Block(BlockKind.TITLE, collapse_ws(text))
            elif el.tag == _H:
                yield Block(BlockKind.HEADING, collapse_ws(text), self._heading_level(el, style))
            else:
                yield Block(BlockKind.PARA, text)
        yield from self._extras(extras)

    def _heading_level(self, el: etree._Element, style: str) -> int:
        level = el.get(TEXT + "outline-level") or ""
        if level.isdigit() and int(level) > 0:
            return min(int(level), 10)
        return min(self.styles.outline_level(style) or 1, 10)

    def _extras(self, extras: list[etree._Element]) -> Iterator[Block]:
        """Notes as "[n] text" paragraphs, then text boxes and shapes anchored in the paragraph."""
        for el in extras:
            if el.tag == _NOTE:
                body = el.find(_NOTE_BODY)
                mark = collapse_ws("".join(el.find(TEXT + "note-citation").itertext())) \
                    if el.find(TEXT + "note-citation") is not None else ""
                text = " ".join(b.text for b in self.blocks(body)) if body is not None else ""
                if text:
                    yield Block(BlockKind.PARA, f"[{mark}] {text}" if mark else text)
            else:
                yield from self.blocks(el)

    def _list(self, el: etree._Element, depth: int) -> Iterator[Block]:
        for item in el.iterchildren(_ITEM, _HEADER):
            yield from self._list_item(item, depth)

    def _list_item(self, item: etree._Element, depth: int) -> Iterator[Block]:
        indent = "  " * min(depth, 8)
        first = True
        for child in item.iterchildren(tag=etree.Element):
            self._tick()
            if child.tag == _LIST:
                yield from self._list(child, depth + 1)
            elif child.tag == _P:
                extras: list[etree._Element] = []
                text = collapse_ws(self.paragraph_text(child, extras))
                if text:
                    yield Block(BlockKind.LIST, f"{indent}{'- ' if first else '  '}{text}")
                    first = False
                yield from self._extras(extras)
            elif child.tag == _H:  # a numbered heading written as a list item
                yield from self._paragraph(child)
            elif child.tag != _NUMBER:
                yield from self.element(child)

    # -- paragraph text -------------------------------------------------------------------------------------------
    def paragraph_text(self, el: etree._Element, extras: list[etree._Element]) -> str:
        """The visible text of a text:p or text:h (line breaks kept as \\n); notes and frames go to `extras`."""
        out: list[str] = []
        if el.tag == _H:
            number = el.find(_NUMBER)
            if number is not None and collapse_ws("".join(number.itertext())):
                out.append(collapse_ws("".join(number.itertext())) + " ")
        hidden_style = self.styles.hidden(el.get(TEXT + "style-name") or "")
        self._inline(el, out, extras, hidden_style)
        # White space in the XML is one space (ODF 1.3 part 3, 6.1.2); text:s, text:tab and text:line-break are the
        # document's own spaces, tabs and line breaks (written as control characters until the runs are folded).
        text = "".join(out)
        if "\n" in text or "\t" in text or "  " in text or "\r" in text:
            text = _SPACES_RE.sub(" ", text)
        if "\x01" in text or "\x02" in text or "\x03" in text:
            text = text.replace(_SPACE, " ").replace(_TAB, "\t").replace(_BREAK, "\n")
        text = clean_text(text)
        if "\n" not in text:
            return text.strip()
        lines = (line.strip() for line in text.split("\n"))
        return "\n".join(line for line in lines if line)

    def _inline(self, el: etree._Element, out: list[str], extras: list[etree._Element], hidden: bool) -> None:
        start = len(out)
        if el.text:
            out.append(el.text)
        for child in el.iterchildren():
            tag = child.tag
            if isinstance(tag, str) and tag not in _SKIP_INLINE:
                if tag == TEXT + "s":
                    count = child.get(TEXT + "c") or "1"
                    out.append(_SPACE * min(int(count) if count.isdigit() else 1, _MAX_SPACES))
                elif tag == TEXT + "tab":
                    out.append(_TAB)
                elif tag == TEXT + "line-break":
                    out.append(_BREAK)
                elif tag == _NOTE or tag.startswith(DRAW):
                    extras.append(child)
                else:
                    style = child.get(TEXT + "style-name") or ""
                    self._inline(child, out, extras, bool(style) and self.styles.hidden(style))
            if child.tail:
                out.append(child.tail)
        if hidden and len(out) > start:
            run = collapse_ws("".join(out[start:]).translate(_MARKS))
            if run:
                self.hidden.append(run)

    # -- tables ---------------------------------------------------------------------------------------------------
    def table_lines(self, tbl: etree._Element) -> list[str]:
        """A table as "cell | cell" lines, the header row first, as rag_core.ingest.loaders.docx writes Word tables:
        merged (covered) cells appear once, empty cells are left out, a one-cell row gives its content lines and a
        table nested in a cell is flattened into it as "a, b; c, d"."""
        lines: list[str] = []
        in_rows = False
        for row in self._rows(tbl):
            self._tick()
            cells = [items for items in (self._cell_items(c) for c in self._cells(row)) if items]
            if len(cells) == 1 and len(row) == 1 and row.get(TABLE + "number-columns-repeated") is None:
                for item in cells[0]:
                    if isinstance(item, list):
                        _add_lines(lines, ["", *item, ""])
                    else:
                        _add_lines(lines, ["", item] if in_rows else [item])
                    in_rows = False
            elif cells:
                line = " | ".join(collapse_ws(" ".join(_flatten(i) for i in items)) for items in cells)
                _add_lines(lines, [line] if in_rows else ["", line])
                in_rows = True
        while lines and not lines[-1]:
            lines.pop()
        while lines and not lines[0]:
            lines.pop(0)
        return lines

    def _rows(self, parent: etree._Element) -> Iterator[etree._Element]:
        for child in parent.iterchildren(tag=etree.Element):
            if child.tag == _ROW:
                repeat = child.get(TABLE + "number-rows-repeated") or "1"
                for _ in range(min(int(repeat) if repeat.isdigit() else 1, _MAX_REPEAT)):
                    yield child
            elif child.tag in _ROW_GROUPS:
                yield from self._rows(child)

    def _cells(self, row: etree._Element) -> Iterator[etree._Element]:
        for cell in row.iterchildren(_CELL):  # covered cells (the rest of a merged cell) are left out
            repeat = cell.get(TABLE + "number-columns-repeated") or "1"
            for _ in range(min(int(repeat) if repeat.isdigit() else 1, _MAX_REPEAT)):
                yield cell

    def _cell_items(self, cell: etree._Element) -> list[str | list[str]]:
        items: list[str | list[str]] = []
        for block in self.blocks(cell):
            if block.kind is BlockKind.TABLE:
                items.append(block.text.split("\n"))
            elif block.text:
                items.append(block.text)
        return items


