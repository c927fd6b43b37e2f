"""Questions about the library itself (rag_core.answer.library_answers), on a real library of three fixture documents
(Markdown, RTF, EPUB) with the real embedding model: "what documents do I have" lists their titles, kinds and dates;
"which of my documents mention X" names the documents that do, each with its best passage quoted, cited and verified;
another owner's document is never listed or quoted."""
from __future__ import annotations

from pathlib import Path

import pytest

from rag_core.answer.generation.notices import NOTICE_EMPTY
from rag_core.answer.intent import Intent, IntentKind, classify
from rag_core.answer.library_answers import library_answer, list_documents_answer
from rag_core.core.config import Settings
from rag_core.core.models import AnswerMode, CitationStatus
from rag_core.service.library import Library

pytestmark = pytest.mark.remembered_vectors  # eu_capitals.md is added by other modules too: its vectors computed once

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
FILES = {"capitals": "eu_capitals.md", "memo": "rtf_memo_headings-list-table.rtf",
         "novella": "epub_toc_three-chapters.epub"}
TITLES = {"capitals": "Capitals of the European Union", "memo": "Memo: moving the Lyon office",
          "novella": "The Keeper of Skerry Light — Ishbel MacLeod"}
PUBLIC = [None]  # the owners whose documents a session sees: the shared ones only
BOB_NOTE = "# Bob's tower notes\n\nThe old water tower behind the depot is private and must not be shown to others.\n"


@pytest.fixture(scope="module")
def lib(tmp_path_factory, embedder):
    """The three documents, shared, plus a note about a tower that belongs to another owner ("bob")."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("library_answers") / "data", ollama_model="")
    library = Library(settings, embedder=embedder)
    ids = {}
    for key, name in FILES.items():
        result = library.ingest_path(DOCS / name)
        assert result.status == "added", result
        ids[key] = result.doc_id
    assert library.ingest_bytes(BOB_NOTE.encode(), "bob_tower.md", owner="bob").status == "added"
    library.ids = ids  # type: ignore[attr-defined]
    yield library
    library.close()


def _ask(lib, question: str, scope=None):
    intent = classify(question, lib.documents(PUBLIC), scope)
    return intent, library_answer(intent, lib, lib.settings, scope=scope, owners=PUBLIC, question=question)


def test_library_list_names_every_title_with_its_kind(lib):
    intent, ans = _ask(lib, "What documents do I have?")
    assert intent.kind is IntentKind.LIBRARY_LIST
    assert ans.mode is AnswerMode.QUOTES and ans.citations == ()
    lines = [ln for ln in ans.text.splitlines() if ln.startswith("- ")]
    assert len(lines) == 3
    for key, kind in (("capitals", "Markdown"), ("memo", "RTF"), ("novella", "EPUB")):
        (line,) = [ln for ln in lines if TITLES[key] in ln]
        assert kind in line and "added " in line and FILES[key] in line
    assert "Bob" not in ans.text and "bob_tower" not in ans.text  # another owner's document
    assert "3 documents" in ans.text


def test_library_list_marks_the_documents_selected_in_the_chat(lib):
    _, ans = _ask(lib, "which files did I upload", scope=[lib.ids["memo"]])
    (selected,) = [ln for ln in ans.text.splitlines() if "selected in this chat" in ln and ln.startswith("- ")]
    assert TITLES["memo"] in selected


def test_topic_names_the_documents_that_mention_it_with_a_passage_each(lib):
    intent, ans = _ask(lib, "Which of my documents mention a tower?")
    assert (intent.kind, intent.topic) == (IntentKind.LIBRARY_TOPIC, "tower")
    cited = {c.passage.chunk.doc_id for c in ans.citations}
    assert cited == {lib.ids["capitals"], lib.ids["novella"]}  # not the memo, not Bob's private note
    assert len(ans.citations) == 2 and len(ans.passages) == 2
    for c in ans.citations:
        assert "tower" in c.passage.chunk.text[c.evidence_start:c.evidence_end].lower()
        assert c.status is CitationStatus.VERIFIED  # each quote is checked against its passage like any answer
    assert TITLES["capitals"] in ans.text and TITLES["novella"] in ans.text and TITLES["memo"] not in ans.text
    assert "Eiffel Tower" in ans.text and "[1]" in ans.text and "[2]" in ans.text
    assert ans.text.startswith("2 of your 3 documents mention")


def test_topic_in_one_document_and_within_the_chat_scope(lib):
    intent, ans = _ask(lib, "what does my library say about the Lyon office")
    assert intent.topic == "Lyon office"
    assert [c.passage.chunk.doc_id for c in ans.citations] == [lib.ids["memo"]]
    _, scoped = _ask(lib, "Which documents mention a tower?", scope=[lib.ids["novella"]])
    assert [c.passage.chunk.doc_id for c in scoped.citations] == [lib.ids["novella"]]
    assert "selected in this chat" in scoped.text


def test_a_topic_no_document_mentions_is_never_said_to_be_mentioned(lib):
    _, ans = _ask(lib, "Which documents mention penguins?")
    assert ans.mode is AnswerMode.NOT_FOUND or ans.extra.get("closest") is True
    assert "documents mention “penguins”" not in ans.text


def test_only_library_intents_are_answered_here(lib):
    with pytest.raises(ValueError, match="not a question about the library"):
        library_answer(Intent(IntentKind.SUMMARY, (lib.ids["memo"],)), lib, lib.settings, owners=None)


def test_an_empty_library_says_so():
    ans = list_documents_answer([])
    assert ans.mode is AnswerMode.NOT_FOUND and ans.notice == NOTICE_EMPTY
