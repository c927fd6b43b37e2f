"""The pieces of a PDF page that layout (_pdf_layout) and reading order (_pdf_order) share: lines, rows, text blocks
and pages. Imports nothing of either, so the two never import each other."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Span:
    """A box of text on a page with its dominant font size and weight."""

    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float
    bold: bool


@dataclass
class Line(_Span):
    """One MuPDF line (horizontal text), with its dominant font size and style."""

    mono: bool = False


@dataclass
class Row(_Span):
    """The lines of a block that share a baseline, joined; `removed` marks a running header/footer."""

    cells: list[str] = field(default_factory=list)  # pieces separated by wide gaps (table cells)
    spans: list[tuple[float, float]] = field(default_factory=list)  # x0, x1 of each cell
    mono: bool = False  # monospaced (code): its line breaks are kept
    removed: bool = False


@dataclass
class TextBlock:
    """A MuPDF text block (or one column of it): the unit of reading order."""

    rows: list[Row]
    _bbox: tuple[float, float, float, float] | None = None

    @property
    def live(self) -> list[Row]:
        """Rows that are not running headers/footers."""
        return [r for r in self.rows if not r.removed]

    def bbox(self) -> tuple[float, float, float, float]:
        """Bounding box of the live rows (cached: only called after running lines are removed)."""
        if self._bbox is None:
            rows = self.live
            self._bbox = (
                min(r.x0 for r in rows), min(r.y0 for r in rows), max(r.x1 for r in rows), max(r.y1 for r in rows)
            )
        return self._bbox


@dataclass
class Page:
    """The text blocks of one page."""

    index: int
    blocks: list[TextBlock] = field(default_factory=list)
    rotated: list[str] = field(default_factory=list)  # text of non-horizontal lines, appended at the end
    rtl: bool = False
    hidden: list[str] = field(default_factory=list)  # text drawn invisibly (white or tiny), see pdf._invisible
