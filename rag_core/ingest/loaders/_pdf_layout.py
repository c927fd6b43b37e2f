"""PDF page layout: rows from MuPDF lines, paragraphs, tables, font-size headings; the column-aware reading order of
a page's blocks is in _pdf_order, the lines, rows, blocks and pages both work on in _pdf_blocks."""
from __future__ import annotations

import re
from collections import Counter

from rag_core.ingest.loaders._common import clean_text, collapse_ws, reads_as_text
from rag_core.ingest.loaders._pdf_blocks import Line, Page, Row, TextBlock
from rag_core.ingest.loaders._pdf_order import MIN_GUTTER, reading_order

_CELL_GAP = 1.0  # a gap of this many font sizes between two pieces of a row separates table cells
RTL_RE = re.compile("[\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefc]")
LETTER_RE = re.compile(r"[^\W\d_]")
_FFFD_RUN_RE = re.compile("\ufffd+")
# A row that starts a list item: a bullet glyph, or "1)", "(a)", "iv)".
_LIST_START_RE = re.compile(r"^(?:[•◦▪▫‣∙●○■□➢➤✓✔]|\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,5})\))\s")
_PARA_END = ".!?:;\"”»)"


def split_columns(lines: list[Line]) -> list[list[Line]]:
    """Split a block whose lines sit in side-by-side prose columns (MuPDF sometimes merges them).

    A table also has a gutter between its columns, so both sides must hold at least 3 lines of
    prose-length text (20+ characters on average) before the block is split.
    """
    if len(lines) < 6:
        return [lines]
    ordered = sorted(lines, key=lambda l: l.x0)
    left_edge = ordered[0].x0
    right_edge = max(l.x1 for l in lines)
    width = right_edge - left_edge
    best: tuple[float, float] | None = None
    reach = ordered[0].x1
    for line in ordered[1:]:
        gap = line.x0 - reach
        if gap >= MIN_GUTTER and reach - left_edge >= 0.25 * width and right_edge - line.x0 >= 0.25 * width \
                and (best is None or gap > best[0]):
            best = (gap, (reach + line.x0) / 2)
        reach = max(reach, line.x1)
    if best is None:
        return [lines]
    left = [l for l in lines if l.x1 <= best[1]]
    right = [l for l in lines if l.x1 > best[1]]
    for side in (left, right):
        if len(side) < 3 or sum(len(l.text) for l in side) < 20 * len(side):
            return [lines]
    return split_columns(left) + split_columns(right)


def clean_line(text: str) -> str:
    """One visual line: unmappable glyphs and control characters dropped, whitespace collapsed."""
    text = _FFFD_RUN_RE.sub(" ", text).rstrip()
    if text.endswith("\u00ad"):  # a soft hyphen at the end of a line is a real line-break hyphen
        text = text[:-1] + "-"
    return collapse_ws(clean_text(text))


def _is_rtl(text: str) -> bool:
    """Mostly Arabic/Hebrew letters?"""
    return bool(RTL_RE.search(text)) and len(RTL_RE.findall(text)) > len(LETTER_RE.findall(text)) / 2


def build_rows(lines: list[Line]) -> list[Row]:
    """Group a block's lines that share a baseline into rows (PyMuPDF splits lines at wide gaps)."""
    groups: list[list[Line]] = []
    for line in lines:
        if groups:
            g = groups[-1]
            top, bottom = min(l.y0 for l in g), max(l.y1 for l in g)
            overlap = min(bottom, line.y1) - max(top, line.y0)
            if overlap >= 0.5 * min(bottom - top, line.y1 - line.y0):
                g.append(line)
                continue
        groups.append([line])
    rows: list[Row] = []
    for g in groups:
        rtl = _is_rtl("".join(l.text for l in g))
        g.sort(key=lambda l: -l.x1 if rtl else l.x0)
        raw_cells: list[tuple[list[str], list[float]]] = []  # (texts, x edges)
        prev: Line | None = None
        for line in g:
            size = max(line.size, 1.0)
            gap = 0.0 if prev is None else ((prev.x0 - line.x1) if rtl else (line.x0 - prev.x1))
            if prev is None or gap >= _CELL_GAP * size:
                raw_cells.append(([line.text], [line.x0, line.x1]))
            else:
                raw_cells[-1][0].append((" " if gap > 0.1 * size else "") + line.text)
                raw_cells[-1][1].extend((line.x0, line.x1))
            prev = line
        pieces = [(clean_line("".join(parts)), (min(xs), max(xs))) for parts, xs in raw_cells]
        cells = [c for c, _ in pieces if c]
        if not cells:
            continue
        sizes: Counter[float] = Counter()
        for line in g:
            sizes[line.size] += len(line.text)
        rows.append(Row(
            min(l.x0 for l in g), min(l.y0 for l in g), max(l.x1 for l in g), max(l.y1 for l in g),
            " ".join(cells), sizes.most_common(1)[0][0], all(l.bold for l in g), cells,
            [span for c, span in pieces if c], all(l.mono for l in g),
        ))
    return rows


