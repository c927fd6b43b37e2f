"""The rerank from existing signals (rag_core.retrieve.rerank) and the contextual-passage text (rag_core.store.context)."""
from __future__ import annotations

from rag_core.core.models import Chunk, Match, MatchKind, MatchLevel, Passage, SourceMeta
from rag_core.retrieve import rerank as rr
from rag_core.store import context

SOURCE = SourceMeta(file_name="a.md", title="Annual report", kind="md", sha256="x")


def _p(i: int, text: str, score: float, cosine: float) -> Passage:
    chunk = Chunk("d", i, text, 0, len(text), None, None, ("Finance", "Costs"), SOURCE)
    return Passage(chunk, score, match=Match(MatchKind.BOTH, MatchLevel.HIGH, cosine, None, ()))


def test_pair_share_counts_adjacent_content_words():
    q = rr.content_terms_in_order("When was the harbour bridge opened?")
    assert rr.pair_share(q, "The harbour bridge opened in 1932.") == 1.0
    assert rr.pair_share(q, "The bridge over the harbour was opened.") < 1.0
    assert rr.pair_share(rr.content_terms_in_order("Bridge?"), "harbour bridge") == 0.0


def test_rerank_moves_up_the_passage_with_the_question_s_phrase():
    ps = [_p(0, "Opening hours of the museum are long.", 1.0, 0.50),
          _p(1, "The harbour bridge opened in 1932 after eight years.", 0.95, 0.52),
          _p(2, "Ferries cross the water daily.", 0.10, 0.20)]
    out = rr.rerank("When was the harbour bridge opened?", ps)
    assert [p.chunk.index for p in out] == [1, 0, 2]
    assert [p.score for p in out] == [0.95, 1.0, 0.10]  # scores kept, only the order changes


def test_rerank_keeps_the_tail_and_tiny_lists():
    ps = [_p(i, f"text number {i}", 1.0 - i / 20, 0.5) for i in range(15)]
    out = rr.rerank("text number 3", ps, depth=5)
    assert out[5:] == ps[5:] and sorted(p.chunk.index for p in out[:5]) == [0, 1, 2, 3, 4]
    assert rr.rerank("anything", ps[:1]) == ps[:1]


def test_indexed_text_prefix_on_and_off(monkeypatch):
    chunk = _p(0, "Costs rose by 4 %.", 1.0, 0.5).chunk
    assert context.indexed_text(chunk) == "Costs rose by 4 %."
    monkeypatch.setattr(context, "PREFIX_CONTEXT", True)
    assert context.indexed_text(chunk) == "Annual report\nFinance › Costs\n\nCosts rose by 4 %."
