"""Crash- and disk-full-safe storage (issue 13): a real kill -9 before every write step and at random moments of adding
and deleting a document, re-adding a half-deleted or damaged document, and a real full filesystem (an ext4 image
loop-mounted in a private mount namespace). After any of them the library holds each document either completely
(its entry and exactly its recorded number of points) or not at all, and it still lists and searches."""
from __future__ import annotations

import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from protocol_server import JSONHandler, ThreadedServer
from qdrant_client import QdrantClient
from store_helpers import (
    BACKENDS,
    add_synthetic,
    child_operation,
    open_bare_backend,
    open_bare_store,
    open_library,
    raw_state,
    synthetic_document,
)

from rag_core.core.errors import DiskFull, StorageError, StoreUnavailable
from rag_core.store.backends import COMPLETE, DELETING, PENDING

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

ROOT = Path(__file__).resolve().parents[2]
OTHER, TARGET = "doc-other", "doc-target"
SEED = int(os.environ.get("DOCCHAT_CRASH_SEED", "13"))


@pytest.fixture(scope="module")
def forkserver():
    """Children forked from a server that has imported the storage code once (a run of the kill loop takes ~0.5 s,
    not the ~3 s of importing it again). Only installed packages can be preloaded: the server ignores sys.path."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["rag_core.service.library", "rag_core.store.backends.client", "rag_core.store.backends.edge"])
    return ctx


def _library(kind: str, folder: Path, target: int) -> Path:
    """A closed library with a 12-chunk document and (target > 0) a `target`-chunk one."""
    store = open_bare_store(kind, str(folder))
    try:
        add_synthetic(store, OTHER, 12, seed=1)
        if target:
            add_synthetic(store, TARGET, target, seed=2)
    finally:
        store.close()
    return folder


def _run(ctx, kind: str, pristine: Path, work: Path, op: str, n: int, kill_at: int | None = None,
         delay: float | None = None, batch: int = 64) -> int | None:
    """Copy the pristine library, run the operation in a child and kill it (before write `kill_at`, or after
    `delay` seconds); the child's exit code (0: it finished before the kill came)."""
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["cp", "-a", "--sparse=always", str(pristine), str(work)], check=True)
    ready = ctx.Event()
    child = ctx.Process(target=child_operation, args=(kind, str(work), op, TARGET, n, batch, ready, kill_at))
    child.start()
    assert ready.wait(120), "the child never got ready"
    if delay is not None:
        time.sleep(delay)
        if child.exitcode is None:
            os.kill(child.pid, signal.SIGKILL)
    child.join(120)
    return child.exitcode


def _measure(ctx, kind: str, pristine: Path, work: Path, op: str, n: int, batch: int = 64) -> tuple[int, float]:
    """How many backend writes the operation makes, and how many seconds it takes, measured in a child."""
    shutil.rmtree(work, ignore_errors=True)
    subprocess.run(["cp", "-a", "--sparse=always", str(pristine), str(work)], check=True)
    ready, measured = ctx.Event(), ctx.Array("d", 2)
    child = ctx.Process(target=child_operation, args=(kind, str(work), op, TARGET, n, batch, ready, None, measured))
    child.start()
    child.join(120)
    assert child.exitcode == 0
    return int(measured[0]), measured[1]


def _after_crash(kind: str, work: Path, n: int) -> str:
    """What the kill left of the target before the library is opened again ("complete", "journalled": a pending or
    deleting entry, or "absent"); then open it and check that each document is whole or gone, and nothing else."""
    backend = open_bare_backend(kind, str(work))
    try:
        before = raw_state(backend)
    finally:
        backend.close()
    entry = before.get(TARGET)
    left = "absent" if entry is None else "journalled" if entry[0] in (PENDING, DELETING) else "complete"
    if left == "complete":
        assert entry == (COMPLETE, n, n), before  # never "complete with fewer points"
    store = open_bare_store(kind, str(work))
    try:
        after = raw_state(store.backend)
        assert after[OTHER] == (COMPLETE, 12, 12), after
        target = after.get(TARGET)
        assert target in (None, (COMPLETE, n, n)), (left, before, after)
        assert set(after) <= {OTHER, TARGET}, after  # no points of no document
        assert store.count_chunks() == sum(d.chunks for d in store.list_documents())
        hits = store.query(None, store.lexical.embed_query("lighthouse keeper storm"), 50)
        assert {h.chunk.doc_id for h in hits} <= {d.doc_id for d in store.list_documents()}
        assert (store.intact(TARGET) is not None) == (target is not None)
    finally:
        store.close()
    return left


