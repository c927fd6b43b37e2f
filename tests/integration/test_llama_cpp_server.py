"""A real model server end to end: llama.cpp's own HTTP server (tests/llama_server.py: the code of `llama-server`,
from the PyPI wheel xllamacpp) serving SmolLM2-135M-Instruct, reached through DocChat's OpenAI-compatible path
(DOCCHAT_CHAT_MODEL=openai:<alias>, OPENAI_BASE_URL=…/v1): langchain-openai's ChatOpenAI built by init_chat_model,
the app's service (Runtime/Workspace) and the Settings status. Nothing on the wire is scripted.

Covered: a streamed answer whose every [n] is verified against a retrieved passage; Stop, which must also stop the
real server's generation (its /slots go idle); a model name the server does not serve; a server too slow for the
timeout; a model file that is missing. Slow (one model load per module, ~1 s, and a few seconds per answer)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from rag_core.adapters.runtime import Runtime
from rag_core.answer import generation as gen
from rag_core.core.config import Settings
from rag_core.core.errors import LLMTimeout, ModelNotPulled, OllamaUnavailable
from rag_core.core.models import Answer, AnswerMode, CitationStatus, Step
from rag_core.llm.ollama import model_status
from rag_core.service.library import Library
from tests.llama_server import ALIAS, LlamaServer

pytestmark = pytest.mark.slow

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "documents" / "eu_capitals.md"
# As in test_real_llm.py: asking for the number makes the 135M model write a citation of its own.
QUESTION = "What is the capital of Belgium? End your sentence with the source number, e.g. [1]."
LONG_QUESTION = "Describe all the features of the capital cities."


@pytest.fixture(scope="module")
def llama():
    with LlamaServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_ambient_openai(monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "DOCCHAT_CHAT_MODEL"):
        monkeypatch.delenv(name, raising=False)


def _settings(tmp_path: Path, base_url: str, model: str = ALIAS, **kw) -> Settings:
    kw = {"answer_tokens": 60, "top_k": 2, "llm_timeout_s": 120, "temperature": 0.0, **kw}
    return Settings(data_dir=tmp_path / "data", chat_model=f"openai:{model}", openai_base_url=base_url, **kw)


@pytest.fixture
def capitals(tmp_path, embedder, llama):
    settings = _settings(tmp_path, llama.base_url)
    lib = Library(settings, embedder=embedder)
    assert lib.ingest_bytes(FIXTURE.read_bytes(), FIXTURE.name).status == "added"
    yield lib, settings
    lib.close()


def _run(stream: gen.AnswerStream) -> tuple[list[str], Answer]:
    deltas = list(stream)
    assert stream.answer is not None
    return deltas, stream.answer


def test_the_real_server_lists_its_model_and_the_settings_status_sees_it(llama, tmp_path):
    status = model_status(_settings(tmp_path, llama.base_url))
    assert status.reachable and status.provider == "openai" and status.models == [ALIAS]
    assert status.has_model(ALIAS) and not status.has_model("gpt-4o")


def test_a_streamed_answer_whose_citations_point_at_retrieved_passages(capitals, llama):
    lib, settings = capitals
    stream = gen.start_answer(lib, QUESTION, settings)
    deltas, answer = _run(stream)
    assert answer.mode == AnswerMode.MODEL and not answer.incomplete, answer
    assert len(deltas) > 3  # streamed token by token by llama.cpp, not one block
    assert "Brussels" in answer.text
    backed = (CitationStatus.VERIFIED, CitationStatus.MATCHED)  # written by the model and checked, or matched
    assert answer.citations and all(c.status in backed for c in answer.citations), answer.citations
    retrieved = {(p.chunk.doc_id, p.chunk.index) for p in stream.passages}
    for c in answer.citations:  # each source is a passage that was really retrieved, and its evidence says Brussels
        assert (c.passage.chunk.doc_id, c.passage.chunk.index) in retrieved, c
        evidence = c.passage.chunk.text[c.evidence_start:c.evidence_end]
        assert "Brussels" in evidence and "Belgium" in evidence, evidence
    shown = [answer.text[s.start:s.end] for s in answer.sentences if s.status in backed]
    assert any("Brussels" in sentence for sentence in shown), answer.sentences
    assert all(s.status in backed for s in answer.sentences), answer.sentences  # only checked text is shown
    assert answer.extra["model"] == ALIAS


def test_stop_ends_the_reply_and_the_real_servers_generation(tmp_path, embedder, llama):
    rt = Runtime(Settings(data_dir=tmp_path / "data", llm_timeout_s=120, answer_tokens=1000, temperature=0.0),
                 embedder=embedder)
    try:
        assert rt.library.ingest_bytes(FIXTURE.read_bytes(), FIXTURE.name).status == "added"
        ws = rt.workspace(rt.new_session_key(), {"chat_model": f"openai:{ALIAS}", "openai_base_url": llama.base_url})
        assert ws.model_line(True) == ("ok", f"Answers are written by {ALIAS} from your documents, with sources "
                                             "beside each reply.")
        live = ws.ask(LONG_QUESTION)
        deadline = time.monotonic() + 120
        while len(live.text) < 40 and time.monotonic() < deadline:  # wait for the model's words to arrive
            assert live.poll(0.05) or live.text, "the reply ended before Stop"
        assert llama.busy_slots() == 1  # llama.cpp is generating
        t = time.perf_counter()
        live.stop()
        assert time.perf_counter() - t < 0.1  # Stop returns at once
        assert live.wait(2.0)  # and the reply has ended within 2 s
        answer = live.answer
        assert answer is not None and answer.incomplete and "stopped" in (answer.notice or "")
        assert [e.step for e in live.events()][-1] == Step.STOPPED
        assert llama.wait_idle(2.0), "llama.cpp went on generating after Stop"  # the HTTP stream was really cut
    finally:
        rt.close()


def test_a_model_the_server_does_not_serve_is_named_and_answers_quote(capitals, llama, tmp_path):
    lib, _ = capitals
    wrong = _settings(tmp_path, llama.base_url, model="llama-3-70b")
    status = model_status(wrong)
    assert status.reachable and not status.has_model("llama-3-70b") and status.models == [ALIAS]
    _, answer = _run(gen.start_answer(lib, QUESTION, wrong))
    # llama.cpp would answer any name with its one model; DocChat does not label that reply as llama-3-70b's
    assert answer.mode == AnswerMode.QUOTES and answer.extra["fault"] == ModelNotPulled.__name__
    assert "has no model called “llama-3-70b”" in (answer.notice or "") and "Brussels" in answer.text
    assert llama.wait_idle(2.0)


def test_a_server_slower_than_the_timeout_gives_quotes_and_one_sentence(capitals, tmp_path):
    lib, _ = capitals
    # One thread and a long prompt: llama.cpp needs seconds before its first token; DocChat waits 0.3 s.
    with LlamaServer(threads=1, parallel=1) as slow:
        settings = _settings(tmp_path, slow.base_url, llm_timeout_s=0.3, top_k=8)
        t = time.perf_counter()
        _, answer = _run(gen.start_answer(lib, LONG_QUESTION, settings))
        took = time.perf_counter() - t
    assert answer.mode == AnswerMode.QUOTES and answer.extra["fault"] == LLMTimeout.__name__, answer
    assert (answer.notice or "").startswith("The model did not answer within") and answer.citations
    assert "DOCCHAT_LLM_TIMEOUT" in answer.extra["details"]
    assert took < 15, took


def test_a_missing_model_file_stops_the_server_and_docchat_says_it_is_not_running(capitals, tmp_path):
    lib, _ = capitals
    gone = LlamaServer(model=tmp_path / "no-such-model.gguf")
    with pytest.raises(RuntimeError, match="failed to open GGUF file"):
        gone.start(timeout=30)
    _, answer = _run(gen.start_answer(lib, QUESTION, _settings(tmp_path, gone.base_url)))
    assert answer.mode == AnswerMode.QUOTES and answer.extra["fault"] == OllamaUnavailable.__name__
    assert "Brussels" in answer.text and gone.base_url in answer.extra["details"]
