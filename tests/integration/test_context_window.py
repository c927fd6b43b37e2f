"""The model server's real context window (issue 47, item 1) and quiet logs for expected failures (item 2).

The real tier: llama.cpp's own server (tests/llama_server.py, xllamacpp + SmolLM2-135M) started as `llama-server
-c 8192 -np 2` (4,096 tokens per slot) and `-c 2048 -np 1`. A long manual (36 pages of text, generated here) is added
through the real library; a question over it and a whole-document summary must both be answered by the model, and
every request DocChat sends is counted in llama.cpp's own tokens (its /apply-template and /tokenize) and must fit the
slot. A refusal for size is forced by making DocChat believe a larger window than the server's: one smaller retry,
then an answer. Servers that hide their window or keep refusing are scripted on the wire (tests/openai_server.py;
Ollama is faked on the wire by tests/ollama_server.py: no Ollama binary exists here)."""
from __future__ import annotations

import json
import logging
import urllib.request
from pathlib import Path

import pytest

from rag_core.answer.generation import outcome, start_answer
from rag_core.core.config import Settings
from rag_core.core.errors import ContextTooSmall
from rag_core.core.models import AnswerMode
from rag_core.llm import context_window
from rag_core.service.library import Library
from tests.llama_server import ALIAS, LlamaServer
from tests.ollama_server import OllamaServer, Reply
from tests.openai_server import OpenAIServer

pytestmark = [pytest.mark.slow,
              pytest.mark.remembered_vectors]  # the same manual is added in every test: each vector computed once

QUESTION = "What pressure does the pump of the K-7 reach?"
SUMMARY = "What is this document about?"
REFUSAL = ("request (5120 tokens) exceeds the available context size (2048 tokens), try increasing it")


def manual_text(pages: int = 36) -> str:
    """A 36-page manual of a made-up espresso machine: one section per page, each about 1,800 characters."""
    topics = ["unpacking", "the water tank", "the pump", "the boiler", "the grinder", "descaling", "the steam wand",
              "cleaning", "error codes", "warranty", "safety", "the display"]
    out = ["# K-7 Espresso Machine: User Manual\n"]
    for page in range(1, pages + 1):
        topic = topics[page % len(topics)]
        out.append(f"\n## Page {page}: {topic}\n")
        for n in range(12):
            out.append(f"Step {page}.{n}: on page {page} the manual explains {topic} of the K-7 in detail, "
                       f"covering check number {n} and the part marked {chr(65 + n)}{page}. ")
        if page == 3:
            out.append("The pump of the K-7 reaches 15 bar of pressure when it brews. ")
    return "".join(out)


def _settings(tmp_path: Path, base_url: str, **kw) -> Settings:
    kw = {"answer_tokens": 200, "top_k": 8, "llm_timeout_s": 300, "temperature": 0.0, "summary_max_calls": 3,
          "chat_model": f"openai:{ALIAS}", "openai_base_url": base_url, **kw}
    return Settings(data_dir=tmp_path / "data", **kw)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DOCCHAT_CHAT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    context_window.forget()
    yield
    context_window.forget()


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, str]]:
    """Every (system, user) pair DocChat sends to a model while streaming (the answer, a summary's calls)."""
    seen: list[tuple[str, str]] = []
    real = outcome.chat_messages

    def record(system: str, user: str):
        seen.append((system, user))
        return real(system, user)

    monkeypatch.setattr(outcome, "chat_messages", record)
    return seen


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def real_tokens(server: LlamaServer, system: str, user: str) -> int:
    """The request's size as llama.cpp counts it: its chat template applied, then its tokenizer."""
    prompt = _post(f"{server.url}/apply-template", {"messages": [{"role": "system", "content": system},
                                                                 {"role": "user", "content": user}]})["prompt"]
    return len(_post(f"{server.url}/tokenize", {"content": prompt, "add_special": True})["tokens"])


def _library(settings: Settings, embedder) -> Library:
    lib = Library(settings, embedder=embedder)
    assert lib.ingest_bytes(manual_text().encode(), "k7-manual.md").status == "added"
    return lib


def _ask(lib: Library, question: str, settings: Settings):
    stream = start_answer(lib, question, settings)
    for _ in stream:
        pass
    assert stream.answer is not None
    return stream.answer


@pytest.fixture(scope="module", params=[(8192, 2), (2048, 1)], ids=["2x4096", "1x2048"])
def llama(request):
    ctx, parallel = request.param
    # One compute thread: make test runs two workers on two cores, so a second llama.cpp thread mostly spin-waits for
    # the core the other worker holds. Measured on this 2-core machine under load (a 700-token prompt, 16 tokens
    # written, 2 pairs): one thread took 0.50x the wall time and 0.46x the CPU time of two. Only here: these tests
    # check sizes, not wording; with one thread SmolLM2 wrote another reply in test_llama_cpp_server, whose
    # citation checks then failed once (with two it passed), so that module keeps two.
    with LlamaServer(ctx=ctx, parallel=parallel, threads=1) as srv:
        yield srv


