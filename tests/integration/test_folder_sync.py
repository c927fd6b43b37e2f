"""Folder sync end to end (issue 39): a real folder, the real model and the embedded store. The diff's four buckets,
applying all or ticked files, a changed file replacing its passages in one step (a search meanwhile sees the old
version or the new one), soft delete with Undo, and a kill -9 at every write of a replacement."""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from store_helpers import die_before_write, open_bare_store, raw_state, synthetic_document

import rag_core.service.folder_sync as folder_sync
from rag_core.core.errors import DocumentNotFound, FolderNotFound
from rag_core.service.folder_sync import Bucket, apply_change, chosen, diff_folder
from rag_core.service.library import Library
from rag_core.service.linked_folders import FolderLinks
from rag_core.store.backends import COMPLETE

pytestmark = pytest.mark.remembered_vectors

TEXTS = {
    "lighthouse.txt": "The lighthouse keeper climbs the tower every evening to light the great lamp for the ships.",
    "reports/bees.md": "# Bees\n\nHoney bees dance to tell the hive where the flowers are, and how far away.",
    "reports/volcano.txt": "A volcano erupts when pressure from the magma chamber pushes molten rock to the surface.",
}


@pytest.fixture
def lib(settings, embedder):
    library = Library(settings, embedder=embedder)
    yield library
    library.close()


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "Reports"
    for rel, text in TEXTS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def _apply(lib, links, diff, paths=None):
    return [apply_change(lib, links, diff.folder, c) for c in chosen(diff, paths)]


def _touch_later(path: Path, text: str) -> None:
    """Write new content with a modification time surely different from the old one."""
    old = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(old + 2_000_000_000, old + 2_000_000_000))


def test_link_review_apply_and_review_again(lib, settings, folder, monkeypatch):
    links = FolderLinks(settings)
    links.link(folder)
    diff = diff_folder(lib, links, folder)
    assert diff.counts() == {Bucket.NEW: 3, Bucket.CHANGED: 0, Bucket.REMOVED: 0, Bucket.UNCHANGED: 0,
                             Bucket.WIKIPEDIA: 0}
    assert [c.rel for c in diff.bucket(Bucket.NEW)] == sorted(TEXTS)
    assert diff.summary() == "3 files changed in Reports"
    assert lib.documents() == []  # nothing changes before applying
    results = _apply(lib, links, diff)
    assert [r.status for r in results] == ["added"] * 3
    assert {d.file_name for d in lib.documents()} == {"lighthouse.txt", "bees.md", "volcano.txt"}

    hashed = []
    real = folder_sync.hash_file
    monkeypatch.setattr(folder_sync, "hash_file", lambda *a: hashed.append(a[0]) or real(*a))
    again = diff_folder(lib, links, folder)
    assert again.counts()[Bucket.UNCHANGED] == 3 and again.pending == () and hashed == []  # size+time: no reading
    assert again.summary() == "Reports is up to date"

    os.utime(folder / "lighthouse.txt", ns=(1, 1))  # touched, same content: read once, unchanged, remembered
    assert diff_folder(lib, links, folder).pending == () and len(hashed) == 1
    assert diff_folder(lib, links, folder).pending == () and len(hashed) == 1


