"""HTML elements as text blocks: paragraphs, headings (h1-h6), lists ("- item"), tables ("cell | cell" rows) and
preformatted code, with the anchor text of links kept and their addresses dropped. Shared by the web page and EPUB
loaders; works on any lxml.html element (parsed by lxml's HTML parser, so tag names carry no namespace)."""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from lxml import etree, html

from rag_core.ingest.loaders._blocks import Block, BlockKind
from rag_core.ingest.loaders._common import collapse_ws

# Parsed as HTML, never as XML: no DTD is read, no entity is resolved from outside, nothing is fetched; comments and
# processing instructions are dropped. Nesting deeper than libxml2's limit (256) is cut there, which bounds recursion.
HTML_PARSER = html.HTMLParser(no_network=True, remove_comments=True, remove_pis=True, huge_tree=False,
                              default_doctype=False, collect_ids=False)

# Elements that are never text: code, styling, media, embedded objects and form controls.
SKIP_TAGS = frozenset({
    "script", "style", "noscript", "template", "svg", "math", "canvas", "iframe", "frame", "frameset", "object",
    "embed", "video", "audio", "source", "track", "map", "img", "picture", "button", "input", "select", "textarea",
    "option", "optgroup", "datalist", "head", "title", "link", "meta", "base", "param", "dialog",
})
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
# Elements that start a new block of text; everything else is inline (its text joins the paragraph it is in).
_BLOCKS = frozenset({
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote", "pre", "ul", "ol",
    "menu", "dir", "li", "dl", "dt", "dd", "table", "tr", "td", "th", "thead", "tbody", "tfoot", "caption", "figure",
    "figcaption", "h1", "h2", "h3", "h4", "h5", "h6", "hgroup", "address", "details", "summary", "hr", "center",
    "fieldset", "legend", "form", "body", "html", "listing", "plaintext", "xmp",
})
_PRE = frozenset({"pre", "listing", "plaintext", "xmp"})
_LAYOUT_IN_CELL = frozenset({"table", "h1", "h2", "h3", "h4", "h5", "h6"})  # a cell holding these lays out a page
_LAYOUT_CELL_CHARS = 400  # a table cell holding this much text is a page region, not a value
_DEADLINE_EVERY = 2048  # elements between two deadline checks
_MAX_DEPTH = 400  # recursion guard, above libxml2's own nesting limit
_SPACE_RE = re.compile(r"[ \t\r\f\v\u00a0]+")
_PERMALINK_RE = re.compile(r"(?:\s*[¶§🔗]|\s+#)+$")  # a heading's permalink marker ("Configuration¶"), not its text
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))  # soft hyphens, zero-width marks


def tag_of(el: etree._Element) -> str:
    """The element's lower-case local name ("" for comments and other non-elements)."""
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].rsplit(":", 1)[-1].lower()


def blocks_of(root: etree._Element, tick: Callable[[], None] = lambda: None,
              anchors: frozenset[str] = frozenset(), max_chars: int | None = None) -> tuple[list[Block], dict[str, int]]:
    """The blocks of text under `root` in document order, and for each id of `anchors` found there the index of the
    first block at or after that element; `tick` is called every few thousand elements (it checks the deadline), and
    OverflowError is raised there once the blocks hold more than `max_chars` characters."""
    walker = _Walker(tick, anchors, max_chars)
    walker.walk(root, 0)
    walker.flush()
    return walker.blocks, walker.found


