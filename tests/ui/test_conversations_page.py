"""Conversations and Settings that are kept (AppTest on the real app with a real library): a new session (a reload,
a restart) finds the last conversation and the saved Settings; the sidebar lists, opens, renames, deletes and
exports conversations."""
from __future__ import annotations

import json
import re

from ollama_server import Reply
from ui_helpers import button, fixture_bytes, new_app, plain, texts

from rag_core.service import render
from rag_core.service.conversations import Conversation, FileConversations

PDF = "pdf_text_multicolumn_3-pages.pdf"
QUESTION = "What is the capital of Belgium?"


def _add(app) -> None:
    assert app.library.ingest_bytes(fixture_bytes(PDF), PDF).status == "added"


def _ask(at, app, question: str = QUESTION, reply: str = "The capital of Belgium is Brussels [1].") -> None:
    app.server.script(Reply(reply))
    at.chat_input[0].set_value(question).run()
    assert not at.exception


def _saved(app) -> FileConversations:
    return FileConversations(app.data_dir / "conversations")


def test_a_reload_reopens_the_conversation_with_its_sources(app):
    _add(app)
    at = new_app()
    _ask(at, app)
    [info] = _saved(app).list()
    assert info.title == QUESTION and info.questions == 1
    fresh = new_app()  # a new visit starts a new conversation, and lists the saved one in the sidebar
    assert fresh.session_state["chat_turns"] == [] and fresh.sidebar.button(key=f"conv_{info.id}")
    from streamlit.testing.v1 import AppTest
    from ui_helpers import ROOT

    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    again.query_params["c"] = info.id  # a reload (F5) keeps the conversation's address
    again.run()
    turns = again.session_state["chat_turns"]
    assert [t["role"] for t in turns] == ["user", "assistant"]
    assert turns[1]["answer"].text == "The capital of Belgium is Brussels [1]."
    assert turns[1]["answer"].citations[0].status == "verified"
    assert any("Brussels" in plain(m.value) for m in again.markdown)


def test_new_open_rename_and_delete_from_the_sidebar(app):
    _add(app)
    at = new_app()
    _ask(at, app)
    first = _saved(app).list()[0].id
    button(at, "New conversation").click().run()
    assert at.session_state["chat_turns"] == []
    _ask(at, app, "Which city is the capital of Belgium?", "Brussels is the capital [1].")
    convs = _saved(app).list()
    assert len(convs) == 2 and convs[0].title == "Which city is the capital of Belgium?"
    # the earlier one is listed in the sidebar and opens with its turns
    at.sidebar.button(key=f"conv_{first}").click().run()
    assert at.session_state["chat_turns"][0]["text"] == QUESTION
    at.sidebar.text_input(key="conv_title").input("Belgium facts").run()
    assert {c.title for c in _saved(app).list()} == {"Belgium facts", "Which city is the capital of Belgium?"}
    button(at, "Delete this conversation").click().run()
    assert [c.title for c in _saved(app).list()] == ["Which city is the capital of Belgium?"]
    assert at.session_state["chat_turns"] == []


def test_export_is_a_markdown_file_with_numbered_sources(app):
    _add(app)
    at = new_app()
    _ask(at, app)
    [download] = [d for d in at.get("download_button") if d.proto.label == "Export as Markdown"]
    assert download.proto.label == "Export as Markdown"
    conv = _saved(app).load(_saved(app).list()[0].id)
    from rag_core.service.conversations import export_markdown

    md = export_markdown(conv)
    assert plain(md).startswith(f"# {QUESTION}") and "**[1]**" in md and "> " in md
    assert re.search(r"\*\*\[1\]\*\* Two-Column Document with Lorem Ipsum, pages? \d", plain(md)), md


def test_a_damaged_conversation_file_never_stops_the_page(app):
    _add(app)
    folder = app.data_dir / "conversations"
    folder.mkdir(parents=True)
    (folder / "0123456789abcdef.json").write_text("{broken", encoding="utf-8")
    at = new_app()
    assert not at.exception and at.chat_input and not at.chat_input[0].disabled


