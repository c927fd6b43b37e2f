"""A scriptable Ollama-compatible HTTP server for tests: the real wire protocol on 127.0.0.1, no model.

It speaks what the official `ollama` client and langchain-ollama's ChatOllama use:
  POST /api/chat   streaming NDJSON (chunked), one {"message": {"role", "content"}, "done": false} line per
                   delta, then a final line with done=true, done_reason and the duration/count counters;
                   {"stream": false} gets one JSON object.  Unknown model -> 404 {"error": "model ... not found"}.
  GET  /api/tags   installed models.        POST /api/show   model details (404 when missing).
  POST /api/pull   NDJSON progress {status, digest, total, completed} ending in {"status": "success"}.
  POST /api/embed  {"embeddings": [[...]]} for `embed_models` (issue 46): the wire is Ollama's, the vectors are
                   faked (hashed words, `fake_vector`), not a model's.
  GET  /api/version, GET /  (liveness).
Each test scripts the chat replies (fixed text, citations, delays, a dropped connection, an error line, an
HTTP error) and reads back every request received (`requests`, `chat_requests`).

    with OllamaServer(models=["llama3.2:3b"]) as srv:
        srv.script(Reply("Paris is the capital [1]."))
        settings = Settings(ollama_host=srv.url, ...)
"""
from __future__ import annotations

import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Self

from tests.protocol_server import JSONHandler, ThreadedServer, now_iso

_TOKEN_RE = re.compile(r"\S+\s*|\s+")


@dataclass
class Reply:
    """How the server answers one /api/chat request."""

    text: str = "This is the scripted answer [1]."
    chunks: list[str] | None = None  # explicit deltas; default: the text split after each word
    delay_first: float = 0.0  # seconds before anything (even headers) is sent: a slow model load
    delay_between: float = 0.0  # seconds between deltas
    disconnect_after: int | None = None  # drop the connection after this many deltas (no final line)
    error: str | None = None  # an {"error": ...} line after the deltas (Ollama's mid-stream failure)
    status: int = 200  # non-200: answer {"error": error_body} with this HTTP status instead
    error_body: str = "internal error"
    done_reason: str = "stop"
    thinking: str | None = None  # emitted first as <think>…</think> content, like a reasoning model

    def deltas(self) -> list[str]:
        """The content pieces streamed for this reply."""
        parts = list(self.chunks) if self.chunks is not None else _TOKEN_RE.findall(self.text)
        if self.thinking is not None:
            parts = ["<think>", self.thinking, "</think>\n\n"] + parts
        return parts


Responder = Callable[[dict], Reply]


@dataclass
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class PullScript:
    """How /api/pull behaves."""

    layers: int = 2
    total: int = 4_000_000
    steps: int = 4
    error: str | None = None  # e.g. "pull model manifest: file does not exist"
    delay_between: float = 0.0


def _model_entry(name: str) -> dict:
    digest = f"{abs(hash(name)) % (16 ** 12):012x}" * 5 + "abcd"
    return {"name": name, "model": name, "modified_at": "2026-11-01T10:00:00Z", "size": 2_019_393_189,
            "digest": digest[:64],
            "details": {"parent_model": "", "format": "gguf", "family": "llama", "families": ["llama"],
                        "parameter_size": "3.2B", "quantization_level": "Q4_K_M"}}


def fake_vector(text: str, dim: int) -> list[float]:
    """A stand-in embedding (not a model): each lower-cased word adds 1 to a bucket chosen by its hash, plus a small
    constant so no vector is zero."""
    import hashlib

    out = [0.01] * dim
    for word in re.findall(r"\w+", text.lower()):
        out[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dim] += 1.0
    return out