# ---------------------------------------------------------------- paragraphs


def page_paragraphs(page: Page, body: float, levels: dict[float, int]) -> list[tuple[str, int | None]]:
    """(paragraph text, heading level or None) in reading order; paragraphs cut by a column break rejoined."""
    out: list[tuple[str, int | None, bool]] = []  # (text, level, may run on into the next block)
    blocks = reading_order([b for b in page.blocks if b.live], page.rtl)
    levels_of = [_font_heading_level(b, body, levels) for b in blocks]
    tables = [level is None and _is_table(b.live) for b, level in zip(blocks, levels_of)]
    header: Row | None = None  # the header row of the next table, taken from the end of the block before it
    for k, block in enumerate(blocks):
        level = levels_of[k]
        if level is not None:
            out.append((collapse_ws(" ".join(r.text for r in block.live)), level, False))
            continue
        if tables[k]:
            out.append((_table_text(([header] if header else []) + block.live), None, False))
            header = None
            continue
        if k + 1 < len(blocks) and tables[k + 1]:
            header = _table_header(block.live[-1], blocks[k + 1].live)
            if header is not None:
                if len(block.live) == 1:
                    continue
                block = TextBlock(block.live[:-1])
        paragraphs = _block_paragraphs(block)
        for i, text in enumerate(paragraphs):
            runs_on = i == len(paragraphs) - 1 and header is None and _ends_full_line(block)
            if i == 0 and out and out[-1][2] and out[-1][0][-1] not in _PARA_END and text[:1].islower():
                out[-1] = (join_lines(out[-1][0], text), None, runs_on)
            else:
                out.append((text, None, runs_on))
    out.extend((text, None, False) for text in page.rotated)
    return [(text, level) for text, level, _ in out]


def _ends_full_line(block: TextBlock) -> bool:
    """A multi-line block whose last line runs to the right edge: its paragraph may go on elsewhere."""
    rows = block.live
    if len(rows) < 2:
        return False
    x0, _, x1, _ = block.bbox()
    return rows[-1].x1 >= x1 - max(2 * rows[-1].size, 0.12 * (x1 - x0))


def _block_paragraphs(block: TextBlock) -> list[str]:
    """A block's rows joined into paragraphs: lines joined with spaces, hyphenated words rejoined."""
    rows = block.live
    x0, _, x1, _ = block.bbox()
    width = max(x1 - x0, 1.0)
    paras: list[str] = []
    current = rows[0].text
    for prev, row in zip(rows, rows[1:]):
        size = max(prev.size, row.size, 1.0)
        gap = row.y0 - prev.y1
        short = prev.x1 < x1 - max(2 * size, 0.12 * width)
        if gap > 0.9 * size or (short and prev.text[-1] in _PARA_END):
            paras.append(current)
            current = row.text
        elif (prev.mono and row.mono) or _LIST_START_RE.match(row.text):
            current += "\n" + row.text
        else:
            current = join_lines(current, row.text)
    paras.append(current)
    return paras


def _is_table(rows: list[Row]) -> bool:
    """Rows made of several widely spaced cells, in at least half of a block of 2+ rows."""
    multi = sum(1 for r in rows if len(r.cells) >= 2)
    return len(rows) >= 2 and multi >= 2 and multi >= 0.5 * len(rows)


