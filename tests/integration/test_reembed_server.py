"""One library, one model (issue 46, item 3) for a library on a Qdrant server: the re-embedding builds a side
collection on the same server and switches in one step with a collection alias; searches keep the old vectors until
then; Stop leaves the old library whole and drops the side collection; a real child process killed with SIGKILL
half-way leaves the old library whole, and the next start resumes the re-embedding (same model) or discards it.

No Qdrant server runs here: qdrant-client's local mode (`QdrantClient(path=...)`, aliases included) stands in for one,
as in tests/integration/test_store_backends.py, by replacing rag_core.store.backends.client.connect. The old library is
made with the real bundled MiniLM; the new model is the scripted Ollama server's (its vectors are FAKED, hashed words).
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
from qdrant_client import QdrantClient

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, Settings
from rag_core.service.library import Library
from rag_core.service.reembed import ReembedState, cancel_switch, open_for_model, switch_model
from rag_core.store import server_model
from rag_core.store.backends import client as client_module
from rag_core.store.backends.client import ClientBackend
from rag_core.store.model_record import ModelRecord, ReembedPlan
from tests.ollama_server import OllamaServer
from tests.reembed_helpers import CHILD_STATUS_LOOP, EMBED_MODELS, NEW, TOPICS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COLLECTION = "docchat"
URL = "http://local-mode.invalid:6333"  # never asked: connect is replaced by qdrant-client's local mode
TITLES = [f"City {i}" for i in range(len(TOPICS))]
CHILD = """
import json, sys, time
from pathlib import Path
from qdrant_client import QdrantClient
from rag_core.core.config import Settings
from rag_core.store.backends import client as client_module
from rag_core.service.reembed import open_for_model
folder = str(Path(sys.argv[1]) / "qdrant-server")
client_module.connect = lambda s: client_module.library_backend(QdrantClient(path=folder), s.library.collection)
settings = Settings(data_dir=sys.argv[1], qdrant_url=sys.argv[5], ollama_host=sys.argv[2], embedding_model=sys.argv[3])
""" + CHILD_STATUS_LOOP


@pytest.fixture
def ollama():
    with OllamaServer(models=["llama3.2:3b"]) as srv:
        srv.embed_models = dict(EMBED_MODELS)
        yield srv


@pytest.fixture
def data_dir(tmp_path, monkeypatch, embedder) -> Path:
    """A server library of six documents made with MiniLM; connect() opens it in qdrant-client's local mode."""
    folder = tmp_path / "data"
    monkeypatch.setattr(client_module, "connect", lambda s: client_module.library_backend(
        QdrantClient(path=str(s.library.data_dir / "qdrant-server")), s.library.collection))
    lib = Library(Settings(data_dir=folder, qdrant_url=URL), embedder=embedder)
    try:
        for i, text in enumerate(TOPICS):
            body = f"# City {i}\n\n{text} " + "It has museums, rivers and old streets. " * 8
            assert lib.ingest_bytes(body.encode(), f"city{i}.md").status == "added"
    finally:
        lib.close()
    return folder


def _settings(data_dir: Path, ollama: OllamaServer, model: str = NEW) -> Settings:
    return Settings(data_dir=data_dir, qdrant_url=URL, ollama_host=ollama.url, embedding_model=model)


def _raw(data_dir: Path) -> ClientBackend:
    return client_module.connect(Settings(data_dir=data_dir, qdrant_url=URL))


def _assert_whole(library: Library, model: str) -> None:
    assert library.embedder.name == model and ModelRecord.of_store(library.store).name == model
    assert sorted(d.title for d in library.store.list_documents()) == TITLES
    assert "Vienna" in library.search("capital of Austria", k=1)[0].chunk.text


def _assert_old_library_whole(data_dir: Path, embedder) -> None:
    lib = Library(Settings(data_dir=data_dir, qdrant_url=URL), embedder=embedder)
    try:
        _assert_whole(lib, DEFAULT_EMBEDDING_MODEL)
    finally:
        lib.close()


def _embeds(ollama: OllamaServer) -> int:
    return sum(1 for r in ollama.requests if r.path == "/api/embed")


def test_switch_on_a_server_searches_old_vectors_until_one_alias_step(data_dir, ollama, embedder):
    ollama.embed_delay = 0.4  # one request per document: the re-embedding takes a moment
    library, job = open_for_model(_settings(data_dir, ollama), embedder)
    side = server_model.side_collection(COLLECTION, NEW)
    try:
        assert job is not None and job.plan.folder == side
        assert server_model.read_plan(library.store.backend).model == NEW  # the plan, in the library's metadata
        _assert_whole(library, DEFAULT_EMBEDDING_MODEL)  # meanwhile: the old vectors, the old model
        assert job.status().state is ReembedState.RUNNING
        status = job.wait(120)
        assert status.state is ReembedState.DONE and status.done == status.total == len(TOPICS), status
        _assert_whole(library, NEW)  # after the switch: the new model only
        backend = library.store.backend
        assert backend.alias_target(COLLECTION) == side and backend.alias_target(f"{COLLECTION}__library") == \
            f"{side}__library"
        assert sorted(backend.collection_names()) == [side, f"{side}__library"]  # the old collections are gone
        assert server_model.read_plan(backend) is None
    finally:
        library.close()
    library, job = open_for_model(_settings(data_dir, ollama), None)  # the next start: the new library directly
    try:
        assert job is None and library.store.backend.collection == side  # opened by the name behind the alias
        _assert_whole(library, NEW)
        back = switch_model(library, DEFAULT_EMBEDDING_MODEL)  # and back: an alias moved from one side to another
        assert back is not None and back.wait(120).state is ReembedState.DONE
        _assert_whole(library, DEFAULT_EMBEDDING_MODEL)
        old_side, now = side, server_model.side_collection(COLLECTION, DEFAULT_EMBEDDING_MODEL)
        assert library.store.backend.alias_target(COLLECTION) == now
        assert old_side not in library.store.backend.collection_names()
    finally:
        library.close()


