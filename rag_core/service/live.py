"""A reply in progress, for a page that must stay alive: the answer stream runs on its own thread, the page polls it.

The page can then show what is happening at every moment (searching, reading N passages, waiting for the model's
first word with the seconds counting, writing, checking the citations), show the sources as soon as they are found,
and stop the reply at once: `stop()` returns immediately, the partial answer is kept and marked stopped, and the
thread closes the model's stream (the HTTP connection to Ollama) as soon as it gets control back.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from rag_core.core.models import Answer, Passage, StageEvent, Step

log = logging.getLogger(__name__)

SHOW_SECONDS_AFTER = 2.0  # the waiting line starts counting seconds after this long



@dataclass(frozen=True)
class Stage:
    """What the reply is doing now, since when, and over how many passages."""

    name: Step
    seconds: float  # how long it has been in this stage
    passages: int = 0
    note: str = ""  # what a long run says about this stage ("Reading section 3 of 11…")

    def line(self) -> str:
        """One short sentence for the person waiting."""
        if self.note and self.name not in (Step.DONE, Step.STOPPED, Step.FAILED):
            return self.note  # it says how long is left
        if self.name == Step.SEARCHING:
            return "Searching your documents…" + (f" {int(self.seconds)} s" if self.seconds >= SHOW_SECONDS_AFTER else "")
        if self.name in (Step.READ, Step.WAITING):
            reading = f"Read {self.passages} passage{'' if self.passages == 1 else 's'}; w" if self.passages else "W"
            wait = f"{reading}aiting for the model's first word…"
            return wait + (f" {int(self.seconds)} s" if self.seconds >= SHOW_SECONDS_AFTER else "")
        if self.name == Step.WRITING:
            return "Writing a draft…"
        if self.name == Step.CHECKING:
            return "Checking the draft against your documents…"
        return ""


_RUNNING: set[LiveAnswer] = set()  # the answers of this process whose thread has not ended
_RUNNING_LOCK = threading.Lock()


def running(library: object | None = None) -> list[LiveAnswer]:
    """The answers still running that read `library` (and those whose library is not known); None: all of them."""
    with _RUNNING_LOCK:
        return [a for a in _RUNNING if library is None or a.library is None or a.library is library]


def drain(library: object | None, timeout: float, grace: float) -> int:
    """Before `library` closes: wait up to `timeout` seconds for its running answers to end, then stop the rest and
    wait up to `grace` more for their threads to let go (a stopped answer ends at its next piece of text); returns
    how many are still running."""
    for wait_s, stop in ((timeout, False), (grace, True)):
        answers = running(library)
        if not answers:
            return 0
        if stop:
            log.info("Stopping %d answer(s) still running", len(answers))
            for a in answers:
                a.stop()
        end = time.monotonic() + wait_s
        for a in answers:
            a.wait(max(0.0, end - time.monotonic()))
    return len(running(library))


class LiveAnswer:
    """An answer run: the answer stream (iterate for text, then `.answer`, `.close()`) on its own thread, reporting
    each step as a typed StageEvent (`events()`); poll it from the page."""

    def __init__(self, stream: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.clock = clock
        self.text = ""
        self.stopped = False
        self._pieces: queue.Queue[str | None] = queue.Queue()
        self._stop = threading.Event()
        self._finished = threading.Event()
        self._started = clock()
        self._events: list[StageEvent] = []
        self._events_lock = threading.Lock()
        self.library = getattr(stream, "library", None)  # what it reads (None: not known), see drain()
        if hasattr(stream, "listen"):  # an AnswerStream (or the demo's): its steps, as they happen
            stream.listen(self._on_event)
        self._thread = threading.Thread(target=self._run, name="docchat-answer", daemon=True)
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        self._thread.start()

    def _on_event(self, event: StageEvent) -> None:
        with self._events_lock:
            self._events.append(replace(event, at=self.clock()))

    # -- the thread --------------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            for piece in self.stream:
                if self._stop.is_set():
                    break
                if piece:
                    self._pieces.put(piece)
        except Exception:  # the stream turns failures into an answer notice; this is the last guard
            log.exception("The answer stream failed")
        finally:
            if self._stop.is_set() or getattr(self.stream, "answer", None) is None:
                self.stream.close()  # ends the model's HTTP stream; the answer keeps the text so far
            self._pieces.put(None)
            with _RUNNING_LOCK:
                _RUNNING.discard(self)
            self._finished.set()

    # -- the page's side -----------------------------------------------------------------------------------------
    def poll(self, timeout: float = 0.25) -> bool:
        """Take what arrived (waiting up to `timeout` for the first piece); False once the reply is finished."""
        try:
            piece = self._pieces.get(timeout=timeout)
        except queue.Empty:
            return not self._finished.is_set() or not self._pieces.empty()
        while piece is not None:
            if not self.stopped:
                self.text += piece
            try:
                piece = self._pieces.get_nowait()
            except queue.Empty:
                return True
        return False

    def stop(self) -> None:
        """Stop now: no more text is taken; the thread closes the model's stream when it next gets control."""
        self.stopped = True
        self._stop.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (True when it did)."""
        return self._finished.wait(timeout)

    @property
    def finished(self) -> bool:
        """True when the stream has ended (answered, failed or stopped)."""
        return self._finished.is_set()

    def events(self) -> list[StageEvent]:
        """The steps so far, in order (searching, read N passages, waiting, writing, checking, done|stopped|failed)."""
        with self._events_lock:
            return list(self._events)

    @property
    def passages(self) -> list[Passage]:
        """The passages found so far (empty until retrieval is done)."""
        found = [e.passages for e in self.events() if e.passages]
        return list(found[-1]) if found else list(getattr(self.stream, "passages", None) or ())

    @property
    def answer(self) -> Answer | None:
        """The checked answer once finished (marked incomplete when stopped), else None."""
        return getattr(self.stream, "answer", None) if self._finished.is_set() else None

    def stage(self) -> Stage:
        """What is happening now, and for how long."""
        events = self.events()
        if events:
            last = events[-1]
            name, since, note = last.step, last.at, last.note
            if self._finished.is_set() and name not in (Step.DONE, Step.STOPPED, Step.FAILED):
                name = Step.STOPPED if self.stopped else Step.DONE
            passages = len(self.passages)
        else:  # a stream that does not report its steps: what the text says
            name = Step.DONE if self._finished.is_set() else Step.WRITING if self.text else Step.SEARCHING
            since, passages, note = self._started, 0, ""
        return Stage(name, self.clock() - since, passages, note)
