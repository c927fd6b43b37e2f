"""Talking to an OpenAI-compatible model server (LM Studio, llama.cpp's server, vLLM, a hosted endpoint) outside of
answering: its status and model list for the Settings page (/v1/models), and the user-facing sentence for each fault
of the `openai` client that langchain-openai's ChatOpenAI uses."""
from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import httpx
import openai

from rag_core.core.config import Provider, Settings
from rag_core.core.errors import (
    ContextTooSmall,
    LLMError,
    LLMTimeout,
    ModelNotPulled,
    OllamaFailed,
    OllamaRefused,
    OllamaUnavailable,
    StreamInterrupted,
    WrongServer,
)
from rag_core.llm.context_window import size_refusal
from rag_core.llm.server_status import CONNECT_TIMEOUT_S, STATUS_TIMEOUT_S, OllamaStatus, unreachable

log = logging.getLogger(__name__)

SERVER = "the model server"
NO_KEY = "not-needed"  # sent when OPENAI_API_KEY is unset: local servers want no key, the client wants one


def api_key(settings: Settings) -> str:
    """The key sent to the server (a placeholder when none is set)."""
    return settings.llm.openai_api_key or NO_KEY


def headers(settings: Settings) -> dict[str, str]:
    """The request headers of a direct call (the bearer key)."""
    return {"Authorization": f"Bearer {api_key(settings)}"}


def translate_openai_error(exc: BaseException, settings: Settings, model: str | None = None) -> LLMError:
    """Map an `openai` client or transport error to the user-facing LLMError that says what to do."""
    host, name = settings.chat_host, model or settings.chat_model_name
    if isinstance(exc, LLMError):
        return exc
    causes = _causes(exc)  # the openai client's transport is httpx2: its errors are told apart by name
    if isinstance(exc, openai.APITimeoutError) and "ConnectTimeout" not in causes:
        return LLMTimeout(settings.llm.timeout_s)
    if isinstance(exc, openai.APIConnectionError) and causes & _DROPPED:  # the stream was cut after it began
        return StreamInterrupted(SERVER)
    if isinstance(exc, (openai.APIConnectionError, ConnectionError)):
        return OllamaUnavailable(host, Provider.OPENAI)
    if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return OllamaRefused(host, exc.status_code, Provider.OPENAI)
    if isinstance(exc, openai.NotFoundError):
        if "model" in _message(exc).lower():
            return ModelNotPulled(name, Provider.OPENAI)
        return WrongServer(host, Provider.OPENAI, "“not found” (HTTP 404) for /chat/completions")
    if isinstance(exc, openai.APIStatusError):
        refused, window = size_refusal(exc.body, _message(exc))
        if refused:  # llama.cpp: HTTP 400 exceed_context_size_error; OpenAI, vLLM: context_length_exceeded
            return ContextTooSmall(window, Provider.OPENAI, _message(exc))
        return OllamaFailed(f"HTTP {exc.status_code}: {_message(exc)}", SERVER)
    if isinstance(exc, (openai.APIResponseValidationError, ValueError)):  # a web page, not the API's JSON
        return WrongServer(host, Provider.OPENAI)
    if causes & _DROPPED:
        return StreamInterrupted(SERVER)
    return OllamaFailed(type(exc).__name__, SERVER)


_DROPPED = frozenset({"RemoteProtocolError", "ReadError"})  # transport errors of a connection cut mid-answer


def _causes(exc: BaseException) -> set[str]:
    """The class names of `exc` and of the errors that caused it."""
    names: set[str] = set()
    seen: BaseException | None = exc
    for _ in range(20):  # a chain is short; never follow a cycle for ever
        if seen is None:
            break
        names.add(type(seen).__name__)
        seen = seen.__cause__ or seen.__context__
    return names


def _message(exc: openai.APIStatusError) -> str:
    body: Any = exc.body
    if isinstance(body, dict):
        body = body.get("message") or body.get("error") or body
    return str(body if body is not None else exc.message)[:200]


def openai_status(settings: Settings) -> OllamaStatus:
    """Ask {OPENAI_BASE_URL}/models whether the server answers and which models it offers (never raises)."""
    host = settings.chat_host
    try:
        with httpx.Client(timeout=httpx.Timeout(STATUS_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)) as client:
            response = client.get(f"{host}/models", headers=headers(settings))
        if response.status_code in (401, 403):
            return unreachable(OllamaRefused(host, response.status_code, Provider.OPENAI), Provider.OPENAI)
        if response.status_code >= 400:
            return unreachable(WrongServer(host, Provider.OPENAI, f"HTTP {response.status_code} for /models"), Provider.OPENAI)
        models = _model_ids(response.json())
    except (httpx.TimeoutException, httpx.ConnectError, httpx.TransportError) as e:
        log.info("Model server status at %s: %s (%s)", host, type(e).__name__, e)
        if isinstance(e, httpx.TimeoutException) and not isinstance(e, httpx.ConnectTimeout):
            return unreachable(LLMTimeout(STATUS_TIMEOUT_S, status=True), Provider.OPENAI)
        return unreachable(OllamaUnavailable(host, Provider.OPENAI), Provider.OPENAI)
    except (json.JSONDecodeError, TypeError, KeyError) as e:  # a web page, or JSON of another kind
        log.info("Model server status at %s: not the API's JSON (%s)", host, e)
        return unreachable(WrongServer(host, Provider.OPENAI, "a page that is not a model list"), Provider.OPENAI)
    return OllamaStatus(reachable=True, models=models, provider=Provider.OPENAI)


LISTING_TTL_S = 10.0  # how long a server's model list is trusted before an answer asks for it again
_listings: dict[str, tuple[float, OllamaStatus]] = {}
_listings_lock = threading.Lock()


def unserved_model(settings: Settings, model: str) -> ModelNotPulled | None:
    """ModelNotPulled when the server lists its models and `model` is not among them, else None (listed, or no
    list to be had: the chat call then says what is wrong). llama.cpp's server answers any name with the one model
    it has loaded, so without this check a reply would be labelled with a model that did not write it."""
    host, now = settings.chat_host, time.monotonic()
    with _listings_lock:
        cached = _listings.get(host)
    if cached is None or now - cached[0] > LISTING_TTL_S:
        cached = (now, openai_status(settings))
        with _listings_lock:
            _listings[host] = cached
    status = cached[1]
    if not status.reachable or not status.models or status.has_model(model):
        return None
    return ModelNotPulled(model, Provider.OPENAI)


def _model_ids(listing: Any) -> list[str]:
    """The ids of a /models answer ({"data": [{"id": …}, …]}); TypeError/KeyError when it is not one."""
    data = listing["data"]
    if not isinstance(data, list):
        raise TypeError("data is not a list")
    return sorted({str(item["id"]) for item in data})


__all__ = ["api_key", "openai_status", "translate_openai_error", "unserved_model"]
