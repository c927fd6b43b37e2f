"""Answers from any OpenAI-compatible server (LM Studio, llama.cpp's server, vLLM, hosted): DOCCHAT_CHAT_MODEL=openai:<m>
builds langchain-openai's ChatOpenAI through LangChain's init_chat_model, talking HTTP to the scripted server in
tests/openai_server.py. Streaming, Stop, the answer budget, verified citations, the withheld-answer rule and each fault
(server down, model missing, the wrong kind of server) behave as with Ollama; real library and embedding model."""
from __future__ import annotations

import json
import socket
import time

import pytest
from ollama_server import Reply

from rag_core.adapters.runtime import Runtime
from rag_core.answer import generation as gen
from rag_core.core.config import Settings
from rag_core.core.errors import ModelNotPulled, OllamaUnavailable, WrongServer
from rag_core.core.models import Answer, Step
from rag_core.llm.chat import backend_for
from rag_core.llm.ollama import model_status
from tests.openai_server import OpenAIServer, WebPageServer

MODEL = "qwen2.5-7b-instruct"
QUESTION = "When does the museum open?"
DOC = ("# Opening hours\n\nThe museum opens at nine in the morning and closes at five in the afternoon. "
       "On Mondays the museum is closed for cleaning.\n\n# Tickets\n\nA ticket costs twelve euros.\n")
BACKED = "The museum opens at nine in the morning [1]."


