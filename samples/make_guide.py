"""Rebuild samples/DocChat demo guide.pdf (the shared sample PDF of the hosted demo) from the text below.

    .venv/bin/python samples/make_guide.py

The text is DocChat's own (same licence as the project). Headings are larger bold type so the PDF loader finds them,
and the guide spans two pages so answers cite page numbers.
"""
from __future__ import annotations

from pathlib import Path

import pymupdf

OUT = Path(__file__).resolve().parent / "DocChat demo guide.pdf"

PAGE_1 = """
<h1>DocChat demo guide</h1>
<p>DocChat lets you chat with your own documents. You add PDF, Word (.docx), text or Markdown files, then ask
questions in plain language. Every answer cites the passages it is based on, with the page number for PDFs, so you
can check it yourself.</p>
<h2>Your private library</h2>
<p>In the public demo every browser session gets its own private library. The files you add are visible only in
your session: other visitors can never list, search, cite or delete them, and you cannot see theirs. Your library is
removed automatically after a period without activity (60 minutes by default), and when the demo server restarts.
Do not upload confidential documents to a public demo.</p>
<h2>Sample documents</h2>
<p>Three sample documents are shared by all visitors so you can try DocChat straight away: this guide, the Zen of
Python (a Word file) and the English Wikipedia article about the Python programming language. The samples are
read-only: nobody can remove or change them.</p>
<h2>Limits in the demo</h2>
<p>To keep the demo fair for everyone, each session may hold up to 10 files, each file may be up to 10 MB, all your
files together may be up to 50 MB, and you may ask up to 10 questions per minute. When you reach a limit DocChat
tells you which one and what to do, for example to remove a document or to wait a few seconds.</p>
"""

PAGE_2 = """
<h2>How answers are made</h2>
<p>When you ask a question, DocChat first searches your documents for the most relevant passages, combining meaning
(vector search) with exact words (keyword search). If the demo is connected to a language model, the model writes a
short answer from those passages only and cites them as [1], [2] and so on. Without a language model DocChat answers
extractively: it quotes the most relevant sentences from your documents. If no document covers the question, DocChat
says so instead of guessing.</p>
<h2>Running DocChat yourself</h2>
<p>DocChat is free software and runs on your own computer without any internet connection: the embedding model is
bundled, the document library is stored in a local folder, and answers come from Ollama running on the same machine.
Start it with make run, or start the full stack (DocChat, Qdrant and Ollama) with docker compose up. Your own copy
has no demo limits and keeps your library between restarts.</p>
"""

CSS = "h1 {font-size: 20pt; font-weight: bold;} h2 {font-size: 14pt; font-weight: bold;} p {font-size: 11pt;}"


def build(out: Path = OUT) -> Path:
    """Write the two-page guide PDF."""
    doc = pymupdf.open()
    rect = pymupdf.paper_rect("a4")
    for html in (PAGE_1, PAGE_2):
        page = doc.new_page(width=rect.width, height=rect.height)
        page.insert_htmlbox(rect + (60, 60, -60, -60), html, css=CSS)
    doc.set_metadata({"title": "DocChat demo guide", "author": "DocChat", "creator": "samples/make_guide.py",
                      "producer": "PyMuPDF", "creationDate": "D:20261101000000Z", "modDate": "D:20261101000000Z"})
    doc.save(str(out), garbage=4, deflate=True, no_new_id=True)
    return out


if __name__ == "__main__":
    print(build())
