"""The Settings page with another model server (OpenAI-compatible: LM Studio, llama.cpp's server, vLLM, hosted) and the
chat without a model, through AppTest: the choice of server, its address and model list, the same friendly status
and fault sentences as for Ollama (down, model missing, a web page at the address), and the chat answering through
it. Scripted servers: tests/openai_server.py and the session's Ollama (tests/ui/conftest.py)."""
from __future__ import annotations

import re
import socket

import pytest
from streamlit.testing.v1.element_tree import Expander, Widget
from ui_helpers import new_app, plain, texts

from rag_core.core.errors import OllamaUnavailable
from tests.ollama_server import Reply
from tests.openai_server import OpenAIServer, WebPageServer
from ui.safe import DRAW_FAILED

MODELS = ["mistral-small", "qwen2.5-7b-instruct"]
DOC = ("# Opening hours\n\nThe museum opens at nine in the morning and closes at five in the afternoon. "
       "On Mondays the museum is closed for cleaning.\n")
QUESTION = "When does the museum open?"
BACKED = "The museum opens at nine in the morning [1]."
MODEL_OFF = "The AI model that writes answers is not running, or DocChat cannot reach it."


@pytest.fixture
def server(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DOCCHAT_CHAT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with OpenAIServer(models=MODELS) as srv:
        yield srv


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _outside_details(node) -> list[str]:
    """The sentences a person reads without opening any "Details" expander (widget values left out)."""
    if isinstance(node, Widget) or (isinstance(node, Expander) and node.label == "Details"):
        return []
    children = getattr(node, "children", None)
    if children is None:
        return [plain(str(getattr(node, "value", None) or getattr(node, "label", None) or ""))]
    return [t for child in children.values() for t in _outside_details(child)]


def _details(container) -> list[str]:
    return [plain(" ".join(texts(e.caption) + texts(e.markdown))) for e in container.expander if e.label == "Details"]


def test_another_model_server_is_chosen_listed_and_writes_the_answers(app, server):
    assert app.library.ingest_bytes(DOC.encode(), "museum.md").status == "added"
    at = new_app("pages/settings.py")
    radio = at.radio(key="set_provider")
    assert radio.value == "ollama" and radio.options == ["Ollama", "Another model server (OpenAI-compatible)"]
    radio.set_value("openai").run()
    assert not at.exception and at.session_state["settings_overrides"]["chat_model"] == "openai:"
    at.text_input(key="set_base_url").set_value(server.base_url + "/").run()
    assert not at.exception
    assert at.session_state["settings_overrides"]["openai_base_url"] == server.base_url
    assert "The model server is running, with 2 models." in [plain(s) for s in texts(at.success)]
    model = at.selectbox(key="set_server_model")
    assert model.options == MODELS and model.value is None
    model.set_value("qwen2.5-7b-instruct").run()
    assert at.session_state["settings_overrides"]["chat_model"] == "openai:qwen2.5-7b-instruct"
    assert at.selectbox(key="set_server_model").value == "qwen2.5-7b-instruct" and not at.info

    server.script(Reply(BACKED))
    ollama_before = len(app.server.chat_requests)
    at.switch_page("pages/chat.py").run()
    assert "Answers are written by qwen2.5-7b-instruct" in " ".join(plain(c) for c in texts(at.caption))
    at.chat_input[0].set_value(QUESTION).run()
    assert not at.exception
    answer = at.session_state["chat_turns"][-1]["answer"]
    assert answer.mode == "model" and answer.text == BACKED and answer.citations[0].status == "verified"
    # the session's Ollama (shared by every page test of this process) heard nothing new
    assert server.chat_requests[-1]["model"] == "qwen2.5-7b-instruct" and len(app.server.chat_requests) == ollama_before

    at.switch_page("pages/settings.py").run()  # back to Ollama: its section, and no model change kept
    at.radio(key="set_provider").set_value("ollama").run()
    assert "chat_model" not in at.session_state["settings_overrides"]
    # the session's Ollama may have been given another model by an earlier page test of this process
    assert any(re.fullmatch(r"Ollama is running, with \d+ models? installed\.", plain(s)) for s in texts(at.success))


def test_server_down_and_a_missing_model_read_plainly(app, server, monkeypatch):
    monkeypatch.setenv("DOCCHAT_CHAT_MODEL", "openai:llama-3-70b")
    monkeypatch.setenv("OPENAI_BASE_URL", _closed_url() + "/v1")
    at = new_app("pages/settings.py")
    assert not at.exception and at.radio(key="set_provider").value == "openai"
    sentences = " ".join(_outside_details(at.main))
    assert MODEL_OFF in sentences and "OPENAI_BASE_URL" not in sentences and "127.0.0.1" not in sentences
    (details,) = _details(at.main)
    assert "OPENAI_BASE_URL" in details and "127.0.0.1" in details

    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    at = new_app("pages/settings.py")
    assert "The model server has no model called “llama-3-70b”. Pick one of its models." in [
        plain(s) for s in texts(at.info)]
    assert at.selectbox(key="set_server_model").options == MODELS


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_a_web_page_at_the_models_address_is_a_sentence_not_a_broken_section(app, server, monkeypatch, provider):
    with WebPageServer() as page:
        if provider == "ollama":
            monkeypatch.setenv("OLLAMA_HOST", page.url)
        else:
            monkeypatch.setenv("DOCCHAT_CHAT_MODEL", "openai:mistral-small")
            monkeypatch.setenv("OPENAI_BASE_URL", page.url + "/v1")
        at = new_app("pages/settings.py")
    assert not at.exception and DRAW_FAILED not in [plain(e) for e in texts(at.error)]
    (warning,) = [plain(w) for w in texts(at.warning)]
    assert warning.startswith("The address set for the AI model belongs to something else")
    (details,) = _details(at.main)
    assert page.url in details and "instead of the JSON" in details


def test_without_a_model_the_chat_says_why_once_in_plain_words(app, monkeypatch):
    """Issue 28 item 2: no reply repeats the Ollama sentence; the model line says it once, the commands are under
    Details."""
    assert app.library.ingest_bytes(DOC.encode(), "museum.md").status == "added"
    monkeypatch.setenv("OLLAMA_HOST", _closed_url())
    at = new_app()
    for question in (QUESTION, "Is the museum open on Mondays?"):
        at.chat_input[0].set_value(question).run()
        assert not at.exception
    sentences = " ".join(_outside_details(at.main))
    assert sentences.count(MODEL_OFF) == 1  # the model line at the top, once
    assert "Ollama" not in sentences and "ollama serve" not in sentences
    replies = [m for m in at.chat_message if m.name == "assistant"]
    assert len(replies) == 2
    for reply in replies:
        answer_text = " ".join(_outside_details(reply))
        assert OllamaUnavailable.short in answer_text and MODEL_OFF not in answer_text
        assert any("ollama serve" in d for d in _details(reply))  # the commands stay under Details
