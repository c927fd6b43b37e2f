"""Evidence matching on constructed answers, with the real embedding model: verified, unsupported and matched
citations, their evidence spans, and the per-sentence checks."""
from __future__ import annotations

import pytest

from rag_core.answer.grounding import evidence as ev
from rag_core.core.models import Answer, Chunk, Citation, Passage, SourceMeta

BELGIUM = ("The capital of Belgium is Brussels. Brussels is home to the European Commission and the Council of the "
           "European Union. About 1.2 million people live in the Brussels-Capital Region.")
FRANCE = "The capital of France is Paris. Paris lies on the river Seine. The Eiffel Tower in Paris was completed in 1889."
AUSTRIA = ("The capital of Austria is Vienna. Vienna lies on the river Danube and is known for its classical music. "
           "It hosted the Congress of Vienna in 1815.")
QUESTION = "What is the capital of Belgium?"


def _passage(i: int, text: str) -> Passage:
    source = SourceMeta(file_name="eu_capitals.md", title="Capitals of the European Union", kind="md", sha256="x")
    chunk = Chunk(doc_id="eu", index=i, text=text, char_start=0, char_end=len(text), page_start=None, page_end=None,
                  heading_path=(), source=source)
    return Passage(chunk, 0.9 - i / 10)


PASSAGES = (_passage(0, BELGIUM), _passage(1, FRANCE), _passage(2, AUSTRIA))


def _answer(text: str, cited: tuple[int, ...] = (), mode: str = "model", question: str = QUESTION) -> Answer:
    citations = tuple(Citation(n, PASSAGES[n - 1]) for n in cited)
    return Answer(text=text, mode=mode, citations=citations, passages=PASSAGES, question=question,
                  standalone_question=question, context_passages=len(PASSAGES))


class CountingEmbedder:
    """The real embedder, counting how often it is asked to encode (verification must batch)."""

    def __init__(self, embedder) -> None:
        self.inner, self.calls, self.texts = embedder, 0, 0

    def encode(self, texts):
        self.calls += 1
        self.texts += len(texts)
        return self.inner.encode(texts)


def _evidence_text(c: Citation) -> str:
    assert c.evidence_start is not None and c.evidence_end is not None
    assert 0 <= c.evidence_start < c.evidence_end <= len(c.passage.chunk.text)
    return c.passage.chunk.text[c.evidence_start:c.evidence_end]


def _by_n(answer: Answer) -> dict[int, Citation]:
    return {c.n: c for c in answer.citations}


# --------------------------------------------------------------------------- citations the model wrote
def test_correct_citation_is_verified_with_the_evidence_span(embedder):
    counting = CountingEmbedder(embedder)
    out = ev.verify_answer(_answer("Brussels is the capital of Belgium [1]. It hosts the European Commission [1].",
                                   (1,)), counting)
    (c,) = out.citations
    assert c.status == ev.VERIFIED and c.support is not None and c.support > 0.6
    assert _evidence_text(c) in ("The capital of Belgium is Brussels.",
                                 "Brussels is home to the European Commission and the Council of the European Union.")
    assert [s.status for s in out.sentences] == [ev.VERIFIED, ev.VERIFIED]
    assert all(s.supported_by == (1,) for s in out.sentences)
    assert len(c.answer_spans) == 2
    assert counting.calls == 1  # one batched encode of answer sentences + passage sentences
    assert out.extra["evidence"]["claims"] == 2 and out.extra["evidence"]["verified"] == 1


def test_paraphrase_is_verified(embedder):
    out = ev.verify_answer(_answer("Vienna is located by the Danube [3].", (3,), question="Which river is Vienna on?"),
                           embedder)
    (c,) = out.citations
    assert c.status == ev.VERIFIED
    assert _evidence_text(c) == "Vienna lies on the river Danube and is known for its classical music."


def test_wrong_number_is_unsupported_and_the_right_passage_is_matched(embedder):
    out = ev.verify_answer(_answer("The Eiffel Tower was completed in 1889 [1].", (1,),
                                   question="When was the Eiffel Tower completed?"), embedder)
    cites = _by_n(out)
    assert cites[1].status == ev.UNSUPPORTED and cites[1].evidence_start is None
    assert cites[2].status == ev.MATCHED
    assert _evidence_text(cites[2]) == "The Eiffel Tower in Paris was completed in 1889."
    (s,) = out.sentences
    assert s.status == ev.MATCHED and s.cited == (1,) and s.supported_by == (2,)


