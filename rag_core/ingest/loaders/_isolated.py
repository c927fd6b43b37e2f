"""Run a format loader in a child process that is killed at the file's deadline.

PDF and Word files are parsed by native code (MuPDF, lxml) in steps DocChat cannot interrupt: one crafted PDF page
took 10 s for a 261 KB file (and holds the GIL, freezing every other session meanwhile). In a child process such a
step is stopped at the deadline whatever it is doing, its memory goes away with it, and two files are parsed at
the same time without sharing MuPDF's global state.

The child is a fresh interpreter (`python -m rag_core.ingest.loaders._isolated`, ~1 s of CPU to start and import
the loaders) that reads one pickled request on stdin and writes one pickled answer on stdout (and, when the caller
follows progress, lines "stage<TAB>done<TAB>total" on a pipe of their own, relayed to its callback). A fresh interpreter, not
multiprocessing: multiprocessing's spawn and forkserver children re-import the caller's main script, which runs a
user's script again when it has no `if __name__ == "__main__"` guard (and `streamlit run`'s launcher every time).

On Linux and macOS the child is forked instead by a reader helper (rag_core/ingest/loaders/_zygote.py, itself a fresh
interpreter started on the first read, one per process) and then behaves as above; the helper has imported what
every child needs and each reader a child has used, so a child starts in milliseconds instead of ~1 s of CPU. When the helper cannot start or dies
the next read starts it once more; after two failures in a row reads go back to fresh interpreters (which Windows,
without fork, always uses).
"""
from __future__ import annotations

import importlib
import logging
import math
import os
import pickle
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, NoReturn, Protocol, TypeVar

from rag_core.core.config import Settings, field_info
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, DocChatError, IngestTimedOut, ReaderOutOfMemory
from rag_core.core.models import Progress
from rag_core.ingest.loaders import _zygote_link as zygote
from rag_core.ingest.loaders._memory import watch_memory
from rag_core.ingest.loaders._zygote_link import child_env

log = logging.getLogger(__name__)

T = TypeVar("T")
_POLL_S = 0.2  # how often the parent looks whether the job was cancelled while the child works
_GRACE_S = 1.0  # the child checks the deadline itself; it is killed if it has not answered this long after it
# Progress lines come on a pipe handed to the child (pass_fds), which Windows' subprocess cannot do: there the file is
# read the same way, without progress. The child is stopped with Popen.kill everywhere (TerminateProcess on Windows).
_PASS_FDS = os.name == "posix"


def child_answer(request: bytes, progress_fd: int | None = None) -> tuple:
    """In the child: run the requested loader, return ("ok", result) or what went wrong. Its progress pipe is the
    one named in the request, else `progress_fd` (a child forked by the reader helper gets it apart)."""
    module, name, args, seconds, seconds_left, file_name, asked_fd = pickle.loads(request)  # ours
    progress_fd = asked_fd if asked_fd is not None else progress_fd
    try:
        func = getattr(importlib.import_module(module), name)
        kwargs: dict[str, Any] = {"deadline": Deadline(seconds, file_name, left=seconds_left)}
        if progress_fd is not None:
            kwargs["progress"] = _pipe_progress(progress_fd)
        return ("ok", func(*args, **kwargs))
    except DocChatError as e:
        cause = e.__cause__
        return ("error", type(e), e.message, dict(vars(e)),
                "".join(traceback.format_exception(cause)) if cause is not None else None)
    except Exception:  # noqa: BLE001 - sent to the parent, which logs it and reports it as unexpected
        return ("crash", traceback.format_exc())


def _pipe_progress(fd: int) -> Progress:
    """In the child: a progress callback that writes one line per report to the parent's pipe."""

    def report(stage: str, done: int, total: int) -> None:
        try:
            os.write(fd, f"{' '.join(stage.split())}\t{int(done)}\t{int(total)}\n".encode())
        except OSError:
            pass  # the parent stopped listening: progress is only for show

    return report