@pytest.fixture(autouse=True)
def _no_ambient_openai(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DOCCHAT_CHAT_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with OpenAIServer(models=[MODEL, "other-model"]) as srv:
        yield srv


@pytest.fixture
def museum(library):
    assert library.ingest_bytes(DOC.encode(), "museum.md").status == "added"
    return library


def _settings(tmp_path, url: str, model: str = MODEL, **kw) -> Settings:
    return Settings(data_dir=tmp_path / "unused", chat_model=f"openai:{model}", openai_base_url=url,
                    llm_timeout_s=10, **kw)


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def _run(stream: gen.AnswerStream) -> tuple[list[str], Answer]:
    deltas = list(stream)
    assert stream.answer is not None
    return deltas, stream.answer


def test_the_setting_builds_chat_openai_through_init_chat_model(server, tmp_path):
    from langchain_openai import ChatOpenAI

    chat = backend_for(_settings(tmp_path, server.base_url))
    assert isinstance(chat.model, ChatOpenAI) and chat.provider == "openai" and chat.name == MODEL
    assert chat.model.openai_api_base == server.base_url and chat.model.max_retries == 0


def test_a_streamed_answer_with_verified_citations_and_the_answer_budget(museum, server, tmp_path):
    server.script(Reply(BACKED))
    settings = _settings(tmp_path, server.base_url, answer_tokens=300, temperature=0.3)
    deltas, ans = _run(gen.start_answer(museum, QUESTION, settings))
    assert len(deltas) > 3 and "".join(deltas) == ans.text == BACKED  # streamed piece by piece
    assert ans.mode == "model" and not ans.incomplete and ans.notice is None
    assert [(c.n, c.status) for c in ans.citations] == [(1, "verified")]
    (request,) = server.chat_requests
    assert request["model"] == MODEL and request["stream"] is True
    assert request["max_completion_tokens"] == 300 and request["temperature"] == 0.3
    system, user = request["messages"]
    assert system["role"] == "system" and "opens at nine" in user["content"]  # the numbered sources
    assert server.requests[-1].headers["authorization"] == "Bearer not-needed"  # a local server needs no key


def test_an_api_key_is_sent_and_a_wrong_one_is_a_sentence(museum, tmp_path):
    with OpenAIServer(models=[MODEL], token="sk-right") as srv:
        srv.script(Reply(BACKED))
        _, ans = _run(gen.start_answer(museum, QUESTION, _settings(tmp_path, srv.base_url, openai_api_key="sk-right")))
        assert ans.mode == "model" and srv.requests[-1].headers["authorization"] == "Bearer sk-right"
        wrong = _settings(tmp_path, srv.base_url, openai_api_key="sk-wrong")
        _, ans = _run(gen.start_answer(museum, QUESTION, wrong))
        assert ans.mode == "quotes" and "needs a valid access key" in ans.notice
        assert "OPENAI_API_KEY" in ans.extra["details"] and "sk-wrong" not in json.dumps(ans.extra)
        status = model_status(wrong)
        assert not status.reachable and "needs a valid access key" in (status.error or "")


def test_the_length_limit_and_an_invented_answer_follow_the_same_rules(museum, server, tmp_path):
    settings = _settings(tmp_path, server.base_url)
    server.script(Reply("The museum opens at nine in the morning [1]. It also", done_reason="length"))
    _, ans = _run(gen.start_answer(museum, QUESTION, settings))
    assert ans.incomplete and ans.extra["done_reason"] == "length" and ans.text == BACKED
    server.script(Reply("The museum was built by the Romans in the year 212 and has a golden roof [1]."))
    _, ans = _run(gen.start_answer(museum, QUESTION, settings))
    assert ans.mode == "quotes" and "Romans" not in ans.text and "opens at nine" in ans.text  # withheld
    assert "Romans" in ans.extra["withheld_text"]


def test_a_dropped_connection_keeps_the_backed_part_and_names_the_server(museum, server, tmp_path):
    server.script(Reply(f"{BACKED} And then the museum", disconnect_after=12))
    _, ans = _run(gen.start_answer(museum, QUESTION, _settings(tmp_path, server.base_url)))
    assert ans.incomplete and ans.text == BACKED
    assert "connection to the model server dropped" in ans.notice


def test_through_the_apps_service_with_the_settings_page_choice_and_stop(tmp_path, embedder, server):
    rt = Runtime(Settings(data_dir=tmp_path / "data", llm_timeout_s=10), embedder=embedder)
    try:
        assert rt.library.ingest_bytes(DOC.encode(), "museum.md").status == "added"
        ws = rt.workspace(rt.new_session_key(), {"chat_model": f"openai:{MODEL}", "openai_base_url": server.base_url})
        assert ws.model_status().models == sorted([MODEL, "other-model"])
        assert ws.model_line(True) == ("ok", f"Answers are written by {MODEL} from your documents, with sources "
                                             "beside each reply.")
        server.script(Reply(BACKED))
        live = ws.ask(QUESTION)
        assert live.wait(30) and live.answer is not None
        assert live.answer.mode == "model" and live.answer.citations[0].status == "verified"

        words = " ".join(f"Filler sentence number {i}." for i in range(200))
        server.script(Reply(f"The museum opens at nine [1]. {words}", delay_between=0.05))
        live = ws.ask(QUESTION)
        while len(live.text) < 60:
            assert live.poll(0.05) or live.text, "the reply ended before Stop"
        t = time.perf_counter()
        live.stop()
        assert time.perf_counter() - t < 0.05  # Stop returns at once
        assert live.wait(2.0)
        answer = live.answer
        assert answer is not None and answer.incomplete and "stopped" in (answer.notice or "")
        assert answer.text == "The museum opens at nine [1]." and answer.citations[0].status == "verified"
        assert "Filler sentence number 0." in answer.extra["details"]
        deadline = time.monotonic() + 2
        while server.cut_streams == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.cut_streams == 1  # the HTTP stream was closed, not read to its end
        assert [e.step for e in live.events()][-1] == Step.STOPPED
    finally:
        rt.close()


def test_server_down_quotes_with_one_plain_sentence_and_the_address_under_details(museum, tmp_path):
    down = _settings(tmp_path, _closed_url())
    _, ans = _run(gen.start_answer(museum, QUESTION, down))
    assert ans.mode == "quotes" and "opens at nine" in ans.text and ans.citations
    assert ans.notice.startswith(OllamaUnavailable.short) and "Ollama" not in ans.notice
    assert down.chat_host in ans.extra["details"] and "OPENAI_BASE_URL" in ans.extra["details"]
    status = model_status(down)
    assert not status.reachable and status.provider == "openai" and "is not running" in (status.error or "")
    assert "OPENAI_BASE_URL" in (status.details or "")


def test_a_missing_model_is_named_and_the_servers_models_are_listed(museum, server, tmp_path):
    missing = _settings(tmp_path, server.base_url, model="llama-3-70b")
    _, ans = _run(gen.start_answer(museum, QUESTION, missing))
    assert ans.mode == "quotes" and ans.extra["fault"] == ModelNotPulled.__name__
    assert "has no model called “llama-3-70b”" in ans.notice and "Ollama" not in ans.notice
    status = model_status(missing)
    assert status.reachable and status.models == sorted([MODEL, "other-model"]) and not status.has_model("llama-3-70b")
    assert status.has_model(MODEL)


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_a_web_page_at_the_address_is_a_friendly_sentence(museum, tmp_path, provider):
    with WebPageServer() as page:
        settings = (_settings(tmp_path, page.url + "/v1") if provider == "openai"
                    else Settings(data_dir=tmp_path / "unused", ollama_host=page.url, llm_timeout_s=10))
        status = model_status(settings)
        assert not status.reachable and status.error == str(WrongServer(settings.chat_host, provider))
        assert "not like a model server" in status.error and settings.chat_host in (status.details or "")
        _, ans = _run(gen.start_answer(museum, QUESTION, settings))
    assert ans.mode == "quotes" and ans.extra["fault"] == "WrongServer" and "opens at nine" in ans.text
    assert "instead of the JSON" in ans.extra["details"]


def test_cli_ask_with_the_openai_setting(museum, server, cli):
    museum.close()  # the CLI opens the folder itself
    env = {"DOCCHAT_CHAT_MODEL": f"openai:{MODEL}", "OPENAI_BASE_URL": server.base_url,
           "DOCCHAT_DATA_DIR": str(museum.settings.library.data_dir)}
    server.script(Reply(BACKED), Reply(BACKED))
    run = cli("ask", QUESTION, "--json", env=env)
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["mode"] == "model" and out["answer"] == BACKED and out["notice"] is None
    assert [c["n"] for c in out["citations"]] == [1] and "opens at nine" in out["citations"][0]["quote"]
    run = cli("ask", QUESTION, "--model", "other-model", env=env)
    assert run.returncode == 0 and run.stdout.startswith(BACKED) and "Sources:\n  [1] " in run.stdout
    assert [r["model"] for r in server.chat_requests] == [MODEL, "other-model"]  # --model keeps the provider
    run = cli("ask", QUESTION, env={**env, "DOCCHAT_CHAT_MODEL": "anthropic:claude"})
    assert run.returncode != 0 and "DOCCHAT_CHAT_MODEL=anthropic:claude is not allowed" in run.stderr
    assert "“openai:MODEL”" in run.stderr and "Traceback" not in run.stderr


def test_the_hosted_demo_uses_a_hosted_openai_compatible_model_visitors_cannot_change():
    from rag_core.adapters.runtime import session_settings
    from rag_core.demo.answers import demo_banner, llm_mode

    hosted = Settings(mode="demo", chat_model="openai:gpt-4o-mini", openai_base_url="https://llm.example.org/v1",
                      openai_api_key="sk-demo")
    assert llm_mode(hosted) == "remote" and "written by the AI model gpt-4o-mini" in demo_banner(hosted)
    assert llm_mode(hosted.with_overrides(openai_api_key=None)) == "extractive"  # no key: quotes, no model call
    visitor = session_settings(hosted, {"chat_model": "openai:other", "openai_base_url": "http://evil.example/v1"})
    assert (visitor.llm.chat_model, visitor.llm.openai_base_url) == (hosted.llm.chat_model, hosted.llm.openai_base_url)