class _Walker:
    """Walks an element tree once, gathering inline text into paragraphs."""

    def __init__(self, tick: Callable[[], None], anchors: frozenset[str], max_chars: int | None = None) -> None:
        self.blocks: list[Block] = []
        self.found: dict[str, int] = {}
        self._anchors = anchors
        self._inline: list[str] = []
        self._tick = tick
        self._max_chars = max_chars
        self._count = 0
        self._chars = self._counted = 0  # characters in the first _counted blocks
        self._bullets: list[str] = []  # prefixes of the open list items, innermost last
        self._bullet_used: list[bool] = []

    def _check_size(self) -> None:
        """OverflowError once the blocks so far hold more than the walk's max_chars characters."""
        if self._max_chars is None:
            return
        self._chars += sum(len(b.text) for b in self.blocks[self._counted:])
        self._counted = len(self.blocks)
        if self._chars > self._max_chars:
            raise OverflowError(f"text longer than {self._max_chars} characters")

    def flush(self) -> None:
        """End the current paragraph (or list item) and store it."""
        raw = "".join(self._inline)
        self._inline = []
        lines = [line for line in (collapse_ws(part) for part in raw.split("\n")) if line]
        if not lines:
            return
        if self._bullets:
            prefix = self._bullets[-1]
            lines = [(prefix if not self._bullet_used[-1] and i == 0 else " " * len(prefix)) + line
                     for i, line in enumerate(lines)]
            self._bullet_used[-1] = True
            self.blocks.append(Block(BlockKind.LIST, "\n".join(lines)))
        else:
            self.blocks.append(Block(BlockKind.PARA, "\n".join(lines)))

    def _text(self, text: str | None) -> None:
        if text:
            self._inline.append(_SPACE_RE.sub(" ", text.replace("\n", " ").translate(_INVISIBLE)))

    def walk(self, el: etree._Element, depth: int) -> None:
        """Add the text of `el` (not its tail) to the blocks."""
        self._count += 1
        if not self._count % _DEADLINE_EVERY:
            self._tick()
            self._check_size()
        tag = tag_of(el)
        if not tag or tag in SKIP_TAGS:
            return
        if self._anchors:
            self._anchor(el)
        if depth > _MAX_DEPTH:
            self._text(" ".join(el.itertext()))
            return
        if tag == "br":
            self._inline.append("\n")
            return
        if tag not in _BLOCKS:
            self._children(el, depth)
            return
        self.flush()
        if tag in _HEADINGS:
            text = _PERMALINK_RE.sub("", collapse_ws(" ".join(_texts(el))))
            if text:
                self.blocks.append(Block(BlockKind.HEADING, text, _HEADINGS[tag]))
        elif tag in _PRE:
            code = _pre_text(el)
            if code:
                self.blocks.append(Block(BlockKind.PARA, code))
        elif tag == "table" and not is_layout_table(el):
            rows = table_rows(el)
            if rows:
                self.blocks.append(Block(BlockKind.TABLE, "\n".join(rows)))
        elif tag == "li":
            self._bullets.append("  " * len(self._bullets) + "- ")
            self._bullet_used.append(False)
            self._children(el, depth)
            self.flush()
            self._bullets.pop()
            self._bullet_used.pop()
        else:
            self._children(el, depth)
            self.flush()

    def _anchor(self, el: etree._Element) -> None:
        """Note where a wanted id starts: at the next block (what is pending so far belongs to the one before)."""
        ident = el.get("id") or (el.get("name") if tag_of(el) == "a" else None)
        if ident and ident in self._anchors and ident not in self.found:
            self.flush()
            self.found[ident] = len(self.blocks)

    def _children(self, el: etree._Element, depth: int) -> None:
        self._text(el.text)
        for child in el.iterchildren():
            self.walk(child, depth + 1)
            self._text(child.tail)


def _texts(el: etree._Element) -> Iterator[str]:
    """The text under `el`, skipping SKIP_TAGS elements (their tails are kept)."""
    if el.text:
        yield el.text.translate(_INVISIBLE)
    for child in el.iterchildren():
        tag = tag_of(child)
        if tag and tag not in SKIP_TAGS:
            yield from (" ",) if tag == "br" else _texts(child)
        if child.tail:
            yield child.tail.translate(_INVISIBLE)


def _pre_text(el: etree._Element) -> str:
    """Preformatted text with its lines kept (trailing spaces and blank lines at either end dropped)."""
    lines = [line.rstrip() for line in "".join(_texts(el)).expandtabs(4).split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def is_layout_table(table: etree._Element) -> bool:
    """A table that lays out a page (nested tables, paragraphs or long text in its cells), not one of values."""
    if (table.get("role") or "").lower() in ("presentation", "none"):
        return True
    for cell in _cells(table):
        for child in cell.iter():
            if child is not cell and tag_of(child) in _LAYOUT_IN_CELL:
                return True
        if len(" ".join(_texts(cell))) > _LAYOUT_CELL_CHARS:
            return True
    return False


def _rows(table: etree._Element) -> Iterator[etree._Element]:
    """The table's own rows (not those of nested tables): header rows first, then body rows, then footer rows."""
    groups: dict[str, list[etree._Element]] = {"thead": [], "tbody": [], "tfoot": []}
    for child in table.iterchildren():
        tag = tag_of(child)
        if tag == "tr":
            groups["tbody"].append(child)
        elif tag in groups:
            groups[tag].extend(r for r in child.iterchildren() if tag_of(r) == "tr")
    for name in ("thead", "tbody", "tfoot"):
        yield from groups[name]


def _cells(table: etree._Element) -> Iterator[etree._Element]:
    for row in _rows(table):
        yield from (c for c in row.iterchildren() if tag_of(c) in ("td", "th"))


def table_rows(table: etree._Element) -> list[str]:
    """A data table as "cell | cell" lines, its caption first; empty rows dropped."""
    lines: list[str] = []
    caption = next((c for c in table.iterchildren() if tag_of(c) == "caption"), None)
    if caption is not None:
        text = collapse_ws(" ".join(_texts(caption)))
        if text:
            lines.append(text)
    for row in _rows(table):
        cells = [collapse_ws(" ".join(_texts(c))) for c in row.iterchildren() if tag_of(c) in ("td", "th")]
        if any(cells):
            lines.append(" | ".join(cells))
    return lines
