"""A question in another language than the documents gets a reply that says so, through the real answer path
(the bundled model, a real library); a question in the documents' language gets no such sentence."""
from __future__ import annotations

from pathlib import Path

from rag_core.answer.generation import answer

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"


def test_french_question_over_english_documents_is_told(library, settings):
    assert library.ingest_path(DOCS / "eu_capitals.md").status == "added"
    reply = answer(library, "Quelle est la capitale de la Belgique et combien de personnes y vivent ?", settings,
                   use_llm=False)
    assert reply.notice is not None and "French" in reply.notice and "English" in reply.notice
    english = answer(library, "What is the capital of Belgium and how many people live there?", settings,
                     use_llm=False)
    assert "seems to be in" not in (english.notice or "")
