"""Reading order of a PDF page's text blocks: columns where a vertical gutter runs through a region, else bands read
top to bottom, each band's blocks left to right (right to left on a right-to-left page)."""
from __future__ import annotations

import math

from rag_core.ingest.loaders._pdf_blocks import TextBlock

MIN_GUTTER = 4.0  # points between two columns


def reading_order(blocks: list[TextBlock], rtl: bool) -> list[TextBlock]:
    """Reading order: split into columns where a vertical gutter runs through a region, else into bands."""
    if len(blocks) <= 1:
        return list(blocks)
    split = _vertical_split(blocks)
    if split is not None:
        left, right = split
        first, second = (right, left) if rtl else (left, right)
        return reading_order(first, rtl) + reading_order(second, rtl)
    bands = _bands(blocks)
    if len(bands) == 1:
        return _line_sort(blocks, rtl)
    # Consecutive bands that together still have a gutter are the same columns (their paragraph gaps
    # just happen to line up): keep them together so each column is read to its end.
    groups: list[list[TextBlock]] = [bands[0]]
    for band in bands[1:]:
        merged = groups[-1] + band
        if _vertical_split(merged) is not None:
            groups[-1] = merged
        else:
            groups.append(band)
    return [b for g in groups for b in reading_order(g, rtl)]


def _vertical_split(blocks: list[TextBlock]) -> tuple[list[TextBlock], list[TextBlock]] | None:
    """The widest gutter (an x-range no block crosses) that leaves real text columns on both sides."""
    boxes = sorted(((b.bbox(), b) for b in blocks), key=lambda t: t[0][0])
    left_edge = boxes[0][0][0]
    right_edge = max(box[2] for box, _ in boxes)
    width = right_edge - left_edge
    best: tuple[float, float] | None = None
    reach = boxes[0][0][2]
    for box, _ in boxes[1:]:
        gap = box[0] - reach
        if gap >= MIN_GUTTER and reach - left_edge >= 0.2 * width and right_edge - box[0] >= 0.2 * width \
                and (best is None or gap > best[0]):
            best = (gap, (reach + box[0]) / 2)
        reach = max(reach, box[2])
    if best is None:
        return None
    cut = best[1]
    left = [b for box, b in boxes if box[2] <= cut]
    right = [b for box, b in boxes if box[2] > cut]
    for side in (left, right):
        rows = sum(len(b.live) for b in side)
        if rows < 2:
            return None
    if max(len(b.live) for b in left + right) < 2:  # a grid of one-line pieces (a form): not columns
        return None
    return left, right


def _bands(blocks: list[TextBlock]) -> list[list[TextBlock]]:
    """Horizontal bands separated by y-gaps that no block crosses."""
    items = sorted(blocks, key=lambda b: b.bbox()[1])
    bands: list[list[TextBlock]] = []
    bottom = -math.inf
    for b in items:
        x0, y0, x1, y1 = b.bbox()
        if bands and y0 < bottom - 1.0:
            bands[-1].append(b)
            bottom = max(bottom, y1)
        else:
            bands.append([b])
            bottom = y1
    return bands


def _line_sort(blocks: list[TextBlock], rtl: bool) -> list[TextBlock]:
    """Blocks that overlap vertically form a line, read left to right (right to left for RTL pages)."""
    items = sorted(blocks, key=lambda b: b.bbox()[1])
    lines: list[tuple[float, float, list[TextBlock]]] = []
    for b in items:
        _, y0, _, y1 = b.bbox()
        if lines:
            top, bottom, members = lines[-1]
            overlap = min(bottom, y1) - max(top, y0)
            if overlap >= 0.5 * min(bottom - top, y1 - y0):
                lines[-1] = (min(top, y0), max(bottom, y1), members + [b])
                continue
        lines.append((y0, y1, [b]))
    out: list[TextBlock] = []
    for _, _, members in lines:
        out.extend(sorted(members, key=lambda b: -b.bbox()[2] if rtl else b.bbox()[0]))
    return out
