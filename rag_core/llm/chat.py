"""The chat model that writes answers: any LangChain chat model, with the one DOCCHAT_CHAT_MODEL names (built by
LangChain's init_chat_model: "ollama:<model>", the default, or "openai:<model>" for any OpenAI-compatible server) as
the default, and what differs between them (per-call options, how a stream ends, which error message to show)."""
from __future__ import annotations

import functools
import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rag_core.core.config import Provider, Settings
from rag_core.core.errors import LLMError, OllamaFailed
from rag_core.llm.ollama import CONNECT_TIMEOUT_S, client_kwargs, translate_error

if TYPE_CHECKING:  # pragma: no cover
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage, BaseMessageChunk

log = logging.getLogger(__name__)

MODEL_FAILED = ("The language model ({name}) reported a problem ({error}). Try again; if it keeps happening, check "
                "how the model is set up.")
STOP, LENGTH = "stop", "length"
_LENGTH_REASONS = frozenset({"length", "max_tokens", "MAX_TOKENS"})  # OpenAI, Anthropic, Google spellings
OLLAMA, OPENAI = Provider.OLLAMA, Provider.OPENAI  # the providers DOCCHAT_CHAT_MODEL may name


@functools.lru_cache(maxsize=8)
def _init_chat_model(provider: Provider, host: str, model: str, api_key: str | None, timeout: float) -> BaseChatModel:
    """One chat model per connection, from LangChain's init_chat_model (building one costs ~40 ms of httpx/SSL
    setup, so it is reused); no retries, so a server that is down is said at once, as for Ollama."""
    from langchain.chat_models import init_chat_model

    if provider == OPENAI:
        import openai

        from rag_core.llm.openai_compat import NO_KEY

        return init_chat_model(f"openai:{model}", base_url=host, api_key=api_key or NO_KEY, max_retries=0,
                               timeout=openai.Timeout(timeout, connect=min(CONNECT_TIMEOUT_S, timeout)))
    settings = Settings(ollama_host=host, ollama_model=model, ollama_api_key=api_key, llm_timeout_s=timeout)
    return init_chat_model(f"ollama:{model}", base_url=host, client_kwargs=client_kwargs(settings))


def chat_model(settings: Settings, model: str | None = None) -> BaseChatModel:
    """The chat model of these settings (DOCCHAT_CHAT_MODEL; `model` replaces its name); options such as num_ctx
    are passed per call."""
    provider = settings.chat_provider
    key = settings.llm.openai_api_key if provider == OPENAI else settings.llm.ollama_api_key
    return _init_chat_model(provider, settings.chat_host, model or settings.chat_model_name, key,
                            settings.llm.timeout_s)


def chat_messages(system: str, user: str) -> list[BaseMessage]:
    """A system and a user message, as every LangChain chat model takes them."""
    from langchain_core.messages import HumanMessage, SystemMessage

    return [SystemMessage(content=system), HumanMessage(content=user)]