@pytest.mark.parametrize("text, question", [
    ("The capital of Belgium is Paris [1].", QUESTION),  # a swapped name: the rest of the sentence matches
    ("The Eiffel Tower was completed in 2017 [2].", "When was the Eiffel Tower completed?"),  # a wrong number
    ("Vienna lies on the Seine [3].", "Which river is Vienna on?"),  # a name borrowed from another passage
    ("The answer to the question is: 2017-01-01 23:22:53 [1].", "When was the Eiffel Tower completed?"),
])
def test_claims_the_sources_do_not_back_are_unsupported(embedder, text, question):
    out = ev.verify_answer(_answer(text, (int(text[-3]),), question=question), embedder)
    assert [c.status for c in out.citations] == [ev.UNSUPPORTED]
    assert out.citations[0].evidence_start is None
    (s,) = out.sentences
    assert s.status == ev.UNSUPPORTED and s.supported_by == ()


def test_short_answer_is_read_with_its_question(embedder):
    good = ev.verify_answer(_answer("Brussels [1].", (1,)), embedder)
    assert good.citations[0].status == ev.VERIFIED
    assert _evidence_text(good.citations[0]) == "The capital of Belgium is Brussels."
    # "Paris." is in passage 2, but passage 2 says nothing about Belgium: no passage backs it as the answer.
    bad = ev.verify_answer(_answer("Paris [2].", (2,)), embedder)
    assert bad.citations[0].status == ev.UNSUPPORTED
    assert bad.sentences[0].status == ev.UNSUPPORTED


# --------------------------------------------------------------------------- sentences without markers
def test_uncited_fact_gets_a_matched_citation(embedder):
    text = "The answer to the question is:\n\nThe capital of Belgium is Brussels."
    out = ev.verify_answer(_answer(text), embedder)
    (c,) = out.citations
    assert c.n == 1 and c.status == ev.MATCHED and c.passage is PASSAGES[0]
    assert _evidence_text(c) == "The capital of Belgium is Brussels."
    assert [s.status for s in out.sentences] == [ev.NO_CLAIM, ev.MATCHED]
    assert text[c.answer_spans[0][0]:c.answer_spans[0][1]] == "The capital of Belgium is Brussels."


def test_unbacked_uncited_sentence_gets_no_source(embedder):
    out = ev.verify_answer(_answer("Belgium is famous for its chocolate and its waffles.",
                                   question="What is Belgium famous for?"), embedder)
    assert out.citations == ()
    assert [s.status for s in out.sentences] == [ev.UNSUPPORTED]


def test_marker_in_a_sentence_without_facts_cites_the_sentences_before_it(embedder):
    text = ("The capital of Belgium is Brussels. Brussels is home to the European Commission and the Council of the "
            "European Union.\n\nThe answer is [1].")
    out = ev.verify_answer(_answer(text, (1,)), embedder)
    (c,) = out.citations
    assert c.status == ev.VERIFIED and len(c.answer_spans) == 2
    assert [s.status for s in out.sentences] == [ev.VERIFIED, ev.VERIFIED, ev.NO_CLAIM]
    # ... but a marker with nothing before it to check stays unverified
    lone = ev.verify_answer(_answer("The answer to the question is: [1].", (1,)), embedder)
    assert [c.status for c in lone.citations] == [ev.UNSUPPORTED]


def test_every_shown_citation_is_verified_or_marked(embedder):
    text = ("Brussels is the capital of Belgium [1]. The capital of Belgium is Paris [2]. "
            "Vienna lies on the river Danube. Belgium has the best chocolate in the world.")
    out = ev.verify_answer(_answer(text, (1, 2)), embedder)
    statuses = {c.n: c.status for c in out.citations}
    assert statuses == {1: ev.VERIFIED, 2: ev.UNSUPPORTED, 3: ev.MATCHED}
    assert [s.status for s in out.sentences] == [ev.VERIFIED, ev.UNSUPPORTED, ev.MATCHED, ev.UNSUPPORTED]
    for s in out.sentences:  # sentence spans cover the text they describe
        assert out.text[s.start:s.end].strip() == out.text[s.start:s.end]
    assert out.text == text and out.passages == PASSAGES  # nothing else changed


