"""PowerPoint (.pptx) with python-pptx: a page and a section per slide ("Slide 3 — Budget"), its text in reading order,
tables as rows under their header, speaker notes kept and marked.

Each slide begins with its heading line ("Slide 3 — <title>", or "Slide 3" when it has no title), so the slide
number is in the text as well as in the citation's page; then its shapes top to bottom and, for shapes side by side,
left to right (shapes in a group in the same order, inside the group); a table as "cell | cell" lines under its
header row (a long one in blocks that each repeat the header, rag_core.ingest.loaders._tables); then the speaker
notes after a line "Speaker notes:". Date, footer and slide-number placeholders are left out (they repeat on every
slide); pictures and SmartArt have no text here; a chart gives its title.
"""
from __future__ import annotations

import io
import logging
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from lxml import etree
from pptx import Presentation
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.exc import PythonPptxError

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, DocChatError, NoText
from rag_core.core.models import Progress
from rag_core.ingest.loaders._archive import check_inflated
from rag_core.ingest.loaders._blocks import Block, BlockKind, assemble
from rag_core.ingest.loaders._common import Extracted, build_sections, check_zip, choose_title, clean_text, collapse_ws
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders._tables import block_budget, cell_text, header_blocks, row_line

log = logging.getLogger(__name__)

NOTES_MARK = "Speaker notes:"
_ROW_BAND = 228_600  # EMU (a quarter inch): shapes whose tops are this close are one row, read left to right
_SKIPPED_PLACEHOLDERS = frozenset({PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.SLIDE_NUMBER,
                                   PP_PLACEHOLDER.HEADER})
# Errors python-pptx raises on damaged files (lxml's parse errors are SyntaxErrors too).
_PPTX_ERRORS = (PythonPptxError, KeyError, IndexError, ValueError, TypeError, AttributeError, SyntaxError,
                etree.LxmlError, zipfile.BadZipFile, zlib.error, EOFError, OSError)


