"""Citation markers: parsing [n] / [1, 3] / [1][2] / ranges, mapping to passages, dropping invalid ones."""
from __future__ import annotations

import logging

import pytest

from rag_core.answer.grounding.citations import (
    citation_json,
    cited_numbers,
    find_markers,
    passage_json,
    resolve,
    source_url,
)
from rag_core.core.models import Chunk, Citation, Passage, SourceMeta


def _passage(i: int, url: str | None = None, anchor: str | None = None) -> Passage:
    src = SourceMeta(file_name=f"doc{i}.pdf", title=f"Doc {i}", kind="pdf", sha256="x" * 64, url=url)
    chunk = Chunk(doc_id=f"d{i}", index=i, text=f"Passage number {i}. It says something.", char_start=100 * i,
                  char_end=100 * i + 38, page_start=i + 1, page_end=i + 1, heading_path=("Part", f"S{i}"),
                  source=src, anchor=anchor)
    return Passage(chunk, score=1.0 / (i + 1))


PASSAGES = [_passage(i) for i in range(3)]  # valid markers: [1] [2] [3]


@pytest.mark.parametrize("text, expected", [
    ("Paris is the capital [1].", [1]),
    ("See [1, 3].", [1, 3]),
    ("See [1,3] and [2; 1].", [1, 3, 2]),
    ("Adjacent [1][2] markers.", [1, 2]),
    ("A range [2-4] and [1–2].", [2, 3, 4, 1]),
    ("Wordy [Source 2] and [sources: 1, 3].", [2, 1, 3]),
    ("Spaces [ 2 ] ok.", [2]),
    ("Conjunction [1 and 3].", [1, 3]),
    ("No markers here.", []),
])
def test_cited_numbers(text, expected):
    assert cited_numbers(text) == expected


@pytest.mark.parametrize("text", [
    "A Markdown link [1](http://example.com) is not a citation.",
    "A year [2021] is not a citation.",
    "Letters [a] and [i] are not citations.",
    "An empty [] bracket.",
    "Nested [[x]] text.",
])
def test_non_citations_are_ignored(text):
    assert find_markers(text) == []


def test_markers_carry_spans():
    text = "One [1]. Two [1][2]."
    marks = find_markers(text)
    assert [text[m.start:m.end] for m in marks] == ["[1]", "[1]", "[2]"]
    assert [m.numbers for m in marks] == [(1,), (1,), (2,)]


def test_resolve_maps_numbers_to_passages_in_order_of_first_use():
    res = resolve("B is true [2]. A is true [1][2].", PASSAGES)
    assert [c.n for c in res.citations] == [2, 1]
    assert res.citations[0].passage is PASSAGES[1]
    assert res.citations[1].passage is PASSAGES[0]
    assert all(isinstance(c, Citation) and c.status == "cited" for c in res.citations)
    assert res.invalid == ()
    assert res.text == "B is true [2]. A is true [1][2]."


def test_invalid_markers_are_counted_logged_and_removed(caplog):
    with caplog.at_level(logging.WARNING, logger="rag_core.answer.grounding.citations"):
        res = resolve("Fact [9]. Other fact [1, 9]. Zero [0].", PASSAGES)
    assert res.invalid == (9, 9, 0)
    assert [c.n for c in res.citations] == [1]
    assert res.text == "Fact. Other fact [1]. Zero."
    assert "[9]" not in res.text and "[0]" not in res.text
    assert "3 marker(s)" in caplog.text and "only 3 sources" in caplog.text


def test_no_passages_means_every_marker_is_invalid():
    res = resolve("Something [1].", [])
    assert res.citations == () and res.invalid == (1,)
    assert res.text == "Something."


def test_absurd_range_is_not_expanded():
    assert cited_numbers("[1-200]") == [1, 200]


def test_json_shapes_and_urls():
    wiki = _passage(5, url="https://en.wikipedia.org/wiki/Rhine", anchor="Geography")
    assert source_url(wiki) == "https://en.wikipedia.org/wiki/Rhine#Geography"
    assert source_url(PASSAGES[0]) is None
    cit = Citation(n=1, passage=wiki, evidence_start=0, evidence_end=16)
    j = citation_json(cit)
    assert j == {"n": 1, "doc_id": "d5", "title": "Doc 5", "page": 6, "section": "Part › S5",
                 "quote": "Passage number 5", "char_start": 500, "char_end": 538,
                 "url": "https://en.wikipedia.org/wiki/Rhine#Geography", "status": "cited"}
    whole = citation_json(Citation(n=2, passage=PASSAGES[1]))
    assert whole["quote"] == PASSAGES[1].chunk.text
    pj = passage_json(PASSAGES[2], n=3)
    assert pj["n"] == 3 and pj["page"] == 3 and pj["text"] == PASSAGES[2].chunk.text


@pytest.mark.parametrize("text, kept, count", [
    ("The source for gzip is [n].", "The source for gzip is.", 1),
    ("Fact [1] [N]. See [Source n], then [#].", "Fact [1]. See, then.", 3),
    ("A checklist [x] and a link [n](http://a) stay.", "A checklist [x] and a link [n](http://a) stay.", 0),
])
def test_the_prompts_placeholder_is_counted_and_removed(text, kept, count):
    res = resolve(text, PASSAGES)
    assert (res.text, res.placeholders) == (kept, count)
    assert [c.n for c in res.citations] == ([1] if "[1]" in text else [])
