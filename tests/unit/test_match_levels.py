"""The plain match a retrieved passage carries (rag_core.retrieve.search.match_for / explain): its level from the
cosine and the existing thresholds, its kind from the question's words it contains, merged passages included; and
the plain words the chat shows for it (ui.relevance)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from rag_core.core.config import Settings
from rag_core.core.models import Chunk, Match, MatchKind, MatchLevel, Passage, SourceMeta
from rag_core.retrieve.search import ON_TOPIC, _dedupe, _question_words, explain, match_for, shared_words
from ui import relevance

MIN = Settings().retrieval.min_relevance  # DOCCHAT_MIN_RELEVANCE: the "not in your documents" bar


@pytest.mark.parametrize(("cosine", "level"), [(0.9, MatchLevel.HIGH), (ON_TOPIC, MatchLevel.HIGH),
                                               (ON_TOPIC - 0.01, MatchLevel.MEDIUM), (MIN, MatchLevel.MEDIUM),
                                               (MIN - 0.01, MatchLevel.LOW), (-0.2, MatchLevel.LOW),
                                               (None, MatchLevel.LOW)])
def test_the_level_follows_the_honesty_thresholds(cosine, level):
    assert match_for(cosine, None, (), MIN).level == level
    assert match_for(cosine, None, (), MIN).weak == (level == MatchLevel.LOW)


def test_a_stricter_min_relevance_moves_both_bounds():
    assert match_for(0.55, None, (), 0.6).level == MatchLevel.LOW  # below the bar: weak, whatever ON_TOPIC says
    assert match_for(0.65, None, ("pump",), 0.6) == Match(MatchKind.BOTH, MatchLevel.HIGH, 0.65, None, ("pump",))


def test_the_kind_comes_from_the_question_words_and_the_meaning():
    assert match_for(0.7, 3.0, ("seal",), MIN).kind == MatchKind.BOTH
    assert match_for(0.3, 3.0, ("seal",), MIN).kind == MatchKind.WORDS
    assert match_for(0.1, 3.0, ("seal",), MIN).kind == MatchKind.WORDS
    assert match_for(0.7, 1.2, (), MIN).kind == MatchKind.MEANING  # BM25 matched only "the", "of": not your words
    assert match_for(0.1, None, (), MIN).kind == MatchKind.MEANING


def test_shared_words_skip_stop_words_and_compare_stems():
    asked = _question_words("When are the Boilers serviced, and what does the 2,000-hour check cost?")
    text = "The boiler is serviced every 2000 hours; a check costs nothing."
    assert shared_words(asked, text) == ("Boilers", "serviced", "2,000", "hour", "check", "cost")
    assert shared_words(_question_words("what is it and when?"), text) == ()


def _chunk(index: int, start: int, end: int, text: str) -> Chunk:
    return Chunk("d", index, text, start, end, None, None, (), SourceMeta("f.txt", "T", "txt", "x"))


def test_a_merged_passage_takes_its_best_chunk_s_scores_and_all_its_words():
    text = "The impeller seal wears out. It is replaced every 2,000 hours by the service team."
    a, b = _chunk(0, 0, 45, text[:45]), _chunk(1, 29, len(text), text[29:])  # overlapping neighbours
    kept, members = _dedupe([Passage(a, 2.0), Passage(b, 1.0)])
    assert len(kept) == 1 and members == [[a, b]]
    store = SimpleNamespace(settings=Settings())  # every cosine is known: the store is never searched
    [p] = explain(store, "When is the impeller seal replaced?", None, kept, members,  # type: ignore[arg-type]
                  {("d", 0): 0.41, ("d", 1): 0.62}, {("d", 1): 4.5})
    assert p.score == 2.0 and p.chunk.text == text  # the better rank, the union of the text
    assert p.match == Match(MatchKind.BOTH, MatchLevel.HIGH, 0.62, 4.5, ("impeller", "seal", "replaced"))


def test_the_chat_says_why_in_plain_words():
    both = match_for(0.7, 4.0, ("impeller", "seal"), MIN)
    assert relevance.reason(both) == "Strong match — shares your words (“impeller”, “seal”) and your meaning"
    assert relevance.reason(match_for(0.4, None, (), MIN)) == "Matched by meaning (different words)"
    assert relevance.reason(match_for(0.4, 2.0, ("pump",), MIN)) == "Matched your words (“pump”)"
    weak = match_for(0.1, 2.0, ("pump",), MIN)
    assert relevance.reason(weak) == "Matched your words (“pump”), but not your meaning"
    assert relevance.reason(match_for(0.1, None, (), MIN)) == relevance.NEAREST
    many = match_for(0.4, 2.0, tuple("abcdef"), MIN)
    assert relevance.reason(many).endswith("(“a”, “b”, “c”, “d” and 2 more)")
    assert relevance.match_markdown(both).startswith(":green-badge[:material/check_circle: High relevance] ")
    hostile = match_for(0.4, 2.0, ("[x](javascript:alert(1))",), MIN)
    assert "](javascript" not in relevance.match_markdown(hostile)  # the question's words are escaped


def test_a_reranked_passage_says_so_and_keeps_it_when_saved():
    from dataclasses import replace

    from rag_core.core.models import Answer, AnswerMode, Citation
    from rag_core.service.conversation_data import answer_from_dict, answer_to_dict

    plain = match_for(0.7, 4.0, ("impeller", "seal"), MIN)
    assert not plain.reranked and "Reranked" not in relevance.match_markdown(plain)
    reranked = replace(plain, reranked=True)  # its place was set by the reranker (DOCCHAT_RERANKER)
    assert relevance.match_markdown(reranked).startswith(
        ":green-badge[:material/check_circle: High relevance] :gray-badge[:material/swap_vert: Reranked] Strong match")
    chunk = Chunk("d", 0, "The impeller seal.", 0, 18, None, None, (),
                  SourceMeta(file_name="pump.txt", title="Pump", kind="txt", sha256="x"))

    def saved(match: Match) -> dict:
        passage = Passage(chunk, 1.0, match)
        return answer_to_dict(Answer("The seal [1].", AnswerMode.MODEL, citations=(Citation(1, passage),),
                                     passages=(passage,)))

    as_before = saved(plain)  # an answer made without the reranker is saved as earlier releases saved it
    assert "reranked" not in as_before["passages"][0]["match"]
    assert "reranked" not in as_before["citations"][0]["passage"]["match"]
    assert not answer_from_dict(as_before).passages[0].match.reranked  # saved by an earlier release: not reranked
    again = answer_from_dict(saved(reranked))
    assert again.passages[0].match.reranked and again.citations[0].passage.match.reranked
