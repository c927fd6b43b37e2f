"""The Settings page after a model download (the choice and the list follow at once, one progress bar), and notices
whose technical part (variable names, addresses, commands) sits in an expandable "Details", through AppTest with
the scripted Ollama server (tests/ollama_server.py) behind the real ollama client."""
from __future__ import annotations

import pytest
from ollama_server import PullScript, Reply
from streamlit.testing.v1.element_tree import Expander, Widget
from ui_helpers import MODEL, button, fixture_bytes, new_app, plain, texts

from rag_core.answer.generation.outcome import NOTICE_LENGTH

PDF = "pdf_text_multicolumn_3-pages.pdf"
NEW = "qwen2.5:1.5b"


@pytest.fixture
def server(app):
    """The session's scripted Ollama, with the models and pull script as they were once the test ends."""
    models, pull = list(app.server.models), app.server.pull
    app.server.models[:] = [MODEL]  # whatever earlier tests downloaded into the shared server
    yield app.server
    app.server.models[:] = models
    app.server.pull = pull


def _outside_details(node) -> list[str]:
    """The sentences a person reads without opening any "Details" expander (widget values, such as the address
    typed in a field, left out)."""
    if isinstance(node, Widget) or (isinstance(node, Expander) and node.label == "Details"):
        return []
    children = getattr(node, "children", None)
    if children is None:
        return [plain(str(getattr(node, "value", None) or getattr(node, "label", None) or ""))]
    return [t for child in children.values() for t in _outside_details(child)]


def _details(container) -> list[str]:
    """The text inside each "Details" expander of `container`, escapes removed."""
    return [plain(" ".join(texts(e.caption) + texts(e.markdown))) for e in container.expander if e.label == "Details"]


def test_a_downloaded_model_is_chosen_and_listed_without_pressing_check(app, server):
    server.pull = PullScript(layers=3, total=2_000_000, steps=4)
    at = new_app("pages/settings.py")
    assert at.selectbox(key="set_model").options == [MODEL]
    at.text_input(key="pull_name").set_value(NEW)
    button(at, "Download").click().run()
    assert not at.exception
    assert NEW in server.models
    model = at.selectbox(key="set_model")
    assert model.value == NEW and model.options == sorted([MODEL, NEW])  # listed as installed, and chosen
    assert "Ollama is running, with 2 models installed." in [plain(s) for s in texts(at.success)]
    assert f"“{NEW}” is ready and now writes the answers." in [plain(s) for s in texts(at.success)]
    (bar,) = at.get("progress")  # one bar for the whole download (three layers), not one per layer
    assert bar.value == 100 and plain(bar.proto.text) == "Download complete."
    assert at.session_state["settings_overrides"]["ollama_model"] == NEW
    at.run()  # the next run keeps the choice
    assert at.selectbox(key="set_model").value == NEW and not at.get("progress")


def test_a_failed_download_is_a_sentence_with_ollamas_words_under_details(app, server):
    server.pull = PullScript(error="pull model manifest: file does not exist")
    at = new_app("pages/settings.py")
    at.text_input(key="pull_name").set_value("no-such-model")
    button(at, "Download").click().run()
    assert not at.exception
    (error,) = [plain(e) for e in texts(at.error)]
    assert "could not download the model “no-such-model”" in error and "file does not exist" not in error
    assert _details(at) == ["Ollama said: pull model manifest: file does not exist"]
    assert at.selectbox(key="set_model").value == MODEL and not at.get("progress")


def test_ollama_down_reads_plainly_with_the_address_and_commands_under_details(app, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    at = new_app("pages/settings.py")
    assert not at.exception
    sentences = " ".join(_outside_details(at.main))
    assert "The AI model that writes answers is not running" in sentences and "Ollama" not in sentences.split("How to turn on")[0]
    for technical in ("127.0.0.1", "OLLAMA_HOST", "ollama serve", "ollama pull"):
        assert technical not in sentences
    (details,) = _details(at)
    assert "http://127.0.0.1:9" in details and "OLLAMA_HOST" in details and "ollama serve" in details
    assert f"ollama pull {MODEL}" in details


def test_a_reply_cut_at_the_length_limit_names_the_setting_only_under_details(app):
    assert app.library.ingest_bytes(fixture_bytes(PDF), PDF).status == "added"
    app.server.script(Reply("The capital of Belgium is Brussels [1] and", done_reason="length"))
    at = new_app()
    at.chat_input[0].set_value("What is the capital of Belgium?").run()
    assert not at.exception
    for _ in range(2):  # as answered, then replayed from the session by the next run
        reply_col = at.chat_message[1].columns[0]
        assert [plain(w) for w in texts(reply_col.warning)] == [NOTICE_LENGTH]
        assert "DOCCHAT_ANSWER_TOKENS" not in " ".join(_outside_details(reply_col))
        (details,) = _details(reply_col)
        assert details.startswith("The limit is DOCCHAT_ANSWER_TOKENS (now ")
        at.run()
        assert not at.exception