def test_changed_removed_and_new_files_and_ticking_some(lib, settings, folder):
    links = FolderLinks(settings)
    links.link(folder)
    _apply(lib, links, diff_folder(lib, links, folder))
    old = {d.file_name: d.doc_id for d in lib.documents()}

    _touch_later(folder / "lighthouse.txt", "The lighthouse keeper now uses an electric lamp and a ledger of ships.")
    (folder / "reports" / "volcano.txt").unlink()
    (folder / "reports" / "harbour.txt").write_text("The harbour master keeps a ledger of every boat that docks.")
    diff = diff_folder(lib, links, folder)
    assert {b: [c.rel for c in diff.bucket(b)] for b in Bucket} == {
        Bucket.NEW: ["reports/harbour.txt"], Bucket.CHANGED: ["lighthouse.txt"],
        Bucket.REMOVED: ["reports/volcano.txt"], Bucket.UNCHANGED: ["reports/bees.md"], Bucket.WIKIPEDIA: []}
    changed = diff.bucket(Bucket.CHANGED)[0]
    assert changed.old_doc_id == old["lighthouse.txt"]
    assert diff.bucket(Bucket.REMOVED)[0].title

    _apply(lib, links, diff, {"lighthouse.txt"})  # ticked: only the changed file
    names = {d.file_name: d.doc_id for d in lib.documents()}
    assert set(names) == {"lighthouse.txt", "bees.md", "volcano.txt"}
    assert names["lighthouse.txt"] == changed.doc_id != old["lighthouse.txt"]
    assert lib.store.count_chunks() == sum(d.chunks for d in lib.documents())  # the old version's passages are gone
    hits = lib.search("lighthouse electric lamp", k=5)
    assert {h.chunk.doc_id for h in hits if "lighthouse" in h.chunk.text} == {changed.doc_id}

    rest = diff_folder(lib, links, folder)
    assert [(c.bucket, c.rel) for c in rest.pending] == [(Bucket.NEW, "reports/harbour.txt"),
                                                         (Bucket.REMOVED, "reports/volcano.txt")]
    _apply(lib, links, rest)
    assert {d.file_name for d in lib.documents()} == {"lighthouse.txt", "bees.md", "harbour.txt"}
    assert diff_folder(lib, links, folder).pending == ()


def test_removed_file_is_soft_deleted_with_undo(lib, settings, folder):
    links = FolderLinks(settings)
    links.link(folder)
    _apply(lib, links, diff_folder(lib, links, folder))
    volcano = next(d for d in lib.documents() if d.file_name == "volcano.txt")
    (folder / "reports" / "volcano.txt").unlink()
    _apply(lib, links, diff_folder(lib, links, folder))
    assert volcano.doc_id not in {d.doc_id for d in lib.documents()}
    assert not [h for h in lib.search("volcano magma chamber", k=10) if h.chunk.doc_id == volcano.doc_id]
    assert [d.doc_id for d, _ in lib.removed()] == [volcano.doc_id]
    assert lib.store.repair() == 0  # kept passages of a removed document are not damage

    lib.restore(volcano.doc_id)  # Undo
    assert volcano.doc_id in {d.doc_id for d in lib.documents()} and lib.removed() == []
    assert any(h.chunk.doc_id == volcano.doc_id for h in lib.search("volcano magma chamber", k=10))
    with pytest.raises(DocumentNotFound):
        lib.restore(volcano.doc_id)

    lib.remove(volcano.doc_id)
    lib.purge(volcano.doc_id)
    assert lib.removed() == [] and lib.store.count_chunks() == sum(d.chunks for d in lib.documents())


def test_first_link_adopts_files_already_in_the_library(lib, settings, folder):
    lib.ingest_path(folder / "lighthouse.txt")
    links = FolderLinks(settings)
    links.link(folder)
    diff = diff_folder(lib, links, folder)
    assert [c.rel for c in diff.bucket(Bucket.UNCHANGED)] == ["lighthouse.txt"]
    assert len(diff.bucket(Bucket.NEW)) == 2
    assert "lighthouse.txt" in links.get(folder).files


def test_vanished_folder_is_one_sentence_and_changes_nothing(lib, settings, folder):
    links = FolderLinks(settings)
    links.link(folder)
    _apply(lib, links, diff_folder(lib, links, folder))
    shutil.rmtree(folder)
    with pytest.raises(FolderNotFound, match="Reports"):
        diff_folder(lib, links, folder)
    assert len(lib.documents()) == 3


