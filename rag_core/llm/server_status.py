"""What both kinds of model server share outside of answering: the timeouts for asking them, and the status the
Settings page shows (rag_core.llm.ollama for Ollama, rag_core.llm.openai_compat for OpenAI-compatible)."""
from __future__ import annotations

from dataclasses import dataclass, field

from rag_core.core.config import Provider
from rag_core.core.errors import LLMError

CONNECT_TIMEOUT_S = 5.0  # a host that does not answer at all fails fast; reads wait llm_timeout_s
STATUS_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class OllamaStatus:
    """What the Settings page shows: can we reach the model server (Ollama, or an OpenAI-compatible one when
    `provider` is "openai"), which models does it have, what is wrong."""

    reachable: bool
    models: list[str] = field(default_factory=list)
    error: str | None = None  # one plain sentence
    details: str | None = None  # the technical part (address, variable names), for an expandable "Details"
    provider: Provider = Provider.OLLAMA

    def has_model(self, name: str) -> bool:
        """True when `name` is installed ("llama3.2" also matches "llama3.2:latest")."""
        return self.installed_name(name) is not None

    def installed_name(self, name: str) -> str | None:
        """The installed model's name as the server lists it (Ollama: "llama3.2" -> "llama3.2:latest"), or None."""
        want = name if ":" in name or self.provider != Provider.OLLAMA else f"{name}:latest"
        return next((m for m in self.models if m in (name, want)), None)


def unreachable(err: LLMError, provider: Provider) -> OllamaStatus:
    """The status of a server that could not be asked, with the sentence of `err`."""
    return OllamaStatus(reachable=False, models=[], error=str(err), details=err.details or None, provider=provider)
