"""The Store contract on both backends - Qdrant Edge (embedded default) and qdrant-client local mode standing in for
a Qdrant server: the same ids, payloads and results; filters evaluated inside the engine; incomplete documents
invisible; crash leftovers cleaned; one process per embedded library; many threads at once; the migration hooks."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import traceback
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from store_helpers import BACKENDS, open_library, open_store_for

from rag_core.core.config import Settings
from rag_core.core.errors import LibraryBusy
from rag_core.core.models import Chunk, Document, Section, SourceMeta
from rag_core.ingest.chunking import chunk_document
from rag_core.retrieve.search import METHODS, embed_queries, retrieve, retrieve_scored
from rag_core.store.backends import COMPLETE, PENDING, RawPoint, RegistryEntry, Scope, Search, has_local_mode_library
from rag_core.store.vector_store import chunk_to_document, document_payload

pytestmark = pytest.mark.remembered_vectors  # the same files are added again and again: each vector computed once

ROOT = Path(__file__).resolve().parents[2]
TEXTS = {
    "bees": "Honey bees live in colonies ruled by a single queen. Worker bees collect nectar and pollen from flowers "
            "and turn the nectar into honey inside the hive. Drones exist only to mate with the queen.",
    "volcano": "A volcano is a rupture in the crust of a planet through which lava, ash and gases escape. "
               "Stratovolcanoes such as Mount Fuji are built from many layers of hardened lava.",
    "pump": "Maintenance of the XQ-7731 centrifugal pump: replace the impeller seal every 2,000 operating hours and "
            "check the bearing temperature monthly. Never run the pump dry.",
    "tea": "Tea plants grow best on misty hillsides. The leaves are picked by hand, withered, rolled and dried; "
           "green tea skips the oxidation that makes black tea dark.",
}
OWNERS = {"bees": "alice", "volcano": "bob", "pump": None, "tea": "alice"}
QUERIES = ["How do worker bees make honey?", "XQ-7731 impeller seal", "What is Mount Fuji made of?",
           "how is green tea made", "the"]


def _doc(key: str, text: str | None = None) -> Document:
    text = text or TEXTS[key]
    return Document(doc_id=f"doc-{key}", text=text, sections=(Section((), 0, len(text)),),
                    source=SourceMeta(file_name=f"{key}.txt", title=key.title(), kind="txt", sha256=key))


def _comparable(payload: dict) -> dict:
    """A payload without the ingest time (the only field two separate ingests may differ in)."""
    meta = payload["metadata"]
    return {**payload, "metadata": {**meta, "source": {k: v for k, v in meta["source"].items() if k != "added_at"}}}


def _ranking(passages) -> list[tuple[float, str, int]]:
    """(score, doc, chunk) in rank order; chunks with equal scores (ties, e.g. in RRF) in a fixed order."""
    return sorted((round(-p.score, 4), p.chunk.doc_id, p.chunk.index) for p in passages)


def _fill(lib) -> dict[str, str]:
    """Add the four documents under their owners; returns {key: doc_id} (owned documents get scoped ids)."""
    ids = {}
    for key, owner in OWNERS.items():
        r = lib.ingest_document(_doc(key), owner=owner)
        assert r.status == "added" and r.doc_id
        ids[key] = r.doc_id
    return ids


@pytest.fixture(params=BACKENDS)
def library(request, settings, embedder):
    """A fresh library on each backend, with its kind as `library.kind`."""
    lib = open_library(request.param, settings, embedder)
    lib.kind = request.param
    yield lib
    lib.close()


# -- one contract, the same data -----------------------------------------------------------------------
def test_both_backends_store_the_same_points_and_return_the_same_results(tmp_path, embedder):
    libs = {kind: open_library(kind, Settings(data_dir=tmp_path / kind), embedder) for kind in BACKENDS}
    try:
        for lib in libs.values():
            _fill(lib)
        points = {kind: {p.id: p for batch in lib.store.backend.points() for p in batch} for kind, lib in libs.items()}
        edge, server = points["edge"], points["server"]
        assert edge.keys() == server.keys() and len(edge) == sum(d.chunks for d in libs["edge"].documents())
        for pid, p in edge.items():
            q = server[pid]
            assert _comparable(p.payload) == _comparable(q.payload)
            assert set(p.payload) == {"page_content", "metadata"} and p.payload["metadata"]["status"] == COMPLETE
            assert p.dense == pytest.approx(q.dense, abs=1e-6)
            assert p.sparse.indices == q.sparse.indices and p.sparse.values == pytest.approx(q.sparse.values)
        assert sorted(d.doc_id for d in libs["edge"].documents()) == sorted(d.doc_id for d in libs["server"].documents())
        for query in QUERIES:
            qv = embed_queries(libs["edge"].store, [query])[0]
            for method in METHODS:
                for owners in (None, ["alice"], ["bob", None]):
                    got = {kind: retrieve_scored(lib.store, query, k=4, owners=owners, method=method, vectors=qv)
                           for kind, lib in libs.items()}
                    e, s = got["edge"], got["server"]
                    assert _ranking(e.passages) == _ranking(s.passages), (query, method, owners)
                    assert [p.score for p in e.passages] == pytest.approx([p.score for p in s.passages], abs=1e-4)
                    assert e.relevance == pytest.approx(s.relevance, abs=1e-5)
    finally:
        for lib in libs.values():
            lib.close()


def test_filters_run_inside_the_engine(library):
    ids = _fill(library)
    store = library.store
    docs = {d.doc_id: d for d in library.documents()}
    backend = store.backend
    qv = embed_queries(store, ["bees honey tea volcano pump"])[0]
    for owners, keys in ((["alice"], {"bees", "tea"}), (["bob"], {"volcano"}), ([None], {"pump"}),
                         (["bob", None], {"volcano", "pump"}), (["carol"], set())):
        want = {ids[k] for k in keys}
        scope = Scope(owners=tuple(owners))
        lists = backend.search([Search(50, dense=qv.dense), Search(50, sparse=qv.sparse)], scope)
        for hits in lists:
            assert {h.payload["metadata"]["doc_id"] for h in hits} <= want, owners
        assert {h.payload["metadata"]["doc_id"] for h in lists[0]} == want  # every chunk in scope, none trimmed
        assert backend.count(scope) == sum(docs[d].chunks for d in want)
        assert {d.doc_id for d in library.documents(owners)} == want
    scope = Scope(doc_ids=(ids["tea"], ids["pump"]), owners=("alice",))
    assert {h.payload["metadata"]["doc_id"] for h in backend.search([Search(50, dense=qv.dense)], scope)[0]} == \
        {ids["tea"]}
    assert backend.count(Scope(doc_ids=("nothing",))) == 0
    assert store.get(ids["bees"], owners=["bob"]) is None and store.get(ids["bees"], owners=["alice"]) is not None


def test_a_document_is_invisible_until_its_last_chunk_is_stored(library, monkeypatch):
    """A big ingest paused between two batches: its chunks are stored but no search, count or listing shows them."""
    monkeypatch.setattr("rag_core.store.vector_store.UPSERT_BATCH", 8)
    library.ingest_document(_doc("bees"))
    sentences = [f"Entry {i}: the lighthouse keeper logged storm number {i} and the honey bees hid." for i in range(400)]
    big = _doc("log", " ".join(sentences))
    chunks = chunk_document(big, library.embedder)
    assert len(chunks) > 16
    vectors = library.store.embed_chunks(chunks)
    half, go, done = threading.Event(), threading.Event(), threading.Event()
    errors: list[str] = []

    def progress(stage: str, n: int, total: int) -> None:
        if stage == "saving" and n >= total // 2 and not half.is_set():
            half.set()
            go.wait(60)

    def ingest() -> None:
        try:
            library.store.add_chunks(big.source, chunks, None, progress=progress, vectors=vectors)
        except Exception:  # noqa: BLE001 - asserted below
            errors.append(traceback.format_exc())
        finally:
            done.set()

    t = threading.Thread(target=ingest)
    t.start()
    try:
        assert half.wait(60)
        store = library.store
        assert store.count_chunks() > len(chunks) // 2  # the pending points are there...
        for method in METHODS:  # ...and nothing shows them, while reads do not wait for the writer
            hits = retrieve(store, "lighthouse keeper storm honey bees", k=5, method=method)
            assert hits and {h.chunk.doc_id for h in hits} == {"doc-bees"}, method
        assert retrieve(store, "lighthouse keeper", k=5, doc_ids=["doc-log"]) == []
        assert store.get("doc-log") is None and [d.doc_id for d in library.documents()] == ["doc-bees"]
        assert store.backend.count(Scope(doc_ids=("doc-log",))) == 0
    finally:
        go.set()
        t.join(60)
    assert errors == [] and done.is_set()
    assert retrieve(library.store, "lighthouse keeper storm", k=5)[0].chunk.doc_id == "doc-log"
    assert library.store.backend.count(Scope(doc_ids=("doc-log",))) == len(chunks)


def test_leftovers_of_a_crash_are_removed_on_open(library, settings, embedder):
    """A pending document (crashed ingest) and a half-deleted one are cleaned when the library is opened again."""
    ids = _fill(library)
    store = library.store
    chunks = chunk_document(_doc("ghost", TEXTS["bees"] + " Ghost."), embedder)
    dense, sparse = store.embed_chunks(chunks)
    store.backend.put_entry(RegistryEntry("doc-ghost", status=PENDING, started=0, title="Ghost"))
    payloads = [document_payload(chunk_to_document(c, None)) for c in chunks]
    store.backend.upsert([RawPoint(c.point_id, dense[i], sparse[i], {**p, "metadata": {**p["metadata"], "status": PENDING}})
                          for i, (c, p) in enumerate(zip(chunks, payloads, strict=True))])
    half_deleted = store.backend.get_entry(ids["tea"])
    assert half_deleted is not None
    store.backend.put_entry(half_deleted.with_status("deleting"))
    total = store.count_chunks()
    library.close()
    reopened = open_library(library.kind, settings, embedder)
    try:
        s = reopened.store
        assert s.backend.get_entry("doc-ghost") is None and s.backend.get_entry(ids["tea"]) is None
        assert {d.doc_id for d in reopened.documents()} == {ids["bees"], ids["volcano"], ids["pump"]}
        assert s.count_chunks() == total - len(chunks) - half_deleted.chunks
        assert s.count_chunks() == sum(d.chunks for d in reopened.documents())
    finally:
        reopened.close()


# -- embedded library: one process, persisted ----------------------------------------------------------
def test_second_open_of_an_embedded_library_is_busy(settings, embedder):
    store = open_store_for("edge", settings, embedder)
    try:
        with pytest.raises(LibraryBusy):
            open_store_for("edge", settings, embedder)
        script = textwrap.dedent(f"""
            from rag_core.store.backends.edge import EdgeBackend
            from rag_core.core.errors import LibraryBusy
            try:
                EdgeBackend(__import__("pathlib").Path({str(settings.library.data_dir / "edge" / settings.library.collection)!r}))
            except LibraryBusy as e:
                print("busy", type(e.__cause__).__name__)
        """)
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
        # refused by the folder lock (filelock.Timeout), before the engine opens its write-ahead log
        assert out.stdout.strip() == "busy Timeout", out.stderr[-2000:]
        # the first store is unharmed by both attempts: it still writes, flushes and reopens
        from rag_core.service.library import Library

        Library(settings, embedder=embedder, store=store).ingest_document(_doc("pump"))
    finally:
        store.close()
    again = open_store_for("edge", settings, embedder)
    try:
        assert again.get("doc-pump") is not None and again.count_chunks() > 0
    finally:
        again.close()


# -- many threads ----------------------------------------------------------------------------------------
WRITER_ROUNDS = 1  # each round replaces every owner's document (8 adds, 8 deletes) while 8 threads search


def test_threads_search_with_owner_filters_while_another_ingests_and_deletes(library):
    """8 threads search as 8 owners while a writer adds and deletes documents of every owner: no errors and no
    result of another owner, on both backends. A set amount of work, not a set time: WRITER_ROUNDS rounds of
    writes, and each searcher starts one search (by turns with each fusion method) as each write starts."""
    store = library.store
    dim = store.embedder.dim
    rng = np.random.default_rng(3)
    owners = [f"owner-{i}" for i in range(8)]
    words = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "glacier", "harbor"]

    def add(owner: str, n: int) -> str:
        doc_id = f"{owner}-doc-{n}"
        src = SourceMeta(file_name=f"{doc_id}.txt", title=doc_id, kind="txt", sha256=doc_id)
        texts = [f"{words[owners.index(owner)]} note {n} part {i} about the shared topic" for i in range(12)]
        chunks = [Chunk(doc_id, i, t, i * 100, i * 100 + len(t), None, None, (), src) for i, t in enumerate(texts)]
        dense = rng.standard_normal((len(chunks), dim)).astype(np.float32)
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
        store.add_chunks(src, chunks, None, owner=owner, vectors=(dense, store.lexical.embed_documents(texts)))
        return doc_id

    for o in owners:
        add(o, 0)
    qvs = embed_queries(store, [f"{w} note about the shared topic" for w in words])
    progress = threading.Condition()  # guards and announces `started` and `counts`
    started = [0]  # write operations started: each searcher searches once while each one runs
    counts = [0] * len(owners)
    finished = threading.Event()
    errors: list[str] = []
    leaks: list[str] = []

    def searched_since(seen: list[int]) -> bool:
        return bool(errors) or all(c > s for c, s in zip(counts, seen, strict=True))

    def searcher(i: int) -> None:
        try:
            done = [0]
            while True:
                with progress:
                    assert progress.wait_for(lambda: started[0] > done[0] or finished.is_set(), timeout=120)
                    if finished.is_set():
                        return
                    done[0] = started[0]
                method = ("zscore", "dbsf", "vector")[done[0] % 3]
                got = retrieve_scored(store, "", k=5, owners=[owners[i]], method=method, vectors=qvs[i])
                leaks.extend(p.chunk.doc_id for p in got.passages if not p.chunk.doc_id.startswith(owners[i] + "-"))
                with progress:
                    counts[i] += 1
                    progress.notify_all()
        except Exception:  # noqa: BLE001 - asserted below
            errors.append(traceback.format_exc())
            with progress:
                progress.notify_all()

    writes = [w for n in range(1, WRITER_ROUNDS + 1) for o in owners  # replace each owner's document
              for w in (partial(add, o, n), partial(store.delete, f"{o}-doc-{n - 1}", owners=[o]))]

    def writer() -> None:
        try:
            for write in writes:
                with progress:  # the searchers start searching as the write starts
                    seen = counts[:]
                    started[0] += 1
                    progress.notify_all()
                write()
                with progress:
                    assert progress.wait_for(lambda seen=seen: searched_since(seen), timeout=120)
        except Exception:  # noqa: BLE001 - asserted below (AssertionError: a searcher stopped searching)
            errors.append(traceback.format_exc())
        finally:
            with progress:
                finished.set()
                progress.notify_all()

    threads = [threading.Thread(target=searcher, args=(i,)) for i in range(len(owners))]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads)
    assert errors == [] and leaks == []
    assert counts == [len(writes)] * len(owners)  # one search during each write
    listing = library.documents()
    assert len(listing) == len(owners) and store.count_chunks() == 12 * len(owners)


# -- for the migration -----------------------------------------------------------------------------------
def test_import_points_copies_a_library_exactly(library, tmp_path, embedder):
    """import_points + import_entry write given ids, vectors and payloads: the copy answers like the original."""
    _fill(library)
    copy = open_library("edge", Settings(data_dir=tmp_path / "copy"), embedder)
    try:
        raw = [p for batch in library.store.backend.points() for p in batch]
        stripped = [replace(p, payload={**p.payload, "metadata": {k: v for k, v in p.payload["metadata"].items()
                                                                   if k != "status"}}) for p in raw]
        assert copy.store.import_points(iter(stripped), batch=3) == len(raw)
        for d in library.documents():
            entry = library.store.backend.get_entry(d.doc_id)
            assert entry is not None
            copy.store.import_entry(entry)
        assert [d.doc_id for d in copy.documents()] == [d.doc_id for d in library.documents()]
        got = {p.id: p.payload for batch in copy.store.backend.points() for p in batch}
        assert got == {p.id: p.payload for p in raw}
        for q in QUERIES:
            a, b = retrieve(library.store, q, k=4), retrieve(copy.store, q, k=4)
            assert [(p.chunk.doc_id, p.chunk.index) for p in a] == [(p.chunk.doc_id, p.chunk.index) for p in b]
    finally:
        copy.close()


def test_old_local_mode_library_is_detected_and_left_alone(tmp_path, embedder):
    from qdrant_client import QdrantClient, models

    data_dir = tmp_path / "old"
    assert not has_local_mode_library(data_dir)
    client = QdrantClient(path=str(data_dir / "qdrant"))
    client.create_collection("docchat", vectors_config={"dense": models.VectorParams(size=4, distance=models.Distance.COSINE)})
    client.close()
    assert has_local_mode_library(data_dir)
    before = sorted(str(p.relative_to(data_dir)) for p in (data_dir / "qdrant").rglob("*"))
    lib = open_library("edge", Settings(data_dir=data_dir), embedder)
    try:
        assert lib.documents() == [] and (data_dir / "edge" / "docchat").is_dir()
    finally:
        lib.close()
    assert sorted(str(p.relative_to(data_dir)) for p in (data_dir / "qdrant").rglob("*")) == before
