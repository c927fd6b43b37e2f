"""The Library lists a document by its own title with its file name under it (issue 28), so a person finds the
file they added; a document titled by its file name does not repeat it."""
from __future__ import annotations

from ui_helpers import fixture_bytes, new_app, plain, texts

DOCX = "docx_headings_toc.docx"  # its first heading is "Beautiful is better than ugly."
PDF4 = "pdf_text_4-pages_pdflatex.pdf"  # no title, no heading: titled by its file name


def test_a_row_shows_the_documents_title_and_its_file_name(app):
    for name in (DOCX, PDF4):
        assert app.library.ingest_bytes(fixture_bytes(name), name).status == "added"
    at = new_app("pages/library.py")
    assert not at.exception
    titles = [plain(t) for t in texts(at.markdown)]
    captions = [plain(t) for t in texts(at.caption)]
    assert "**Beautiful is better than ugly.**" in titles
    assert any(c.startswith(f"{DOCX} · Word · ") for c in captions), captions
    assert "**pdf_text_4-pages_pdflatex**" in titles
    assert any(c.startswith("PDF · 4 pages · ") for c in captions), captions  # the title says the file's name
    at.text_input(key="title_filter").set_value("headings_toc").run()  # searching by the file's name finds it
    assert "**Beautiful is better than ugly.**" in [plain(t) for t in texts(at.markdown)]
