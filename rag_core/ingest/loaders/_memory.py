"""A memory ceiling for a reader's child process that holds on Linux, macOS and Windows.

RLIMIT_AS is unreliable on macOS (not enforced for most allocations) and absent on Windows, so the parent watches
the child instead: a thread reads the child's resident memory every `POLL_S` seconds (psutil when it is installed;
else /proc on Linux, `ps` on macOS and other Unixes, GetProcessMemoryInfo on Windows) and kills it as soon as it
passes the ceiling. The watch also keeps the highest value it saw (the child's peak, to within one poll).
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

POLL_S = 0.05  # seconds between two looks at the child's memory (a parser grows ~0.3 GB/s at most here: ~15 MB a poll)
SLOW_POLL_S = 0.25  # the same when each look starts a `ps` process (macOS and other Unixes without psutil)
MB = 1024 * 1024

try:  # a development dependency; the fallbacks below do without it
    import psutil
except ImportError:  # pragma: no cover - installed wherever the tests run
    psutil = None
_QUICK = psutil is not None or sys.platform == "win32" or os.path.exists("/proc/self/statm")  # no `ps` needed
_ERRORS: tuple[type[Exception], ...] = (OSError, ValueError, IndexError, subprocess.SubprocessError,
                                        *((psutil.Error,) if psutil is not None else ()))


def resident_bytes(pid: int) -> int | None:
    """The resident memory of process `pid` in bytes, or None when it cannot be read (it has ended)."""
    try:
        if psutil is not None:
            return int(psutil.Process(pid).memory_info().rss)
        if sys.platform == "win32":
            return _windows_rss(pid)
        if os.path.exists(f"/proc/{pid}/statm"):
            with open(f"/proc/{pid}/statm", "rb") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        out = subprocess.run(["ps", "-o", "rss=", "-p", str(pid)], capture_output=True, timeout=5, check=False)
        return int(out.stdout.strip()) * 1024 if out.stdout.strip() else None
    except _ERRORS as e:  # the child has ended (psutil.NoSuchProcess), or cannot be looked at
        log.debug("memory of process %d not readable: %s", pid, e)
        return None


if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes

    class _Counters(ctypes.Structure):
        _fields_ = [("cb", wintypes.DWORD), ("PageFaultCount", wintypes.DWORD),
                    ("PeakWorkingSetSize", ctypes.c_size_t), ("WorkingSetSize", ctypes.c_size_t),
                    ("QuotaPeakPagedPoolUsage", ctypes.c_size_t), ("QuotaPagedPoolUsage", ctypes.c_size_t),
                    ("QuotaPeakNonPagedPoolUsage", ctypes.c_size_t), ("QuotaNonPagedPoolUsage", ctypes.c_size_t),
                    ("PagefileUsage", ctypes.c_size_t), ("PeakPagefileUsage", ctypes.c_size_t)]

    def _windows_rss(pid: int) -> int | None:
        """The working set of process `pid` (GetProcessMemoryInfo), None when it cannot be opened."""
        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
        if not handle:
            return None
        try:
            counters = _Counters()
            counters.cb = ctypes.sizeof(_Counters)
            if not kernel32.K32GetProcessMemoryInfo(handle, ctypes.byref(counters), counters.cb):
                return None
            return int(counters.WorkingSetSize)
        finally:
            kernel32.CloseHandle(handle)
else:
    def _windows_rss(pid: int) -> int | None:
        return None


@dataclass
class MemoryWatch:
    """Watches one child process until `stop()`: kills it once its resident memory passes `limit_bytes`."""

    proc: subprocess.Popen
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
        while not self._done.is_set() and self.proc.poll() is None:
            rss = resident_bytes(self.proc.pid)
            if rss is not None:
                self.peak_bytes = max(self.peak_bytes, rss)
                if rss > self.limit_bytes:
                    self.exceeded = True
                    log.warning("Stopping reader process %d: %d MB resident, over its %d MB ceiling",
                                self.proc.pid, rss // MB, self.limit_bytes // MB)
                    self.proc.kill()
                    return
            self._done.wait(POLL_S if _QUICK else SLOW_POLL_S)


def watch_memory(proc: subprocess.Popen, limit_mb: int) -> MemoryWatch:
    """Start watching `proc` against a ceiling of `limit_mb` MB (see MemoryWatch)."""
    return MemoryWatch(proc, limit_mb * MB).start()
