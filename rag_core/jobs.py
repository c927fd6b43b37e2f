"""Background ingest queue: files are added one at a time on a worker thread, so an upload keeps going when
the person switches pages, and every page can tell that the library is still being built."""
from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .errors import DocChatError
from .models import Progress

if TYPE_CHECKING:  # the library pulls in Qdrant and the model: pages import this module before painting
    from .library import IngestResult, Library

log = logging.getLogger(__name__)

Work = Callable[[Progress], Any]  # returns a result with .status and .error (IngestResult, WikiImportResult, ...)
STAGES = ("reading", "chunking", "embedding", "saving")
STAGE_ALIASES = {"downloading": "reading"}  # Wikipedia imports download instead of reading a file


@dataclass(frozen=True)
class JobView:
    """A snapshot of one queued or finished ingest."""

    id: str
    label: str
    owner: str | None
    state: str  # "queued" | "running" | "done"
    stage: str = ""  # one of STAGES while running
    done: int = 0
    total: int = 0
    result: Any = None  # what the work returned (IngestResult for files), set when done
    kind: str = "file"  # "file" | "wikipedia" | "refresh" (how pages describe it)
    submitted: float = 0.0

    @property
    def fraction(self) -> float:
        """Overall progress 0..1: each ingest stage is a quarter, filled by its done/total."""
        if self.state == "done":
            return 1.0
        part = max(0.0, min((self.done / self.total) if self.total else 0.0, 1.0))
        stage = STAGE_ALIASES.get(self.stage, self.stage)
        if stage not in STAGES:
            return part  # a single-stage job (e.g. checking for updates)
        return min(1.0, (STAGES.index(stage) + part) / len(STAGES))


class IngestQueue:
    """Runs ingests one after another on a daemon worker thread; thread-safe, one per process."""

    def __init__(self, library: Library, keep_finished: int = 500) -> None:
        self.library = library
        self.keep_finished = keep_finished
        self._jobs: dict[str, JobView] = {}
        self._work: dict[str, Work] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    # -- submitting ----------------------------------------------------------
    def submit(self, label: str, work: Work, owner: str | None = None, kind: str = "file") -> str:
        """Queue a unit of work (it gets a progress callback and returns a result); returns the job id."""
        job_id = uuid.uuid4().hex
        with self._lock:
            self._jobs[job_id] = JobView(job_id, label, owner, "queued", kind=kind, submitted=time.time())
            self._work[job_id] = work
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="docchat-ingest", daemon=True)
                self._thread.start()
            self._queue.put(job_id)  # under the lock: the worker's exit check (below) sees it
        return job_id

    def submit_bytes(self, data: bytes, file_name: str, owner: str | None = None) -> str:
        """Queue an uploaded file (bytes in memory; the name is only a label); returns the job id."""
        library = self.library

        def work(progress: Progress) -> IngestResult:
            return library.ingest_bytes(data, file_name, owner=owner, progress=progress)

        return self.submit(file_name, work, owner)

    # -- reading -------------------------------------------------------------
    def jobs(self, job_ids: Iterable[str]) -> list[JobView]:
        """Snapshots of the given jobs (unknown ids are skipped), in the order asked."""
        with self._lock:
            return [self._jobs[j] for j in job_ids if j in self._jobs]

    def active(self, owner: str | None = None) -> list[JobView]:
        """Jobs of `owner` that are queued or running, oldest first."""
        with self._lock:
            return sorted((j for j in self._jobs.values() if j.state != "done" and j.owner == owner),
                          key=lambda j: j.submitted)

    def busy(self, owner: str | None = None) -> bool:
        """True while any of `owner`'s files are still being added."""
        return bool(self.active(owner))

    def wait(self, job_ids: Iterable[str], timeout: float = 60.0) -> bool:
        """Block until the jobs are done (for tests and scripts); False on timeout."""
        ids = list(job_ids)
        deadline = time.monotonic() + timeout
        with self._changed:
            while any(self._jobs.get(j) and self._jobs[j].state != "done" for j in ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop finished jobs from memory."""
        with self._lock:
            for j in job_ids:
                if j in self._jobs and self._jobs[j].state == "done":
                    del self._jobs[j]

    # -- worker --------------------------------------------------------------
    def _update(self, job_id: str, **changes) -> None:
        with self._changed:
            self._jobs[job_id] = replace(self._jobs[job_id], **changes)
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            job_id = self._queue.get()
            if job_id is None:
                with self._lock:
                    if self._queue.empty():  # close(): stop; a job submitted after it keeps this worker going
                        self._thread = None
                        return
                continue
            with self._lock:
                work = self._work.pop(job_id)
                label = self._jobs[job_id].label
            self._update(job_id, state="running", stage="")

            def progress(stage: str, done: int, total: int, _id: str = job_id) -> None:
                self._update(_id, stage=stage, done=done, total=total)

            from .library import IngestResult

            try:
                result = work(progress)
            except DocChatError as e:
                result = IngestResult(label, "failed", error=str(e))
            except Exception:  # noqa: BLE001 - the worker must survive; the user gets a sentence, the log the traceback
                log.exception("Unexpected failure while adding %s", label)
                result = IngestResult(label, "failed", error=(
                    f"“{label}”: something unexpected went wrong while adding this; your library was not changed. "
                    "Try again in a moment."))
            self._update(job_id, state="done", result=result)
            self._prune()

    def _prune(self) -> None:
        with self._lock:
            done = sorted((j for j in self._jobs.values() if j.state == "done"), key=lambda j: j.submitted)
            for j in done[:max(0, len(done) - self.keep_finished)]:
                del self._jobs[j.id]

    def close(self, timeout: float = 5.0) -> None:
        """Stop the worker after the jobs already queued (a later submit starts a new one)."""
        with self._lock:
            thread = self._thread
            if thread is None or not thread.is_alive():
                return  # no worker to stop: a sentinel left in the queue would swallow the next job
            self._queue.put(None)
        thread.join(timeout)