class ScriptedServer(ThreadedServer):
    """What the scripted model servers share (this one and tests/openai_server.py): installed models, queued replies
    for `chat_path` (then `default`), every request kept, an optional bearer token, sleeps that end on stop."""

    chat_path = ""

    def __init__(self, models: Iterable[str], default: Reply | Responder | None = None,
                 token: str | None = None) -> None:
        super().__init__()
        self.models: list[str] = list(models)
        self.default: Reply | Responder = default or Reply()
        self.token = token  # when set, requests need "Authorization: Bearer <token>"
        self.requests: list[Recorded] = []
        self.cut_streams = 0  # chat streams the client closed before the reply was finished
        self._queue: deque[Reply | Responder] = deque()
        self._stopping = threading.Event()
        self._lock = threading.Lock()

    # -- scripting -----------------------------------------------------------
    def script(self, *replies: Reply | Responder | str) -> Self:
        """Queue replies for the next chat requests (then `default` answers)."""
        for r in replies:
            self._queue.append(Reply(r) if isinstance(r, str) else r)
        return self

    def _next_reply(self, body: dict) -> Reply:
        with self._lock:
            item = self._queue.popleft() if self._queue else self.default
        return item(body) if callable(item) and not isinstance(item, Reply) else item

    @property
    def chat_requests(self) -> list[dict]:
        """Bodies of the chat requests, oldest first."""
        return [r.body for r in self.requests if r.path == self.chat_path]

    # -- lifecycle -----------------------------------------------------------
    def stop(self) -> None:
        """Wake the handlers' sleeps, then stop serving."""
        self._stopping.set()
        super().stop()

    def sleep(self, seconds: float) -> None:
        """Sleep that ends early when the server stops."""
        if seconds > 0:
            self._stopping.wait(seconds)


class ScriptedHandler(JSONHandler):
    """Request plumbing the scripted model servers share: record each request, check the bearer token."""

    owner: ScriptedServer
    unauthorised_body: Any = {"error": "unauthorized"}

    def _record(self, body: Any) -> None:
        self.owner.requests.append(Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()},
                                            body))

    def _authorised(self) -> bool:
        token = self.owner.token
        if token and self.headers.get("Authorization") != f"Bearer {token}":
            self._send_json(401, self.unauthorised_body)
            return False
        return True


class OllamaServer(ScriptedServer):
    """Threaded Ollama look-alike on 127.0.0.1:<free port>; use as a context manager."""

    thread_name = "ollama-test-server"
    chat_path = "/api/chat"

    def __init__(self, models: Iterable[str] = ("llama3.2:3b",), default: Reply | Responder | None = None,
                 token: str | None = None) -> None:
        super().__init__(models, default, token)
        self.pull = PullScript()
        self.context_length = 131072  # what /api/show says of every model (model_info "llama.context_length")
        # /api/embed (issue 46): embedding models and their vector sizes; vectors are faked (hashed words, not a
        # model) but the wire is Ollama's: {"model", "input": [...]} -> {"model", "embeddings": [[...], ...]}
        self.embed_models: dict[str, int] = {}
        self.embed_delay = 0.0  # seconds per /api/embed request (a slow model)
        self.embed_dim_override: int | None = None  # answer vectors of this size instead (a changed model)