def _relay(fd: int, progress: Progress) -> threading.Thread:
    """In the parent: a thread passing the child's progress lines to `progress` until the child closes the pipe."""

    def run() -> None:
        with os.fdopen(fd, "rb") as pipe:
            for line in pipe:
                parts = line.decode(errors="replace").rstrip("\n").split("\t")
                if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                    try:
                        progress(parts[0], int(parts[1]), int(parts[2]))
                    except Exception:  # a failing display must not stop the read; the deadline does
                        log.debug("progress callback failed", exc_info=True)

    thread = threading.Thread(target=run, name="docchat-reader-progress", daemon=True)
    thread.start()
    return thread


class ChildError(Exception):
    """What a loader's error was translated from, in its child process (the text of its traceback)."""


def _rebuild(cls: type[DocChatError], message: str, state: dict[str, Any], cause: str | None) -> DocChatError:
    """The child's DocChatError again: same class, message and details (their constructors take other arguments),
    with what it was raised from as a ChildError."""
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    vars(err).update(state)
    if cause is not None:
        err.__cause__ = ChildError(cause)
    return err


class ReaderChild(Protocol):
    """A started reader child: a fresh interpreter (_FreshChild) or one forked by the reader helper
    (_zygote_link.ForkedChild)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...  # once finished; None when it could not be known

    def running(self) -> bool: ...

    def kill(self) -> None: ...

    def exchange(self, request: bytes, timeout: float | None) -> tuple[bytes, bytes]: ...

    def finish(self) -> None: ...


class _FreshChild:
    """A reader child that is a fresh interpreter (`python -m rag_core.ingest.loaders._isolated`)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self._proc = proc
        self.progress: int | None = None

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def running(self) -> bool:
        return self._proc.poll() is None

    def kill(self) -> None:
        self._proc.kill()

    def exchange(self, request: bytes, timeout: float | None) -> tuple[bytes, bytes]:
        return self._proc.communicate(request, timeout=timeout)

    def finish(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()


def _start_child(module: str, progress: bool) -> tuple[ReaderChild, int | None, int | None]:
    """A reader child for a function of `module`, the progress pipe's read end here (when asked for and possible), and the pipe's number to
    name in the request (None for a forked child, which gets it apart). OSError when no child could be started."""
    if _PASS_FDS and zygote.available():
        forked = zygote.helper().fork_reader(module, progress)
        if forked is not None:
            return forked, forked.progress, None
    read_fd, write_fd = os.pipe() if progress and _PASS_FDS else (None, None)
    try:
        proc = subprocess.Popen([sys.executable, "-m", __name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=child_env(),
                                pass_fds=() if write_fd is None else (write_fd,))
    except OSError:
        for fd in (read_fd, write_fd):
            if fd is not None:
                os.close(fd)
        raise
    if write_fd is not None:
        os.close(write_fd)  # the child holds the only write end: the relay ends when the child does
    return _FreshChild(proc), read_fd, write_fd


def run_isolated(func: Callable[..., T], args: tuple, deadline: Deadline, reader: str,
                 progress: Progress | None = None) -> T:
    """func(*args, deadline=...) in a child process; IngestTimedOut when it has not finished by the deadline (the
    child is killed), ReaderOutOfMemory when its resident memory passes the ceiling (reader_memory_mb of the Settings
    among `args`, else its default; the child is killed), CorruptFile when the child dies (`reader`, e.g. "PDF",
    names what crashed). With `progress`, func also gets progress=..., whose reports reach `progress` (on a thread of
    this process) as they are made."""
    file_name = deadline.file_name
    deadline.check()
    try:
        child, read_fd, child_fd = _start_child(func.__module__, progress is not None)
    except OSError:
        log.exception("Could not start a %s reader process; reading %s in this one", reader, file_name)
        return func(*args, deadline=deadline, **({} if progress is None else {"progress": progress}))
    left = deadline.left()
    try:
        request = pickle.dumps((func.__module__, func.__qualname__, args, deadline.seconds, left, file_name, child_fd))
    except BaseException:  # arguments that cannot be sent: the child is not needed
        child.finish()
        if read_fd is not None:
            os.close(read_fd)
        raise
    relay = None if read_fd is None or progress is None else _relay(read_fd, progress)
    finished = _kill_on_cancel(child, deadline)
    memory_mb = next((a.ingest.reader_memory_mb for a in args if isinstance(a, Settings)),
                     field_info("reader_memory_mb").default)
    watch = watch_memory(child, memory_mb)
    try:
        out, err = child.exchange(request, None if left == math.inf else left + _GRACE_S)
    except subprocess.TimeoutExpired:
        log.warning("Stopping the %s reader of %s at its deadline (%g s)", reader, file_name, deadline.seconds)
        raise IngestTimedOut(file_name, deadline.seconds) from None
    finally:
        finished.set()
        watch.stop()
        child.finish()
        if relay is not None:
            relay.join(timeout=_GRACE_S)
    log.debug("The %s reader of %s peaked at %d MB", reader, file_name, watch.peak_bytes >> 20)
    if watch.exceeded:
        raise ReaderOutOfMemory(file_name, memory_mb)
    if deadline.cancelled():
        deadline.check()  # IngestCancelled: the child was killed (or answered) as the job was cancelled
    return _answer(out, err, child.returncode, reader, file_name)


def _answer(out: bytes, err: bytes, returncode: int | None, reader: str, file_name: str) -> Any:
    """What the child answered: its result, or its error raised again here; CorruptFile when it answered nothing
    (it died: `returncode` None when its exit code could not be known)."""
    try:
        message = pickle.loads(out) if out and returncode in (0, None) else None  # from our own child process
    except (pickle.UnpicklingError, EOFError, ValueError):
        message = None  # cut short: it was killed while answering
    if message is None:
        said = err.decode(errors="replace").strip()
        log.warning("The %s reader of %s stopped without an answer (exit code %s): %s", reader, file_name,
                    "unknown" if returncode is None else returncode,
                    said.splitlines()[-1][:300] if said else "nothing on stderr")
        log.debug("What the %s reader wrote on stderr:\n%s", reader, said[-4000:])
        raise CorruptFile(file_name, f"the {reader} reader stopped while reading it")
    if message[0] == "ok":
        return message[1]
    if message[0] == "error":
        raise _rebuild(*message[1:])
    return _crashed(reader, file_name, message[1])


def _crashed(reader: str, file_name: str, child_traceback: str) -> NoReturn:
    """A reader that failed in a way it did not foresee (a library's own exception on a malformed file): one
    sentence for the person, one log line for the terminal, the child's traceback only at debug level."""
    last = child_traceback.strip().splitlines()[-1] if child_traceback.strip() else "no detail"
    log.warning("The %s reader failed on %s: %s", reader, file_name, last)
    log.debug("The %s reader's traceback:\n%s", reader, child_traceback)
    raise CorruptFile(file_name, f"the {reader} reader could not make sense of it") from ChildError(child_traceback)


def _kill_on_cancel(proc: ReaderChild, deadline: Deadline) -> threading.Event:
    """A thread killing the child as soon as the job is cancelled (IngestQueue.cancel); set the returned event once
    the child has answered."""
    finished = threading.Event()
    cancel = deadline.cancel_event
    if cancel is None:
        return finished

    def run() -> None:
        while not finished.is_set():
            if cancel.wait(_POLL_S):
                if not finished.is_set() and proc.running():
                    log.info("Stopping the reader of %s: cancelled", deadline.file_name)
                    proc.kill()
                return

    threading.Thread(target=run, name="docchat-reader-cancel", daemon=True).start()
    return finished


def _main() -> None:
    """The child process: one request on stdin, one answer on stdout."""
    answer = child_answer(sys.stdin.buffer.read())
    sys.stdout.buffer.write(pickle.dumps(answer))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    _main()
