"""Page logic through Streamlit's AppTest: the real app, a real library (real model, embedded Qdrant on a temp
folder), Ollama faked at the wire by tests/ollama_server.py."""
from __future__ import annotations

import threading

import pytest
from ollama_server import Reply
from ui_helpers import fixture_bytes, new_app, plain, texts, wait_for_jobs

from rag_core.ingest.originals import original_path
from rag_core.service.library import IngestResult

PDF = "pdf_text_multicolumn_3-pages.pdf"
PDF4 = "pdf_text_4-pages_pdflatex.pdf"
LOCKED = "pdf_encrypted_user-password.pdf"


def _md(at) -> str:
    """All Markdown-ish text of the page (markdown, captions, alerts) in one string, escapes removed."""
    return plain("\n".join(texts(at.markdown) + texts(at.caption) + texts(at.info) + texts(at.warning) + texts(at.error)
                     + texts(at.success)))


def _add(app, name: str) -> IngestResult:
    result = app.library.ingest_bytes(fixture_bytes(name), name)
    assert result.status == "added", result
    return result


# -- chat: first screen, busy state ----------------------------------------------------
def test_empty_library_shows_a_friendly_first_screen(app):
    at = new_app()
    assert not at.exception
    page = _md(at)
    assert "Your library is empty" in page
    assert "Library" in page and "Wikipedia" in page
    assert not at.error and not at.warning
    assert at.chat_input[0].disabled


def test_chat_stays_usable_while_files_are_being_added(app):
    _add(app, PDF)
    gate = threading.Event()

    def slow(progress):
        progress("embedding", 1, 4)
        gate.wait(30)
        return IngestResult("report.pdf", "added", "x", 1, 1, "report")

    job = app.queue.submit("report.pdf", slow)
    try:
        at = new_app()
        assert not at.exception
        assert "Still adding “report.pdf”; answers use the documents already in your library." in _md(at)
        assert not at.chat_input[0].disabled  # documents already in the library can be asked about meanwhile
        app.server.script(Reply("The capital of Belgium is Brussels [1]."))
        at.chat_input[0].set_value("What is the capital of Belgium?").run(timeout=60)
        assert not at.exception
        turns = at.session_state["chat_turns"]
        assert turns[-1]["answer"] is not None and turns[-1]["answer"].text == "The capital of Belgium is Brussels [1]."
        assert not app.queue.wait([job], 0.1)  # the upload was still running while the question was answered
    finally:
        gate.set()
    assert app.queue.wait([job], 10)
    at.run()
    assert "Still adding" not in _md(at)
    assert not at.chat_input[0].disabled


# -- chat: an answer with citations, replayed ------------------------------------------
def test_reply_with_citations_is_kept_in_state_and_replayed(app):
    _add(app, PDF)
    app.server.script(Reply("The capital of Belgium is Brussels [1]."))
    at = new_app()
    at.chat_input[0].set_value("What is the capital of Belgium?").run()
    assert not at.exception
    turns = at.session_state["chat_turns"]
    assert [t["role"] for t in turns] == ["user", "assistant"]
    answer = turns[1]["answer"]
    assert answer.mode == "model" and answer.text == "The capital of Belgium is Brussels [1]."
    [cite] = answer.citations
    assert cite.n == 1 and "Brussels" in cite.passage.chunk.text and cite.passage.chunk.page_end == 3
    # The UI located the cited row inside the passage for highlighting.
    assert "Brussels" in cite.passage.chunk.text[cite.evidence_start:cite.evidence_end]

    def check(at):
        msgs = at.chat_message
        assert [m.name for m in msgs] == ["user", "assistant"]
        reply_col, sources_col = msgs[1].columns
        assert "Brussels **\\[1\\]**" in " ".join(texts(reply_col.markdown))
        side = " ".join(texts(sources_col.markdown))
        assert "**\\[1\\]** **Two\\-Column Document with Lorem Ipsum**" in side  # its own title (issue 28)
        assert ":orange-background[**Belgium \\| 11\\.5" in side
        assert "Show on the page" in texts(sources_col.expander)
        assert any(label.startswith("Other passages") for label in texts(sources_col.expander))

    check(at)
    at.run()  # any rerun replays the conversation from session state
    assert not at.exception
    check(at)
    # A follow-up carries the history to the model.
    app.server.script(Reply("Brussels"), Reply("It has about 11.5 million people [1]."))
    at.chat_input[0].set_value("And how many people live there?").run()
    assert len(at.session_state["chat_turns"]) == 4
    rewrite = app.server.chat_requests[-2]["messages"][-1]["content"]
    assert "What is the capital of Belgium?" in rewrite


