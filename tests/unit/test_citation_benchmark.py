"""benchmarks/citations.py: the judge and ALCE's citation precision and recall, on claims whose answer is known."""
from __future__ import annotations

from benchmarks.citations import content_words, entails, load_items, score_answer

BELGIUM = "The capital of Belgium is Brussels, home of the European Commission."
FRANCE = "The capital of France is Paris, on the Seine."
GOLD = ("Brussels",)


def test_content_words_drop_stop_words_markers_and_plural_endings():
    assert content_words("The capitals of Belgium [1] are cities.") == ["capital", "belgium", "citi"]


def test_the_judge_entails_a_restatement_and_rejects_a_wrong_answer_or_number():
    assert entails(BELGIUM, "Brussels is the capital of Belgium.", GOLD)
    assert not entails(FRANCE, "Brussels is the capital of Belgium.", GOLD)  # different facts
    assert not entails("The capital of Belgium is a city.", "Brussels is the capital of Belgium.", GOLD)
    assert not entails("It opened in 1990.", "It opened in 1991.", ())  # a number the premise lacks
    assert not entails(BELGIUM, "The answer is:", GOLD)  # no content: nothing to support


def test_recall_counts_sentences_whose_citations_support_them():
    claims = [("Brussels is the capital of Belgium.", [BELGIUM]),  # supported
              ("Paris is the capital of France.", [BELGIUM]),  # cited, not supported
              ("Paris lies on the Seine.", [])]  # not cited
    recall, precision = score_answer(claims, GOLD)
    assert recall == 1 / 3
    assert precision == 1 / 2  # the second sentence's citation is not correct: its sentence is unsupported


def test_a_needless_second_citation_lowers_precision_but_not_recall():
    needed = [("Brussels is the capital of Belgium.", [BELGIUM])]
    padded = [("Brussels is the capital of Belgium.", [BELGIUM, FRANCE])]
    assert score_answer(needed, GOLD) == (1.0, 1.0)
    assert score_answer(padded, GOLD) == (1.0, 0.5)  # FRANCE alone supports nothing and is not needed


def test_two_citations_that_are_needed_together_are_both_correct():
    claim = [("Brussels is the capital of Belgium and Paris is the capital of France.", [BELGIUM, FRANCE])]
    assert score_answer(claim, GOLD) == (1.0, 1.0)


def test_the_set_has_a_test_split_of_its_own():
    test, tune = load_items("test", 0), load_items("tune", 0)
    assert len(test) >= 100 and len(tune) >= 100
    assert not {i.qid for i in test} & {i.qid for i in tune}
    assert all(i.gold for i in test)