def _kill_loop(forkserver, kind: str, tmp_path: Path, op: str, n: int, timed: int) -> dict[str, int]:
    """Kill the operation before each of its write calls, after it (before close) and at `timed` random moments."""
    pristine = _library(kind, tmp_path / "pristine", n if op == "delete" else 0)
    work = tmp_path / "work"
    calls, took = _measure(forkserver, kind, pristine, work, op, n)
    rng = random.Random(SEED)
    kills = [(k, None) for k in range(calls + 1)] + [(None, rng.uniform(0, 1.2 * took)) for _ in range(timed)]
    outcomes: dict[str, int] = {}
    for kill_at, delay in kills:
        code = _run(forkserver, kind, pristine, work, op, n, kill_at, delay)
        assert code in (0, -signal.SIGKILL), code
        left = _after_crash(kind, work, n)
        outcomes[left] = outcomes.get(left, 0) + 1
    print(f"{kind} {op} of {n} chunks: {calls} write calls, {took:.2f} s; {len(kills)} kills -> {outcomes}")
    return outcomes


@pytest.mark.slow
def test_kill_during_delete_leaves_the_document_whole_or_gone(forkserver, tmp_path):
    """kill -9 before each of the delete's writes, after it, and at random moments inside it (Qdrant Edge)."""
    outcomes = _kill_loop(forkserver, "edge", tmp_path, "delete", 600, timed=6)
    assert outcomes.get("journalled", 0) >= 2 and outcomes.get("complete", 0) >= 1, outcomes
    assert outcomes.get("absent", 0) >= 1, outcomes


@pytest.mark.slow
def test_kill_during_add_leaves_the_document_whole_or_gone(forkserver, tmp_path):
    """kill -9 before each of the add's writes (entry, flush, every batch, completion), after it, and at random."""
    outcomes = _kill_loop(forkserver, "edge", tmp_path, "add", 256, timed=5)
    assert outcomes.get("journalled", 0) >= 5 and outcomes.get("absent", 0) >= 1, outcomes
    assert outcomes.get("complete", 0) >= 1, outcomes


def test_kill_during_delete_on_the_server_backend(forkserver, tmp_path):
    """The same journal through qdrant-client (local mode standing in for a server: points are deleted one by one)."""
    outcomes = _kill_loop(forkserver, "server", tmp_path, "delete", 150, timed=3)
    assert outcomes.get("journalled", 0) >= 2 and outcomes.get("complete", 0) >= 1, outcomes


# -- re-adding repairs ---------------------------------------------------------------------------------------------
def _text_file(tmp_path: Path, name: str, paragraphs: int) -> Path:
    words = ["lighthouse", "keeper", "storm", "honey", "bees", "volcano", "pump", "tea", "harbour", "ledger"]
    rng = random.Random(name)
    text = "\n\n".join(f"## Part {i}\n\n" + " ".join(
        " ".join(rng.choice(words) for _ in range(12)).capitalize() + "." for _ in range(10))
        for i in range(paragraphs))
    path = tmp_path / name
    path.write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    return path


DAMAGE = {"complete": "listed, some points missing (what the issue found: 336 of 354)",
          "deleting": "a delete stopped half-way", "pending": "an add stopped half-way"}


@pytest.mark.parametrize("kind", BACKENDS)
def test_adding_a_damaged_document_again_repairs_it(kind, settings, embedder, tmp_path):
    """A document left complete with a third of its points missing, one half deleted and one half added (without
    reopening the library): adding each file again stores it whole instead of answering "unchanged"."""
    files = {status: _text_file(tmp_path, f"{status}.md", 10) for status in DAMAGE}
    library = open_library(kind, settings, embedder)
    try:
        backend = library.store.backend
        first = {status: library.ingest_path(path) for status, path in files.items()}
        for status, r in first.items():
            assert r.status == "added" and r.chunks >= 6, r
            entry = backend.get_entry(r.doc_id)
            assert entry is not None
            backend.put_entry(entry.with_status(status))
            _remove_every_third_point(backend, r.doc_id)
        assert [d.doc_id for d in library.documents()] == [first["complete"].doc_id]  # listed, yet not all there
        assert library.store.intact(first["complete"].doc_id) is None

        again = {status: library.ingest_path(path) for status, path in files.items()}
        assert {s: (r.status, r.chunks) for s, r in again.items()} == {s: ("added", r.chunks) for s, r in first.items()}
        assert raw_state(backend) == {r.doc_id: (COMPLETE, r.chunks, r.chunks) for r in first.values()}
        assert {library.ingest_path(path).status for path in files.values()} == {"unchanged"}
        assert library.store.count_chunks() == sum(r.chunks for r in first.values())
    finally:
        library.close()


