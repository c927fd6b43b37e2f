"""Scanned PDFs made inside the tests (image-only pages, no text layer) and the library state they must leave."""
from __future__ import annotations

import pymupdf
import pytest

from rag_core.ingest.loaders.ocr import find_tessdata, installed_languages
from rag_core.ingest.originals import originals_dir

needs_ocr = pytest.mark.skipif("eng" not in installed_languages(find_tessdata()),
                               reason="Tesseract with the English pack is not installed (make ocr)")

FACT = ("The lighthouse keeper of Port Elspeth winds the great clock every Tuesday at dawn. The harbour ledger is bound "
        "in green leather and kept in the customs house.")
OTHER = ("Bern is the federal city of Switzerland and lies on the Aare. Its old town is a World Heritage Site with "
         "long arcades and many fountains.")


def scan(texts: list[str], dpi: int = 150) -> bytes:
    """An image-only PDF: one picture of each text per page, no text layer at all."""
    out = pymupdf.open()
    for text in texts:
        src = pymupdf.open()
        page = src.new_page(width=420, height=300)
        page.insert_textbox(pymupdf.Rect(20, 20, 400, 280), text, fontsize=13)
        pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
        scanned = out.new_page(width=420, height=300)
        scanned.insert_image(scanned.rect, stream=pix.tobytes("png"))
    return out.tobytes()


def repeated_scan(pages: int, dpi: int = 150, width: float = 420, height: float = 300) -> bytes:
    """An image-only PDF of `pages` pages showing the same picture of FACT (one image, stored once)."""
    src = pymupdf.open()
    page = src.new_page(width=width, height=height)
    page.insert_textbox(pymupdf.Rect(10, 10, width - 10, height - 10), FACT, fontsize=13 * width / 420)
    png = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY).tobytes("png")
    out = pymupdf.open()
    xref = 0
    for _ in range(pages):
        scanned = out.new_page(width=width, height=height)
        xref = scanned.insert_image(scanned.rect, stream=png) if not xref else \
            scanned.insert_image(scanned.rect, xref=xref)
    return out.tobytes()


def library_state(library) -> tuple:
    """(chunk count, document ids, saved PDF copies): what a stopped or refused file must leave unchanged."""
    folder = originals_dir(library.settings)
    return (library.store.count_chunks(), [d.doc_id for d in library.documents()],
            sorted(p.name for p in folder.iterdir()) if folder.exists() else [])