@dataclass(frozen=True)
class ChatBackend:
    """A LangChain chat model and how to talk to it.

    The configured model (`provider` "ollama" or "openai") gets its options with every call (Ollama: num_ctx,
    num_predict, temperature; OpenAI-compatible: max_completion_tokens, temperature), must end its stream with the
    server's end mark (Ollama's "done" line, a finish_reason), and has its faults explained with advice for that
    server (rag_core.llm.ollama.translate_error). Any other chat model (`provider` None) is called as
    configured, and its faults become one generic sentence."""

    model: BaseChatModel
    name: str  # for messages and logs
    settings: Settings
    provider: Provider | None = None

    @property
    def ollama(self) -> bool:
        """True for the configured ChatOllama."""
        return self.provider == OLLAMA

    def call_kwargs(self, num_ctx: int, num_predict: int, temperature: float | None = None) -> dict[str, Any]:
        """Keyword arguments for model.invoke/stream: the server's options, nothing for other models."""
        temperature = self.settings.llm.temperature if temperature is None else temperature
        if self.provider == OPENAI:  # the context window is the server's; the prompt already fits the budget
            return {"max_tokens": num_predict, "temperature": temperature}
        if not self.ollama:
            return {}
        return {"options": {"num_ctx": num_ctx, "num_predict": num_predict, "temperature": temperature}}

    def end_reason(self, chunk: BaseMessageChunk) -> str | None:
        """Why the stream ended, when `chunk` says so ("stop", "length"), else None."""
        meta = getattr(chunk, "response_metadata", None) or {}
        if self.ollama:
            return (meta.get("done_reason") or STOP) if meta.get("done") else None
        reason = meta.get("finish_reason") or meta.get("stop_reason")
        return None if not reason else LENGTH if reason in _LENGTH_REASONS else STOP

    @property
    def server(self) -> str:
        """The server's name in sentences ("Ollama", "the model server")."""
        return "Ollama" if self.ollama else "the model server"

    @property
    def requires_end(self) -> bool:
        """True when a stream that stops without an end reason was cut off (Ollama and OpenAI-compatible servers
        always send one)."""
        return self.provider is not None

    def translate(self, exc: BaseException) -> LLMError:
        """The user-facing LLMError for a fault of this model."""
        if self.provider is not None or isinstance(exc, LLMError):
            return translate_error(exc, self.settings, self.name)
        return LLMError(MODEL_FAILED.format(name=self.name, error=type(exc).__name__))

    def unserved(self) -> LLMError | None:
        """ModelNotPulled when this is an OpenAI-compatible server that lists its models without this one; else None."""
        if self.provider != OPENAI:
            return None  # Ollama says "not found" itself
        from rag_core.llm.openai_compat import unserved_model

        return unserved_model(self.settings, self.name)

    def is_unexpected(self, fault: LLMError, exc: BaseException | None = None) -> bool:
        """True for faults worth a traceback at the default log level: a failure of unknown kind (not a server's
        HTTP error, a timeout, a refusal for size or a missing server, which are one log line)."""
        if self.provider is None:
            return True
        return isinstance(fault, OllamaFailed) and getattr(exc, "status_code", None) is None

    @property
    def host(self) -> str:
        """The server's address, for log lines."""
        return self.settings.chat_host if self.provider is not None else self.name


def model_name(model: BaseChatModel) -> str:
    """A chat model's model name ("gpt-4o-mini"), or its class name."""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(model).__name__


def backend_for(settings: Settings, model: BaseChatModel | None = None, name: str | None = None) -> ChatBackend:
    """The backend for `model`, or for the chat model of the settings (model `name`, default DOCCHAT_CHAT_MODEL's)."""
    if model is not None:
        return ChatBackend(model, name or model_name(model), settings)
    name = (name or settings.chat_model_name or "").strip()
    return ChatBackend(chat_model(settings, name), name, settings, provider=settings.chat_provider)


def strip_thinking(text: str) -> str:
    """The text without a leading <think>…</think> block."""
    return re.sub(r"^\s*<think>.*?</think>\s*", "", text, flags=re.DOTALL)


class ThinkFilter:
    """Drops a leading <think>…</think> block that reasoning models emit before the answer, while streaming."""

    def __init__(self) -> None:
        self._buf = ""
        self._state = "start"  # start -> (thinking ->) pass

    def feed(self, delta: str) -> str:
        """The part of `delta` to show (empty while a reasoning block may still be open)."""
        if self._state == "pass":
            return delta
        self._buf += delta
        if self._state == "start":
            stripped = self._buf.lstrip()
            if not stripped:
                return ""
            if "<think>".startswith(stripped[:7]) and len(stripped) < 7:
                return ""  # could still become "<think>"
            if not stripped.startswith("<think>"):
                self._state, out, self._buf = "pass", self._buf, ""
                return out
            self._state = "thinking"
        end = self._buf.find("</think>")
        if end < 0:
            return ""
        out = self._buf[end + len("</think>"):].lstrip()
        self._state, self._buf = "pass", ""
        return out

    def flush(self) -> str:
        """What is left to show when the stream ends (nothing of an unclosed reasoning block)."""
        out = "" if self._state == "thinking" else self._buf
        self._buf = ""
        return out
