"""Run a format loader in a child process that is killed at the file's deadline.

PDF and Word files are parsed by native code (MuPDF, lxml) in steps DocChat cannot interrupt: one crafted PDF page
took 10 s for a 261 KB file (and holds the GIL, freezing every other session meanwhile). In a child process such a
step is stopped at the deadline whatever it is doing, its memory goes away with it, and two files are parsed at
the same time without sharing MuPDF's global state. The children fork from a `forkserver` that has the loaders
imported already (one ~1 s start per server process, then ~20 ms per file; under `streamlit run` each child also
imports the `streamlit` launcher script, as multiprocessing does with a main script: ~0.5 s). Where there is no
forkserver (Windows) the loader runs in this process, checking the deadline between pages.
"""
from __future__ import annotations

import logging
import math
import multiprocessing
import multiprocessing.connection
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from rag_core.budget import Deadline
from rag_core.errors import CorruptFile, DocChatError, IngestTimedOut

log = logging.getLogger(__name__)

T = TypeVar("T")
_GRACE_S = 1.0  # the child checks the deadline itself; it is killed if it has not answered this long after it
_PRELOAD = ["rag_core.loaders.pdf", "rag_core.loaders.docx"]


def _context() -> Any:
    """The forkserver start method with the loaders preloaded, or None where there is none."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return None
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


_CTX = _context()


def _child(conn: multiprocessing.connection.Connection, func: Callable[..., Any], args: tuple, seconds: float,
           seconds_left: float, file_name: str) -> None:
    """Body of the child: run the loader, send back ("ok", result) or what went wrong."""
    try:
        result = func(*args, deadline=Deadline(seconds, file_name, left=seconds_left))
        conn.send(("ok", result))
    except DocChatError as e:
        cause = e.__cause__
        conn.send(("error", type(e), e.message, dict(vars(e)),
                   "".join(traceback.format_exception(cause)) if cause is not None else None))
    except Exception:  # noqa: BLE001 - sent to the parent, which logs it and reports it as unexpected
        conn.send(("crash", traceback.format_exc()))
    finally:
        conn.close()


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


def run_isolated(func: Callable[..., T], args: tuple, deadline: Deadline, reader: str) -> T:
    """func(*args, deadline=...) in a child process; IngestTimedOut when it has not finished by the deadline (the
    child is killed), CorruptFile when the child dies (`reader`, e.g. "PDF", names what crashed)."""
    file_name = deadline.file_name
    if _CTX is None:
        return func(*args, deadline=deadline)
    deadline.check()
    receiver, sender = _CTX.Pipe(duplex=False)
    left = deadline.left()
    child = _CTX.Process(target=_child, args=(sender, func, args, deadline.seconds, left, file_name), daemon=True,
                         name=f"docchat-{reader.lower()}-reader")
    try:
        child.start()
    except OSError:
        log.exception("Could not start a %s reader process; reading %s in this one", reader, file_name)
        receiver.close()
        sender.close()
        return func(*args, deadline=deadline)
    sender.close()
    answered = False
    try:
        if not receiver.poll(None if left == math.inf else left + _GRACE_S):
            log.warning("Stopping the %s reader of %s at its deadline (%g s)", reader, file_name, deadline.seconds)
            raise IngestTimedOut(file_name, deadline.seconds)
        try:
            message = receiver.recv()
        except EOFError:
            log.warning("The %s reader of %s stopped without an answer (exit code %s)", reader, file_name,
                        child.exitcode)
            raise CorruptFile(file_name, f"the {reader} reader stopped while reading it") from None
        answered = True
    finally:
        receiver.close()
        child.join(_GRACE_S if answered else 0)
        if child.is_alive():
            child.kill()
            child.join()
        child.close()
    if message[0] == "ok":
        return message[1]
    if message[0] == "error":
        raise _rebuild(*message[1:])
    raise RuntimeError(f"The {reader} reader failed in its child process:\n{message[1]}")
