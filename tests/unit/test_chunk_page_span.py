"""A passage's pages are those its text is on (issue 28): a table at the top of page 3 is not "pages 2–3" because the
last paragraph of page 2 was packed with it; a paragraph running over the page break still spans both."""
from __future__ import annotations

import re
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.core.models import Document, Section, SourceMeta
from rag_core.ingest.chunking import chunk_document
from rag_core.ingest.loaders import load_bytes

SRC = SourceMeta(file_name="t.pdf", title="T", kind="pdf", sha256="x")
DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"


class WordTokenizer:
    """One token per word: enough to pack by a budget (the real model is not what this checks)."""

    def count_tokens(self, texts: list[str]) -> list[int]:
        return [len(t.split()) for t in texts]

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"\S+", text)]


def _doc(pages: list[str]) -> Document:
    starts, text = [], ""
    for page in pages:
        text += "\n\n" if text else ""
        starts.append(len(text))
        text += page
    return Document(doc_id="d", text=text, sections=(Section((), 0, len(text)),), source=SRC,
                    page_count=len(pages), page_starts=tuple(starts))


def test_a_table_at_the_top_of_a_page_is_on_that_page_only():
    table = "Country | Capital\nFinland | Helsinki\nSweden | Stockholm"
    doc = _doc(["Page one talks about ferries.", "The last paragraph of page two is short.", table])
    chunks = chunk_document(doc, WordTokenizer(), max_tokens=200)
    holding = [c for c in chunks if "Helsinki" in c.text]
    assert [(c.page_start, c.page_end) for c in holding] == [(3, 3)]
    for c in chunks:  # every chunk's pages are exactly the pages its text is on
        assert (c.page_start, c.page_end) == (doc.page_at(c.char_start), doc.page_at(c.char_end - 1))


def test_a_paragraph_running_over_the_page_break_still_spans_both_pages():
    text = "Intro.\n\nA sentence that begins on page one and ends on page two. Another sentence follows."
    doc = Document(doc_id="d", text=text, sections=(Section((), 0, len(text)),), source=SRC, page_count=2,
                   page_starts=(0, text.index("ends")))
    spans = {(c.page_start, c.page_end) for c in chunk_document(doc, WordTokenizer(), max_tokens=200)}
    assert (1, 2) in spans


def test_the_table_on_page_3_of_the_fixture_is_labelled_page_3(embedder):
    name = "pdf_text_multicolumn_3-pages.pdf"
    doc = load_bytes((DOCS / name).read_bytes(), name, Settings())
    table = [c for c in chunk_document(doc, embedder, Settings().ingest.chunk_tokens) if "Helsinki" in c.text]
    assert table and all((c.page_start, c.page_end) == (3, 3) for c in table)
