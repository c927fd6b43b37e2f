"""Talking to the model server outside of answering: connection options, status for the Settings page, model pulls
(Ollama), and the user-facing sentence for each fault. The OpenAI-compatible side is in rag_core.llm.openai_compat."""
from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import httpx
import ollama

from rag_core.core.config import Provider, Settings
from rag_core.core.errors import (
    ContextTooSmall,
    LLMError,
    LLMTimeout,
    ModelNotPulled,
    ModelPullFailed,
    OllamaFailed,
    OllamaRefused,
    OllamaUnavailable,
    StreamInterrupted,
    WrongServer,
)
from rag_core.llm.context_window import size_refusal
from rag_core.llm.server_status import CONNECT_TIMEOUT_S, STATUS_TIMEOUT_S, OllamaStatus, unreachable

log = logging.getLogger(__name__)
__all__ = ["CONNECT_TIMEOUT_S", "STATUS_TIMEOUT_S", "OllamaStatus", "unreachable"]  # re-exported: server_status.py



def client_kwargs(settings: Settings, read_timeout: float | None = None) -> dict[str, Any]:
    """httpx options for the ollama client: timeouts and the bearer token when OLLAMA_API_KEY is set."""
    read = settings.llm.timeout_s if read_timeout is None else read_timeout
    kwargs: dict[str, Any] = {"timeout": httpx.Timeout(read, connect=min(CONNECT_TIMEOUT_S, read))}
    if settings.llm.ollama_api_key:
        kwargs["headers"] = {"Authorization": f"Bearer {settings.llm.ollama_api_key}"}
    return kwargs


def make_client(settings: Settings, read_timeout: float | None = None) -> ollama.Client:
    """An official ollama client for settings.ollama_host."""
    return ollama.Client(host=settings.llm.ollama_host, **client_kwargs(settings, read_timeout))


def translate_error(exc: BaseException, settings: Settings, model: str | None = None) -> LLMError:
    """Map a transport or model-server error to the user-facing LLMError that says what to do."""
    if isinstance(exc, LLMError):
        return exc
    if settings.chat_provider == Provider.OPENAI:
        from rag_core.llm.openai_compat import translate_openai_error

        return translate_openai_error(exc, settings, model)
    if isinstance(exc, json.JSONDecodeError):  # an answer that is not Ollama's JSON: a web page, another server
        return WrongServer(settings.llm.ollama_host, Provider.OLLAMA)
    if isinstance(exc, httpx.TimeoutException) and not isinstance(exc, httpx.ConnectTimeout):
        return LLMTimeout(settings.llm.timeout_s)
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, ConnectionError)):
        return OllamaUnavailable(settings.llm.ollama_host)
    if isinstance(exc, ollama.ResponseError):
        if exc.status_code == 404 and "not found" in str(exc.error).lower():
            return ModelNotPulled(model or settings.llm.ollama_model)
        if exc.status_code in (401, 403):
            return OllamaRefused(settings.llm.ollama_host, exc.status_code)
        refused, window = size_refusal(None, str(exc.error))
        if refused:  # Ollama itself cuts a long prompt silently; a proxy in front of it may refuse instead
            return ContextTooSmall(window, Provider.OLLAMA, str(exc.error))
        return OllamaFailed(str(exc.error))
    if isinstance(exc, httpx.TransportError):  # ReadError, RemoteProtocolError: the connection dropped
        return StreamInterrupted()
    return OllamaFailed(type(exc).__name__)


def model_status(settings: Settings) -> OllamaStatus:
    """Whether the chat model's server answers and which models it has (never raises)."""
    if settings.chat_provider == Provider.OPENAI:
        from rag_core.llm.openai_compat import openai_status

        return openai_status(settings)
    return ollama_status(settings)


def ollama_status(settings: Settings) -> OllamaStatus:
    """Ask /api/tags whether Ollama answers and which models are installed (never raises)."""
    client = make_client(settings, read_timeout=STATUS_TIMEOUT_S)
    try:
        listing = client.list()
    except (httpx.HTTPError, ConnectionError, ollama.ResponseError, ValueError) as e:  # ValueError: not JSON
        timed_out = isinstance(e, httpx.TimeoutException) and not isinstance(e, httpx.ConnectTimeout)
        err = LLMTimeout(STATUS_TIMEOUT_S, status=True) if timed_out else translate_error(e, settings)
        log.info("Ollama status at %s: %s (%s)", settings.llm.ollama_host, type(e).__name__, e)
        return unreachable(err, Provider.OLLAMA)
    finally:
        client.close()
    names = sorted({m.model for m in listing.models if m.model})
    return OllamaStatus(reachable=True, models=names, error=None)