def test_a_search_during_a_replacement_sees_one_version(settings):
    """Searches run in a loop while a 40-passage document is replaced 6 times: each sees the old version or the
    new one, never both or neither; and the two status changes happen with the gate held alone."""
    store = open_bare_store("edge", str(settings.library.data_dir))
    try:
        src, chunks, vectors = synthetic_document(store, "v0", 40, seed=0)
        store.add_chunks(src, chunks, None, vectors=vectors)
        seen_gate = []
        real = store.backend.set_status

        def watched(doc_id, status):
            seen_gate.append(store.gate._swapping)
            return real(doc_id, status)

        store.backend.set_status = watched
        done = threading.Event()
        bad: list[set[str]] = []
        searches = [0]

        def search() -> None:
            while not done.is_set():
                hits = store.query(vectors[0][0].tolist(), None, 60)
                ids = {h.chunk.doc_id for h in hits}
                searches[0] += 1
                if len(ids) != 1:
                    bad.append(ids)

        t = threading.Thread(target=search)
        t.start()
        try:
            for v in range(1, 7):
                src, chunks, vectors2 = synthetic_document(store, f"v{v}", 40, seed=0)
                store.replace_document(f"v{v - 1}", src, chunks, None, vectors2)
        finally:
            done.set()
            t.join()
        assert bad == [] and searches[0] > 0
        assert seen_gate and all(seen_gate)
        assert [d.doc_id for d in store.list_documents()] == ["v6"] and store.count_chunks() == 40
    finally:
        store.close()


def _replace_child(data_dir: str, kill_at: int, ready) -> None:
    store = open_bare_store("edge", data_dir)
    src, chunks, vectors = synthetic_document(store, "new", 9, seed=3)
    die_before_write(store, kill_at)
    ready.set()
    store.replace_document("old", src, chunks, None, vectors)
    os.kill(os.getpid(), 9)


@pytest.mark.slow
@pytest.mark.linux_only("kills a child process with SIGKILL at each write")
def test_kill_9_at_every_write_of_a_replacement_leaves_one_version(tmp_path):
    pristine = tmp_path / "pristine"
    store = open_bare_store("edge", str(pristine))
    src, chunks, vectors = synthetic_document(store, "old", 7, seed=2)
    store.add_chunks(src, chunks, None, vectors=vectors)
    store.close()
    ctx = multiprocessing.get_context("fork")
    outcomes = set()
    for kill_at in range(0, 18):  # a replacement makes 15 writes: the last kills land after it finished
        work = tmp_path / f"k{kill_at}"
        subprocess.run(["cp", "-a", str(pristine), str(work)], check=True)
        ready = ctx.Event()
        child = ctx.Process(target=_replace_child, args=(str(work), kill_at, ready))
        child.start()
        assert ready.wait(60)
        child.join(60)
        assert child.exitcode == -9
        store = open_bare_store("edge", str(work))
        try:
            state = raw_state(store.backend)
            docs = [(d.doc_id, d.chunks) for d in store.list_documents()]
            assert docs in ([("old", 7)], [("new", 9)]), (kill_at, state)
            assert state == {docs[0][0]: (COMPLETE, docs[0][1], docs[0][1])}, (kill_at, state)
            hits = store.query(vectors[0][0].tolist(), None, 20)
            assert {h.chunk.doc_id for h in hits} == {docs[0][0]}
        finally:
            store.close()
        outcomes.add(docs[0][0])
        shutil.rmtree(work)
    assert outcomes == {"old", "new"}


def test_the_interval_check_finds_changes_and_applies_nothing(lib, settings, folder):
    from rag_core.service.folder_watch import FolderWatch

    links = FolderLinks(settings)
    links.link(folder)
    watch = FolderWatch(lib)
    watch.start(0.05)
    try:
        deadline = time.monotonic() + 60
        while not watch.last() and time.monotonic() < deadline:
            threading.Event().wait(0.01)  # polling for the state (the first check), bounded
        [check] = watch.last()
    finally:
        watch.stop()
    assert check.needs_review and check.diff is not None and check.diff.summary() == "3 files changed in Reports"
    assert lib.documents() == []  # found, never applied
    shutil.rmtree(folder)
    assert "is not there any more" in (watch.check(folder).error or "")


