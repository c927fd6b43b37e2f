"""The model server's real context window, learnt from the server where it says so, so that every request DocChat
sends (a question with its sources, the follow-up rewrite, a summary's map and combine calls) fits it.

DocChat's own ceiling is DOCCHAT_NUM_CTX_MAX (8,192 by default). A server may hold less per request:
  llama.cpp   GET /props: default_generation_settings.n_ctx is the window of one slot (`-c` divided by `-np`)
  LM Studio   GET /api/v0/models: the model's loaded_context_length (else max_context_length)
  vLLM        GET /v1/models: the model's max_model_len
  Ollama      POST /api/show: model_info["<arch>.context_length"]; DocChat sets num_ctx itself, up to its ceiling
A server that says nothing keeps DocChat's ceiling; when it then refuses a request for its size, the window it names
in the refusal (llama.cpp's n_ctx) is remembered instead (`remember`). What was learnt is kept per server and model
for WINDOW_TTL_S, so a switched model or a restarted server is asked again.
"""
from __future__ import annotations

import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx

from rag_core.core.config import Provider, Settings
from rag_core.llm.server_status import CONNECT_TIMEOUT_S, STATUS_TIMEOUT_S

log = logging.getLogger(__name__)

WINDOW_TTL_S = 60.0  # how long a learnt window is trusted before the server is asked again
MIN_WINDOW = 512  # below this a reported size is not believed (a broken answer); DocChat keeps its own ceiling
OPENAI, OLLAMA = Provider.OPENAI, Provider.OLLAMA


@dataclass(frozen=True)
class Window:
    """What DocChat knows of one server's window: tokens per request (None: the server does not say), and where
    that was read."""

    tokens: int | None
    source: str = ""


_cache: dict[tuple[str, str, str], tuple[float, Window]] = {}
_lock = threading.Lock()


def _key(settings: Settings, model: str) -> tuple[str, str, str]:
    return settings.chat_provider, settings.chat_host.rstrip("/"), model


def learn(settings: Settings, model: str) -> Window:
    """The window of the configured server for `model` (asked at most once per WINDOW_TTL_S; never raises)."""
    key, now = _key(settings, model), time.monotonic()
    with _lock:
        cached = _cache.get(key)
    if cached is not None and now - cached[0] <= WINDOW_TTL_S:
        return cached[1]
    try:
        window = _ask_ollama(settings, model) if settings.chat_provider == OLLAMA else _ask_openai(settings, model)
    except (httpx.HTTPError, ValueError, TypeError, KeyError, AttributeError) as e:  # not reachable, not its JSON
        log.debug("Context window of %s: not learnt (%s: %s)", settings.chat_host, type(e).__name__, e)
        window = Window(None)
    if window.tokens is not None:
        log.info("Context window of %s (%s): %d tokens per request (%s)", settings.chat_host, model, window.tokens,
                 window.source)
    with _lock:
        _cache[key] = (now, window)
    return window


def remember(settings: Settings, model: str, tokens: int, source: str = "the server's refusal") -> None:
    """Keep a window the server named itself (in a refusal) for the next requests."""
    if tokens >= MIN_WINDOW:
        with _lock:
            _cache[_key(settings, model)] = (time.monotonic(), Window(tokens, source))


def forget() -> None:
    """Drop every learnt window (tests; a changed server)."""
    with _lock:
        _cache.clear()


def fit(settings: Settings, window: int | None) -> Settings:
    """`settings` with DocChat's ceiling lowered to `window` when the server holds less: the reply's room (at most
    half the window) and the history (at most a quarter) shrink with it. Unchanged when the window is unknown."""
    if window is None or window >= settings.answer.max_context_tokens:
        return settings
    return settings.model_copy(update={"max_context_tokens": window,
                                       "answer_tokens": min(settings.answer.answer_tokens, window // 2),
                                       "history_tokens": min(settings.answer.history_tokens, window // 4)})


_SIZE_RE = re.compile(r"exceeds? the available context|context[_ ]length[_ ]exceeded|exceed_context_size|"
                      r"maximum context length|greater than the context length|context window", re.IGNORECASE)
_NAMED_RE = re.compile(r"(?:maximum context length is|available context size \()\s*(\d+)", re.IGNORECASE)


def size_refusal(body: Any, message: str) -> tuple[bool, int | None]:
    """Whether a server's error (its JSON `body`, its `message`) refuses a request for its size, and the window it
    names (llama.cpp's n_ctx, "maximum context length is N" of vLLM and OpenAI) when it names one."""
    fields = body if isinstance(body, dict) else {}
    said = " ".join(str(fields.get(k, "")) for k in ("type", "code")) + " " + message
    if not _SIZE_RE.search(said):
        return False, None
    named = _NAMED_RE.search(message)
    return True, _size(fields.get("n_ctx")) or (_size(int(named.group(1))) if named else None)


def _get(client: httpx.Client, url: str, settings: Settings) -> Any:
    """The JSON of a GET, or None when the server has no such page."""
    headers = {"Authorization": f"Bearer {settings.llm.openai_api_key}"} if settings.llm.openai_api_key else {}
    response = client.get(url, headers=headers)
    if response.status_code >= 400:
        return None
    return response.json()


def _size(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= MIN_WINDOW else None


def _ask_openai(settings: Settings, model: str) -> Window:
    """llama.cpp's /props, vLLM's /v1/models, LM Studio's /api/v0/models, in that order."""
    host = settings.chat_host.rstrip("/")
    root = re.sub(r"/v1$", "", host)
    with httpx.Client(timeout=httpx.Timeout(STATUS_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)) as client:
        props = _get(client, f"{root}/props", settings)
        if isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict):
            n_ctx = _size(props["default_generation_settings"].get("n_ctx"))
            if n_ctx:
                return Window(n_ctx, "llama.cpp /props")
        for url, fields, source in ((f"{host}/models", ("max_model_len",), "vLLM /v1/models"),
                                    (f"{root}/api/v0/models", ("loaded_context_length", "max_context_length"),
                                     "LM Studio /api/v0/models")):
            entry = _entry(_get(client, url, settings), model)
            for name in fields:
                tokens = _size(entry.get(name))
                if tokens:
                    return Window(tokens, source)
    return Window(None)


def _entry(listing: Any, model: str) -> dict:
    """The entry of `model` in a model list ({"data": [{"id": …}, …]}); the only one when the server has one."""
    data = listing.get("data") if isinstance(listing, dict) else None
    items = [item for item in data if isinstance(item, dict)] if isinstance(data, list) else []
    match = [item for item in items if item.get("id") == model] or (items if len(items) == 1 else [])
    return match[0] if match else {}


def _ask_ollama(settings: Settings, model: str) -> Window:
    """The model's context_length from Ollama's /api/show (DocChat's num_ctx is the window up to it)."""
    headers = {"Authorization": f"Bearer {settings.llm.ollama_api_key}"} if settings.llm.ollama_api_key else {}
    with httpx.Client(timeout=httpx.Timeout(STATUS_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)) as client:
        response = client.post(f"{settings.llm.ollama_host.rstrip('/')}/api/show", json={"model": model}, headers=headers)
    if response.status_code >= 400:
        return Window(None)
    info = response.json().get("model_info") or {}
    tokens = next((_size(v) for k, v in info.items() if k.endswith(".context_length") and _size(v)), None)
    return Window(tokens, "Ollama /api/show") if tokens else Window(None)


__all__ = ["WINDOW_TTL_S", "Window", "fit", "forget", "learn", "remember", "size_refusal"]