_STAGES = {"pulling manifest": "Getting ready…", "verifying sha256 digest": "Checking the download…",
           "writing manifest": "Finishing…", "removing any unused layers": "Finishing…",
           "success": "Download complete."}
_NEARLY = 0.99  # the bar's ceiling until Ollama says "success" (more layers or the check may still come)


def _size(n: int) -> str:
    """Bytes for people: "812 KB", "1.3 MB", "2.0 GB"."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{max(0, round(n / 1e3))} KB"


@dataclass(frozen=True)
class PullProgress:
    """One line of the /api/pull stream, with the whole download's progress so far (`overall`, `done_bytes`,
    `total_bytes`: every layer Ollama has reported, as filled in by PullMeter)."""

    status: str
    digest: str | None = None
    total: int | None = None
    completed: int | None = None
    overall: float = 0.0
    done_bytes: int = 0
    total_bytes: int = 0

    @property
    def fraction(self) -> float | None:
        """Share of the current layer downloaded (0..1), or None when the line has no sizes."""
        if self.total and self.completed is not None:
            return max(0.0, min(1.0, self.completed / self.total))
        return None

    @property
    def done(self) -> bool:
        """True on the final "success" line."""
        return self.status == "success"

    @property
    def label(self) -> str:
        """What the download is doing, in words for people ("Downloading — 1.2 of 2.0 GB")."""
        if self.status in _STAGES:
            return _STAGES[self.status]
        if self.status.startswith("pulling") and self.total_bytes:
            return f"Downloading — {_size(self.done_bytes)} of {_size(self.total_bytes)}"
        return "Downloading…" if self.status.startswith("pulling") else "Working…"


class PullMeter:
    """One progress bar for a whole pull: bytes completed over bytes to fetch, summed across every layer (digest)
    Ollama has reported, so the bar does not restart for each layer. It never goes back (a new layer appearing
    adds to the total) and stays below 100 % until Ollama's final "success"."""

    def __init__(self) -> None:
        self._layers: dict[str, tuple[int, int]] = {}  # digest -> (completed, total)
        self.fraction = 0.0

    def add(self, part: PullProgress) -> PullProgress:
        """`part` with the overall progress filled in."""
        if part.digest and part.total:
            done = max(0, min(part.completed or 0, part.total))
            seen = self._layers.get(part.digest, (0, 0))[0]
            self._layers[part.digest] = (max(done, seen), part.total)
        done_bytes = sum(c for c, _ in self._layers.values())
        total_bytes = sum(t for _, t in self._layers.values())
        if part.done:
            self.fraction, done_bytes = 1.0, total_bytes
        elif total_bytes:
            self.fraction = max(self.fraction, min(_NEARLY, done_bytes / total_bytes))
        return replace(part, overall=self.fraction, done_bytes=done_bytes, total_bytes=total_bytes)


def pull_model(settings: Settings, name: str) -> Iterator[PullProgress]:
    """Download a model into Ollama, yielding progress lines from /api/pull (each with the whole download's
    progress so far, see PullMeter); raises an LLMError on failure."""
    name = name.strip()
    if not name:
        raise ModelPullFailed(name, "no model name was given")
    # Reading a multi-GB pull can pause for long; only the connection gets the short timeout.
    client = make_client(settings, read_timeout=max(settings.llm.timeout_s, 300.0))
    meter = PullMeter()
    try:
        for part in client.pull(name, stream=True):
            yield meter.add(PullProgress(status=part.status or "", digest=part.digest, total=part.total,
                                         completed=part.completed))
    except ollama.ResponseError as e:
        if e.status_code in (401, 403):
            raise translate_error(e, settings, name) from e
        raise ModelPullFailed(name, str(e.error)) from e
    except (httpx.HTTPError, ConnectionError) as e:
        raise translate_error(e, settings, name) from e
    finally:
        client.close()
