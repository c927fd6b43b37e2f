"""No traceback in the browser, ever: a part of a page that fails to draw (a page image, a replayed turn, a settings
section, a library entry, a whole page) becomes one sentence and the rest of the page is still drawn; a reply whose
citation does not back one of its sentences says so and marks it. Real app, library and model through AppTest;
Ollama faked at the wire."""
from __future__ import annotations

import logging

import streamlit as st
from ollama_server import Reply
from streamlit.testing.v1 import AppTest
from ui_helpers import fixture_bytes, new_app, plain, texts

from rag_core.answer.generation.outcome import NOTICE_UNBACKED_ONE
from rag_core.core.errors import LimitReached
from rag_core.service import render
from rag_core.service.workspace import LocalWorkspace
from ui.safe import DRAW_FAILED
from ui.sources import PAGE_FAILED, PARTIAL_NOTE, TURN_FAILED

PDF = "pdf_text_multicolumn_3-pages.pdf"
QUESTION = "What is the capital of Belgium?"
SECRET = "/srv/docchat/secret/path.py"  # must never reach the page


def _page(at) -> str:
    """Everything the page says (markdown, captions, alert boxes), escapes removed."""
    return plain("\n".join(texts(at.markdown) + texts(at.caption) + texts(at.info) + texts(at.warning)
                           + texts(at.error) + texts(at.success)))


def _ask(app, reply: str = "The capital of Belgium is Brussels [1]."):
    assert app.library.ingest_bytes(fixture_bytes(PDF), PDF).status in ("added", "unchanged")
    app.server.script(Reply(reply))
    at = new_app()
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    return at


def _open_page_image(at) -> None:
    turn = at.session_state["chat_turns"][-1]
    at.session_state[f"{turn['id']}_page_1"] = True  # the "Show on the page" expander of source [1]
    at.run()


def _still_usable(at) -> None:
    assert not at.exception
    assert at.chat_input and not at.chat_input[0].disabled  # the conversation can go on
    page = _page(at)
    assert "Traceback" not in page and SECRET not in page


# -- page images ---------------------------------------------------------------------------------------------
def test_a_page_image_that_fails_to_draw_is_one_sentence_on_every_run(app, monkeypatch, caplog):
    at = _ask(app)

    def broken(*args, **kwargs):
        raise RuntimeError(f"FzErrorLimit: Overly large image ({SECRET})")

    monkeypatch.setattr(render, "pdf_page_for", broken)
    st.cache_data.clear()  # a page drawn by an earlier test must not hide the failure
    with caplog.at_level(logging.ERROR, logger="ui.safe"):
        _open_page_image(at)
    _still_usable(at)
    assert [plain(e) for e in texts(at.error)] == [PAGE_FAILED]
    assert any(r.exc_info and "Overly large image" in str(r.exc_info[1]) for r in caplog.records)  # logged in full
    for _ in range(2):  # old turns are redrawn on every run: the sentence again, never a traceback
        at.run()
        _still_usable(at)
        assert [plain(e) for e in texts(at.error)] == [PAGE_FAILED]
        assert "Brussels" in _page(at)  # the reply and its source card are still there


def test_the_page_render_limit_is_said_in_its_own_sentence_and_only_real_drawings_count(app, monkeypatch):
    at = _ask(app)
    calls = []
    monkeypatch.setattr(LocalWorkspace, "allow_page_render", lambda self: calls.append(1))
    st.cache_data.clear()
    _open_page_image(at)
    assert not at.exception and at.get("image") and len(calls) == 1
    at.run()
    at.run()
    assert len(calls) == 1  # a rerun with the page still open shows the cached image: no new drawing to count

    limit = "You have drawn 30 page images in the last minute. Wait a minute, then open the page again."

    def refuse(self):
        raise LimitReached(limit)

    monkeypatch.setattr(LocalWorkspace, "allow_page_render", refuse)
    st.cache_data.clear()
    at.run()
    _still_usable(at)
    assert [plain(w) for w in texts(at.warning)] == [limit] and not at.error


# -- replayed turns, settings, library, whole pages ------------------------------------------------------------
def test_a_turn_that_cannot_be_redrawn_is_one_sentence_and_the_rest_of_the_chat_stays(app):
    at = new_app()
    at.session_state["chat_turns"] = [
        {"id": "t1", "role": "user", "text": "First question"},
        {"id": "t2", "role": "assistant", "text": "x", "answer": "not an Answer at all", "error": None},
        {"id": "t3", "role": "user"},  # no text
        {"id": "t4", "role": "assistant", "text": "", "answer": None, "error": "The library is busy."},
    ]
    for _ in range(2):
        at.run()
        _still_usable(at)
        assert [plain(e) for e in texts(at.error)] == [TURN_FAILED, TURN_FAILED, "The library is busy."]
        assert "First question" in _page(at)
        assert len(at.chat_message) == 4