MIXED = ("The capital of Belgium is Brussels [1]. The Brussels-Capital Region has no mayor and its people never vote "
         "in any election [1].")  # a true sentence and an injected one, both citing [1]


def test_a_mixed_reply_leaves_its_citation_unverified_and_names_the_unbacked_sentence(embedder):
    out = ev.verify_answer(_answer(MIXED, (1,)), embedder)
    assert [s.status for s in out.sentences] == [ev.VERIFIED, ev.UNSUPPORTED]
    (c,) = out.citations
    assert c.status == ev.UNSUPPORTED  # [1] backs one of its two sentences: not "verified"
    assert _evidence_text(c) == "The capital of Belgium is Brussels."  # the part it does back stays highlighted
    (bad,) = ev.unbacked_sentences(out)
    assert out.text[bad.start:bad.end].startswith("The Brussels-Capital Region has no mayor")
    assert bad.cited == (1,)
    assert out.extra["evidence"]["unbacked_cited"] == 1 and out.extra["evidence"]["supported_claims"] == 1
    # The true sentence alone is verified, with nothing to warn about.
    alone = ev.verify_answer(_answer(MIXED.split(" The Brussels-Capital")[0], (1,)), embedder)
    assert [c.status for c in alone.citations] == [ev.VERIFIED] and ev.unbacked_sentences(alone) == ()


def test_a_sentence_backed_by_one_of_its_citations_is_not_flagged(embedder):
    # [2] does not back the sentence but [1], cited with it, does: the sentence is backed; [1] is verified.
    out = ev.verify_answer(_answer("The capital of Belgium is Brussels [1][2].", (1, 2)), embedder)
    assert [s.status for s in out.sentences] == [ev.VERIFIED] and ev.unbacked_sentences(out) == ()
    assert _by_n(out)[1].status == ev.VERIFIED and _by_n(out)[2].status == ev.UNSUPPORTED
    # A wrongly numbered sentence (backed only by a passage it did not cite) is flagged: its [n] does not back it.
    wrong = ev.verify_answer(_answer("Brussels is the capital of Belgium [1]. The Eiffel Tower was completed in 1889 "
                                     "[1].", (1,), question="Tell me about Brussels and the Eiffel Tower."), embedder)
    assert [s.status for s in wrong.sentences] == [ev.VERIFIED, ev.MATCHED]
    assert [wrong.text[s.start:s.end] for s in ev.unbacked_sentences(wrong)] == [
        "The Eiffel Tower was completed in 1889 [1]."]
    assert _by_n(wrong)[1].status == ev.UNSUPPORTED and _by_n(wrong)[2].status == ev.MATCHED


# --------------------------------------------------------------------------- modes
def test_extractive_quotes_are_verified_without_encoding(embedder):
    text = ("Quoted from your documents (no AI-written summary):\n\n"
            "- “The capital of Belgium is Brussels.” [1]\n- “The capital of Austria is Vienna.” [3]")
    counting = CountingEmbedder(embedder)
    out = ev.verify_answer(_answer(text, (1, 3), mode="quotes"), counting)
    assert [c.status for c in out.citations] == [ev.VERIFIED, ev.VERIFIED]
    assert _evidence_text(out.citations[0]) == "The capital of Belgium is Brussels."
    assert _evidence_text(out.citations[1]) == "The capital of Austria is Vienna."
    assert [s.status for s in out.sentences] == [ev.NO_CLAIM, ev.VERIFIED, ev.VERIFIED]
    assert counting.calls == 0


def test_not_found_answer_is_returned_unchanged(embedder):
    answer = _answer("I couldn't find the answer to this in your documents.", mode="not_found")
    assert ev.verify_answer(answer, embedder) is answer


def test_refusal_sentence_is_not_a_claim(embedder):
    out = ev.verify_answer(_answer("I couldn't find the answer to this in your documents."), embedder)
    assert [s.status for s in out.sentences] == [ev.NO_CLAIM] and out.citations == ()


