"""A reply in progress (rag_core.service.live): stages from the first moment, sources before the first word, Stop at once.

Real library, real embedding model, the real ChatOllama talking HTTP to the scripted Ollama-compatible server."""
from __future__ import annotations

import time

import pytest
from ollama_server import OllamaServer, Reply

from rag_core.answer import generation as gen
from rag_core.answer.generation.outcome import NOTICE_STOPPED
from rag_core.core.config import Settings
from rag_core.core.models import Step
from rag_core.service.live import LiveAnswer

SEARCHING, READ, WAITING, WRITING, CHECKING, DONE = (Step.SEARCHING, Step.READ, Step.WAITING, Step.WRITING,
                                                    Step.CHECKING, Step.DONE)

MODEL = "llama3.2:3b"
QUESTION = "When does the museum open?"
DOC = ("# Opening hours\n\nThe museum opens at nine in the morning and closes at five in the afternoon. "
       "On Mondays the museum is closed for cleaning.\n\n# Tickets\n\nA ticket costs twelve euros.\n")


@pytest.fixture
def server():
    with OllamaServer(models=[MODEL]) as srv:
        yield srv


@pytest.fixture
def museum(library):
    assert library.ingest_bytes(DOC.encode(), "museum.md").status == "added"
    return library


def _live(museum, server, tmp_path) -> LiveAnswer:
    settings = Settings(data_dir=tmp_path / "unused", ollama_host=server.url, ollama_model=MODEL, llm_timeout_s=20)
    return LiveAnswer(gen.start_answer(museum, QUESTION, settings))


def _drain(live: LiveAnswer, until: float = 20.0) -> list:
    seen = []
    deadline = time.monotonic() + until
    while live.poll(0.05) and time.monotonic() < deadline:
        seen.append((live.stage(), len(live.passages), live.text))
    seen.append((live.stage(), len(live.passages), live.text))
    return seen


def test_stages_show_waiting_with_seconds_and_sources_before_the_first_word(museum, server, tmp_path) -> None:
    server.script(Reply("The museum opens at nine in the morning [1].", delay_first=2.6, delay_between=0.05))
    live = _live(museum, server, tmp_path)
    seen = _drain(live)
    names = [s.name for s, _, _ in seen]
    assert names[0] in (SEARCHING, READ, WAITING) and names[-1] == DONE
    assert WAITING in names and WRITING in names
    assert names.index(WAITING) < names.index(WRITING)
    waiting = [(s, n, t) for s, n, t in seen if s.name == WAITING]
    assert all(t == "" and n > 0 for _, n, t in waiting)  # the sources are known before the model's first word
    counted = [s.line() for s, _, _ in waiting if s.seconds >= 2.0]
    assert counted and counted[-1].endswith(" 2 s") and "passage" in counted[-1]
    answer = live.answer
    assert answer is not None and not answer.incomplete
    assert answer.text == live.text == "The museum opens at nine in the morning [1]."
    assert answer.citations[0].status == "verified"
    # the run's typed steps, each once and in order; the passages come with READ, before the first word
    events = live.events()
    assert [e.step for e in events] == [SEARCHING, READ, WAITING, WRITING, CHECKING, DONE]
    assert not events[0].passages and len(events[1].passages) == len(answer.passages) > 0
    assert [e.at for e in events] == sorted(e.at for e in events)


def test_stop_while_writing_keeps_the_partial_answer_and_closes_the_stream(museum, server, tmp_path) -> None:
    words = " ".join(f"Filler sentence number {i}." for i in range(200))
    server.script(Reply(f"The museum opens at nine [1]. {words}", delay_between=0.05))
    live = _live(museum, server, tmp_path)
    while len(live.text) < 60:
        assert live.poll(0.05) or live.text, "the reply ended before Stop"
    t = time.perf_counter()
    live.stop()
    assert time.perf_counter() - t < 0.05  # Stop returns at once
    shown = live.text
    assert not live.poll(0.2) or live.text == shown  # nothing more is taken after Stop
    assert live.wait(2.0)
    answer = live.answer
    assert answer is not None and answer.incomplete and "stopped" in (answer.notice or "")
    assert answer.text == "The museum opens at nine [1]."  # only what the documents back ...
    assert "Filler sentence number 0." in answer.extra["details"]  # ... the rest is under Details
    assert [c.n for c in answer.citations] == [1]  # the part written before Stop keeps its checked citation
    assert answer.citations[0].status == "verified"
    deadline = time.monotonic() + 2
    while server.cut_streams == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.cut_streams == 1  # the HTTP stream to the model was closed, not read to its end
    steps = [e.step for e in live.events()]
    assert steps[-1] == Step.STOPPED and Step.DONE not in steps and steps.index(WRITING) < len(steps) - 1


def test_stop_with_nothing_backed_yet_gives_the_closest_quotes_within_two_seconds(museum, server, tmp_path) -> None:
    invented = "The museum was built by the Romans in the year 212 and has a golden roof."
    server.script(Reply(f"{invented} " + " ".join(f"Filler {i}." for i in range(300)), delay_between=0.05))
    live = _live(museum, server, tmp_path)
    while invented not in live.text:
        assert live.poll(0.05) or invented in live.text, "the reply ended before Stop"
    t = time.perf_counter()
    live.stop()
    assert live.wait(2.0), "the checked answer must come within 2 s of Stop"
    took = time.perf_counter() - t
    answer = live.answer
    assert answer is not None and answer.incomplete and answer.mode == "quotes"
    assert "Romans" not in answer.text and "opens at nine" in answer.text and answer.citations
    assert NOTICE_STOPPED in (answer.notice or "") and "Romans" in answer.extra["details"]
    print(f"\nStop to the closest quotes: {took:.2f} s")


def test_stop_while_waiting_returns_at_once_and_ends_the_stream(museum, server, tmp_path) -> None:
    server.script(Reply("The museum opens at nine [1]. " + "more " * 50, delay_first=1.5, delay_between=0.05))
    live = _live(museum, server, tmp_path)
    deadline = time.monotonic() + 10
    while live.stage().name != WAITING and time.monotonic() < deadline:
        live.poll(0.05)
    t = time.perf_counter()
    live.stop()
    assert time.perf_counter() - t < 0.05
    assert live.text == ""
    assert live.wait(5.0)  # the thread closes the stream when the model's first piece arrives
    assert live.answer is not None and live.answer.incomplete
    assert live.text == ""
