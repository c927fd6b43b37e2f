"""Settings: defaults, environment variable names, bounds with one-sentence errors, st.secrets precedence, the CLI."""
from __future__ import annotations

import ast
import inspect
import json
from pathlib import Path

import pydantic_settings
import pytest

import rag_core.core.config as config
from rag_core.core.config import (
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_OLLAMA_MODEL,
    ENV_VARS,
    FIELDS,
    Settings,
    describe,
    env_name,
    load_settings,
    settings_markdown,
)
from rag_core.core.errors import DocChatError, SettingsError

ROOT = Path(__file__).resolve().parents[2]

# A valid, non-default value for every field, as an environment variable would carry it.
SAMPLE = {
    "data_dir": "/srv/docchat", "qdrant_url": "http://qdrant:6333", "qdrant_api_key": "qk", "collection": "c2",
    "embedding_model": "/models/minilm", "chunk_tokens": "128", "max_upload_mb": "20",
    "max_docx_uncompressed_mb": "30", "max_sheet_rows": "5000", "reader_memory_mb": "2048", "ollama_host": "http://ollama:11434", "ollama_model": "qwen2.5:3b",
    "ollama_api_key": "ok", "chat_model": "openai:qwen2.5-7b-instruct", "openai_base_url": "http://localhost:1234/v1",
    "openai_api_key": "sk-local", "llm_timeout_s": "12.5", "temperature": "0.7", "top_k": "7", "min_relevance": "0.4",
    "history_tokens": "500", "max_context_tokens": "4096", "answer_tokens": "512", "summary_max_calls": "5", "mode": "demo",
    "wikipedia_api": "http://127.0.0.1:1/{lang}/w/api.php", "wikipedia_contact": "me@example.org",
    "wikipedia_timeout_s": "5", "wikipedia_retries": "1", "wikipedia_backoff_s": "0.5",
    "wikipedia_deadline_s": "30", "wikipedia_max_response_mb": "5",
    "demo_session_idle_minutes": "30", "demo_max_files_per_session": "3", "demo_max_session_mb": "40",
    "demo_questions_per_minute": "20", "demo_max_file_mb": "5",
    "demo_page_renders_per_minute": "7", "demo_max_files_per_client": "12", "demo_max_client_mb": "60",
    "demo_client_questions_per_minute": "15", "demo_client_page_renders_per_minute": "9", "demo_total_files": "99",
    "demo_total_mb": "999", "demo_questions_per_minute_total": "77", "demo_page_renders_per_minute_total": "88",
    "demo_trust_proxy": "True", "ingest_timeout_s": "120", "ingest_workers": "3", "folder_recheck_s": "60",
    "ocr": "False", "ocr_language": "deu+eng", "ocr_dpi": "200",
    "embedding_timeout_s": "30",  # issue 46
    "reranker": "http://127.0.0.1:8012", "rerank_model": "bge-reranker-v2-m3", "rerank_api_key": "rk",
    "rerank_top": "20", "rerank_timeout_s": "2.5",  # the reranker (issue 46)
}


def test_defaults():
    s = Settings()
    assert s == load_settings({})
    assert s.library.data_dir == Path("data")
    assert s.library.embedding_model == DEFAULT_EMBEDDING_MODEL and s.llm.ollama_model == DEFAULT_OLLAMA_MODEL
    assert (s.ingest.chunk_tokens, s.retrieval.top_k, s.retrieval.min_relevance, s.mode) == (200, 5, 0.25, "local")
    assert s.llm.ollama_host == "http://localhost:11434" and s.library.qdrant_url is None and s.llm.ollama_api_key is None
    assert s.max_upload_bytes == 200 * 1024 * 1024


def test_the_environment_variable_names_are_unchanged():
    assert ENV_VARS["DOCCHAT_TOP_K"] == "top_k" and ENV_VARS["OLLAMA_HOST"] == "ollama_host"
    assert ENV_VARS["QDRANT_URL"] == "qdrant_url" and ENV_VARS["DOCCHAT_NUM_CTX_MAX"] == "max_context_tokens"
    assert ENV_VARS["DOCCHAT_MAX_DOCX_UNPACKED_MB"] == "max_docx_uncompressed_mb"
    assert ENV_VARS["DOCCHAT_READER_MEMORY_MB"] == "reader_memory_mb"
    assert ENV_VARS["DOCCHAT_DEMO_IDLE_MINUTES"] == "demo_session_idle_minutes"
    assert ENV_VARS["DOCCHAT_CHAT_MODEL"] == "chat_model" and ENV_VARS["OPENAI_BASE_URL"] == "openai_base_url"
    assert ENV_VARS["DOCCHAT_EMBEDDING_TIMEOUT_S"] == "embedding_timeout_s"  # issue 46
    assert len(ENV_VARS) == len(FIELDS) == 59