def test_quoted_and_not_found_replies_are_marked(app):
    _add(app, PDF)
    at = new_app()
    at.session_state["prefs"] = {"use_llm": False}
    at.run()
    at.chat_input[0].set_value("What is the capital of Belgium?").run()
    assert not at.exception
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.mode == "quotes"
    reply_col = at.chat_message[1].columns[0]
    shown = " ".join(texts(reply_col.markdown) + texts(reply_col.caption))
    assert "Quoted from your documents" in shown
    assert "no AI model wrote this answer" in shown
    assert "Brussels" in shown

    at.chat_input[0].set_value("Who painted the Mona Lisa in the Louvre?").run()
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.mode == "not_found" and not answer.citations
    reply_col = at.chat_message[3].columns[0]
    shown = " ".join(texts(reply_col.markdown) + texts(reply_col.caption))
    assert "Not found in your documents" in shown
    assert "None of your documents seems to cover this question" in shown


def test_ollama_down_gives_a_friendly_sentence_and_quotes(app, monkeypatch):
    _add(app, PDF)
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    at = new_app()
    assert "The AI model that writes answers is not running" in _md(at)
    at.chat_input[0].set_value("What is the capital of Belgium?").run()
    assert not at.exception
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.mode == "quotes"
    assert "The AI model that writes answers is not available" in answer.notice and "127.0.0.1" not in answer.notice
    assert "http://127.0.0.1:9" in answer.extra["details"]
    assert "Traceback" not in _md(at)


@pytest.mark.slow
def test_scope_limits_the_search_to_picked_documents(app):
    _add(app, PDF)
    four = _add(app, PDF4)
    at = new_app()
    at.sidebar.radio[0].set_value("pick").run()
    assert at.chat_input[0].disabled  # nothing picked yet
    at.sidebar.multiselect[0].set_value([four.doc_id]).run()
    assert not at.chat_input[0].disabled
    app.server.script(Reply("I couldn't find the answer to this in your documents."))
    at.chat_input[0].set_value("What is the capital of Belgium?").run()
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.passages and {p.chunk.doc_id for p in answer.passages} == {four.doc_id}


# -- library: uploads, results, list, delete --------------------------------------------
def test_upload_results_per_file(app):
    at = new_app("pages/library.py")
    at.get("file_uploader")[0].set_value([
        (PDF4, fixture_bytes(PDF4), "application/pdf"),
        (LOCKED, fixture_bytes(LOCKED), "application/pdf"),
        ("empty.txt", b"", "text/plain"),
    ]).run()
    assert not at.exception
    wait_for_jobs(at, app.queue)
    statuses = {s.label: s for s in at.status}
    added = statuses["Added **pdf\\_text\\_4\\-pages\\_pdflatex\\.pdf** — 4 pages, " +
                     f"{app.library.documents()[0].chunks} passages"]
    assert added.state == "complete"
    errors = {plain(e.proto.title): plain(e.value) for e in at.error}  # open error boxes, never folded away
    assert not [label for label in statuses if label.startswith("Could not add")]
    assert "password-protected" in errors["Could not add pdf_encrypted_user-password.pdf"]
    assert "the file is empty" in errors["Could not add empty.txt"]
    # The list shows the added document; only it has a private copy of its original, named by id.
    [doc] = app.library.documents()
    assert "**pdf\\_text\\_4\\-pages\\_pdflatex**" in texts(at.markdown)
    assert original_path(app.settings, doc.doc_id).read_bytes() == fixture_bytes(PDF4)
    assert [p.name for p in original_path(app.settings, doc.doc_id).parent.iterdir()] == [f"{doc.doc_id}.pdf"]

    # The same file again: "already in your library".
    at.get("file_uploader")[0].set_value([("copy.pdf", fixture_bytes(PDF4), "application/pdf")]).run()
    wait_for_jobs(at, app.queue)
    assert "**copy\\.pdf** is already in your library" in texts(at.status)
    assert len(app.library.documents()) == 1


def test_file_name_is_never_a_path(app):
    at = new_app("pages/library.py")
    at.get("file_uploader")[0].set_value([("../../evil.pdf", fixture_bytes(PDF4), "application/pdf")]).run()
    wait_for_jobs(at, app.queue)
    assert not (app.data_dir.parent / "evil.pdf").exists() and not (app.data_dir / "evil.pdf").exists()
    [doc] = app.library.documents()
    assert original_path(app.settings, doc.doc_id).exists()


