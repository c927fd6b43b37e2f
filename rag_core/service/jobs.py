"""Background ingest queue: files are added on a small pool of worker threads, so an upload keeps going when the
person switches pages, and every page can tell that the library is still being built.

Fair for the hosted demo, where everyone shares one queue: each owner (a demo session; None locally) has a queue of
their own, at most one of their jobs runs at a time (in the order they were submitted), and free workers take the
next job from the owners in turn. So a second visitor's small file starts while the first visitor's big one runs,
and no one occupies every worker while others wait. Each job is bounded by the file's time budget
(DOCCHAT_INGEST_TIMEOUT_S, enforced by the library), so a worker is never held longer than that.

`cancel(job_id)` stops a job (the Stop button): a queued one is marked stopped at once, a running one has its
deadline made to pass now (rag_core.core.deadline.cancellable), so it ends at its next check with nothing stored, by the
same path as a file that ran out of time, and its result says "stopped".

Jobs belong to their owner, not to a browser tab: `owner_jobs(owner)` lists the queued, running and recently finished
ones, so a reload or a second tab of the same person shows them. A finished job is kept until it is dismissed
(`forget`), for at most KEEP_FOR_S after it ended, and only the newest KEEP_PER_OWNER finished ones of each owner.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from rag_core.core.deadline import cancellable
from rag_core.core.errors import DocChatError, IngestCancelled
from rag_core.core.models import IngestStatus, Progress

if TYPE_CHECKING:  # the library pulls in Qdrant and the model: pages import this module before painting
    from rag_core.service.library import IngestResult, Library

log = logging.getLogger(__name__)

Work = Callable[[Progress], Any]  # returns a result with .status and .error (IngestResult, WikiImportResult, ...)
STAGES = ("reading", "chunking", "embedding", "saving")
STAGE_ALIASES = {"downloading": "reading", "ocr": "reading"}  # downloading (Wikipedia) and OCR are reading
KEEP_PER_OWNER = 20  # finished jobs shown to one person (the newest); older ones are forgotten
KEEP_FOR_S = 3600.0  # a finished job nobody dismissed is forgotten this long after it ended


class JobState(StrEnum):
    """Where a job is: waiting its turn, being worked on, or finished (its result says how)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"


class JobKind(StrEnum):
    """What a job adds (how pages describe it)."""

    FILE = "file"
    WIKIPEDIA = "wikipedia"  # an article imported from Wikipedia
    REFRESH = "refresh"  # imported articles checked for newer revisions


@dataclass(frozen=True)
class JobView:
    """A snapshot of one queued, running or finished ingest."""

    id: str
    label: str
    owner: str | None
    state: JobState
    stage: str = ""  # one of STAGES while running
    done: int = 0
    total: int = 0
    result: Any = None  # what the work returned (IngestResult for files), set when done
    kind: JobKind = JobKind.FILE
    submitted: float = 0.0
    ended: float = 0.0  # when it finished (the queue's clock), 0 until then
    stopping: bool = False  # Stop was pressed; it ends at its next check

    @property
    def queued(self) -> bool:
        """True while it waits for its turn."""
        return self.state == JobState.QUEUED

    @property
    def running(self) -> bool:
        """True while it is being worked on."""
        return self.state == JobState.RUNNING

    @property
    def finished(self) -> bool:
        """True once it has a result (added, unchanged, failed or stopped)."""
        return self.state == JobState.DONE

    @property
    def fraction(self) -> float:
        """Overall progress 0..1: each ingest stage is a quarter, filled by its done/total."""
        if self.state == JobState.DONE:
            return 1.0
        part = max(0.0, min((self.done / self.total) if self.total else 0.0, 1.0))
        stage = STAGE_ALIASES.get(self.stage, self.stage)
        if stage not in STAGES:
            return part  # a single-stage job (e.g. checking for updates)
        return min(1.0, (STAGES.index(stage) + part) / len(STAGES))


