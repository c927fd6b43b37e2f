"""The per-file time budget (DOCCHAT_INGEST_TIMEOUT_S): a deadline fixed when work on a file starts.

It is cooperative: loaders check it between pages, lines or blocks, chunking between tokenizer batches, and the
library on every progress report (each embedding batch, each saving batch) and before saving. Every step between two
checks is bounded in size, and a PDF is read in a child process that is killed at the deadline
(rag_core.ingest.loaders._isolated), so no single step can carry a file far past its budget. Stopping raises
IngestTimedOut; the store rolls back whatever was written (see rag_core.store.vector_store).

A job can also be stopped by hand (IngestQueue.cancel): the queue runs each job's work inside `cancellable(event)`,
every Deadline made there (on that thread) takes the event, and once it is set the deadline counts as passed and
`check()` raises IngestCancelled instead, so the same stop-and-roll-back path ends it.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from rag_core.core.errors import IngestCancelled, IngestTimedOut
from rag_core.core.models import Progress

_CANCEL: ContextVar[threading.Event | None] = ContextVar("docchat_ingest_cancel", default=None)


@contextmanager
def cancellable(event: threading.Event) -> Iterator[None]:
    """Deadlines made inside this block (on this thread) stop as soon as `event` is set."""
    token = _CANCEL.set(event)
    try:
        yield
    finally:
        _CANCEL.reset(token)


class Deadline:
    """When work on one file must stop; `check()` raises IngestTimedOut once it has passed."""

    def __init__(self, seconds: float, file_name: str, clock: Callable[[], float] = time.monotonic,
                 left: float | None = None) -> None:
        self.seconds = seconds  # the whole budget (what messages name)
        self.file_name = file_name
        self.clock = clock
        self.end = clock() + (seconds if left is None else left)  # `left`: the part of it still to run
        self.cancel_event = _CANCEL.get()  # set by IngestQueue.cancel: stop now

    @classmethod
    def never(cls, file_name: str = "") -> Deadline:
        """A deadline that never passes (callers that have no budget)."""
        return cls(math.inf, file_name)

    def cancelled(self) -> bool:
        """True once the work was stopped by hand."""
        return self.cancel_event is not None and self.cancel_event.is_set()

    def left(self) -> float:
        """Seconds until the deadline (0 once passed or cancelled)."""
        return 0.0 if self.cancelled() else max(0.0, self.end - self.clock())

    def check(self) -> None:
        """Raise IngestCancelled once cancelled, IngestTimedOut when the deadline has passed."""
        if self.cancelled():
            raise IngestCancelled(self.file_name)
        if self.clock() >= self.end:
            raise IngestTimedOut(self.file_name, self.seconds)

    def refuse_if_longer(self, seconds_needed: float) -> None:
        """Raise IngestTimedOut (projected) now when `seconds_needed` more work cannot finish before the deadline."""
        self.check()
        if seconds_needed > self.left():
            raise IngestTimedOut(self.file_name, self.seconds, projected=True)

    def watch(self, progress: Progress | None = None) -> Progress:
        """A progress callback that checks the deadline on every report, then passes it on to `progress`."""

        def report(stage: str, done: int, total: int) -> None:
            self.check()
            if progress is not None:
                progress(stage, done, total)

        return report
