"""Settings are grouped in sections (settings.retrieval.top_k); every environment variable of earlier releases still
sets its knob, flat names still build and copy Settings, and no code reads a flat name any more
(scripts/codemod_settings.py rewrites such reads)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from pydantic import BaseModel

from rag_core.core.config import (
    ENV_VARS,
    FIELDS,
    SECTIONS,
    RetrievalSettings,
    Settings,
    describe,
    field_info,
    load_settings,
)

ROOT = Path(__file__).resolve().parents[2]

# Every environment variable DocChat reads, the section field it sets, and a valid value other than the default.
EVERY_VARIABLE = {
    "DOCCHAT_DATA_DIR": ("library.data_dir", "/srv/docchat"),
    "QDRANT_URL": ("library.qdrant_url", "http://qdrant:6333"),
    "QDRANT_API_KEY": ("library.qdrant_api_key", "qk"),
    "DOCCHAT_COLLECTION": ("library.collection", "c2"),
    "DOCCHAT_EMBEDDING_MODEL": ("library.embedding_model", "/models/minilm"),
    "DOCCHAT_CHUNK_TOKENS": ("ingest.chunk_tokens", "128"),
    "DOCCHAT_MAX_UPLOAD_MB": ("ingest.max_upload_mb", "20"),
    "DOCCHAT_MAX_DOCX_UNPACKED_MB": ("ingest.max_docx_uncompressed_mb", "30"),
    "DOCCHAT_MAX_SHEET_ROWS": ("ingest.max_sheet_rows", "5000"),
    "DOCCHAT_READER_MEMORY_MB": ("ingest.reader_memory_mb", "2048"),
    "DOCCHAT_INGEST_TIMEOUT_S": ("ingest.timeout_s", "120"),
    "DOCCHAT_INGEST_WORKERS": ("ingest.workers", "3"),
    "DOCCHAT_FOLDER_RECHECK_S": ("ingest.folder_recheck_s", "60"),
    "DOCCHAT_OCR": ("ingest.ocr", "False"),
    "DOCCHAT_OCR_LANGUAGE": ("ingest.ocr_language", "deu+eng"),
    "DOCCHAT_OCR_DPI": ("ingest.ocr_dpi", "200"),
    "OLLAMA_HOST": ("llm.ollama_host", "http://ollama:11434"),
    "DOCCHAT_OLLAMA_MODEL": ("llm.ollama_model", "qwen2.5:3b"),
    "OLLAMA_API_KEY": ("llm.ollama_api_key", "ok"),
    "DOCCHAT_LLM_TIMEOUT": ("llm.timeout_s", "12.5"),
    "DOCCHAT_TEMPERATURE": ("llm.temperature", "0.7"),
    "DOCCHAT_CHAT_MODEL": ("llm.chat_model", "openai:qwen2.5-7b-instruct"),
    "OPENAI_BASE_URL": ("llm.openai_base_url", "http://localhost:1234/v1"),
    "OPENAI_API_KEY": ("llm.openai_api_key", "sk-local"),
    "DOCCHAT_TOP_K": ("retrieval.top_k", "7"),
    "DOCCHAT_MIN_RELEVANCE": ("retrieval.min_relevance", "0.4"),
    "DOCCHAT_RERANKER": ("retrieval.reranker", "http://127.0.0.1:8012"),  # the reranker (issue 46)
    "DOCCHAT_RERANK_MODEL": ("retrieval.rerank_model", "bge-reranker-v2-m3"),
    "DOCCHAT_RERANK_API_KEY": ("retrieval.rerank_api_key", "rk"),
    "DOCCHAT_RERANK_TOP": ("retrieval.rerank_top", "20"),
    "DOCCHAT_RERANK_TIMEOUT": ("retrieval.rerank_timeout_s", "2.5"),
    "DOCCHAT_HISTORY_TOKENS": ("answer.history_tokens", "500"),
    "DOCCHAT_NUM_CTX_MAX": ("answer.max_context_tokens", "4096"),
    "DOCCHAT_ANSWER_TOKENS": ("answer.answer_tokens", "512"),
    "DOCCHAT_SUMMARY_MAX_CALLS": ("answer.summary_max_calls", "5"),
    "DOCCHAT_MODE": ("mode", "demo"),
    "DOCCHAT_WIKIPEDIA_API": ("wikipedia.api", "http://127.0.0.1:1/{lang}/w/api.php"),
    "DOCCHAT_WIKIPEDIA_CONTACT": ("wikipedia.contact", "me@example.org"),
    "DOCCHAT_WIKIPEDIA_TIMEOUT": ("wikipedia.timeout_s", "5"),
    "DOCCHAT_WIKIPEDIA_RETRIES": ("wikipedia.retries", "1"),
    "DOCCHAT_WIKIPEDIA_BACKOFF": ("wikipedia.backoff_s", "0.5"),
    "DOCCHAT_WIKIPEDIA_DEADLINE": ("wikipedia.deadline_s", "30"),
    "DOCCHAT_WIKIPEDIA_MAX_RESPONSE_MB": ("wikipedia.max_response_mb", "5"),
    "DOCCHAT_DEMO_IDLE_MINUTES": ("demo.session_idle_minutes", "30"),
    "DOCCHAT_DEMO_MAX_FILES": ("demo.max_files_per_session", "3"),
    "DOCCHAT_DEMO_MAX_SESSION_MB": ("demo.max_session_mb", "40"),
    "DOCCHAT_DEMO_QUESTIONS_PER_MINUTE": ("demo.questions_per_minute", "20"),
    "DOCCHAT_DEMO_MAX_FILE_MB": ("demo.max_file_mb", "5"),
    "DOCCHAT_DEMO_PAGE_RENDERS_PER_MINUTE": ("demo.page_renders_per_minute", "7"),
    "DOCCHAT_DEMO_MAX_FILES_PER_CLIENT": ("demo.max_files_per_client", "12"),
    "DOCCHAT_DEMO_MAX_CLIENT_MB": ("demo.max_client_mb", "60"),
    "DOCCHAT_DEMO_CLIENT_QUESTIONS_PER_MINUTE": ("demo.client_questions_per_minute", "15"),
    "DOCCHAT_DEMO_CLIENT_PAGE_RENDERS_PER_MINUTE": ("demo.client_page_renders_per_minute", "9"),
    "DOCCHAT_DEMO_TOTAL_FILES": ("demo.total_files", "99"),
    "DOCCHAT_DEMO_TOTAL_MB": ("demo.total_mb", "999"),
    "DOCCHAT_DEMO_QUESTIONS_PER_MINUTE_TOTAL": ("demo.questions_per_minute_total", "77"),
    "DOCCHAT_DEMO_PAGE_RENDERS_PER_MINUTE_TOTAL": ("demo.page_renders_per_minute_total", "88"),
    "DOCCHAT_DEMO_TRUST_PROXY": ("demo.trust_proxy", "True"),
    "DOCCHAT_EMBEDDING_TIMEOUT_S": ("library.embedding_timeout_s", "30"),  # issue 46
}


def _read(settings: Settings, path: str) -> object:
    value: object = settings
    for part in path.split("."):
        value = getattr(value, part)
    return value


def _matches(value: object, text: str) -> bool:
    return str(value) == text or (not isinstance(value, bool) and isinstance(value, int | float)
                                  and value == float(text))


def test_the_variables_are_the_ones_earlier_releases_read():
    assert set(EVERY_VARIABLE) == set(ENV_VARS) and len(EVERY_VARIABLE) == 59
    assert {row.variable: row.setting for row in describe()} == {v: p for v, (p, _) in EVERY_VARIABLE.items()}


@pytest.mark.parametrize("variable", list(EVERY_VARIABLE))
def test_each_variable_lands_in_its_section_field(variable):
    path, text = EVERY_VARIABLE[variable]
    value = _read(load_settings({variable: text}), path)
    assert value != _read(Settings(), path)
    assert _matches(value, text)


def test_every_variable_at_once():
    s = load_settings({v: text for v, (_, text) in EVERY_VARIABLE.items()})
    for variable, (path, text) in EVERY_VARIABLE.items():
        assert _matches(_read(s, path), text), variable


def test_sections_are_frozen_models_with_described_bounded_fields():
    assert list(SECTIONS) == ["library", "ingest", "llm", "retrieval", "answer", "wikipedia", "demo"]
    every = {(section, name) for section, model in SECTIONS.items() for name in model.model_fields} | {(None, "mode")}
    assert set(FIELDS.values()) == every and len(every) == len(FIELDS)  # a new field needs its flat name in FIELDS
    for flat in FIELDS:
        assert field_info(flat).description, flat
    assert field_info("top_k").metadata and field_info("wikipedia_timeout_s").metadata  # the bounds moved along
    s = Settings()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        s.retrieval.top_k = 3  # type: ignore[misc]
    assert isinstance(s.retrieval, BaseModel) and hash(s) == hash(Settings())


def test_flat_names_build_copy_and_override():
    flat = {name: EVERY_VARIABLE[variable][1] for variable, name in ENV_VARS.items()}
    s = Settings(**flat)
    assert s == load_settings({v: text for v, (_, text) in EVERY_VARIABLE.items()})
    assert Settings(top_k=3).retrieval.top_k == 3 and Settings(wikipedia_timeout_s=5).wikipedia.timeout_s == 5
    assert Settings(retrieval={"top_k": 3}) == Settings(retrieval=RetrievalSettings(top_k=3)) == Settings(top_k=3)
    assert Settings(retrieval=RetrievalSettings(min_relevance=0.5), top_k=3).retrieval == RetrievalSettings(
        top_k=3, min_relevance=0.5)
    copied = Settings().model_copy(update={"max_context_tokens": 2048, "answer_tokens": 512, "mode": "demo"})
    assert (copied.answer.max_context_tokens, copied.answer.answer_tokens, copied.mode) == (2048, 512, "demo")
    assert copied.answer.history_tokens == 1000 and Settings().answer.max_context_tokens == 8192
    changed = Settings(top_k=3).with_overrides(demo_trust_proxy=True, ingest_workers=4)
    assert (changed.retrieval.top_k, changed.demo.trust_proxy, changed.ingest.workers) == (3, True, 4)
    assert Settings(top_k=4).value("top_k") == 4 and Settings().value("mode") == "local"


def test_no_flat_read_access_is_left():
    """Reading a flat name fails (no compatibility path): every read names its section."""
    with pytest.raises(AttributeError):
        getattr(Settings(), "top_k")  # noqa: B009 - a flat name, as code of an earlier release would read it


def _codemod():
    spec = importlib.util.spec_from_file_location("codemod_settings", ROOT / "scripts" / "codemod_settings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_codemod_maps_every_flat_name_to_its_section():
    module = _codemod()
    assert {flat: f"{section}.{name}" for flat, (section, name) in FIELDS.items() if section} == module.MOVED
    assert tuple(module.SECTIONS) == tuple(SECTIONS)


def test_the_codemod_rewrites_flat_reads_once():
    source = '''from rag_core.core.config import Settings


def f(settings: Settings, cfg: Settings, args) -> None:
    s = settings.with_overrides(top_k=3)
    base = Settings(top_k=3)
    print(settings.top_k, s.wikipedia_timeout_s, self.settings.demo_trust_proxy, base.ollama_host,
          cfg.llm_timeout_s, args.data_dir, Settings().chat_model, settings.mode, settings.chat_provider,
          settings.retrieval.top_k, "é", settings.ingest_workers)
'''
    module = _codemod()
    new, rewritten, left = module.rewrite_source(source)
    assert "settings.retrieval.top_k, s.wikipedia.timeout_s, self.settings.demo.trust_proxy, base.llm.ollama_host" in new
    assert "cfg.llm.timeout_s, args.data_dir, Settings().llm.chat_model, settings.mode, settings.chat_provider" in new
    assert '"é", settings.ingest.workers)' in new and "with_overrides(top_k=3)" in new and "Settings(top_k=3)" in new
    assert len(rewritten) == 7 and [n.attr for n in left] == ["data_dir"]
    assert module.rewrite_source(new)[0] == new  # a second run changes nothing


def test_no_code_reads_a_flat_setting():
    module = _codemod()
    found = []
    for path in module._files(list(module.DEFAULT_PATHS)):
        _, rewritten, _ = module.rewrite_source(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{n.lineno}" for n in rewritten]
    assert not found, "run scripts/codemod_settings.py: flat settings reads at " + ", ".join(found)
