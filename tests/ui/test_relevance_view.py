"""Answers a reader can check quickly (issue 37): each source in the chat says how relevant it is and why it was chosen,
in plain words, with a warning on a weak match; the Settings page's retrieval test ranks the passages a question
finds, with their scores, without asking a model. Through AppTest: the real app, a real library, no model asked."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest
from ui_helpers import button, fixture_bytes, new_app, plain, texts

PDF = "pdf_text_multicolumn_3-pages.pdf"  # a table of countries and their capitals, among other text
QUESTION = "What is the capital of Belgium?"


def _add(app) -> None:
    assert app.library.ingest_bytes(fixture_bytes(PDF), PDF).status == "added"


def _retrieval_test(at, question: str):
    at.text_input(key="retrieval_question").set_value(question)
    return button(at, "Test retrieval").click().run()


def test_the_retrieval_test_ranks_passages_with_scores_and_reasons(app):
    from ui.relevance import LEVELS

    _add(app)
    asked = len(app.server.chat_requests)  # (the scripted model server is shared by the session's tests)
    at = _retrieval_test(new_app("pages/settings.py"), QUESTION)
    assert not at.exception
    page = plain(" ".join(texts(at.markdown) + texts(at.caption)))
    assert f"for “{QUESTION}”, best first" in page
    ranked = [plain(" ".join(texts(m for m in at.markdown if m.value.startswith(f"**{n}\\.**"))))
              for n in range(1, 6)]
    assert "Two-Column Document with Lorem Ipsum" in ranked[0]  # the document's title on the first row
    assert any(label in page for label, _, _ in LEVELS.values())
    assert "Matched your words (“capital”, “Belgium”)" in page or "shares your words (“capital”, “Belgium”)" in page
    scores = [c for c in texts(at.caption) if plain(c).startswith("Rank score ")]
    assert scores and all(" · Meaning 0." in plain(s) or " · Meaning -0." in plain(s) for s in scores)
    assert ":orange-background" not in " ".join(texts(at.markdown))  # nothing highlighted: no reply cites them
    assert len(app.server.chat_requests) == asked  # no model was asked
    at.run()  # a later run of the page (another setting changed) keeps the last test
    assert f"for “{QUESTION}”, best first" in plain(" ".join(texts(at.markdown)))


def test_the_retrieval_test_says_one_sentence_for_an_empty_question_or_library(app):
    from rag_core.service.workspace import TEST_EMPTY_LIBRARY, TEST_NO_QUESTION

    at = _retrieval_test(new_app("pages/settings.py"), QUESTION)
    assert not at.exception
    assert [plain(i.value) for i in at.info] == [TEST_EMPTY_LIBRARY]
    _add(app)
    at = _retrieval_test(at, "   ")
    assert [plain(i.value) for i in at.info] == [TEST_NO_QUESTION]
    assert not any(plain(c).startswith("Rank score ") for c in texts(at.caption))


def test_a_chat_reply_s_sources_say_how_relevant_they_are_and_why(app):
    _add(app)
    at = new_app()
    at.session_state["prefs"] = {"use_llm": False}  # quoted: no model
    at.run()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.citations and all(c.passage.match is not None for c in answer.citations)
    sources = at.chat_message[1].columns[1]
    side = plain(" ".join(texts(sources.markdown)))
    assert "High relevance" in side or "Medium relevance" in side
    assert "(“capital”, “Belgium”)" in side  # the question's words the cited passage holds
    at.run()  # replayed from the conversation: the reasons stay
    assert "(“capital”, “Belgium”)" in plain(" ".join(texts(at.chat_message[1].columns[1].markdown)))


def _sources_page():
    from rag_core.core.models import Answer, Chunk, Citation, Match, MatchKind, MatchLevel, Passage, SourceMeta
    from ui.sources import show_sources

    src = SourceMeta(file_name="manual.txt", title="Pump manual", kind="txt", sha256="0" * 64)
    strong = Passage(Chunk("d1", 0, "Replace the impeller seal every 2,000 hours.", 0, 44, None, None, (), src), 1.4,
                     Match(MatchKind.BOTH, MatchLevel.HIGH, 0.72, 8.7, ("impeller", "seal")))
    weak = Passage(Chunk("d1", 1, "The warranty lasts two years.", 45, 74, None, None, (), src), -0.8,
                   Match(MatchKind.MEANING, MatchLevel.LOW, 0.08, None, ()))
    paraphrase = Passage(Chunk("d1", 2, "Swap the rotor gasket when it leaks.", 75, 111, None, None, (), src), 0.3,
                         Match(MatchKind.MEANING, MatchLevel.MEDIUM, 0.41, None, ()))
    old = Passage(Chunk("d1", 3, "Saved before matches were kept.", 112, 143, None, None, (), src), 0.1)
    answer = Answer("Every 2,000 hours [1].", "model", (Citation(1, strong, "verified", 0, 44),),
                    (strong, weak, paraphrase, old), context_passages=3)
    show_sources(answer, "t", None)  # text files: the workspace is never used


def test_a_weak_source_carries_a_warning_and_each_kind_its_own_words():
    from ui.relevance import MEANING, NEAREST, WEAK_NOTE

    at = AppTest.from_function(_sources_page, default_timeout=60)
    at.run()
    assert not at.exception
    shown = [plain(m) for m in texts(at.markdown)]
    assert any("High relevance" in m and "Strong match — shares your words (“impeller”, “seal”) and your meaning" in m
               for m in shown)
    assert any("Low relevance" in m and NEAREST in m for m in shown)
    assert any("Medium relevance" in m and MEANING in m for m in shown)
    warnings = [c for c in texts(at.caption) if WEAK_NOTE in plain(c).replace("**", "")]
    assert len(warnings) == 1  # on the weak passage only; the passage saved without a match shows no line
    assert sum("relevance" in m for m in shown) == 3
