"""The reader helper ("zygote", POSIX only): one long-lived process per DocChat process that imports the readers
once and forks a reader child per file, so that a child starts in milliseconds instead of ~1 s of imports.

Started by rag_core/ingest/loaders/_zygote_link.py as `python -m rag_core.ingest.loaders._zygote FD` (FD: its end of
a socket pair; the wire is described there). It imports what every reader child needs (the Settings, _isolated),
says it is ready, then serves one request at a time; after forking a child for a reader of READERS it imports that
reader, once, so that its next children start with it (a process that reads one file pays no more than with a fresh
interpreter; its second file of a kind starts in milliseconds). It stays single-threaded: a fork copies only the
calling thread (numpy's thread pool is kept off with OPENBLAS_NUM_THREADS=1; no reader starts a thread at import).

For each "fork" it forks a child that puts the pipes it was handed on its stdin, stdout and stderr, takes the
parent's current environment and folder, and then behaves exactly like the fresh interpreter of _isolated.py: one
request on stdin, one answer on stdout, progress on its own pipe; it ends with os._exit. Children stay zombies until
the parent asks to reap them (their pid stays theirs while the parent may kill them). The helper exits when the
parent's end of the socket closes.
"""
from __future__ import annotations

import importlib
import logging
import os
import pickle
import signal
import socket
import sys
import threading
import traceback
from typing import NoReturn

from rag_core.ingest.loaders._isolated import child_answer
from rag_core.ingest.loaders._zygote_link import recv_message, send_message

log = logging.getLogger(__name__)

#: The modules of run_isolated's callers (each child's request names its function's module): imported here once
#: a child has used one. None starts a thread at import (the helper checks).
READERS = frozenset({"rag_core.ingest.loaders.pdf", "rag_core.ingest.loaders.image", "rag_core.ingest.loaders.docx",
                     "rag_core.ingest.loaders.slides", "rag_core.ingest.loaders.sheets",
                     "rag_core.ingest.loaders.opendocument", "rag_core.ingest.loaders.rtf",
                     "rag_core.ingest.loaders.ebook", "rag_core.ingest.loaders.web"})


def main(argv: list[str]) -> int:
    """The helper: say it is ready (what every child needs is imported with this module), serve until the parent
    goes."""
    sock = socket.socket(fileno=int(argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the parent; the helper follows on end of file
    send_message(sock, ("ready",))
    serve(sock)
    return 0


def _warm(module: str) -> None:
    """Import reader `module` (if it is one of READERS) for the next children; the helper ends (the parent reads in
    fresh processes) if that started a thread."""
    if module not in READERS or module in sys.modules:
        return
    try:
        importlib.import_module(module)
    except Exception:  # its children import it themselves and report what fails
        log.debug("could not import %s", module, exc_info=True)
    if threading.active_count() > 1:
        raise SystemExit(f"{threading.active_count()} threads after importing {module}: no more forks")


def serve(sock: socket.socket) -> None:
    """Answer the parent's requests until it closes its end."""
    unreaped: set[int] = set()  # children the parent gave up waiting for: reaped here once they end
    while True:
        try:
            message, fds = recv_message(sock)
        except (EOFError, OSError):
            return  # the parent has gone
        for pid in list(unreaped):
            if _reap(pid)[0] == "reaped":
                unreaped.discard(pid)
        if message[0] == "fork":
            reply = _fork(sock, message, fds)
        elif message[0] == "reap":
            reply = _reap(message[1])
            if reply[0] == "running":
                unreaped.add(message[1])
        else:
            for fd in fds:
                os.close(fd)
            reply = ("error", f"unknown request {message[0]!r}")
        try:
            send_message(sock, reply)
        except OSError:
            return
        if message[0] == "fork":
            _warm(message[3])


def _reap(pid: int) -> tuple:
    """Reap child `pid` if it has ended: ("reaped", its exit code, negative for the signal that ended it; None when it
    is not a child of this helper: the one before it forked it), else ("running",)."""
    if sys.platform == "win32":
        raise OSError("no fork on Windows")
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return ("reaped", None)
    return ("reaped", os.waitstatus_to_exitcode(status)) if done else ("running",)


def _fork(sock: socket.socket, message: tuple, fds: list[int]) -> tuple:
    """Fork one reader child on the pipes `fds`; ("forked", pid) or ("error", why)."""
    if sys.platform == "win32":
        raise OSError("no fork on Windows")
    _, env, cwd, _module = message
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = os.fork()
    except OSError as e:
        for fd in fds:
            os.close(fd)
        return ("error", f"fork failed: {e}")
    if pid == 0:
        _be_the_reader(sock, fds, env, cwd)
    for fd in fds:
        os.close(fd)
    return ("forked", pid)


def _be_the_reader(sock: socket.socket, fds: list[int], env: dict[str, str], cwd: str) -> NoReturn:
    """In the forked child: become today's reader child (stdin, stdout, stderr from `fds`), answer, end."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a fresh interpreter
        sock.close()
        for target, fd in enumerate(fds[:3]):  # all above 2: the helper's own 0-2 are open (/dev/null)
            os.dup2(fd, target)
            os.close(fd)
        progress = fds[3] if len(fds) > 3 else None
        os.environ.clear()
        os.environ.update(env)
        try:
            os.chdir(cwd)
        except OSError:
            pass  # the parent's folder has gone: a fresh interpreter would not have started there either
        with open(0, "rb", closefd=False) as stdin:
            request = stdin.read()
        answer = pickle.dumps(child_answer(request, progress))
        with open(1, "wb", closefd=False) as stdout:
            stdout.write(answer)
        code = 0
    except BaseException:  # noqa: BLE001 - the parent sees no answer and reports the file; the detail on stderr
        traceback.print_exc()
    finally:
        try:
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    from rag_core.ingest.loaders._zygote import main as imported_main  # by its importable name, not __main__

    os._exit(imported_main(sys.argv))  # without tearing down ~900 modules (0.4 s): the parent may be waiting