def load_pptx(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    """Extract a .pptx: one page and section per slide, text in reading order, tables, speaker notes; zip-bomb checked
    here, read in a child process stopped at `deadline` (rag_core.ingest.loaders._isolated)."""
    check_zip(data, file_name, settings, "ppt/presentation.xml", "PowerPoint file")
    return run_isolated(read_pptx, (data, file_name, settings), deadline or Deadline.never(file_name), "PowerPoint",
                        progress)


def read_pptx(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
              progress: Progress | None = None) -> Extracted:
    """`load_pptx` in this process, checking `deadline` between slides."""
    check_zip(data, file_name, settings, "ppt/presentation.xml", "PowerPoint file")
    check_inflated(data, file_name, settings.ingest.max_docx_uncompressed_mb, "PowerPoint file", deadline)
    try:
        prs = Presentation(io.BytesIO(data))
        slides = list(prs.slides)
    except _PPTX_ERRORS as e:
        raise CorruptFile(file_name, "the PowerPoint file could not be opened") from e
    budget = block_budget(settings.ingest.chunk_tokens)
    blocks: list[Block] = []
    first_title = ""
    has_text = False
    for n, slide in enumerate(slides, 1):
        deadline.check()
        if progress is not None:
            progress("reading", n - 1, len(slides))
        try:
            title, body = _slide(slide, n, budget)
        except DocChatError:
            raise
        except _PPTX_ERRORS as e:
            raise CorruptFile(file_name, f"slide {n} could not be read") from e
        first_title = first_title or title
        has_text = has_text or bool(title) or any(b.kind is not BlockKind.SHEET for b in body)
        label = f"Slide {n} — {title}" if title else f"Slide {n}"
        blocks += [Block(BlockKind.SLIDE, label), Block(BlockKind.PARA, label), *body]
    if not has_text:
        raise NoText(file_name)
    joined = assemble(blocks, deadline)
    core_title = ""
    try:
        core_title = collapse_ws(prs.core_properties.title or "")
    except _PPTX_ERRORS as e:
        log.info("%s: unreadable core properties (%s)", file_name, e)
    title = choose_title(file_name, core_title, first_title)
    return Extracted(joined.text, build_sections(joined.text, joined.heads), title, page_count=len(slides),
                     page_starts=joined.page_starts)


def _slide(slide: Any, n: int, budget: int) -> tuple[str, list[Block]]:
    """A slide's title ("" when it has none) and the blocks of its shapes and notes."""
    title_shape = slide.shapes.title
    title = collapse_ws(clean_text(title_shape.text_frame.text)) if title_shape is not None else ""
    skip = title_shape.shape_id if title_shape is not None else None
    shapes = [s for s in slide.shapes if s.shape_id != skip and not _boilerplate(s)]
    label = f"Slide {n} — {title}" if title else f"Slide {n}"
    body = list(_shape_blocks(_reading_order(shapes), label, budget))
    if slide.has_notes_slide:
        frame = slide.notes_slide.notes_text_frame
        notes = _frame_text(frame) if frame is not None else ""
        if notes:
            body.append(Block(BlockKind.PARA, f"{NOTES_MARK}\n{notes}"))
    if slide._element.get("show") in ("0", "false"):
        log.debug("slide %d is hidden in the slide show; read all the same", n)
    return title, body


def _boilerplate(shape: Any) -> bool:
    """A date, footer, header or slide-number placeholder (the same on every slide)."""
    return bool(shape.is_placeholder) and shape.placeholder_format.type in _SKIPPED_PLACEHOLDERS


def _reading_order(shapes: Iterable[Any]) -> list[Any]:
    """Shapes top to bottom; those whose tops are within _ROW_BAND of a row's first one, left to right."""
    by_top = sorted(shapes, key=lambda s: (s.top or 0, s.left or 0))
    rows: list[list[Any]] = []
    for shape in by_top:
        if rows and (shape.top or 0) - (rows[-1][0].top or 0) <= _ROW_BAND:
            rows[-1].append(shape)
        else:
            rows.append([shape])
    return [s for row in rows for s in sorted(row, key=lambda s: s.left or 0)]


def _shape_blocks(shapes: Iterable[Any], label: str, budget: int) -> Iterator[Block]:
    """The blocks of shapes in order: text frames, tables (each block of rows a section `label` of its own), the
    shapes of groups, chart titles."""
    for shape in shapes:
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            yield from _shape_blocks(_reading_order(shape.shapes), label, budget)
        elif getattr(shape, "has_table", False) and shape.has_table:
            for block in _table_blocks(shape.table, budget):
                yield Block(BlockKind.SHEET, label)  # a section of its own: every passage of it starts at the header
                yield Block(BlockKind.TABLE, "\n".join(block))
        elif getattr(shape, "has_chart", False) and shape.has_chart:
            chart = shape.chart
            if chart.has_title and chart.chart_title.has_text_frame:
                text = collapse_ws(clean_text(chart.chart_title.text_frame.text))
                if text:
                    yield Block(BlockKind.PARA, f"Chart: {text}")
        elif shape.has_text_frame:
            text = _frame_text(shape.text_frame)
            if text:
                yield Block(BlockKind.PARA, text)


def _frame_text(frame: Any) -> str:
    """A text frame's paragraphs, one per line (line breaks inside a paragraph too), indented by outline level."""
    lines = []
    for para in frame.paragraphs:
        indent = "  " * max(0, min(int(para.level or 0), 8))
        for line in clean_text(para.text.replace("\v", "\n")).split("\n"):
            line = collapse_ws(line)
            if line:
                lines.append(indent + line)
    return "\n".join(lines)


def _table_blocks(table: Any, budget: int) -> list[list[str]]:
    """A table's rows as "cell | cell" lines under its first row, in blocks of about a passage; cells covered by a
    merged one are left out."""
    rows = []
    for row in table.rows:
        cells = [cell_text(cell.text) for cell in row.cells if not cell.is_spanned]
        if any(cells):
            rows.append(row_line(cells))
    if not rows:
        return []
    return header_blocks(rows[0], rows[1:], budget) or [[rows[0]]]