def test_damage_no_journal_explains_is_removed_on_open(tmp_path):
    """Files damaged behind the journal's back (a complete document missing points, points of no document): the next
    open removes both, so the listing never shows a document that is not all there."""
    folder = _library("edge", tmp_path / "lib", 40)
    backend = open_bare_backend("edge", str(folder))
    try:
        _remove_every_third_point(backend, TARGET)
        backend.delete_entry(OTHER)  # its 12 points now belong to no document
    finally:
        backend.close()
    store = open_bare_store("edge", str(folder))
    try:
        assert raw_state(store.backend) == {} and store.list_documents() == [] and store.count_chunks() == 0
        add_synthetic(store, TARGET, 40, seed=2)
        assert raw_state(store.backend) == {TARGET: (COMPLETE, 40, 40)}
    finally:
        store.close()


def test_a_damaged_library_is_one_sentence(tmp_path):
    """A library whose files are damaged: opening it says so in a sentence (no engine traceback), and reads on a
    store whose engine fails are sentences too."""
    folder = _library("edge", tmp_path / "lib", 0)
    for f in (folder / "edge" / "docchat" / "registry").rglob("*"):
        if f.is_file() and f.stat().st_size:
            f.write_bytes(b"\0garbage" * 3)
    with pytest.raises(StorageError) as e:
        open_bare_store("edge", str(folder))
    assert str(e.value).startswith("The document library could not be opened") and "\n" not in str(e.value)



class FailingQdrant(ThreadedServer):
    """A Qdrant server whose every answer is HTTP 500 with `error` (as Qdrant words a failure of its storage)."""

    error = "Service internal error: segment files are damaged"

    class handler(JSONHandler):  # the ThreadedServer attribute
        def _fail(self) -> None:
            self._read_body()
            self._send_json(500, {"status": {"error": self.owner.error}, "time": 0.0})

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _fail


def test_server_failures_are_sentences_and_a_full_server_disk_says_so(settings, tmp_path):
    """A store whose Qdrant server fails every request: reads are one sentence; a server reporting a full disk makes
    an add say so (its roll-back is retried later); a server that stopped is "could not be reached"."""
    store = open_bare_store("server", str(settings.library.data_dir))
    add_synthetic(store, OTHER, 12, seed=1)
    store.backend.client.close()  # from here on the store talks to a failing server
    with FailingQdrant() as server:
        store.backend.client = QdrantClient(url=server.url, timeout=5, check_compatibility=False)
        for read in (store.list_documents, store.count_chunks,
                     lambda: store.query(None, store.lexical.embed_query("lighthouse"), 3)):
            with pytest.raises(StorageError, match=r"^The document library could not be (read|searched) because"):
                read()
        server.error = "Service internal error: No space left on device (os error 28)"
        src, chunks, vectors = synthetic_document(store, TARGET, 20)
        with pytest.raises(DiskFull, match=f"so “{TARGET}.txt” was not added and your library was not changed;"):
            store.add_chunks(src, chunks, None, vectors=vectors)
    with pytest.raises(StoreUnavailable, match="could not be reached"):
        store.list_documents()


# -- a real full disk ------------------------------------------------------------------------------------------------
def _can_mount() -> str:
    """Why a loop-mounted image cannot be used here ("" when it can)."""
    if os.geteuid() != 0:
        return "needs root to mount a filesystem image"
    missing = [t for t in ("unshare", "mount", "mkfs.ext4") if shutil.which(t) is None]
    if missing:
        return f"needs {', '.join(missing)}"
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return "" if probe.returncode == 0 else "cannot make a private mount namespace"