@pytest.mark.slow
def test_delete_asks_for_confirmation(app):
    doc = _add(app, PDF4)
    _add(app, PDF)
    at = new_app("pages/library.py")
    at.text_input(key="title_filter").set_value("4-pages").run()
    assert "**pdf\\_text\\_4\\-pages\\_pdflatex**" in texts(at.markdown)
    assert "**pdf\\_text\\_multicolumn\\_3\\-pages**" not in texts(at.markdown)
    at.button(key=f"del_{doc.doc_id}").click().run()
    assert any("from your library?" in w for w in texts(at.warning))
    assert len(app.library.documents()) == 2  # nothing deleted yet
    at.button(key=f"no_{doc.doc_id}").click().run()
    assert not at.warning and len(app.library.documents()) == 2
    at.button(key=f"del_{doc.doc_id}").click().run()
    at.button(key=f"yes_{doc.doc_id}").click().run()
    assert not at.exception
    assert [d.file_name for d in app.library.documents()] == [PDF]


# -- settings --------------------------------------------------------------------------
def test_settings_show_models_and_persist_for_the_session(app):
    at = new_app("pages/settings.py")
    assert not at.exception
    assert any("Ollama is running, with 1 model installed." in plain(s) for s in texts(at.success))
    assert at.selectbox[0].options == ["llama3.2:3b"]
    at.slider(key="set_k").set_value(9).run()
    at.radio(key="set_scope").set_value("pick").run()
    assert at.session_state["settings_overrides"] == {"top_k": 9}
    at.switch_page("pages/chat.py").run()
    at.switch_page("pages/settings.py").run()
    assert at.slider(key="set_k").value == 9  # kept across pages
    assert at.radio(key="set_scope").value == "pick"


def test_pull_model_shows_progress_and_adds_it(app):
    at = new_app("pages/settings.py")
    at.text_input[1].set_value("qwen2.5:1.5b")
    at.button[1].click().run()  # the form's Download button
    assert not at.exception
    assert any("“qwen2.5:1.5b” is ready" in plain(s) for s in texts(at.success))
    assert "qwen2.5:1.5b" in app.server.models
    assert at.progress[0].value == 100
    assert at.session_state["settings_overrides"]["ollama_model"] == "qwen2.5:1.5b"


def test_settings_guidance_when_ollama_is_down(app, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    at = new_app("pages/settings.py")
    assert not at.exception
    page = _md(at)
    assert "The AI model that writes answers is not running" in page
    assert "How to turn on written answers" in page
    assert "answers by quoting your documents" in page


def test_upload_limit_follows_the_setting_and_the_streamlit_config_agrees(app, monkeypatch):
    import tomllib

    from ui_helpers import ROOT

    from rag_core.core.config import Settings
    from rag_core.core.formats import ACCEPTED_EXTENSIONS

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == Settings().ingest.max_upload_mb  # the browser-side cap = the default
    monkeypatch.setenv("DOCCHAT_MAX_UPLOAD_MB", "7")
    at = new_app("pages/library.py")
    uploader = at.get("file_uploader")[0]
    assert uploader.proto.max_upload_size_mb == 7
    assert "up to 7 MB each" in uploader.help
    assert uploader.proto.type == list(ACCEPTED_EXTENSIONS)  # every kind DocChat reads (rag_core.core.formats)
    assert ".pptx" in uploader.proto.type and ".xlsx" in uploader.proto.type and ".png" in uploader.proto.type


def test_an_invalid_setting_stops_the_page_with_one_sentence(app, monkeypatch):
    monkeypatch.setenv("DOCCHAT_TOP_K", "0")
    for page in (None, "pages/library.py", "pages/settings.py"):
        at = new_app(page)
        assert not at.exception
        errors = [plain(e) for e in texts(at.error)]
        assert errors == ["DOCCHAT_TOP_K=0 is not allowed: use a whole number from 1 to 50."], errors
        assert not at.chat_input and not at.get("file_uploader")


def test_streamlit_config_keeps_the_app_quiet_offline_and_traceback_free():
    import tomllib

    from ui_helpers import ROOT

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none"
    assert config["server"]["fileWatcherType"] == "none"
    assert config["browser"]["serverAddress"] and config["browser"]["gatherUsageStats"] is False
