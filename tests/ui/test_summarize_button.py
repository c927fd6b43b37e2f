"""The "Summarize" action (issue 26): a Library row's button opens the chat scoped to that document and asks for its
summary, answered from the whole document; the chat's scope picker offers it for each scoped document."""
from __future__ import annotations

import re

from ollama_server import Reply
from ui_helpers import button, fixture_bytes, new_app

from rag_core.core.models import AnswerMode, CitationStatus

CAPITALS, MEMO = "eu_capitals.md", "rtf_memo_headings-list-table.rtf"


def first_sentences(body: dict) -> Reply:
    """A model that writes one bullet per source shown: its first sentence, cited."""
    user = body["messages"][-1]["content"]
    sources = re.findall(r'<source n="(\d+)"[^>]*>\n(.*?)\n</source>', user, re.S)
    lines = []
    for n, text in sources:
        sentence = next((s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 5), "")
        if sentence:
            lines.append(f"- {' '.join(sentence.split())} [{n}]")
    return Reply("\n".join(lines) or "Nothing.")


def _add(app, name: str) -> str:
    result = app.library.ingest_bytes(fixture_bytes(name), name)
    assert result.status == "added", result
    return result.doc_id


def test_library_summarize_opens_a_scoped_chat_with_the_summary(app):
    capitals, _ = _add(app, CAPITALS), _add(app, MEMO)
    app.server.default = first_sentences
    try:
        at = new_app("pages/library.py")
        assert not at.exception
        rows = [b for b in at.button if b.label == "Summarize"]
        assert len(rows) == 2  # one per document
        next(b for b in rows if b.key == f"summarize_{capitals}").click().run(timeout=120)
    finally:
        app.server.default = Reply()
    assert not at.exception
    assert at.session_state["scope_mode"] == "pick" and at.session_state["scope_docs"] == [capitals]
    question, reply = at.session_state["chat_turns"]
    assert question["text"] == "Summarize “Capitals of the European Union”"
    answer = reply["answer"]
    assert answer is not None and answer.mode == AnswerMode.MODEL and not answer.incomplete, reply
    assert answer.extra["summary"]["shape"] == "summary"
    assert answer.citations and {c.passage.chunk.doc_id for c in answer.citations} == {capitals}
    assert all(c.status == CitationStatus.VERIFIED for c in answer.citations)
    assert "Helsinki" in answer.text and "Brussels" in answer.text  # read from the whole document: first and last


def test_scope_picker_offers_summarize_for_each_scoped_document(app):
    capitals, memo = _add(app, CAPITALS), _add(app, MEMO)
    at = new_app()
    at.session_state["prefs"] = {"use_llm": False}
    at.radio(key="scope_mode").set_value("pick").run()
    at.multiselect(key="scope_docs").set_value([capitals, memo]).run()
    offered = [b.label for b in at.button if b.key and b.key.startswith("scope_summarize_")]
    assert sorted(offered) == ["Summarize “Capitals of the European Union”", "Summarize “Memo: moving the Lyon office”"]
    button(at, "Summarize “Memo: moving the Lyon office”").click().run(timeout=120)
    assert not at.exception
    assert at.session_state["scope_docs"] == [memo]  # the scope narrows to the document summarized
    question, reply = at.session_state["chat_turns"]
    assert question["text"] == "Summarize “Memo: moving the Lyon office”"
    answer = reply["answer"]
    assert answer.mode == AnswerMode.QUOTES and answer.extra["summary"]["shape"] == "summary"
    assert {c.passage.chunk.doc_id for c in answer.citations} == {memo}
