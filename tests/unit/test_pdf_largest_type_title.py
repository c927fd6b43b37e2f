"""A PDF without a title of its own is named after the line(s) page 1 states in its largest type (issue 47, item 7):
a slug file name ("some-product-spec.pdf") gives way to "Acme Rotor Controller"; a title wrapped over two lines is
joined; a small running header, a page number or a "Contents" page is not a title; a page all in one size keeps the
file name; a metadata title stays first. PDFs generated here with pymupdf, read by the real loader."""
from __future__ import annotations

import pymupdf
import pytest

from rag_core.core.config import Settings
from rag_core.ingest.loaders import load_bytes

SETTINGS = Settings()
SLUG = "some-product-spec.pdf"
BODY = ("Each rotor is rated for continuous operation at twelve volts and draws at most two amperes under load; the "
        "controller board limits the current and reports faults over its serial port.")


def _pdf(title: tuple[str, ...] = (), size: float = 24, header: str = "", meta: str = "", pages: int = 2,
         toc: tuple[str, ...] = ()) -> bytes:
    """Pages of body text at 11 pt; on page 1 `title` (one line each) at `size` pt below `header` (9 pt, on every
    page, as a running header); a page number at the foot of every page."""
    doc = pymupdf.open()
    for n in range(pages):
        page = doc.new_page(width=595, height=842)
        y = 40.0
        if header:
            page.insert_text((72, y), header, fontsize=9)
        y = 90.0
        for line in title if n == 0 else ():
            y += size * 1.2
            page.insert_text((72, y), line, fontsize=size)
        page.insert_textbox(pymupdf.Rect(72, y + 30, 523, y + 330), f"{BODY} Page {n + 1} text. " * 3, fontsize=11)
        page.insert_text((290, 810), str(n + 1), fontsize=9)
    doc.set_metadata({"title": meta} if meta else {})
    if toc:
        doc.set_toc([[1, entry, 1] for entry in toc])
    return doc.tobytes()


def _title(data: bytes, name: str = SLUG) -> str:
    return load_bytes(data, name, SETTINGS).source.title


@pytest.mark.parametrize(("pdf", "expected"), [
    (_pdf(("Acme Rotor Controller",)), "Acme Rotor Controller"),
    (_pdf(("Acme Rotor Controller", "Technical Specification"), header="Acme Corp · Confidential"),
     "Acme Rotor Controller Technical Specification"),  # wrapped over two lines, under a small running header
    (_pdf(("Acme Rotor Controller",), size=13.5), "Acme Rotor Controller"),  # modestly larger than the body
    (_pdf(("Acme Rotor Controller",), pages=1), "Acme Rotor Controller"),
    (_pdf(("Acme Rotor Controller",), toc=("1 Introduction",)), "Acme Rotor Controller"),  # an outline of chapters
    (_pdf(("Acme Rotor Controller",), meta="Rotor Controller Datasheet, Rev. B"), "Rotor Controller Datasheet, Rev. B"),
    # the title repeated in small type as the running header of the next pages (as LaTeX sets it: the Shared MIME-info
    # Database specification Debian ships, /usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf, was named
    # after its author's affiliation, the next largest line)
    (_pdf(("Acme Rotor Controller",), header="Acme Rotor Controller"), "Acme Rotor Controller"),
    (_pdf(("Acme",), header="Acme"), "Acme"),
])
def test_a_pdf_without_a_title_is_named_by_its_largest_type(pdf: bytes, expected: str):
    assert _title(pdf) == expected


@pytest.mark.parametrize("pdf", [
    _pdf(("Acme Rotor Controller",), size=11),  # the "title" is in the body's size: nothing stands out
    _pdf(()),  # body text only (and a page number)
    _pdf(("Contents",)),  # a generic section name, not the document's name
    _pdf(("1 Introduction",)),  # a numbered chapter
    _pdf(("The rotors stop at once when they overheat,", "and the board then reports it."), size=18),  # a sentence
])
def test_otherwise_the_file_name_is_kept(pdf: bytes):
    assert _title(pdf) == "some-product-spec"


def test_a_running_header_in_large_type_is_not_the_title():
    doc = pymupdf.open()
    for n in range(2):
        page = doc.new_page(width=595, height=842)
        page.insert_text((72, 50), "ACME QUARTERLY", fontsize=26)  # on every page
        if n == 0:
            page.insert_text((72, 110), "Rotor Sales in Spring", fontsize=20)
        page.insert_textbox(pymupdf.Rect(72, 150, 523, 500), BODY * 3, fontsize=11)
    doc.set_metadata({})
    assert _title(doc.tobytes()) == "Rotor Sales in Spring"