@pytest.mark.slow
@pytest.mark.linux_only("kills `docchat sync` with SIGKILL")
def test_kill_9_while_applying_a_diff_loses_nothing(tmp_path, capsys):
    """`docchat sync` is killed while it adds a folder's files; the library then holds whole documents only, the
    next check lists exactly the files not yet applied, and applying them completes the folder."""
    import signal
    import subprocess
    import sys

    from rag_core.adapters.cli.main import main

    folder = tmp_path / "Notes"
    folder.mkdir()
    for i in range(12):
        (folder / f"note{i:02d}.txt").write_text(f"Note {i}: the harbour master logged ferry number {i} at dawn.")
    data = tmp_path / "data"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "rag_core", "sync", str(folder), "--yes", "--data-dir", str(data)],
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    started = 0
    for line in proc.stderr:  # "  new: note03.txt…" is printed as each file's turn comes
        started += line.startswith("  new: ")
        if started == 5:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    assert started == 5 and proc.returncode == -9

    store = open_bare_store("edge", str(data))
    try:
        state = raw_state(store.backend)
        assert all(status == COMPLETE and recorded == stored for status, recorded, stored in state.values()), state
        kept = len(store.list_documents())
    finally:
        store.close()
    assert 4 <= kept <= 5  # four finished, the fifth maybe
    assert main(["sync", str(folder), "--dry-run", "--json", "--data-dir", str(data)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["counts"]["unchanged"] == kept and got["counts"]["new"] == 12 - kept
    assert main(["sync", str(folder), "--json", "--data-dir", str(data)]) == 0
    capsys.readouterr()
    assert main(["sync", str(folder), "--dry-run", "--json", "--data-dir", str(data)]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["counts"]["unchanged"] == 12 and got["counts"]["new"] == 0


def test_a_removed_document_is_kept_30_days_then_purged(lib, settings, folder):
    from rag_core.service.folder_workspace import REMOVED_KEPT_S
    from rag_core.service.jobs import IngestQueue
    from rag_core.service.workspace import LocalWorkspace
    from rag_core.store.backends import REMOVED

    links = FolderLinks(settings)
    links.link(folder)
    _apply(lib, links, diff_folder(lib, links, folder))
    (folder / "lighthouse.txt").unlink()
    (folder / "reports" / "bees.md").unlink()
    _apply(lib, links, diff_folder(lib, links, folder))
    ws = LocalWorkspace(lib, IngestQueue(lib))
    assert len(ws.removed_documents()) == 2
    old = next(d for d in ws.removed_documents() if d.file_name == "lighthouse.txt")
    entry = lib.store.backend.get_entry(old.doc_id)
    assert entry is not None and entry.status == REMOVED
    lib.store.backend.put_entry(replace(entry, removed_at=time.time() - REMOVED_KEPT_S - 60))  # removed 30 days ago
    assert [d.file_name for d in ws.removed_documents()] == ["bees.md"]
    assert lib.store.backend.get_entry(old.doc_id) is None
    assert lib.store.count_chunks() == sum(d.chunks for d in lib.documents()) + ws.removed_documents()[0].chunks


@pytest.mark.parametrize("fail_at", ["upsert", "second_flush"])
def test_a_failed_replacement_leaves_the_old_version_searchable(settings, fail_at):
    from rag_core.core.errors import DiskFull

    store = open_bare_store("edge", str(settings.library.data_dir))
    try:
        src, chunks, vectors = synthetic_document(store, "old", 6, seed=1)
        store.add_chunks(src, chunks, None, vectors=vectors)
        new = synthetic_document(store, "new", 8, seed=2)
        flushes = [0]
        real_flush, real_upsert = store.backend.flush, store.backend.upsert

        def flush():
            flushes[0] += 1
            if fail_at == "second_flush" and flushes[0] == 2:  # the one after the swap
                raise DiskFull("the new version could not be saved")
            return real_flush()

        def upsert(points):
            if fail_at == "upsert":
                raise DiskFull("the new version could not be saved")
            return real_upsert(points)

        store.backend.flush, store.backend.upsert = flush, upsert
        with pytest.raises(DiskFull):
            store.replace_document("old", new[0], new[1], None, new[2])
        store.backend.flush, store.backend.upsert = real_flush, real_upsert
        assert [(d.doc_id, d.chunks) for d in store.list_documents()] == [("old", 6)]
        assert {h.chunk.doc_id for h in store.query(vectors[0][0].tolist(), None, 20)} == {"old"}
        assert raw_state(store.backend) == {"old": (COMPLETE, 6, 6)}
    finally:
        store.close()
