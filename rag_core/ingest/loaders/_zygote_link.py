"""This process's side of the reader helper (rag_core/ingest/loaders/_zygote.py, POSIX only): starting it, asking it
for a reader child, and the handle run_isolated keeps on that child.

The helper is started on the first read as `python -m rag_core.ingest.loaders._zygote FD` (a fresh interpreter, not
multiprocessing, for the reason in _isolated.py's docstring), with one end of a socket pair as FD. One helper per
process (keyed by os.getpid(): a process forked from this one starts its own). It ends when this process's end of the
socket closes: at exit (atexit), or when this process dies, however (the kernel closes the socket then).

Wire: each message is a 4-byte length and a pickle (between our own processes), with file descriptors attached to
its first bytes (SCM_RIGHTS). To the helper: ("fork", env, cwd, module of the reader) with the child's stdin, stdout
and stderr pipe ends (and its progress pipe's), answered ("forked", pid) or ("error", why); ("reap", pid), answered ("reaped", exit code)
or ("running",) (the helper reaps it later by itself). From the helper first: ("ready",) once it has started. One request and its answer at a time (a lock): several threads read files at once.

A child stays the helper's zombie until this process asks to reap it, so its pid cannot be reused while this
process may still kill it; kills go through psutil, which also refuses a pid reused after the helper died.
"""
from __future__ import annotations

import atexit
import logging
import os
import pickle
import selectors
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

import psutil

log = logging.getLogger(__name__)

_HOME = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # the folder holding rag_core
_LEN = struct.Struct("!I")
MAX_FDS = 4  # stdin, stdout, stderr and the progress pipe of one child
STARTUP_S = 60.0  # how long the helper may take to start (~0.5 s alone, more on a loaded machine)
REPLY_S = 30.0  # how long it may take to fork or reap (milliseconds normally): past it, it is taken for dead
_CHUNK = 1 << 20  # bytes written to a child's stdin at a time
_EXIT_POLL_S = 0.002  # how often a child that closed its output is looked at until it has ended
_REAP_S = 5.0  # how long a killed child is waited for before the helper is left to reap it by itself
_CLOSE_S = 2.0  # how long the helper may take to end once its socket is closed, before it is killed
_MAX_FAILURES = 2  # consecutive helper starts or deaths before reads go back to fresh interpreters for good