def _save(app, conv_id: str, title: str) -> None:
    conv = Conversation(id=conv_id, title=title, titled_by_user=True)
    conv.turns.append({"id": "u1", "role": "user", "text": "Who?"})
    _saved(app).save(conv)


def test_bad_conversation_files_are_named_and_everything_else_works(app):
    """A file of the wrong shape is skipped and named in the sidebar; one that looks right but is damaged inside
    says so when opened (from the list or from the address); the chat input and the other conversations work."""
    _add(app)
    folder = app.data_dir / "conversations"
    _save(app, "0123456789abcdef", "A good one")
    (folder / "00000000000000b1.json").write_text("[1,2]", encoding="utf-8")
    (folder / "00000000000000b2.json").write_text('{"format": 1, "id": "00000000000000b2", "title": "Damaged", '
                                                   '"turns": [1]}', encoding="utf-8")
    at = new_app()
    assert not at.exception and at.chat_input and not at.chat_input[0].disabled
    assert at.sidebar.button(key="conv_0123456789abcdef")
    [line] = [c for c in texts(at.sidebar.caption) if "could not be opened" in c]
    assert "1 saved conversation could not be opened" in plain(line) and "00000000000000b1.json" in line
    at.sidebar.button(key="conv_00000000000000b2").click().run()  # listed (its head is fine), damaged inside
    assert not at.exception and at.chat_input and not at.chat_input[0].disabled
    assert any("00000000000000b2.json" in w and "could not be opened" in plain(w) for w in texts(at.warning))
    at.sidebar.button(key="conv_0123456789abcdef").click().run()
    assert at.session_state["chat_turns"][0]["text"] == "Who?"

    from streamlit.testing.v1 import AppTest
    from ui_helpers import ROOT

    again = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    again.query_params["c"] = "00000000000000b2"  # a reload of a damaged conversation's address
    again.run()
    assert not again.exception and again.chat_input and not again.chat_input[0].disabled
    assert any("00000000000000b2.json" in w for w in texts(again.warning))
    assert again.session_state["chat_conversation"].id != "00000000000000b2"  # a new one: the file is never overwritten


def test_sidebar_titles_show_as_text(app):
    """A title is shown as typed: an image in it is not loaded, :red[...] does not colour, ** does not embolden."""
    title = "![x](http://127.0.0.1:9/p.png?d=secret) :red[alarm] **bold** <b>tag</b>"
    _save(app, "0123456789abcdef", title)
    at = new_app()
    shown, when = at.sidebar.button(key="conv_0123456789abcdef").label.rsplit(" :gray[", 1)  # then when it was used
    assert shown == render.escape_markdown(title) and plain(shown) == title and when.endswith("]")
    assert "![" not in shown and ":red[" not in shown and "**" not in shown


def test_settings_choices_are_saved_and_used_by_the_next_session(app):
    _add(app)
    at = new_app("pages/settings.py")
    at.slider(key="set_k").set_value(7).run()
    assert not at.exception
    saved = json.loads((app.data_dir / "preferences.json").read_text())
    assert saved["top_k"] == 7
    later = new_app("pages/settings.py")  # a reload or the next start
    assert later.slider(key="set_k").value == 7
    assert any("keeps them on this computer" in t for t in texts(later.caption))


def test_restore_defaults_also_forgets_the_saved_choices(app):
    at = new_app("pages/settings.py")
    at.slider(key="set_k").set_value(9).run()
    assert json.loads((app.data_dir / "preferences.json").read_text())["top_k"] == 9
    button(at, "Restore defaults").click().run()
    assert not at.exception
    assert json.loads((app.data_dir / "preferences.json").read_text()) == {}
    later = new_app("pages/settings.py")
    assert later.slider(key="set_k").value == app.settings.retrieval.top_k