def test_a_failing_settings_section_leaves_the_rest_of_the_page(app, monkeypatch):
    import rag_core.llm.ollama

    def broken(settings):
        raise RuntimeError(SECRET)

    monkeypatch.setattr(rag_core.llm.ollama, "ollama_status", broken)
    at = new_app("pages/settings.py")
    assert not at.exception and SECRET not in _page(at)
    assert [plain(e) for e in texts(at.error)] == [DRAW_FAILED]
    assert at.slider(key="set_k").value == app.settings.retrieval.top_k  # the answer settings are still there


def test_a_failing_library_entry_is_one_sentence_and_the_others_stay(app, monkeypatch):
    for name in ("walrus.txt", "zebra.txt"):
        app.library.ingest_bytes(f"The {name[:-4]} notes say hello to every reader.".encode(), name)
    real = render.kind_label
    monkeypatch.setattr(render, "kind_label", lambda kind: (_ for _ in ()).throw(ValueError(SECRET))
                        if st.session_state.get("break_rows") else real(kind))
    at = new_app("pages/library.py")
    assert not at.error and "walrus" in _page(at) and "zebra" in _page(at)
    at.session_state["break_rows"] = True
    at.run()
    assert not at.exception and SECRET not in _page(at)
    assert [plain(e) for e in texts(at.error)] == [DRAW_FAILED, DRAW_FAILED]
    assert at.get("file_uploader")  # adding files still works


def test_whatever_escapes_a_page_is_one_sentence(app, monkeypatch):
    from ui import state

    def broken():
        raise KeyError(SECRET)

    monkeypatch.setattr(state, "workspace", broken)
    # app.py runs every page inside one guard. (AppTest runs the other pages in Streamlit's pages/-folder mode,
    # without app.py, so only the default page can show it here; a real server always goes through app.py.)
    at = new_app()
    assert not at.exception and SECRET not in _page(at)
    assert [plain(e) for e in texts(at.error)] == [DRAW_FAILED]
    assert at.title[0].value == "Chat with your documents"  # drawn before the failure, and kept


def test_guarded_lets_streamlit_stop_and_rerun_through():
    def script():
        import streamlit as st

        from ui.safe import guarded

        st.session_state["runs"] = st.session_state.get("runs", 0) + 1
        with guarded("a block that reruns"):
            if st.session_state["runs"] == 1:
                st.rerun()
        with guarded("a block that fails"):
            raise ValueError("inside")
        st.write("after the failure")
        with guarded("a block that stops"):
            st.stop()
        st.write("after the stop")

    at = AppTest.from_function(script).run()
    assert not at.exception
    assert at.session_state["runs"] == 2  # st.rerun() was not swallowed
    shown = texts(at.markdown)
    assert "after the failure" in shown and "after the stop" not in shown  # st.stop() was not swallowed
    assert [plain(e) for e in texts(at.error)] == [DRAW_FAILED]


# -- a reply with a sentence its citation does not back -----------------------------------------------------------
def test_a_mixed_reply_shows_a_notice_and_marks_the_sentence(app):
    at = _ask(app, "The capital of Belgium is Brussels [1]. Its people must send their savings to the treasurer "
                   "on the moon every week [1].")
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.notice == NOTICE_UNBACKED_ONE
    (cite,) = answer.citations
    assert cite.status == "unsupported" and cite.evidence_start is not None
    for _ in range(2):  # as answered, then replayed from the session by the next run
        reply_col, sources_col = at.chat_message[1].columns
        reply = " ".join(texts(reply_col.markdown))
        assert "every week **\\[1\\]**\\. " + render.UNBACKED_MARK in reply  # the injected sentence is marked ...
        assert reply.count(render.UNBACKED_MARK) == 1  # ... and only it
        assert "Brussels **\\[1\\]**\\. Its" in reply
        assert [plain(w) for w in texts(reply_col.warning)] == [NOTICE_UNBACKED_ONE]
        assert any(PARTIAL_NOTE in plain(c) for c in texts(sources_col.caption))
        at.run()
        assert not at.exception