@pytest.mark.slow
@pytest.mark.linux_only("a loop-mounted ext4 disk in a mount namespace made with unshare -m")
def test_disk_full_while_adding_is_one_sentence_and_leaves_nothing_behind(tmp_path):
    """A 48 MB ext4 image, loop-mounted in a private mount namespace, is filled to the last byte while a file is being
    stored (after its first batch of 8 points). The engine writes through memory maps, where a full disk is a SIGBUS
    that kills the process, so this also proves nothing is written blindly."""
    reason = _can_mount()
    if reason:
        pytest.skip(reason)
    image, mount = tmp_path / "disk.img", tmp_path / "mnt"
    mount.mkdir()
    with open(image, "wb") as f:
        f.truncate(48 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True)
    small, large = _text_file(tmp_path, "small.md", 3), _text_file(tmp_path, "large.md", 40)
    code = (f"import json, store_helpers; print(json.dumps(store_helpers.disk_full_scenario("
            f"{str(image)!r}, {str(mount)!r}, {str(small)!r}, {str(large)!r})))")
    proc = subprocess.run(["unshare", "-m", sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          timeout=600, env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"})
    assert proc.returncode == 0, proc.stderr[-3000:]  # -7 would be the SIGBUS of a blind write
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    small_id, chunks = facts["small"]["doc_id"], facts["small"]["chunks"]
    only_small = {small_id: [COMPLETE, chunks, chunks]}

    # 1. full while adding: one sentence, rolled back with the reserve's space, nothing left
    large_r = facts["large"]
    assert large_r["status"] == "failed", large_r
    assert large_r["error"].startswith("The disk that holds your document library is full, so “large.md” was not "
                                       "added and your library was not changed;"), large_r
    assert large_r["error"].count(".") == 2 and facts["reserve_before"] and not facts["reserve_after"]  # "large.md", end
    assert facts["rolled_back_state"] == only_small
    # 2. 100 % full: lists and searches; another add and a delete are refused in a sentence, nothing changes
    assert facts["full_free"] < 1 << 20
    assert facts["full_listed"] == facts["full_found"] == ["small.md"]
    assert "is full, so “large.md” was not added" in facts["again"]["error"]
    assert facts["delete_error"].startswith("The disk that holds your document library is full, so “small")
    assert "was not removed" in facts["delete_error"]
    assert facts["after_delete_state"] == only_small
    # 3. opened again on the full disk: still lists and searches
    assert facts["reopened_listed"] == facts["reopened_found"] == ["small.md"]
    assert facts["reopened_state"] == only_small
    # 4. full again half-way with no reserve left: the roll-back cannot write, the half-added file stays invisible
    assert "is full, so “large.md” was not added" in facts["unrolled"]["error"]
    assert facts["unrolled_listed"] == facts["unrolled_found"] == ["small.md"]
    large_id = next(d for d in facts["unrolled_state"] if d != small_id)
    assert facts["unrolled_state"][large_id][0] == PENDING
    # 5. space again: the next open finishes the roll-back; the file can be added
    assert facts["freed_state"] == only_small
    assert facts["readded"]["status"] == "added" and facts["readded"]["doc_id"] == large_id
    n = facts["readded"]["chunks"]
    assert facts["final_state"] == {**only_small, large_id: [COMPLETE, n, n]}
    assert sorted(facts["final_listed"]) == sorted(facts["final_found"]) == ["large.md", "small.md"]
    # 6. the server backend (qdrant-client's local mode, whose SQLite says "database or disk is full"): the same
    # sentence; its roll-back cannot write either, and the half-added document stays invisible until it is re-added
    assert facts["server_error"].startswith("The disk that holds your document library is full, so “doc-b.txt” was "
                                            "not added"), facts["server_error"]
    assert facts["server_listed"] == facts["server_found"] == ["doc-a"]
    assert facts["server_state"]["doc-a"] == [COMPLETE, 10, 10] and facts["server_state"]["doc-b"][0] == PENDING


def _remove_every_third_point(backend, doc_id: str) -> None:
    """Delete a third of a document's points through the engine itself, as a half-done delete leaves them."""
    ids = [p.id for batch in backend.points(with_vectors=False) for p in batch
           if p.payload["metadata"]["doc_id"] == doc_id and p.payload["metadata"]["index"] % 3 == 0]
    if backend.kind == "edge":
        import qdrant_edge as qe

        backend.chunks.update(qe.UpdateOperation.delete_points(ids))
    else:
        from qdrant_client import models

        backend.client.delete(backend.collection, points_selector=models.PointIdsList(points=ids), wait=True)
