"""AppTest harness: the real app script, a real library on a temp folder, the scripted Ollama server."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from ollama_server import OllamaServer
from shared_model import remembering_embedder
from ui_helpers import MODEL


@pytest.fixture(scope="session", autouse=True)
def one_model():
    """The app's embedding model is this test process's shared one, remembering vectors (tests/shared_model.py): the
    page tests add the same fixture files again and again, and time uploads with gates, not with the model."""
    from rag_core.store.embeddings import Embedder
    from ui import state

    def load(name: str) -> Embedder:
        model = remembering_embedder()
        return model if name == model.name else Embedder(name, background=True)

    patch = pytest.MonkeyPatch()
    patch.setattr(state, "load_embedder", load)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def ollama():
    """One scripted Ollama-compatible server for the UI tests (tests script their replies)."""
    with OllamaServer(models=[MODEL]) as srv:
        yield srv


@pytest.fixture
def app(tmp_path, monkeypatch, ollama):
    """Environment for one app session: its own data folder; the library and queue the app will use."""
    from ui import state

    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    monkeypatch.setenv("DOCCHAT_OLLAMA_MODEL", MODEL)
    ollama._queue.clear()
    rt = state.runtime()
    yield SimpleNamespace(library=rt.library, queue=rt.queue, settings=state.base_settings(), server=ollama,
                          data_dir=tmp_path / "data")
    state.reset_runtime()
