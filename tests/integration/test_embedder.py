"""The embedding model can load in the background: the library opens and lists at once, the first search waits."""
from __future__ import annotations

import time

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError
from rag_core.service.library import Library
from rag_core.store.embeddings import Embedder, model_shape


def test_shape_is_read_without_loading_the_model(embedder):
    assert model_shape(embedder.path) == (embedder.dim, embedder.max_seq_length) == (384, 256)


def test_library_opens_while_the_model_loads(tmp_path, embedder):
    settings = Settings(data_dir=tmp_path / "d")
    lib = Library(settings, embedder=embedder)
    assert lib.ingest_bytes(b"Tulips flower in spring in the Netherlands.", "tulips.txt").status == "added"
    lib.close()
    t0 = time.perf_counter()
    slow = Embedder(background=True)
    lib = Library(settings, embedder=slow)
    try:
        opened = time.perf_counter() - t0
        assert [d.title for d in lib.documents()] == ["tulips"]
        listed = time.perf_counter() - t0
        hits = lib.search("When do tulips flower?", k=1)  # waits for the model
        assert slow.ready and hits and "Tulips" in hits[0].chunk.text
        assert opened < 5 and listed < 5, (opened, listed)
    finally:
        lib.close()


def test_a_model_that_cannot_load_says_so_on_first_use(tmp_path):
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    broken = Embedder(str(folder), background=True)
    with pytest.raises(DocChatError, match="missing or damaged"):
        broken.encode(["hello"])
    assert broken.ready
