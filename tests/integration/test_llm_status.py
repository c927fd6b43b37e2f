"""Ollama status and model pulls for the Settings page, through the official client against the wire-level
test server (tests/ollama_server.py)."""
from __future__ import annotations

import socket

import pytest
from ollama_server import OllamaServer, PullScript

from rag_core.core.config import Settings
from rag_core.core.errors import ModelPullFailed, OllamaUnavailable
from rag_core.llm.ollama import OllamaStatus, PullMeter, PullProgress, ollama_status, pull_model


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
    assert "is not running" in st.error  # a plain sentence; the command and the address are the details
    for technical in ("ollama serve", "OLLAMA_HOST", "http://"):
        assert technical not in st.error and technical in st.details


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_status_of_a_server_that_accepts_and_never_answers_names_the_status_wait(monkeypatch, provider):
    """A hung server (the connection is accepted, nothing comes back): the sentence names the status check's own
    wait (STATUS_TIMEOUT_S), not DOCCHAT_LLM_TIMEOUT's 60 s, and arrives within about that wait."""
    import threading
    import time

    import rag_core.llm.ollama as ollama_mod
    import rag_core.llm.openai_compat as openai_mod
    from rag_core.llm.openai_compat import openai_status

    for mod in (ollama_mod, openai_mod):
        monkeypatch.setattr(mod, "STATUS_TIMEOUT_S", 1.0)
    held: list[socket.socket] = []
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        url = f"http://127.0.0.1:{srv.getsockname()[1]}"
        threading.Thread(target=lambda: held.append(srv.accept()[0]), daemon=True).start()
        t0 = time.monotonic()
        st = (ollama_status(Settings(ollama_host=url)) if provider == "ollama" else
              openai_status(Settings(chat_model="openai:m", openai_base_url=f"{url}/v1")))
        waited = time.monotonic() - t0
    assert st.reachable is False and waited < 30
    assert "within 1 second" in st.error and "60" not in st.error
    assert "DOCCHAT_LLM_TIMEOUT" not in (st.details or "") and "Check again" in (st.details or "")
    for c in held:
        c.close()


def test_status_sends_the_api_key_and_explains_a_refusal():
    with OllamaServer(models=["llama3.2:3b"], token="k-123") as srv:
        refused = ollama_status(Settings(ollama_host=srv.url))
        assert refused.reachable is False and "access key" in refused.error
        assert "OLLAMA_API_KEY" not in refused.error and "401" not in refused.error and srv.url not in refused.error
        assert "OLLAMA_API_KEY" in refused.details and "401" in refused.details and srv.url in refused.details
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
    assert "no-such-model" in str(e.value) and "file does not exist" not in str(e.value)
    assert e.value.details == "Ollama said: pull model manifest: file does not exist"
    assert not ollama_status(Settings(ollama_host=server.url)).has_model("no-such-model")


def test_pull_when_ollama_is_down():
    with pytest.raises(OllamaUnavailable) as e:
        list(pull_model(Settings(ollama_host=f"http://127.0.0.1:{_free_port()}"), "llama3.2:3b"))
    assert "ollama serve" not in str(e.value) and "ollama serve" in e.value.details


def test_pull_needs_a_name(server):
    with pytest.raises(ModelPullFailed):
        list(pull_model(Settings(ollama_host=server.url), "  "))
    assert server.requests == []


def test_pull_progress_is_one_bar_over_every_layer(server):
    server.pull = PullScript(layers=3, total=1_000_000, steps=4)
    steps = list(pull_model(Settings(ollama_host=server.url), "qwen2.5:1.5b"))
    overall = [p.overall for p in steps]
    assert overall == sorted(overall)  # never goes back, although each layer's own share restarts at 0
    assert [p.fraction for p in steps if p.fraction is not None].count(0.0) == 3
    assert overall[0] == 0.0 and overall[-1] == 1.0 and 1.0 not in overall[:-1]  # full only at "success"
    assert len(set(overall)) >= 5  # it moves while the first layer downloads
    assert steps[-1].done_bytes == steps[-1].total_bytes == 3_000_000
    assert steps[-1].label == "Download complete." and steps[0].label == "Getting ready…"
    assert steps[5].label == "Downloading — 1.0 MB of 1.0 MB" and steps[6].label == "Downloading — 1.0 MB of 2.0 MB"


def test_pull_meter_with_a_big_model_layer_then_small_ones():
    """Ollama's real order: the weights (most of the bytes), then template, licence and parameters; a layer that
    is already on disk arrives complete; lines of parallel layers may interleave."""
    gb, meter = 2_000_000_000, PullMeter()

    def line(digest: str, total: int, completed: int) -> float:
        return meter.add(PullProgress(f"pulling {digest}", digest=digest, total=total, completed=completed)).overall

    assert meter.add(PullProgress("pulling manifest")).overall == 0.0
    assert [line("w", gb, c) for c in (0, gb // 4, gb // 2, gb)] == [0.0, 0.25, 0.5, 0.99]
    assert line("t", 1_400, 0) == 0.99 and line("t", 1_400, 1_400) == 0.99  # a small layer does not pull it back
    second = PullMeter()
    assert second.add(PullProgress("pulling a", digest="a", total=100, completed=100)).overall == 0.99  # on disk
    assert second.add(PullProgress("pulling b", digest="b", total=300, completed=0)).overall == 0.99
    third = PullMeter()
    assert third.add(PullProgress("pulling a", digest="a", total=100, completed=50)).overall == 0.5
    assert third.add(PullProgress("pulling b", digest="b", total=100, completed=10)).overall == 0.5  # held, 60/200
    assert third.add(PullProgress("pulling a", digest="a", total=100, completed=40)).overall == 0.5  # a stale line
    assert third.add(PullProgress("pulling b", digest="b", total=100, completed=90)).overall == 0.7  # 140/200
    assert third.add(PullProgress("success")).overall == 1.0
