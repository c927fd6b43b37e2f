"""AppTest harness: the real app script, a real library on a temp folder, the scripted Ollama server."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
for p in (str(ROOT), str(ROOT / "tests"), str(Path(__file__).parent)):
    if p not in sys.path:
        sys.path.insert(0, p)

from ollama_server import OllamaServer  # noqa: E402

from ui_helpers import MODEL  # noqa: E402


@pytest.fixture(scope="session")
def ollama():
    """One scripted Ollama-compatible server for the UI tests (tests script their replies)."""
    with OllamaServer(models=[MODEL]) as srv:
        yield srv


@pytest.fixture
def app(tmp_path, monkeypatch, ollama):
    """Environment for one app session: its own data folder; the library and queue the app will use."""
    import ui_state

    monkeypatch.setenv("DOCCHAT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OLLAMA_HOST", ollama.url)
    monkeypatch.setenv("DOCCHAT_OLLAMA_MODEL", MODEL)
    ollama._queue.clear()
    lib = ui_state.get_library()
    queue = ui_state.get_queue()
    yield SimpleNamespace(library=lib, queue=queue, settings=ui_state.base_settings(), server=ollama,
                          data_dir=tmp_path / "data")
    queue.close()
    lib.close()
    ui_state._queue.clear()
    ui_state._library.clear()