def test_the_chat_model_names_its_provider_and_ollama_stays_the_default():
    s = Settings()
    assert (s.chat_provider, s.chat_model_name, s.chat_host) == ("ollama", DEFAULT_OLLAMA_MODEL, s.llm.ollama_host)
    old = load_settings({"DOCCHAT_OLLAMA_MODEL": "qwen2.5:3b"})  # the older variable still chooses the model
    assert (old.chat_provider, old.chat_model_name) == ("ollama", "qwen2.5:3b")
    new = load_settings({"DOCCHAT_CHAT_MODEL": "ollama:llama3.2:1b", "DOCCHAT_OLLAMA_MODEL": "qwen2.5:3b"})
    assert new.chat_model_name == "llama3.2:1b"  # the new one wins
    assert new.with_overrides(ollama_model="phi4").chat_model_name == "phi4"  # a later choice of the Ollama model
    other = load_settings({"DOCCHAT_CHAT_MODEL": "openai:qwen2.5-7b-instruct", "OPENAI_BASE_URL": "http://h:1234/v1/"})
    assert (other.chat_provider, other.chat_model_name, other.chat_host) == (
        "openai", "qwen2.5-7b-instruct", "http://h:1234/v1")
    assert other.with_chat_model("mistral").llm.chat_model == "openai:mistral"
    assert load_settings({"DOCCHAT_CHAT_MODEL": "openai:m"}).chat_host == "https://api.openai.com/v1"
    for bad in ("anthropic:claude-3", "llama3.2", "openai"):
        with pytest.raises(SettingsError, match=rf"^DOCCHAT_CHAT_MODEL={bad} is not allowed: use “ollama:MODEL” "
                                                r"or “openai:MODEL”"):
            load_settings({"DOCCHAT_CHAT_MODEL": bad})


@pytest.mark.parametrize("field", list(FIELDS))
def test_each_variable_sets_its_field(field):
    value = load_settings({env_name(field): SAMPLE[field]}).value(field)
    assert value != Settings().value(field)
    assert str(value) == SAMPLE[field] or value == float(SAMPLE[field])


def test_every_field_at_once_and_by_keyword():
    s = load_settings({env_name(f): v for f, v in SAMPLE.items()})
    assert s == Settings(**SAMPLE)
    assert s.library.data_dir == Path("/srv/docchat") and s.retrieval.top_k == 7 and s.llm.timeout_s == 12.5


def test_only_the_given_mapping_is_read(monkeypatch):
    monkeypatch.setenv("DOCCHAT_TOP_K", "9")
    assert load_settings({}).retrieval.top_k == 5
    assert load_settings().retrieval.top_k == 9
    assert Settings().retrieval.top_k == 5  # keyword construction never reads the environment


def test_empty_values_mean_unset_and_other_keys_are_ignored():
    s = load_settings({"DOCCHAT_TOP_K": "", "DOCCHAT_MODE": "", "top_k": "9", "PATH": "/bin", "DOCCHAT_NOPE": "1"})
    assert s == Settings()


def test_secrets_take_precedence_over_the_environment():
    env = {"DOCCHAT_TOP_K": "7", "OLLAMA_HOST": "http://env:11434", "DOCCHAT_MODE": "local"}
    secrets = {"DOCCHAT_TOP_K": 8, "DOCCHAT_MODE": "demo", "DOCCHAT_TEMPERATURE": "", "section": {"a": 1}}
    s = load_settings(env, secrets)
    assert (s.retrieval.top_k, s.mode, s.llm.ollama_host, s.llm.temperature) == (8, "demo", "http://env:11434", 0.1)
    assert load_settings(env, {"OLLAMA_API_KEY": 12345}).llm.ollama_api_key == "12345"  # TOML numbers are fine


@pytest.mark.parametrize("env, sentence", [
    ({"DOCCHAT_CHUNK_TOKENS": "2"}, "DOCCHAT_CHUNK_TOKENS=2 is not allowed: use a whole number from 32 to 256."),
    ({"DOCCHAT_TOP_K": "0"}, "DOCCHAT_TOP_K=0 is not allowed: use a whole number from 1 to 50."),
    ({"DOCCHAT_MODE": "foo"}, "DOCCHAT_MODE=foo is not allowed: use “local” or “demo”."),
    ({"DOCCHAT_MIN_RELEVANCE": "2"}, "DOCCHAT_MIN_RELEVANCE=2 is not allowed: use a number from 0 to 1."),
    ({"DOCCHAT_TOP_K": "five"}, "DOCCHAT_TOP_K=five is not allowed: use a whole number from 1 to 50."),
    ({"DOCCHAT_TEMPERATURE": "nan"}, "DOCCHAT_TEMPERATURE=nan is not allowed: use a number from 0 to 2."),
    ({"DOCCHAT_LLM_TIMEOUT": "0"}, "DOCCHAT_LLM_TIMEOUT=0 is not allowed: use a number above 0 and up to 3600."),
    ({"DOCCHAT_ANSWER_TOKENS": "4096", "DOCCHAT_NUM_CTX_MAX": "2048"},
     "DOCCHAT_ANSWER_TOKENS=4096 is not allowed: it must be smaller than DOCCHAT_NUM_CTX_MAX (2048)."),
])
def test_bad_values_raise_one_sentence_naming_the_variable(env, sentence):
    with pytest.raises(SettingsError) as e:
        load_settings(env)
    assert str(e.value) == sentence
    assert isinstance(e.value, DocChatError) and isinstance(e.value, ValueError)
    assert "\n" not in str(e.value) and "pydantic" not in str(e.value)


