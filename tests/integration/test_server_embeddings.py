"""Embedding models from the model server (issue 46, item 2), over real HTTP.

- Ollama's `/api/embed` through langchain-ollama's OllamaEmbeddings, against tests/ollama_server.py: the wire is
  Ollama's (requests, answers, errors), the vectors are FAKED (hashed words, `fake_vector`), not a model's.
- OpenAI-compatible `/v1/embeddings` through langchain-openai's OpenAIEmbeddings, against a REAL llama.cpp server
  (tests/llama_server.py, xllamacpp) serving SmolLM2-135M with `--embeddings --pooling mean` (slow: one model load).

Covered: a library added and searched with a server model; its record; a server that is unreachable, does not have
the model, or answers vectors of another size, each as one sentence; listing the server's embedding models.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import EmbeddingServerUnreachable, EmbeddingSizeWrong
from rag_core.service.library import Library
from rag_core.store.model_record import ModelRecord
from rag_core.store.server_embeddings import ServerEmbedder, list_embedding_models, open_embedder
from tests.ollama_server import OllamaServer

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "documents" / "eu_capitals.md"
EMBED = "fake-embed"


@pytest.fixture
def ollama():
    with OllamaServer(models=["llama3.2:3b"]) as srv:
        srv.embed_models = {EMBED: 32, "bge-m3": 1024}
        yield srv


def _settings(tmp_path: Path, srv: OllamaServer, model: str = f"ollama:{EMBED}") -> Settings:
    return Settings(data_dir=tmp_path / "data", ollama_host=srv.url, embedding_model=model)


def test_a_library_is_added_and_searched_with_an_ollama_embedding_model(tmp_path, ollama):
    settings = _settings(tmp_path, ollama)
    lib = Library(settings)
    try:
        assert isinstance(lib.embedder, ServerEmbedder)
        assert lib.ingest_bytes(FIXTURE.read_bytes(), FIXTURE.name).status == "added"
        assert ModelRecord.of_store(lib.store) == ModelRecord(f"ollama:{EMBED}", 32)
        hits = lib.search("capital of Belgium", k=3)
        assert hits and any("Brussels" in h.chunk.text for h in hits)
    finally:
        lib.close()
    bodies = [r.body for r in ollama.requests if r.path == "/api/embed"]
    assert bodies and all(b["model"] == EMBED and isinstance(b["input"], list) for b in bodies)
    lib = Library(settings)  # reopened: the record matches, nothing refused
    try:
        assert len(lib.store.list_documents()) == 1
    finally:
        lib.close()


def test_vectors_are_normalised_and_questions_use_the_same_model(tmp_path, ollama):
    emb = open_embedder(_settings(tmp_path, ollama))
    vectors = emb.encode(["Brussels is the capital of Belgium.", "Paris"])
    assert vectors.shape == (2, 32) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert emb.count_tokens(["Brussels is the capital"]) == [4]  # word pieces: the bundled tokenizer counts them


def test_an_unreachable_server_is_one_sentence(tmp_path):
    settings = Settings(data_dir=tmp_path / "d", ollama_host="http://127.0.0.1:9", embedding_model="ollama:x")
    with pytest.raises(EmbeddingServerUnreachable) as err:
        open_embedder(settings).encode(["hello"])
    assert "could not be reached at http://127.0.0.1:9" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(EmbeddingServerUnreachable):  # opening a new library asks the vector size: same sentence
        Library(settings)


def test_a_model_the_server_lacks_is_one_sentence(tmp_path, ollama):
    with pytest.raises(EmbeddingServerUnreachable, match="does not have this model"):
        open_embedder(_settings(tmp_path, ollama, "ollama:nomic-embed-text")).encode(["hello"])


def test_vectors_of_the_wrong_size_are_refused(tmp_path, ollama):
    settings = _settings(tmp_path, ollama)
    lib = Library(settings)
    try:
        assert lib.ingest_bytes(FIXTURE.read_bytes(), FIXTURE.name).status == "added"
        ollama.embed_dim_override = 16  # the server now serves another model under the same name
        with pytest.raises(EmbeddingSizeWrong, match="returned vectors of 16 numbers where 32 were expected"):
            lib.search("capital of Belgium")
    finally:
        lib.close()
    lib = Library(settings)  # reopened: it opens and lists with its record's size (32), the server not asked
    try:
        assert len(lib.documents()) == 1
        with pytest.raises(EmbeddingSizeWrong, match="returned vectors of 16 numbers where 32 were expected"):
            lib.search("capital of Belgium")
    finally:
        lib.close()


def test_the_servers_embedding_models_are_listed(tmp_path, ollama):
    assert list_embedding_models(_settings(tmp_path, ollama), "ollama") == ["ollama:fake-embed", "ollama:bge-m3"]
    with pytest.raises(EmbeddingServerUnreachable):
        list_embedding_models(Settings(ollama_host="http://127.0.0.1:9"), "ollama")


@pytest.mark.slow
def test_a_real_llama_cpp_server_embeds_through_v1_embeddings(tmp_path):
    from tests.llama_server import ALIAS, LlamaServer

    with LlamaServer(embeddings=True) as srv:
        settings = Settings(data_dir=tmp_path / "data", openai_base_url=srv.base_url, embedding_model=f"openai:{ALIAS}")
        assert list_embedding_models(settings, "openai") == [f"openai:{ALIAS}"]
        lib = Library(settings)
        try:
            assert ModelRecord.of_store(lib.store).dim == 576  # SmolLM2-135M's hidden size, mean-pooled by llama.cpp
            assert lib.ingest_bytes(FIXTURE.read_bytes(), FIXTURE.name).status == "added"
            assert lib.search("capital of Belgium", k=3)
        finally:
            lib.close()