class IngestQueue:
    """Runs ingests on up to `workers` daemon threads, one job per owner at a time, owners in turn; thread-safe,
    one per process."""

    def __init__(self, library: Library, keep_finished: int = 500, workers: int | None = None,
                 keep_per_owner: int = KEEP_PER_OWNER, keep_for_s: float = KEEP_FOR_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.library = library
        self.keep_finished = keep_finished  # finished jobs kept in all
        self.keep_per_owner = keep_per_owner
        self.keep_for_s = keep_for_s
        self.clock = clock
        self.workers = workers or library.settings.ingest.workers
        self._jobs: dict[str, JobView] = {}
        self._work: dict[str, Work] = {}
        self._cancel: dict[str, threading.Event] = {}  # job id -> set when Stop was pressed (queued and running)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._waiting: dict[str | None, deque[str]] = {}  # owner -> their queued job ids, oldest first
        self._running: set[str | None] = set()  # owners with a job running
        self._turns = itertools.count()
        self._last_turn: dict[str | None, int] = {}  # owner -> when a job of theirs last started
        self._threads: list[threading.Thread] = []
        self._discarding: list[threading.Thread] = []  # running the work of jobs stopped while queued

    # -- submitting ----------------------------------------------------------
    def submit(self, label: str, work: Work, owner: str | None = None, kind: JobKind = JobKind.FILE) -> str:
        """Queue a unit of work (it gets a progress callback and returns a result); returns the job id."""
        job_id = uuid.uuid4().hex
        with self._changed:
            self._jobs[job_id] = JobView(job_id, label, owner, JobState.QUEUED, kind=kind, submitted=self.clock())
            self._work[job_id] = work
            self._cancel[job_id] = threading.Event()
            self._waiting.setdefault(owner, deque()).append(job_id)
            self._start_workers()
            self._changed.notify_all()
        return job_id

    def submit_bytes(self, data: bytes, file_name: str, owner: str | None = None) -> str:
        """Queue an uploaded file (bytes in memory; the name is only a label); returns the job id."""
        library = self.library

        def work(progress: Progress) -> IngestResult:
            return library.ingest_bytes(data, file_name, owner=owner, progress=progress)

        return self.submit(file_name, work, owner)

    def cancel(self, job_id: str, owner: str | None = None) -> bool:
        """Stop one of `owner`'s queued or running jobs, leaving the library as it was; False when there is no such
        job or it has finished. A running job ends at its next deadline check (well under a second)."""
        with self._changed:
            job = self._jobs.get(job_id)
            event = self._cancel.get(job_id)
            if job is None or job.owner != owner or job.finished or event is None:
                return False
            event.set()
            if not job.queued:
                self._jobs[job_id] = replace(job, stopping=True)
                self._changed.notify_all()
                log.info("Stopping %s (cancelled)", job.label)
                return True
            queued = self._waiting.get(owner)
            if queued is not None and job_id in queued:
                queued.remove(job_id)
                if not queued:
                    del self._waiting[owner]
            work = self._work.pop(job_id)
            del self._cancel[job_id]
            self._jobs[job_id] = replace(job, state=JobState.DONE, result=_stopped(job.label), ended=self.clock(),
                                         stopping=True)
            self._changed.notify_all()
        log.info("Removed %s from the queue (cancelled)", job.label)
        if job.kind != JobKind.FILE:
            return True
        # a file's work still runs once, already cancelled, so the room it reserved (demo) is released: it stops at
        # its first deadline check, before reading anything big
        thread = threading.Thread(target=self._discard, args=(job.label, work, event), daemon=True,
                                  name="docchat-ingest-cancelled")
        with self._changed:
            self._discarding.append(thread)
        thread.start()
        return True

    def _discard(self, label: str, work: Work, event: threading.Event) -> None:
        try:
            with cancellable(event):
                work(lambda stage, done, total: None)
        except Exception:  # nobody waits for this result
            log.debug("cancelled job %s ended with an error", label, exc_info=True)
        finally:
            with self._changed:
                self._discarding.remove(threading.current_thread())
                self._changed.notify_all()

    # -- reading -------------------------------------------------------------
    def jobs(self, job_ids: Iterable[str]) -> list[JobView]:
        """Snapshots of the given jobs (unknown ids are skipped), in the order asked."""
        with self._lock:
            return [self._jobs[j] for j in job_ids if j in self._jobs]

    def active(self, owner: str | None = None) -> list[JobView]:
        """Jobs of `owner` that are queued or running, oldest first."""
        with self._lock:
            return sorted((j for j in self._jobs.values() if not j.finished and j.owner == owner),
                          key=lambda j: j.submitted)

    def owner_jobs(self, owner: str | None = None) -> list[JobView]:
        """Every job of `owner` still to show: queued, running, and finished ones not yet dismissed (nor older than
        `keep_for_s`), oldest first."""
        self._prune()
        with self._lock:
            return sorted((j for j in self._jobs.values() if j.owner == owner), key=lambda j: j.submitted)

    def busy(self, owner: str | None = None) -> bool:
        """True while any of `owner`'s files are still being added."""
        return bool(self.active(owner))

    def wait(self, job_ids: Iterable[str], timeout: float = 60.0) -> bool:
        """Block until the jobs are done (for tests and scripts); False on timeout."""
        ids = list(job_ids)
        deadline = time.monotonic() + timeout
        with self._changed:
            while any(self._jobs.get(j) and not self._jobs[j].finished for j in ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop finished jobs from memory."""
        with self._lock:
            for j in job_ids:
                if j in self._jobs and self._jobs[j].finished:
                    del self._jobs[j]

    # -- scheduling (under the lock) -------------------------------------------
    def _start_workers(self) -> None:
        """Start threads up to `workers`, no more than there are owners with work (one job per owner runs)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        wanted = min(self.workers, len(set(self._waiting) | self._running))
        while len(self._threads) < wanted:
            thread = threading.Thread(target=self._run, name=f"docchat-ingest-{len(self._threads) + 1}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _take(self) -> str | None:
        """The next job to run: the oldest job of the owner served longest ago (never: first) among those with
        nothing running; None when no job may run now."""
        free = [o for o in self._waiting if o not in self._running]  # dict order: whose job has waited longest
        if not free:
            return None
        owner = min(free, key=lambda o: self._last_turn.get(o, -1))
        queued = self._waiting[owner]
        job_id = queued.popleft()
        if not queued:
            del self._waiting[owner]
        self._running.add(owner)
        self._last_turn[owner] = next(self._turns)
        if len(self._last_turn) > 2 * self.keep_finished:  # forget the owners served longest ago
            for old in sorted(self._last_turn, key=self._last_turn.__getitem__)[:self.keep_finished]:
                del self._last_turn[old]
        return job_id

    # -- worker --------------------------------------------------------------
    def _update(self, job_id: str, **changes) -> None:
        with self._changed:
            self._jobs[job_id] = replace(self._jobs[job_id], **changes)
            self._changed.notify_all()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._changed:
                job_id = self._take()
                while job_id is None:
                    if not self._waiting:  # nothing queued: this worker ends (a later submit starts one again)
                        if me in self._threads:
                            self._threads.remove(me)
                        self._changed.notify_all()
                        return
                    self._changed.wait()  # queued jobs all belong to owners with a job running
                    job_id = self._take()
                work = self._work.pop(job_id)
                event = self._cancel.get(job_id) or threading.Event()
                view = self._jobs[job_id]
            try:
                self._update(job_id, state=JobState.RUNNING, stage="")
                with cancellable(event):
                    result = self._execute(job_id, view.label, work)
                if event.is_set() and view.kind == JobKind.FILE and getattr(result, "status", None) == IngestStatus.FAILED:
                    result = _stopped(view.label)  # stopped by hand: whatever it failed with on the way out
                self._update(job_id, state=JobState.DONE, result=result, ended=self.clock())
            finally:
                with self._changed:
                    self._cancel.pop(job_id, None)
                    self._running.discard(view.owner)
                    self._changed.notify_all()
            self._prune()

    def _execute(self, job_id: str, label: str, work: Work) -> Any:
        """Run one job's work; whatever goes wrong becomes a failed result with one sentence."""

        def progress(stage: str, done: int, total: int) -> None:
            self._update(job_id, stage=stage, done=done, total=total)

        from rag_core.service.library import IngestResult

        try:
            return work(progress)
        except IngestCancelled:
            return _stopped(label)
        except DocChatError as e:
            return IngestResult(label, IngestStatus.FAILED, error=str(e), details=e.details)
        except Exception:  # the worker must survive; the user gets a sentence, the log the traceback
            log.exception("Unexpected failure while adding %s", label)
            return IngestResult(label, IngestStatus.FAILED, error=(
                f"“{label}”: something unexpected went wrong while adding this; your library was not changed. "
                "Try again in a moment."))

    def _prune(self) -> None:
        """Forget finished jobs that ended over `keep_for_s` ago, those past the newest `keep_per_owner` of their
        owner, and those past the newest `keep_finished` in all."""
        with self._lock:
            old = self.clock() - self.keep_for_s
            order = {job_id: n for n, job_id in enumerate(self._jobs)}  # submission order, for equal times
            done = sorted((j for j in self._jobs.values() if j.finished), key=lambda j: (j.ended, order[j.id]),
                          reverse=True)  # newest first
            seen: dict[str | None, int] = {}
            for rank, j in enumerate(done):
                seen[j.owner] = seen.get(j.owner, 0) + 1
                if j.ended < old or seen[j.owner] > self.keep_per_owner or rank >= self.keep_finished:
                    del self._jobs[j.id]

    def close(self, timeout: float = 5.0, grace: float = 2.0) -> bool:
        """Let the workers finish the jobs already queued for up to `timeout` seconds, then stop what is left (queued
        jobs are marked stopped, running ones cancelled: nothing of them is stored) and wait up to `grace` seconds
        more for them to end; True when nothing runs any more (a later submit starts new workers)."""
        if self._idle_within(timeout):
            return True
        with self._lock:
            left = [(j.id, j.owner) for j in self._jobs.values() if not j.finished]
        log.info("Stopping %d ingest job(s) still queued or running", len(left))
        for job_id, owner in left:
            self.cancel(job_id, owner)
        if self._idle_within(grace):
            return True
        log.warning("Ingest jobs still running after being stopped")
        return False

    def _idle_within(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds until no worker (nor a stopped job's last run) is alive; True once so."""
        end = time.monotonic() + timeout
        with self._changed:
            while any(t.is_alive() for t in self._threads + self._discarding):
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True


def _stopped(label: str) -> Any:
    """The result of a job stopped by hand."""
    from rag_core.service.library import IngestResult

    return IngestResult(label, IngestStatus.STOPPED, error=str(IngestCancelled(label)))
