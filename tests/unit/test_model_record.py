"""The library's embedding-model record and the pointer to its folder (issue 46, rag_core/store/model_record.py)."""
from __future__ import annotations

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, Settings
from rag_core.store.backends import edge_path
from rag_core.store.model_record import (
    ModelRecord,
    ReembedPlan,
    active_folder,
    pointer_path,
    read_plan,
    side_folder,
    stale_folders,
    write_plan,
    write_pointer,
)
from rag_core.store.server_embeddings import EmbeddingProvider, provider_of, reads_input_type, server_model


def test_a_library_without_a_record_is_minilms():
    assert ModelRecord.from_meta({}) == ModelRecord(DEFAULT_EMBEDDING_MODEL, 384)
    assert ModelRecord.from_meta({"embedding_model": "ollama:bge-m3", "dim": 1024}) == ModelRecord("ollama:bge-m3", 1024)


def test_the_pointer_names_the_library_folder_and_is_written_whole(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert active_folder(settings) == edge_path(settings) == tmp_path / "edge" / "docchat"
    side = side_folder(settings, "ollama:bge-m3")
    assert side.parent == tmp_path / "edge" and side.name.startswith(".docchat.model-")
    write_pointer(settings, side, ModelRecord("ollama:bge-m3", 1024))
    assert active_folder(settings) == edge_path(settings) == side
    assert [p.name for p in pointer_path(settings).parent.iterdir()] == ["docchat.active.json"]  # no temporary left
    pointer_path(settings).write_text('{"folder": "../../etc"}')  # a pointer out of the folder is not followed
    assert active_folder(settings) == tmp_path / "edge" / "docchat"


def test_stale_folders_are_those_neither_active_nor_planned(tmp_path):
    settings = Settings(data_dir=tmp_path)
    old, planned, other = (tmp_path / "edge" / "docchat", side_folder(settings, "ollama:a"),
                           side_folder(settings, "ollama:b"))
    for p in (old, planned, other, tmp_path / "edge" / "another-collection"):
        p.mkdir(parents=True)
    write_plan(settings, ReembedPlan(planned.name, "ollama:a"))
    assert read_plan(settings) == ReembedPlan(planned.name, "ollama:a")
    assert stale_folders(settings, read_plan(settings)) == [other]
    write_pointer(settings, planned, ModelRecord("ollama:a", 8))
    assert sorted(stale_folders(settings)) == sorted([old, other])


def test_the_setting_names_the_provider():
    assert provider_of(DEFAULT_EMBEDDING_MODEL) is EmbeddingProvider.LOCAL
    assert provider_of("/models/e5") is EmbeddingProvider.LOCAL
    settings = Settings(embedding_model="openai:text-embedding-3-small", openai_base_url="http://h:8080/v1/")
    server = server_model(settings)
    assert server is not None and (server.provider, server.model, server.host) == (
        EmbeddingProvider.OPENAI, "text-embedding-3-small", "http://h:8080/v1")
    assert server_model(Settings(), "ollama:bge-m3:567m").model == "bge-m3:567m"


def test_only_an_openai_compatible_e5_model_is_told_questions_from_passages():
    def told(setting: str) -> bool:
        server = server_model(Settings(openai_base_url="http://h:8080/v1"), setting)
        assert server is not None
        return reads_input_type(server)

    for name in ("multilingual-e5-small-q4", "intfloat/e5-base-v2", "E5-large", "multilingual-e5-small"):
        assert told(f"openai:{name}"), name
    for name in ("text-embedding-3-small", "bge-m3", "nomic-embed-text", "bge5", "e50-test", "smollm2-135m"):
        assert not told(f"openai:{name}"), name
    assert not told("ollama:multilingual-e5-small")  # Ollama's /api/embed has no such field


def test_the_settings_page_choice_holds_until_the_variable_changes(tmp_path):
    from rag_core.store.model_record import choice_path, wanted_model, write_choice

    settings = Settings(data_dir=tmp_path)
    assert wanted_model(settings) == DEFAULT_EMBEDDING_MODEL
    write_choice(settings, "ollama:bge-m3")
    assert wanted_model(settings) == "ollama:bge-m3"
    assert wanted_model(Settings(data_dir=tmp_path, embedding_model="ollama:other")) == "ollama:other"
    write_choice(settings, DEFAULT_EMBEDDING_MODEL)  # back to the variable's model: nothing to remember
    assert not choice_path(settings).exists() and wanted_model(settings) == DEFAULT_EMBEDDING_MODEL
