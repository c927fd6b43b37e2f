"""Ollama status and model pulls for the Settings page, through the official client against the wire-level
test server (tests/ollama_server.py)."""
from __future__ import annotations

import socket

import pytest
from ollama_server import OllamaServer

from rag_core.config import Settings
from rag_core.errors import ModelPullFailed, OllamaUnavailable
from rag_core.llm import OllamaStatus, ollama_status, pull_model


@pytest.fixture(autouse=True)
def _no_ambient_key(monkeypatch):
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)  # the ollama client reads it by itself


@pytest.fixture
def server():
    with OllamaServer(models=["llama3.2:3b", "qwen2.5:1.5b"]) as srv:
        yield srv


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_lists_installed_models(server):
    st = ollama_status(Settings(ollama_host=server.url))
    assert st == OllamaStatus(reachable=True, models=["llama3.2:3b", "qwen2.5:1.5b"], error=None)
    assert st.has_model("llama3.2:3b") and not st.has_model("llama3.2:1b")
    assert server.requests[-1].path == "/api/tags" and "authorization" not in server.requests[-1].headers


def test_status_when_ollama_is_not_running():
    st = ollama_status(Settings(ollama_host=f"http://127.0.0.1:{_free_port()}"))
    assert st.reachable is False and st.models == []
    assert "not reachable" in st.error and "ollama serve" in st.error


def test_status_sends_the_api_key_and_explains_a_refusal():
    with OllamaServer(models=["llama3.2:3b"], token="k-123") as srv:
        refused = ollama_status(Settings(ollama_host=srv.url))
        assert refused.reachable is False and "OLLAMA_API_KEY" in refused.error and "401" in refused.error
        ok = ollama_status(Settings(ollama_host=srv.url, ollama_api_key="k-123"))
        assert ok.reachable and ok.models == ["llama3.2:3b"]
        assert srv.requests[-1].headers["authorization"] == "Bearer k-123"


def test_pull_streams_progress_then_the_model_is_installed(server):
    settings = Settings(ollama_host=server.url)
    steps = list(pull_model(settings, "  phi4-mini:3.8b "))
    assert steps[0].status == "pulling manifest" and steps[-1].done and steps[-1].status == "success"
    sized = [p for p in steps if p.fraction is not None]
    assert len(sized) == 2 * 5  # 2 layers, 0..4 steps each
    assert sized[0].fraction == 0.0 and sized[4].fraction == 1.0 and sized[-1].fraction == 1.0
    assert all(p.digest and p.digest.startswith("sha256:") and p.total == 4_000_000 for p in sized)
    assert server.requests[-1].body["model"] == "phi4-mini:3.8b"
    assert ollama_status(settings).has_model("phi4-mini:3.8b")


def test_pull_of_an_unknown_model_raises_a_friendly_error(server):
    server.pull.error = "pull model manifest: file does not exist"
    with pytest.raises(ModelPullFailed) as e:
        list(pull_model(Settings(ollama_host=server.url), "no-such-model"))
    assert "no-such-model" in str(e.value) and "file does not exist" in str(e.value)
    assert not ollama_status(Settings(ollama_host=server.url)).has_model("no-such-model")


def test_pull_when_ollama_is_down():
    with pytest.raises(OllamaUnavailable) as e:
        list(pull_model(Settings(ollama_host=f"http://127.0.0.1:{_free_port()}"), "llama3.2:3b"))
    assert "ollama serve" in str(e.value)


def test_pull_needs_a_name(server):
    with pytest.raises(ModelPullFailed):
        list(pull_model(Settings(ollama_host=server.url), "  "))
    assert server.requests == []