class _Handler(ScriptedHandler):
    owner: OllamaServer

    # -- routes --------------------------------------------------------------
    def do_GET(self) -> None:  # http.server naming
        self._record(None)
        if self.path in ("/", ""):
            self._send_text(200, "Ollama is running")
        elif not self._authorised():
            return
        elif self.path == "/api/tags":
            names = [*self.owner.models, *(m for m in self.owner.embed_models if m not in self.owner.models)]
            self._send_json(200, {"models": [_model_entry(m) for m in names]})
        elif self.path == "/api/version":
            self._send_json(200, {"version": "0.12.6"})
        else:
            self._send_json(404, {"error": "404 page not found"})

    def do_POST(self) -> None:
        body = self._read_body()
        self._record(body)
        if not self._authorised():
            return
        body = body if isinstance(body, dict) else {}
        route = {"/api/chat": self._chat, "/api/show": self._show, "/api/pull": self._pull,
                 "/api/embed": self._embed}.get(self.path)
        if route is None:
            self._send_json(404, {"error": "404 page not found"})
        else:
            route(body)

    def _show(self, body: dict) -> None:
        name = body.get("model") or body.get("name") or ""
        if name in self.owner.embed_models:
            self._send_json(200, {"details": _model_entry(name)["details"], "capabilities": ["embedding"],
                                  "model_info": {"general.architecture": "bert"}})
            return
        if name not in self.owner.models:
            self._send_json(404, {"error": f"model '{name}' not found"})
            return
        self._send_json(200, {
            "modelfile": f"FROM {name}\n", "parameters": "stop \"<|eot_id|>\"", "template": "{{ .Prompt }}",
            "details": _model_entry(name)["details"],
            "model_info": {"general.architecture": "llama", "llama.context_length": self.owner.context_length},
            "capabilities": ["completion", "tools"], "modified_at": "2026-11-01T10:00:00Z"})

    def _embed(self, body: dict) -> None:
        """Ollama's /api/embed: one vector per input; the vectors are a fake (each word hashed into one of `dim`
        buckets, so texts sharing words are near), the request and answer shapes are the real ones."""
        owner = self.owner
        model = body.get("model", "")
        if model not in owner.embed_models:
            self._send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
            return
        owner.sleep(owner.embed_delay)
        texts = body.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        dim = owner.embed_dim_override or owner.embed_models[model]
        self._send_json(200, {"model": model, "embeddings": [fake_vector(t, dim) for t in texts],
                              "total_duration": 1000, "load_duration": 10, "prompt_eval_count": len(texts)})

    def _chat(self, body: dict) -> None:
        owner = self.owner
        model = body.get("model", "")
        if model not in owner.models:
            self._send_json(404, {"error": f'model "{model}" not found, try pulling it first'})
            return
        reply = owner._next_reply(body)
        owner.sleep(reply.delay_first)
        if reply.status != 200:
            self._send_json(reply.status, {"error": reply.error_body})
            return
        started = time.perf_counter_ns()
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body.get("messages", []))
        deltas = reply.deltas()
        if body.get("stream") is False:
            self._send_json(200, self._final(model, "".join(deltas), reply, prompt_chars, len(deltas), started))
            return
        self._start_stream()
        try:
            for i, delta in enumerate(deltas):
                if reply.disconnect_after is not None and i >= reply.disconnect_after:
                    self.close_connection = True  # no terminating chunk: the client sees a cut body
                    return
                if i:
                    owner.sleep(reply.delay_between)
                self._line({"model": model, "created_at": now_iso(),
                            "message": {"role": "assistant", "content": delta}, "done": False})
            if reply.disconnect_after is not None:
                self.close_connection = True
                return
            if reply.error:
                self._line({"error": reply.error})
            else:
                self._line(self._final(model, "", reply, prompt_chars, len(deltas), started))
            self._end_stream()
        except (BrokenPipeError, ConnectionResetError):  # the client went away: fine
            owner.cut_streams += 1
            self.close_connection = True

    @staticmethod
    def _final(model: str, content: str, reply: Reply, prompt_chars: int, count: int, started: int) -> dict:
        took = max(1, time.perf_counter_ns() - started)
        return {"model": model, "created_at": now_iso(), "message": {"role": "assistant", "content": content},
                "done": True, "done_reason": reply.done_reason, "total_duration": took, "load_duration": 1000,
                "prompt_eval_count": max(1, prompt_chars // 4), "prompt_eval_duration": took // 2,
                "eval_count": count, "eval_duration": took // 2}

    def _pull(self, body: dict) -> None:
        owner, script = self.owner, self.owner.pull
        name = body.get("model") or body.get("name") or ""
        if body.get("stream") is False:
            if script.error:
                self._send_json(500, {"error": script.error})
            else:
                owner.models.append(name) if name not in owner.models else None
                self._send_json(200, {"status": "success"})
            return
        self._start_stream()
        self._line({"status": "pulling manifest"})
        if script.error:
            self._line({"error": script.error})
            self._end_stream()
            return
        for layer in range(script.layers):
            digest = f"sha256:{layer:064x}"
            for step in range(script.steps + 1):
                owner.sleep(script.delay_between)
                self._line({"status": f"pulling {digest[7:19]}", "digest": digest, "total": script.total,
                            "completed": script.total * step // script.steps})
        for status in ("verifying sha256 digest", "writing manifest", "success"):
            self._line({"status": status})
        if name not in owner.models:
            owner.models.append(name)
        self._end_stream()


OllamaServer.handler = _Handler  # set here: the handler class is defined after the server

__all__ = ["OllamaServer", "PullScript", "Recorded", "Reply", "ScriptedHandler", "ScriptedServer", "fake_vector"]
