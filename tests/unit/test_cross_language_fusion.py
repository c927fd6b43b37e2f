"""The default fusion with a library whose model reads many languages: a passage in another language than the
question's is not sunk by the lexical score it cannot have (issue 46); with MiniLM nothing changes."""
from __future__ import annotations

import statistics
from types import SimpleNamespace

import pytest

from rag_core.core import language_id
from rag_core.core.models import Chunk, Passage, SourceMeta
from rag_core.retrieve import search
from rag_core.retrieve.search import CROSS_LANGUAGE_GAP, other_language, zscore_fuse

ENGLISH = ("The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading the NFL in "
           "interceptions with 24 and boasting four Pro Bowl selections.")
FRENCH = ("La défense des Panthers n'a concédé que 308 points, se classant sixième de la ligue, tout en menant la NFL "
          "aux interceptions avec 24 et en comptant quatre sélections au Pro Bowl.")
QUESTION = "How many points did the Panthers defense give up?"


def _chunk(doc_id: str, text: str = "") -> Chunk:
    return Chunk(doc_id=doc_id, index=0, text=text, char_start=0, char_end=len(text), page_start=None, page_end=None,
                 heading_path=(), source=SourceMeta("f.txt", "T", "txt", "x"))


def _lists() -> tuple[list[Passage], list[Passage]]:
    """English passages a, b, c, d found by both lists; the French "fr" by meaning only (a little below a and b, as a
    multilingual model rates a passage in another language), never by its English words."""
    c = {n: _chunk(n) for n in ("a", "b", "c", "d", "fr")}
    dense = [Passage(c["a"], 0.84), Passage(c["b"], 0.83), Passage(c["fr"], 0.82), Passage(c["c"], 0.80),
             Passage(c["d"], 0.60)]
    lexical = [Passage(c["a"], 9.0), Passage(c["b"], 8.0), Passage(c["c"], 7.0), Passage(c["d"], 1.0)]
    return dense, lexical


def test_without_other_language_the_fusion_is_unchanged():
    dense, lexical = _lists()
    before = zscore_fuse(dense, lexical, 0.5)
    assert zscore_fuse(dense, lexical, 0.5, frozenset()) == before
    assert zscore_fuse(dense, lexical) == before
    # "fr" is missing from the lexical list: it gets that list's lowest z-score and falls below "c", which has both.
    assert [p.chunk.doc_id for p in before] == ["a", "b", "c", "fr", "d"]


def test_a_passage_in_another_language_is_not_sunk_by_its_missing_lexical_score():
    dense, lexical = _lists()
    fused = zscore_fuse(dense, lexical, 0.5, frozenset({("fr", 0)}))
    assert [p.chunk.doc_id for p in fused] == ["a", "b", "fr", "c", "d"]  # above "c" now, which has both scores
    scores = [p.score + CROSS_LANGUAGE_GAP if p.chunk.doc_id == "fr" else p.score for p in dense]
    z = dict(zip(["a", "b", "fr", "c", "d"], _zscores(scores), strict=True))
    by_id = {p.chunk.doc_id: p.score for p in fused}
    # its lexical z-score is neutral (0), not the list's lowest; its cosine gets the cross-language gap back
    assert by_id["fr"] == pytest.approx(0.5 * z["fr"] + 0.5 * 0.0)
    assert by_id["a"] == pytest.approx(0.5 * z["a"] + 0.5 * _zscores([9.0, 8.0, 7.0, 1.0])[0])


def _zscores(values: list[float]) -> list[float]:
    mean, std = statistics.fmean(values), statistics.pstdev(values)
    return [(v - mean) / std for v in values]


def _store(multilingual: bool | None) -> SimpleNamespace:
    embedder = SimpleNamespace() if multilingual is None else SimpleNamespace(multilingual=multilingual)
    return SimpleNamespace(embedder=embedder)


def test_other_language_names_the_candidates_in_another_language():
    found = [Passage(_chunk("en", ENGLISH), 1.0), Passage(_chunk("fr", FRENCH), 1.0), Passage(_chunk("short", "Tesla"), 1.0)]
    assert other_language(_store(True), QUESTION, found) == {("fr", 0)}  # too short to tell: not "other"
    assert other_language(_store(True), "Combien de points la défense des Panthers a-t-elle concédés ?", found) == {
        ("en", 0)}
    assert other_language(_store(True), "Panthers?", found) == frozenset()  # the question's language is unclear


@pytest.mark.parametrize("multilingual", [False, None])
def test_an_english_only_model_reads_no_language(monkeypatch, multilingual):
    def fail(text: str) -> str:
        raise AssertionError("no language is read for an English-only model")

    monkeypatch.setattr(search, "text_language", fail)
    monkeypatch.setattr(search, "passage_language", fail)
    found = [Passage(_chunk("fr", FRENCH), 1.0)]
    assert other_language(_store(multilingual), QUESTION, found) == frozenset()


def test_passage_language_reads_the_start_once(monkeypatch):
    read: list[str] = []
    real = language_id.text_language
    monkeypatch.setattr(language_id, "text_language", lambda text: read.append(text) or real(text))
    start = FRENCH + " Une phrase de plus pour ce test seulement. "
    assert language_id.passage_language(start + ENGLISH * 20) == "fr"
    assert language_id.passage_language(start + ENGLISH * 30) == "fr"  # the same first PASSAGE_PREFIX characters
    assert read == [(start + ENGLISH * 20)[:language_id.PASSAGE_PREFIX]]
    assert language_id.passage_language("Tesla") is None
