"""Shutting the server's runtime down (issue 24): answers and ingests still running are let finish, or stopped,
before the library's store is closed, never cut off by a closed store under them."""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rag_core.adapters.runtime import Runtime
from rag_core.core.deadline import Deadline
from rag_core.service.jobs import IngestQueue
from rag_core.service.library import IngestResult
from rag_core.service.live import LiveAnswer

WAIT_S = 30.0  # upper bound on any wait for a state: reached only when the test is failing
DOC = b"# Opening hours\n\nThe museum opens at nine in the morning and closes at five in the afternoon.\n"
QUESTION = "When does the museum open?"


class _Held:
    """An answer stream that holds on before it starts (before it reads the library) until `go` is set."""

    def __init__(self, inner: Any, go: Callable[[], bool]) -> None:
        self.inner = inner
        self.library = inner.library
        self.go = go
        self.holding = threading.Event()

    def __iter__(self) -> Iterator[str]:
        self.holding.set()
        pause = threading.Event()
        for _ in range(int(WAIT_S / 0.005)):
            if self.go():
                break
            pause.wait(0.005)
        yield from self.inner

    def close(self) -> None:
        self.inner.close()

    @property
    def answer(self) -> Any:
        return self.inner.answer

    @property
    def passages(self) -> list:
        return self.inner.passages


@pytest.fixture
def runtime(settings, embedder):
    rt = Runtime(settings, embedder=embedder)
    ws = rt.workspace(rt.new_session_key())
    job = ws.add_file(DOC, "museum.md")
    assert rt.queue.wait([job], WAIT_S)
    yield rt
    rt.close()


def _spy_on_store_close(rt: Runtime, live: LiveAnswer, closing: threading.Event) -> list[bool]:
    """Record, when the library is closed, whether the answer had finished; then let a held answer go on."""
    seen: list[bool] = []
    real = rt.library.close

    def close() -> None:
        seen.append(live.finished)
        closing.set()
        real()

    rt.library.close = close  # type: ignore[method-assign]
    return seen


def test_an_answer_in_flight_finishes_before_the_store_closes(runtime):
    ws = runtime.workspace(runtime.new_session_key())
    closing, waited_for = threading.Event(), threading.Event()
    stream = _Held(ws.answer_stream(QUESTION, use_llm=False), lambda: closing.is_set() or waited_for.is_set())
    live = LiveAnswer(stream)
    real_wait = live.wait

    def wait(timeout: float | None = None) -> bool:  # shutdown waits for the answer: let it go on now
        waited_for.set()
        return real_wait(timeout)

    live.wait = wait  # type: ignore[method-assign]
    seen = _spy_on_store_close(runtime, live, closing)
    assert stream.holding.wait(WAIT_S)

    runtime.close()
    assert seen == [True], "the store was closed while the answer was still running"
    answer = live.answer
    assert answer is not None and not answer.incomplete
    assert answer.passages and "nine" in answer.text


def test_an_answer_still_running_when_the_wait_is_over_is_stopped_before_the_store_closes(runtime):
    ws = runtime.workspace(runtime.new_session_key())
    closing = threading.Event()
    live: LiveAnswer | None = None
    stream = _Held(ws.answer_stream(QUESTION, use_llm=False), lambda: closing.is_set() or (live is not None and live.stopped))
    live = LiveAnswer(stream)
    seen = _spy_on_store_close(runtime, live, closing)
    assert stream.holding.wait(WAIT_S)

    runtime.close(timeout=0, grace=WAIT_S)  # no time to finish: stopped at once
    assert seen == [True], "the store was closed while the answer was still running"
    assert live.stopped
    answer = live.answer  # stopped cleanly: an answer from what it had read (here all of it), no failure notice
    assert answer is not None and answer.passages and "unexpected" not in (answer.notice or "")


def test_closing_the_queue_stops_what_is_still_running_or_queued_when_the_wait_is_over(library):
    queue = IngestQueue(library, workers=1)
    started, finished = threading.Event(), threading.Event()

    def until_stopped(progress: Any) -> IngestResult:
        deadline = Deadline(WAIT_S, "big.pdf")  # what the library's ingest checks: stopped by cancel()
        started.set()
        pause = threading.Event()
        while not deadline.cancelled():
            pause.wait(0.005)
        deadline.check()  # IngestCancelled
        finished.set()
        return IngestResult("big.pdf", "added")

    ran: list[str] = []

    def small(progress: Any) -> IngestResult:
        Deadline(WAIT_S, "next.txt").check()  # a stopped job is still run once, to release what it reserved
        ran.append("next.txt")
        return IngestResult("next.txt", "added")

    running = queue.submit("big.pdf", until_stopped)
    queued = queue.submit("next.txt", small)
    assert started.wait(WAIT_S)
    try:
        assert queue.close(timeout=0, grace=WAIT_S)
        views = {v.id: v for v in queue.jobs([running, queued])}
        assert views[running].state == "done" and views[running].result.status == "stopped"
        assert views[queued].state == "done" and views[queued].result.status == "stopped"
        assert ran == [] and not finished.is_set()
    finally:
        for job in (running, queued):
            queue.cancel(job)
        queue.close(timeout=WAIT_S)