def test_stop_on_a_server_keeps_the_old_library_and_drops_the_side_collection(data_dir, ollama, embedder):
    ollama.embed_delay = 0.3
    library, job = open_for_model(_settings(data_dir, ollama), embedder)
    side = server_model.side_collection(COLLECTION, NEW)
    try:
        assert job is not None
        job.stop()
        assert job.wait(60).state is ReembedState.STOPPED
        _assert_whole(library, DEFAULT_EMBEDDING_MODEL)
        assert side in library.store.backend.collection_names()  # kept for the next start, until the page's Stop
        cancel_switch(library)
        names = library.store.backend.collection_names()
        assert side not in names and f"{side}__library" not in names and COLLECTION in names
        assert server_model.read_plan(library.store.backend) is None
        _assert_whole(library, DEFAULT_EMBEDDING_MODEL)
    finally:
        library.close()


def _kill_half_way(data_dir: Path, srv: OllamaServer, tmp_path: Path) -> int:
    """Run the re-embedding in a child, SIGKILL it once 2 documents are done; how many were done."""
    srv.embed_delay = 0.4
    status = tmp_path / "status.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(data_dir), srv.url, NEW, str(status), URL], cwd=ROOT,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, done = time.monotonic() + 180, 0
        while time.monotonic() < deadline and child.poll() is None:
            if status.exists():
                done = json.loads(status.read_text())["done"]
                if done >= 2:
                    break
            time.sleep(0.02)
        assert child.poll() is None, child.stderr.read().decode() if child.stderr else ""
        assert 2 <= done < len(TOPICS)
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    srv.embed_delay = 0.0
    return done


def test_kill_9_on_a_server_leaves_the_old_library_whole_and_the_next_start_resumes(data_dir, ollama, embedder,
                                                                                    tmp_path):
    done = _kill_half_way(data_dir, ollama, tmp_path)
    raw = _raw(data_dir)
    try:
        assert raw.alias_target(COLLECTION) is None  # no switch happened
        assert server_model.read_plan(raw) == ReembedPlan(server_model.side_collection(COLLECTION, NEW), NEW)
    finally:
        raw.close()
    _assert_old_library_whole(data_dir, embedder)
    before = _embeds(ollama)
    library, job = open_for_model(_settings(data_dir, ollama), embedder)
    try:
        assert job is not None and library.embedder.name == DEFAULT_EMBEDDING_MODEL
        status = job.wait(120)
        assert status.state is ReembedState.DONE and status.done == status.total == len(TOPICS), status
        assert _embeds(ollama) - before <= len(TOPICS) - done + 2  # the documents done before the kill: kept
        _assert_whole(library, NEW)
    finally:
        library.close()


def test_kill_9_on_a_server_then_another_model_discards_the_side_collection(data_dir, ollama, embedder, tmp_path):
    _kill_half_way(data_dir, ollama, tmp_path)
    side = server_model.side_collection(COLLECTION, NEW)
    library, job = open_for_model(Settings(data_dir=data_dir, qdrant_url=URL), embedder)  # back to MiniLM: discard
    try:
        assert job is None and side not in library.store.backend.collection_names()
        assert server_model.read_plan(library.store.backend) is None
        _assert_whole(library, DEFAULT_EMBEDDING_MODEL)
    finally:
        library.close()


def test_a_first_switch_cut_short_between_delete_and_alias_is_finished_at_the_next_start(data_dir, ollama, embedder,
                                                                                        monkeypatch):
    real = ClientBackend.switch_alias

    def cut_short(self, name, physical):  # the library's collections deleted, then the process "dies"
        self.client.update_collection_aliases = lambda **kw: (_ for _ in ()).throw(OSError("killed"))
        real(self, name, physical)

    monkeypatch.setattr(ClientBackend, "switch_alias", cut_short)
    library, job = open_for_model(_settings(data_dir, ollama), embedder)
    try:
        assert job is not None and job.wait(120).state is ReembedState.FAILED
        assert COLLECTION not in library.store.backend.collection_names()
    finally:
        library.close()
    monkeypatch.setattr(ClientBackend, "switch_alias", real)
    library, job = open_for_model(_settings(data_dir, ollama), None)
    try:
        assert job is None and library.store.backend.alias_target(COLLECTION) == server_model.side_collection(
            COLLECTION, NEW)
        _assert_whole(library, NEW)
    finally:
        library.close()