def _table_header(row: Row, table: list[Row]) -> Row | None:
    """`row` when it is the header of the table right below it: 2+ cells lined up with the table's columns.

    Same cell count, each cell nearest its own column; or (header cells spanning columns) every cell
    overlapping a column and every column overlapped by a cell. PyMuPDF often puts a table's header
    row in one block with the caption above it.
    """
    size = max(row.size, 1.0)
    if len(row.spans) < 2 or row.y1 > table[0].y0 + 0.5 * size or table[0].y0 - row.y1 > 2 * size:
        return None
    counts = Counter(len(r.spans) for r in table if len(r.spans) >= 2)
    n = counts.most_common(1)[0][0]
    body = [r for r in table if len(r.spans) == n]
    columns = [(min(r.spans[i][0] for r in body), max(r.spans[i][1] for r in body)) for i in range(n)]
    if len(row.spans) == n:
        def nearest(span: tuple[float, float]) -> int:
            mid = (span[0] + span[1]) / 2
            return min(range(n), key=lambda j: (_distance(span, columns[j]), abs(sum(columns[j]) / 2 - mid)))

        lined_up = all(nearest(s) == i and _distance(s, columns[i]) <= 2 * size for i, s in enumerate(row.spans))
        return row if lined_up else None
    covered = all(any(_distance(s, c) == 0 for c in columns) for s in row.spans)
    return row if covered and all(any(_distance(s, c) == 0 for s in row.spans) for c in columns) else None


def _distance(a: tuple[float, float], b: tuple[float, float]) -> float:
    """The horizontal gap between two x ranges (0 when they overlap)."""
    return max(0.0, max(a[0], b[0]) - min(a[1], b[1]))


def _table_text(rows: list[Row]) -> str:
    """One line per row, cells joined with " | "; a hyphenated word wrapped onto a one-cell row is rejoined."""
    lines: list[str] = []
    for row in rows:
        text = " | ".join(row.cells)
        if lines and len(row.cells) == 1 and lines[-1][-1:] in "-\u2010" and text[:1].islower():
            lines[-1] = join_lines(lines[-1], text)
        else:
            lines.append(text)
    return "\n".join(lines)


def join_lines(text: str, nxt: str) -> str:
    """Join two lines of a paragraph; "exam-" + "ple" -> "example", "Schwarz-" + "Weiß" -> "Schwarz-Weiß"."""
    if len(text) >= 2 and text[-1] in "-\u2010" and text[-2].isalpha():
        return text[:-1] + nxt if nxt[:1].islower() else text + nxt
    return text + " " + nxt


# ---------------------------------------------------------------- headings from font sizes


def body_font_size(pages: list[Page]) -> float:
    """The font size (to 0.5 pt) that carries the most characters: the body text."""
    sizes: Counter[float] = Counter()
    for page in pages:
        for block in page.blocks:
            for r in block.live:
                sizes[round(r.size * 2) / 2] += len(r.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _is_font_heading(block: TextBlock, body: float) -> bool:
    rows = block.live
    if not rows or len(rows) > 3 or body <= 0:
        return False
    text = " ".join(r.text for r in rows)
    if len(text) > 150 or not LETTER_RE.search(text) or reads_as_text(text):
        return False
    size = min(r.size for r in rows)
    return size >= 1.25 * body or (size >= 1.1 * body and all(r.bold for r in rows))


def font_heading_levels(pages: list[Page], body: float) -> dict[float, int]:
    """Heading font sizes (rounded) -> level, largest first."""
    sizes = {
        round(min(r.size for r in b.live) * 2) / 2
        for page in pages
        for b in page.blocks
        if b.live and _is_font_heading(b, body)
    }
    return {size: min(i + 1, 6) for i, size in enumerate(sorted(sizes, reverse=True))}


def _font_heading_level(block: TextBlock, body: float, levels: dict[float, int]) -> int | None:
    if not levels or not _is_font_heading(block, body):
        return None
    return levels.get(round(min(r.size for r in block.live) * 2) / 2)
