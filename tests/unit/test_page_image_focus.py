""""Show on the page" on a phone (issue 28): the picture of a cited table row was cut to the whole passage, 968 px
wide for 480 points of page, and shown 236 px wide on a 390-px screen: its letters were 3 px tall. The focused
picture is cut to the cited words and drawn larger, so they stay readable in a phone's column."""
from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from rag_core.core.config import Settings
from rag_core.ingest.loaders import load_bytes
from rag_core.service import render

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
NAME = "pdf_text_multicolumn_3-pages.pdf"  # page 3: a table of EU countries, set in a 10-pt font
PHONE_COLUMN_PX = 236  # the width the picture had on a 390-px phone screen (issue 28)


def _orange_rows(png: bytes) -> tuple[int, int, int]:
    """(width, tallest run of rows holding the orange evidence highlight: one line's height, orange pixels)."""
    im = Image.open(io.BytesIO(png)).convert("RGB")
    w, h = im.size
    px = im.load()
    rows = [sum(1 for x in range(0, w, 2) if _orange(px[x, y])) for y in range(h)]
    run = tallest = 0
    for n in rows:
        run = run + 1 if n else 0
        tallest = max(tallest, run)
    return w, tallest, 2 * sum(rows)


def _orange(rgb: tuple[int, int, int]) -> bool:
    r, g, b = rgb
    return r > 220 and 120 < g < 200 and b < 120


def _on_phone_px(png: bytes) -> float:
    """How tall the highlighted line is on screen when the picture is shown PHONE_COLUMN_PX wide."""
    width, rows, _ = _orange_rows(png)
    return rows * PHONE_COLUMN_PX / width


def test_the_cited_words_are_enlarged_to_be_read_in_a_phone_column():
    pdf = (DOCS / NAME).read_bytes()
    doc = load_bytes(pdf, NAME, Settings())
    passage, evidence = doc.text[doc.page_starts[2]:], "Belgium | 11.5"
    page, whole = render.pdf_page_for(pdf, passage, 3, 3, evidence)
    page_f, focused = render.pdf_page_for(pdf, passage, 3, 3, evidence, focus=True)
    assert page == page_f == 3
    assert _orange_rows(focused)[2] > 500  # the cited cells are in the picture, highlighted
    w_focus, h_focus = Image.open(io.BytesIO(focused)).size
    assert w_focus >= 900  # drawn large: not a small crop the browser scales up
    assert _on_phone_px(whole) < 7  # before: a 10-pt table row about 5 px tall on the phone, unreadable
    assert _on_phone_px(focused) >= 12  # now: taller than the phone's own small print
    assert h_focus < w_focus  # a strip around the cited row, not the whole table


def test_a_cited_row_across_the_page_is_cut_into_strips_one_under_another():
    pdf = (DOCS / NAME).read_bytes()
    doc = load_bytes(pdf, NAME, Settings())
    passage, row = doc.text[doc.page_starts[2]:], "Belgium | 11.5 | 30,689 | Brussels | Dutch, French, German"
    _, whole = render.pdf_page_for(pdf, passage, 3, 3, row)
    _, focused = render.pdf_page_for(pdf, passage, 3, 3, row, focus=True)
    width, height = Image.open(io.BytesIO(focused)).size
    assert height > width * 0.6  # stacked strips, not one long thin row
    assert _on_phone_px(whole) < 7 and _on_phone_px(focused) >= max(10, 2 * _on_phone_px(whole))


def test_without_evidence_the_focus_is_the_passage_as_before():
    pdf = (DOCS / NAME).read_bytes()
    doc = load_bytes(pdf, NAME, Settings())
    passage = doc.text[doc.page_starts[2]:]
    assert render.pdf_page_for(pdf, passage, 3, 3, None, focus=True) == render.pdf_page_for(pdf, passage, 3, 3)