def test_bad_secret_is_named_but_not_shown():
    with pytest.raises(SettingsError, match=r"^OLLAMA_API_KEY=\(hidden\) is not allowed"):
        load_settings({}, {"OLLAMA_API_KEY": ["not", "text"]})


def test_settings_use_only_the_public_pydantic_settings_api():
    """A private hook (a `_method` override, a `pydantic_settings.sources...` import) breaks on upgrade."""
    for node in ast.walk(ast.parse(inspect.getsource(config))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pydantic_settings"):
            assert node.module == "pydantic_settings", f"private module {node.module}"
            assert {a.name for a in node.names} <= set(pydantic_settings.__all__)
    for cls in vars(config).values():
        if isinstance(cls, type) and cls.__module__ == config.__name__:
            bases = [b for b in cls.__mro__[1:] if b.__module__.startswith("pydantic_settings")]
            overridden = {n for n, v in vars(cls).items() if inspect.isfunction(v) and n.startswith("_")
                          and not n.startswith("__") and any(hasattr(b, n) for b in bases)}
            assert not overridden, f"{cls.__name__} overrides private pydantic-settings methods {overridden}"


def test_keyword_construction_and_with_overrides_validate():
    with pytest.raises(SettingsError, match="DOCCHAT_TOP_K=0 is not allowed"):
        Settings(top_k=0)
    with pytest.raises(SettingsError, match="no_such_knob is not a DocChat setting"):
        Settings(no_such_knob=1)
    base = Settings(data_dir="lib", top_k=3)
    assert base.library.data_dir == Path("lib")
    changed = base.with_overrides(top_k=9, data_dir=Path("/x"))
    assert (changed.retrieval.top_k, changed.library.data_dir, base.retrieval.top_k) == (9, Path("/x"), 3)
    with pytest.raises(SettingsError, match="DOCCHAT_CHUNK_TOKENS=5 is not allowed"):
        base.with_overrides(chunk_tokens=5)
    assert base.with_overrides(ollama_model="").llm.ollama_model == ""  # empty in code: quoted answers only


def test_settings_are_frozen_and_hashable():
    s = Settings()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen-instance error
        s.retrieval.top_k = 3  # type: ignore[misc]
    assert hash(s) == hash(Settings()) and len({s, Settings(top_k=6)}) == 2
    assert "ok-secret" not in repr(Settings(ollama_api_key="ok-secret"))


def test_docs_settings_md_is_up_to_date():
    doc = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    for row in describe():
        assert f"`{row.variable}`" in doc and row.description in doc
    assert doc == settings_markdown(), "regenerate: .venv/bin/python -m rag_core settings --markdown > docs/settings.md"


def test_cli_with_a_bad_variable_exits_2_with_one_line(cli):
    for args in (("list",), ("settings", "--json"), ("wiki-search", "x")):
        r = cli(*args, env={"DOCCHAT_TOP_K": "0"}, unset=ENV_VARS)  # only this variable set
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip().splitlines() == ["Error: DOCCHAT_TOP_K=0 is not allowed: use a whole number from 1 "
                                                 "to 50."]
        assert "Traceback" not in r.stderr and r.stdout == ""


def test_cli_settings_lists_every_variable_with_its_value(cli):
    r = cli("settings", "--json", env={"DOCCHAT_TOP_K": "7", "OLLAMA_API_KEY": "s3cret"}, unset=ENV_VARS)
    assert r.returncode == 0, r.stderr
    rows = {row["variable"]: row for row in json.loads(r.stdout)["settings"]}
    assert set(rows) == set(ENV_VARS)
    assert rows["DOCCHAT_TOP_K"]["value"] == 7 and rows["DOCCHAT_TOP_K"]["default"] == 5
    assert rows["DOCCHAT_TOP_K"]["allowed"] == "a whole number from 1 to 50"
    assert rows["OLLAMA_API_KEY"]["value"] == "(set)" and "s3cret" not in r.stdout
    human = cli("settings", env={"DOCCHAT_TOP_K": "7"}, unset=ENV_VARS)
    assert human.returncode == 0 and "DOCCHAT_TOP_K = 7" in human.stdout
