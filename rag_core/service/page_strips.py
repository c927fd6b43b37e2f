"""A wide cited line (a table row across the page) cut into strips stacked one under the other, so a phone's narrow
column shows its words large: a 450-point row drawn 236 pixels wide has letters 5 pixels tall, two 225-point strips
twice that (issue 28). The cuts fall in the gaps between words."""
from __future__ import annotations

import math
from typing import Any

#: The widest strip, in points: about a column of text, readable when drawn as wide as a phone's column.
STRIP_PT = 240.0
#: Cited words this tall (points) or taller are a paragraph, not a line to cut: two lines of 11-point text.
LINES_PT = 30.0
GAP_PT = 8.0  # between two strips


def one_wide_line(clip: Any, box: Any) -> bool:
    """Whether the cited words (`box`, drawn as `clip`) are one or two lines much wider than a strip: only then are
    they cut into strips (the lines of a paragraph cut so would read left halves first)."""
    return bool(clip.width > 1.5 * STRIP_PT and box.height < LINES_PT)


def _cut_near(words: list[tuple[float, float]], x: float, low: float, high: float) -> float:
    """The x nearest to `x`, between `low` and `high`, that no word covers (else `x`)."""
    gaps = [(a[1] + b[0]) / 2 for a, b in zip(words, words[1:], strict=False) if b[0] > a[1] and low < a[1] < high]
    return min(gaps, key=lambda g: abs(g - x), default=x)


def stacked_png(doc: Any, page_index: int, clip: Any, zoom: float) -> bytes:
    """PNG of `clip` on page `page_index` of `doc` (highlights baked in), in strips of at most STRIP_PT points."""
    import pymupdf

    doc.bake()  # the highlight annotations become page content, so the strips copy them
    page = doc[page_index]
    n = math.ceil(clip.width / STRIP_PT)
    words = sorted((w[0], w[2]) for w in page.get_text("words", clip=clip))
    step = clip.width / n
    cuts = [clip.x0]
    for i in range(1, n):
        cuts.append(_cut_near(words, clip.x0 + i * step, cuts[-1] + step / 2, clip.x0 + (i + 0.5) * step))
    cuts.append(clip.x1)
    strips = [pymupdf.Rect(a, clip.y0, b, clip.y1) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    out = pymupdf.open()
    try:
        width = max(s.width for s in strips)
        sheet = out.new_page(width=width, height=sum(s.height for s in strips) + GAP_PT * (len(strips) - 1))
        y = 0.0
        for i, strip in enumerate(strips):
            if i:  # a thin rule between two strips: the line goes on below
                sheet.draw_line((0, y - GAP_PT / 2), (width, y - GAP_PT / 2), color=(0.6, 0.6, 0.6), width=0.5)
            sheet.show_pdf_page(pymupdf.Rect(0, y, strip.width, y + strip.height), doc, page_index, clip=strip)
            y += strip.height + GAP_PT
        return sheet.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom)).tobytes("png")
    finally:
        out.close()