# A busy machine (load ~17 on 2 cores) reads ~13 prompt tokens/s and writes ~0.3 tokens/s with SmolLM2: a request
# near the window takes minutes, so these tests write short replies, read a summary in one call, and may run long.
REAL = {"answer_tokens": 32, "summary_max_calls": 1}


@pytest.mark.timeout(2400)
def test_questions_and_summaries_fit_the_real_servers_window(llama, tmp_path, embedder, sent, caplog):
    window = llama.ctx // llama.parallel
    settings = _settings(tmp_path, llama.base_url, **REAL)
    assert context_window.learn(settings, ALIAS) == context_window.Window(window, "llama.cpp /props")
    lib = _library(settings, embedder)
    try:
        with caplog.at_level(logging.WARNING):
            answer = _ask(lib, QUESTION, settings)
            asked = len(sent)
            # The summary at the smaller window only: the same fitting, and 2 x 4,096's ~3,700-token summary call
            # took two minutes of make test's twelve on 2 cores.
            summary = _ask(lib, SUMMARY, settings) if window <= 2048 else None
    finally:
        lib.close()
    # Answered: no refusal, no fault (a reply cut at 32 tokens may keep only its backed part, or quotes instead)
    assert answer.text.strip() and "fault" not in answer.extra and "context window" not in (answer.notice or "")
    assert answer.extra["num_ctx"] <= window, answer.extra
    if summary is not None:
        assert summary.text.strip() and "fault" not in summary.extra, summary
        assert "context window" not in (summary.notice or "")
    sizes = [real_tokens(llama, s, u) for s, u in sent]
    assert asked == 1 and len(sizes) >= (2 if summary is not None else 1), sizes  # the summary in its own call(s)
    assert max(sizes) < window, (sizes, window)
    assert max(sizes) > window // 3, sizes  # the window is used, not a small fixed prompt
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "refused" in r.getMessage()]
    print(f"FIGURE llama.cpp {llama.parallel}x{window}: learnt {window}, largest request {max(sizes)} tokens "
          f"(question {sizes[0]}, summary calls {sizes[1:]})")


@pytest.mark.timeout(2400)
def test_a_refusal_for_size_is_retried_once_smaller_then_answered(llama, tmp_path, embedder, sent, caplog):
    window = llama.ctx // llama.parallel
    # 20 passages: ~4,600 tokens (refused by both windows), then the best 10 (~2,400 tokens; fitted to 2,048 on the
    # smaller window). The retry begins with the question test's 8 passages, which llama.cpp still holds (its prompt
    # cache), so only the rest is read again: 40 passages made a retry of ~3,700 tokens, ~2,000 of them new.
    settings = _settings(tmp_path, llama.base_url, max_context_tokens=16_384, top_k=20, **REAL)
    context_window.remember(settings, ALIAS, 16_384, "the test")  # DocChat believes 16,384: the server refuses
    lib = _library(settings, embedder)
    try:
        with caplog.at_level(logging.WARNING):
            answer = _ask(lib, QUESTION, settings)
    finally:
        lib.close()
    sizes = [real_tokens(llama, s, u) for s, u in sent]
    assert len(sizes) == 2 and sizes[0] > window > sizes[1], (sizes, window)  # refused once, then one smaller
    assert answer.text.strip() and "fault" not in answer.extra, answer
    assert answer.extra["prompt_tokens"] < window, answer.extra
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("HTTP 400" in r.getMessage() and llama.base_url in r.getMessage() for r in warnings), warnings
    assert not any(r.exc_info for r in warnings) and "Traceback" not in caplog.text
    assert context_window.learn(settings, ALIAS).tokens == window  # the window the refusal named is kept
    print(f"FIGURE llama.cpp {llama.parallel}x{window} forced: believed 16384, sent {sizes[0]} (refused), "
          f"retried {sizes[1]}, answered")