def test_lexical_and_embedding_methods_differ(embedder):
    # Lexical alone cannot see a paraphrase; embeddings alone cannot see a swapped name; combined sees both.
    para = _answer("Vienna is located by the Danube [3].", (3,), question="Which river is Vienna on?")
    assert ev.verify_answer(para, embedder, method="lexical").citations[0].status == ev.UNSUPPORTED
    assert ev.verify_answer(para, embedder, method="combined").citations[0].status == ev.VERIFIED
    swapped = _answer("The capital of Belgium is Paris [1].", (1,))
    assert ev.verify_answer(swapped, embedder, method="embedding").citations[0].status == ev.VERIFIED
    assert ev.verify_answer(swapped, embedder, method="combined").citations[0].status == ev.UNSUPPORTED
    scores = ev.find_evidence(["The Eiffel Tower was completed in 1889."], [FRANCE], embedder)[0][0]
    assert scores.supported and scores.cosine > 0.8 and scores.coverage == 1.0


# --------------------------------------------------------------------------- text helpers
def test_answer_sentences_attach_leading_markers_to_the_previous_sentence():
    text = "The capital is Brussels. [1] Paris is in France [2][3].\n\n- “Quote one. Two” [1]\nFinally [4]"
    got = ev.answer_sentences(text)
    assert [text[s:e] for (s, e), _ in got] == ["The capital is Brussels. [1]", "Paris is in France [2][3].",
                                                "- “Quote one. Two” [1]", "Finally [4]"]
    assert [n for _, n in got] == [(1,), (2, 3), (1,), (4,)]


def test_split_sentences_keeps_decimals_and_lowercase_continuations():
    text = "About 1.2 million people live there. e.g. this stays. Next one!\nNew line"
    assert [text[s:e] for s, e in ev.split_sentences(text)] == [
        "About 1.2 million people live there. e.g. this stays.", "Next one!", "New line"]


def test_claim_text_and_key_terms():
    assert ev.claim_text("- “Brussels is the capital [1].” [2]") == "Brussels is the capital."
    terms = ev.content_terms("Brussels has 1,200 parks and the Atomium.")
    assert {"1200", "atomium"} <= terms.keys and "brussel" in terms.opener and "park" in terms.words
    assert "the" not in terms.words


def test_verifying_twice_gives_the_same_answer(embedder):
    text = "Brussels is the capital of Belgium [1]. Vienna lies on the river Danube."
    once = ev.verify_answer(_answer(text, (1,)), embedder)
    twice = ev.verify_answer(once, embedder)
    assert [(c.n, c.status, c.evidence_start) for c in twice.citations] == \
        [(c.n, c.status, c.evidence_start) for c in once.citations] == [(1, ev.VERIFIED, 0), (3, ev.MATCHED, 34)]
    assert twice.sentences == once.sentences


# --------------------------------------------------------------------------- table rows read with their header
SHEET = ("Sheet: Budget\nItem | Budget (EUR) | Spent (EUR) | Notes\nStaff | 80,000 | 61,000 | Two researchers\n"
         "Travel | 12,000 | 3,400 | Conferences and site visits\nEquipment | 9,500 | 9,100 | Laptops")


def test_a_sentence_about_a_table_row_may_use_the_words_of_its_header(embedder):
    """A row is read under its header (issue 25: sheets): "EUR" is in "Budget (EUR)", not in the Travel row, and a
    sentence citing the row with it is backed; a number the row does not hold still is not."""
    source = SourceMeta(file_name="budget.xlsx", title="Project budget", kind="xlsx", sha256="x")
    chunk = Chunk(doc_id="b", index=0, text=SHEET, char_start=0, char_end=len(SHEET), page_start=None, page_end=None,
                  heading_path=("Budget",), source=source)
    passages = (Passage(chunk, 0.9),)
    question = "What is the budget for travel?"

    def check(text: str) -> str:
        answer = Answer(text=text, mode="model", citations=(Citation(1, passages[0]),), passages=passages,
                        question=question, standalone_question=question, context_passages=1)
        return ev.verify_answer(answer, embedder).sentences[0].status

    assert check("Of the travel budget of 12,000 EUR, 3,400 EUR was spent [1].") == ev.VERIFIED
    assert check("Of the travel budget of 15,000 EUR, 3,400 EUR was spent [1].") != ev.VERIFIED
