"""A memory ceiling for a reader's child process that holds on Linux, macOS and Windows.

RLIMIT_AS is unreliable on macOS (not enforced for most allocations) and absent on Windows, so the parent watches
the child instead: a thread reads the child's resident memory every `POLL_S` seconds (psutil, which reads it the
native way on each system) and kills it as soon as it passes the ceiling. The watch also keeps the highest value it
saw (the child's peak, to within one poll).
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Protocol

import psutil

log = logging.getLogger(__name__)

POLL_S = 0.05  # seconds between two looks at the child's memory (a parser grows ~0.3 GB/s at most here: ~15 MB a poll)
MB = 1024 * 1024


def resident_bytes(pid: int) -> int | None:
    """The resident memory of process `pid` in bytes, or None when it cannot be read (it has ended)."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except (psutil.Error, OSError) as e:  # the child has ended (psutil.NoSuchProcess), or cannot be looked at
        log.debug("memory of process %d not readable: %s", pid, e)
        return None


class ReaderProcess(Protocol):
    """What the watch needs of a reader's child process: a fresh interpreter (subprocess.Popen) or a child forked
    by the reader helper (rag_core.ingest.loaders._zygote)."""

    @property
    def pid(self) -> int: ...

    def running(self) -> bool: ...

    def kill(self) -> None: ...


@dataclass
class MemoryWatch:
    """Watches one child process until `stop()`: kills it once its resident memory passes `limit_bytes`."""

    proc: ReaderProcess
    limit_bytes: int
    exceeded: bool = False
    peak_bytes: int = 0
    _done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> MemoryWatch:
        threading.Thread(target=self._run, name="docchat-reader-memory", daemon=True).start()
        return self

    def stop(self) -> None:
        self._done.set()

    def _run(self) -> None:
        while not self._done.is_set() and self.proc.running():
            rss = resident_bytes(self.proc.pid)
            if rss is not None:
                self.peak_bytes = max(self.peak_bytes, rss)
                if rss > self.limit_bytes:
                    self.exceeded = True
                    log.warning("Stopping reader process %d: %d MB resident, over its %d MB ceiling",
                                self.proc.pid, rss // MB, self.limit_bytes // MB)
                    self.proc.kill()
                    return
            self._done.wait(POLL_S)


def watch_memory(proc: ReaderProcess, limit_mb: int) -> MemoryWatch:
    """Start watching `proc` against a ceiling of `limit_mb` MB (see MemoryWatch)."""
    return MemoryWatch(proc, limit_mb * MB).start()