# --------------------------------------------------------------------------- scripted wire servers
def test_a_server_that_hides_its_window_and_keeps_refusing_gets_one_plain_sentence(tmp_path, embedder, caplog):
    with OpenAIServer(models=[ALIAS]) as srv:
        srv.script(Reply(status=400, error_body=REFUSAL), Reply(status=400, error_body=REFUSAL))
        settings = _settings(tmp_path, srv.base_url)
        assert context_window.learn(settings, ALIAS).tokens is None  # no /props, no max_model_len
        lib = _library(settings, embedder)
        try:
            with caplog.at_level(logging.DEBUG):
                answer = _ask(lib, QUESTION, settings)
        finally:
            lib.close()
        bodies = srv.chat_requests
    assert len(bodies) == 2  # one retry, not more
    first, second = (len(json.dumps(b["messages"])) for b in bodies)
    assert second < first, (first, second)
    expected = str(ContextTooSmall(2048))
    assert expected.startswith("The model server's context window is 2,048 tokens per request, too small")
    assert expected in (answer.notice or ""), answer.notice
    assert "restart" not in (answer.notice or "")
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings and not any(r.exc_info for r in warnings)
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records)  # the traceback, at debug only
    print(f"FIGURE OpenAI-wire without a window: learnt none, largest request {first} chars of messages "
          f"(~{bodies[0]['messages'][1]['content'].__len__() // 3} est. tokens), retry {second} chars, then: {expected}")


def test_ollama_wire_window_from_api_show_caps_num_ctx(tmp_path, embedder):
    with OllamaServer(models=["llama3.2:3b"]) as srv:
        srv.context_length = 2048
        srv.default = Reply("The pump of the K-7 reaches 15 bar of pressure [1].")
        settings = Settings(data_dir=tmp_path / "data", ollama_host=srv.url, chat_model="ollama:llama3.2:3b",
                            answer_tokens=200, top_k=8, summary_max_calls=3)
        assert context_window.learn(settings, "llama3.2:3b") == context_window.Window(2048, "Ollama /api/show")
        lib = _library(settings, embedder)
        try:
            answer = _ask(lib, QUESTION, settings)
            summary = _ask(lib, SUMMARY, settings)
        finally:
            lib.close()
        options = [b["options"]["num_ctx"] for b in srv.chat_requests]
        prompts = [sum(len(m["content"]) for m in b["messages"]) // 3 for b in srv.chat_requests]
    assert answer.mode == AnswerMode.MODEL and "context window" not in (summary.notice or ""), summary
    assert len(options) > 2 and max(options) <= 2048, options  # the question, then the summary's calls
    assert max(prompts) + 200 <= 2048, prompts
    print(f"FIGURE Ollama-wire 2048: learnt 2048, num_ctx {options}, largest request ~{max(prompts)} est. tokens")


def test_a_server_error_is_one_warning_line_and_its_traceback_only_at_debug(tmp_path, embedder, caplog):
    with OpenAIServer(models=[ALIAS]) as srv:
        srv.default = Reply(status=500, error_body="out of memory")
        settings = _settings(tmp_path, srv.base_url)
        lib = _library(settings, embedder)
        try:
            with caplog.at_level(logging.WARNING):
                quiet = _ask(lib, QUESTION, settings)
            warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
            caplog.clear()
            with caplog.at_level(logging.DEBUG):
                _ask(lib, QUESTION, settings)
        finally:
            lib.close()
    assert quiet.notice and "reported a problem" in quiet.notice
    assert len(warned) == 1 and "HTTP 500" in warned[0].getMessage() and srv.base_url in warned[0].getMessage()
    assert not warned[0].exc_info
    assert any(r.levelno == logging.DEBUG and r.exc_info for r in caplog.records)


def test_the_cli_shows_one_warning_line_and_the_traceback_only_with_verbose(tmp_path, embedder, cli):
    # `python -m rag_core ask` run in this process (the `cli` fixture: main's own logging set-up on stderr, as in a
    # new process), so the two runs do not load the embedding model twice more; tests/integration/test_wikipedia.py
    # keeps a real `python -m rag_core` process as the entry point's smoke test.
    with OpenAIServer(models=[ALIAS]) as srv:
        srv.default = Reply(status=500, error_body="out of memory")
        settings = _settings(tmp_path, srv.base_url)
        _library(settings, embedder).close()
        env = {"DOCCHAT_DATA_DIR": str(settings.library.data_dir), "DOCCHAT_CHAT_MODEL": f"openai:{ALIAS}",
               "OPENAI_BASE_URL": srv.base_url}
        runs = [cli("ask", QUESTION, *flag, env=env) for flag in ([], ["-v"])]
    quiet, verbose = runs
    assert quiet.returncode == 0, quiet.stderr
    warnings = [ln for ln in quiet.stderr.splitlines() if ln.startswith("WARNING")]
    assert len(warnings) == 1 and "HTTP 500" in warnings[0] and srv.base_url in warnings[0], quiet.stderr
    assert "Traceback" not in quiet.stderr
    assert "Traceback" in verbose.stderr and "HTTP 500" in verbose.stderr
    assert logging.getLogger("rag_core").level == logging.NOTSET  # `-v` did not outlive its run (the cli fixture)
