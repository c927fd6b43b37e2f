"""The small-to-large read (rag_core.retrieve.widen) on a real library: a passage grows with its own section's
neighbours within the budget, never into another section or another passage, and keeps its identity."""
from __future__ import annotations

from rag_core.core.models import Document, Section, SourceMeta
from rag_core.retrieve import widen
from rag_core.retrieve.search import retrieve


def _document() -> Document:
    harbour = " ".join(f"Harbour fact {i}: the old harbour crane number {i} lifted {i * 7} tonnes of cargo in 1910."
                       for i in range(40))
    garden = " ".join(f"Garden fact {i}: the botanical garden grows {i * 3} kinds of fern near the glasshouse."
                      for i in range(40))
    text = harbour + "\n\n" + garden
    sections = (Section(("Harbour",), 0, len(harbour)), Section(("Garden",), len(harbour) + 2, len(text)))
    return Document(doc_id="town", text=text, sections=sections,
                    source=SourceMeta(file_name="town.md", title="Town guide", kind="md", sha256="t"))


def test_widened_passages_stay_in_their_section_and_budget(library):
    assert library.ingest_document(_document()).status == "added"
    found = retrieve(library.store, "How many tonnes did harbour crane number 20 lift?", k=1)
    grown = widen.widen(library.store, found, tokens=700)
    assert [p.chunk.point_id for p in grown] == [p.chunk.point_id for p in found]  # same passages, same order
    top, before = grown[0].chunk, found[0].chunk
    assert len(top.text) > len(before.text) and before.text in top.text  # read with its neighbours
    assert len(top.text) <= 700 * widen.CHARS_PER_TOKEN
    assert top.heading_path == before.heading_path and "Garden fact" not in top.text
    assert top.char_start <= before.char_start and top.char_end >= before.char_end
    spans = sorted((p.chunk.char_start, p.chunk.char_end) for p in grown)
    assert all(a[1] <= b[0] or a[1] - b[0] < 400 for a, b in zip(spans, spans[1:], strict=False))


def test_a_budget_smaller_than_a_neighbour_leaves_the_passage_as_it_was(library):
    assert library.ingest_document(_document()).status == "added"
    found = retrieve(library.store, "Which ferns grow near the glasshouse?", k=2)
    assert widen.widen(library.store, found, tokens=1) == found