def child_env() -> dict[str, str]:
    """This process's environment, with the folder holding rag_core first on the child's import path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_HOME, env.get("PYTHONPATH", "")) if p)
    return env


def available() -> bool:
    """Whether reader children can come from the helper here (fork and descriptor passing: Linux and macOS)."""
    return os.name == "posix" and hasattr(os, "fork") and hasattr(socket, "send_fds")


def send_message(sock: socket.socket, message: tuple, fds: Sequence[int] = ()) -> None:
    """Send one message (and `fds`, duplicated into the receiver) on `sock`."""
    if sys.platform == "win32":
        raise OSError("no descriptor passing on Windows")
    data = pickle.dumps(message)
    frame = _LEN.pack(len(data)) + data
    sent = socket.send_fds(sock, [frame], list(fds)) if fds else sock.send(frame)
    sock.sendall(frame[sent:])


def recv_message(sock: socket.socket) -> tuple[tuple, list[int]]:
    """One message from `sock` and the descriptors that came with it; EOFError when the other end has closed."""
    if sys.platform == "win32":
        raise OSError("no descriptor passing on Windows")
    head, fds, flags, _ = socket.recv_fds(sock, _LEN.size, MAX_FDS)
    if not head or flags & socket.MSG_CTRUNC:
        for fd in fds:
            os.close(fd)
        raise EOFError("the other end closed") if not head else OSError("descriptors were dropped")
    head += _recv_exactly(sock, _LEN.size - len(head))
    return pickle.loads(_recv_exactly(sock, _LEN.unpack(head)[0])), fds  # from our own process


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    parts: list[bytes] = []
    while size > 0:
        part = sock.recv(min(size, 1 << 16))
        if not part:
            raise EOFError("the other end closed")
        parts.append(part)
        size -= len(part)
    return b"".join(parts)


class ForkedChild:
    """A reader child forked by the helper, seen from this process: its pid and the ends of its pipes here."""

    def __init__(self, pid: int, pipes: tuple[int, int, int], progress: int | None, helper: Zygote) -> None:
        self._pid = pid
        self._stdin: int | None = pipes[0]
        self._out, self._err = pipes[1], pipes[2]
        self.progress = progress  # the read end of its progress pipe (the caller relays it), or None
        self._helper = helper
        self.returncode: int | None = None  # its exit code once reaped; None also when it could not be known
        self._ended = False
        try:
            self._ps: psutil.Process | None = psutil.Process(pid)
        except psutil.Error:  # already gone (the helper died and its children were reaped elsewhere)
            self._ps = None

    @property
    def pid(self) -> int:
        return self._pid

    def running(self) -> bool:
        """Whether the child still runs (a zombie, not yet reaped, has ended)."""
        if self._ended or self._ps is None:
            return False
        try:
            alive = self._ps.is_running() and self._ps.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            alive = False
        self._ended = not alive
        return alive

    def kill(self) -> None:
        if self._ps is not None and self.running():
            try:
                self._ps.kill()  # SIGKILL; refused if the pid was reused meanwhile
            except psutil.Error:
                pass  # ended meanwhile

    def exchange(self, request: bytes, timeout: float | None) -> tuple[bytes, bytes]:
        """Like Popen.communicate: write `request` to its stdin, read its stdout and stderr until it ends;
        subprocess.TimeoutExpired after `timeout` seconds (it is left running: see finish)."""
        end = None if timeout is None else time.monotonic() + timeout
        got: dict[int, list[bytes]] = {self._out: [], self._err: []}
        view, sent = memoryview(request), 0
        with selectors.DefaultSelector() as sel:
            for fd in got:
                sel.register(fd, selectors.EVENT_READ)
            if self._stdin is not None and sys.platform != "win32":  # (never used on Windows)
                os.set_blocking(self._stdin, False)
                sel.register(self._stdin, selectors.EVENT_WRITE)
            while sel.get_map():
                for key, _ in sel.select(self._left(end, timeout)):
                    if key.fd == self._stdin:
                        sent = self._write(view, sent)
                        if sent >= len(view):
                            sel.unregister(key.fd)
                            self._close_stdin()
                    elif chunk := os.read(key.fd, 1 << 16):
                        got[key.fd].append(chunk)
                    else:
                        sel.unregister(key.fd)
        while self.running():  # its output is closed: it is ending
            self._left(end, timeout)
            time.sleep(_EXIT_POLL_S)
        return b"".join(got[self._out]), b"".join(got[self._err])

    def _left(self, end: float | None, timeout: float | None) -> float | None:
        if end is None:
            return None
        left = end - time.monotonic()
        if left <= 0:
            raise subprocess.TimeoutExpired(f"reader child {self._pid}", timeout or 0.0)
        return left

    def _write(self, view: memoryview, sent: int) -> int:
        """Write the next part of the request; how much is written so far (all of it once the child stopped
        reading)."""
        assert self._stdin is not None
        try:
            return sent + os.write(self._stdin, view[sent:sent + _CHUNK])
        except BlockingIOError:
            return sent
        except BrokenPipeError:  # it ended without reading it all: its output says why
            return len(view)

    def _close_stdin(self) -> None:
        if self._stdin is not None:
            os.close(self._stdin)
            self._stdin = None

    def finish(self) -> None:
        """Kill the child if it still runs, close its pipes here, and reap it (its exit code in returncode)."""
        self._close_stdin()
        self.kill()
        for fd in (self._out, self._err):
            os.close(fd)
        end = time.monotonic() + _REAP_S
        while self.running() and time.monotonic() < end:
            time.sleep(_EXIT_POLL_S)
        self.returncode = self._helper.reap(self._pid)


class Zygote:
    """This process's reader helper: started on first use; after it fails to start or dies, started once more, and
    after two failures in a row given up (reads then use fresh interpreters)."""

    def __init__(self) -> None:
        self.owner = os.getpid()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._failures = 0

    @property
    def pid(self) -> int | None:
        """The helper's pid while it runs."""
        return None if self._proc is None else self._proc.pid

    def fork_reader(self, module: str, progress: bool) -> ForkedChild | None:
        """A new reader child for a function of `module` (with a progress pipe when asked), or None when the helper
        cannot give one."""
        with self._lock:
            for _ in range(_MAX_FAILURES):
                if self._sock is None and not self._start():
                    return None
                child = self._fork(module, progress)
                if child is not None:
                    self._failures = 0
                    return child
            return None

    def _fork(self, module: str, progress: bool) -> ForkedChild | None:
        pipes = [os.pipe() for _ in range(4 if progress else 3)]
        theirs = [pipes[0][0]] + [w for _, w in pipes[1:]]  # the child reads stdin, writes the others
        ours = [pipes[0][1]] + [r for r, _ in pipes[1:]]
        try:
            reply = self._ask(("fork", child_env(), os.getcwd(), module), theirs)
        finally:
            for fd in theirs:
                os.close(fd)
        if reply is None or reply[0] != "forked":
            if reply is not None:
                log.warning("The reader helper could not start a reader: %s", reply[-1])
            for fd in ours:
                os.close(fd)
            return None
        return ForkedChild(reply[1], (ours[0], ours[1], ours[2]), ours[3] if progress else None, self)

    def reap(self, pid: int) -> int | None:
        """The exit code of ended child `pid` (the helper forgets it), or None when it cannot be known."""
        with self._lock:
            reply = self._ask(("reap", pid))
        return reply[1] if reply is not None and reply[0] == "reaped" else None

    def _ask(self, message: tuple, fds: Sequence[int] = ()) -> tuple | None:
        """Send one request and read its answer; None (and the helper stopped) when it does not answer."""
        if self._sock is None:
            return None
        try:
            send_message(self._sock, message, fds)
            reply, extra = recv_message(self._sock)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            log.warning("The reader helper stopped answering (%s)", str(e) or type(e).__name__)
            self._failures += 1
            self._stop()
            return None
        for fd in extra:
            os.close(fd)
        return reply

    def _start(self) -> bool:
        """Start the helper and wait until it is ready; False (and logged) when it cannot."""
        if self._failures >= _MAX_FAILURES:
            return False
        ours, theirs = socket.socketpair()  # AF_UNIX, SOCK_STREAM
        self._sock = ours
        env = {**child_env(), "OPENBLAS_NUM_THREADS": "1"}  # numpy's pool would be a thread: the helper forks
        try:
            with theirs:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "rag_core.ingest.loaders._zygote", str(theirs.fileno())],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                    pass_fds=(theirs.fileno(),))
            ours.settimeout(STARTUP_S)
            reply, _ = recv_message(ours)
            ours.settimeout(REPLY_S)
        except (OSError, EOFError, pickle.UnpicklingError) as e:
            reply = ("failed", str(e) or type(e).__name__)
        if reply[0] != "ready":
            log.warning("The reader helper could not start (%s); reading in fresh processes", reply[-1])
            self._failures += 1
            self._stop()
            return False
        log.debug("Reader helper %d started", self.pid)
        return True

    def _stop(self, wait_s: float = 0.0) -> None:
        """Close the socket (the helper exits on its end of file), kill the helper if it has not ended within
        `wait_s` seconds (one that failed is not waited for), and reap it."""
        sock, proc, self._sock, self._proc = self._sock, self._proc, None, None
        if sock is not None:
            sock.close()
        if proc is not None:
            try:
                proc.wait(timeout=wait_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def close(self) -> None:
        """Stop the helper (this process's exit does it too)."""
        with self._lock:
            self._stop(wait_s=_CLOSE_S)

    def disown(self) -> None:
        """In a process forked from the owner: close this copy of the socket without talking to the helper."""
        if self._sock is not None:
            self._sock.close()


_helper: Zygote | None = None
_helper_lock = threading.Lock()


def helper() -> Zygote:
    """This process's reader helper (a forked copy of a process gets its own)."""
    global _helper
    with _helper_lock:
        if _helper is None or _helper.owner != os.getpid():
            if _helper is not None:
                _helper.disown()
            else:
                atexit.register(_close_at_exit)
                if sys.platform != "win32":
                    os.register_at_fork(after_in_child=_forget_in_child)
            _helper = Zygote()
        return _helper


def _close_at_exit() -> None:
    if _helper is not None and _helper.owner == os.getpid():
        _helper.close()


def _forget_in_child() -> None:
    """In a process forked from this one: drop the copy of the helper's socket, so that the helper still ends when
    this process does (the copy starts its own helper if it reads files)."""
    global _helper, _helper_lock
    if _helper is not None:
        _helper.disown()
        _helper = None
    _helper_lock = threading.Lock()  # another thread may have held it at the fork
