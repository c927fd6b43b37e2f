"""Opening a DocChat store on either backend in tests: Qdrant Edge (the embedded default) or qdrant-client's local
mode standing in for a Qdrant server (the backend used when QDRANT_URL is set). Also the pieces of the crash and
full-disk tests (tests/integration/test_crash_safety.py): a store without the embedding model, synthetic documents,
a child operation that kills itself at a chosen write, the raw state of a backend, a disk filler and the full-disk
scenario run inside a private mount namespace."""
from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from qdrant_client import QdrantClient

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL, Settings
from rag_core.core.models import Chunk, SourceMeta
from rag_core.service.library import Library
from rag_core.store.backends import COMPLETE, DELETING, METADATA_KEY, PENDING, Backend, edge_path
from rag_core.store.backends.client import ClientBackend
from rag_core.store.backends.edge import EdgeBackend
from rag_core.store.embeddings import Embedder
from rag_core.store.vector_store import Store, open_store

BACKENDS = ("edge", "server")
SERVER_FOLDER = "qdrant-server"  # not "qdrant": that name is the old embedded library's folder


def open_store_for(kind: str, settings: Settings, embedder: Embedder) -> Store:
    """A Store on `kind` ("edge" or "server") for the library folder of `settings`."""
    if kind == "edge":
        return open_store(settings, embedder)
    if kind != "server":
        raise ValueError(kind)
    client = QdrantClient(path=str(settings.library.data_dir / SERVER_FOLDER))
    return Store(ClientBackend(client, settings.library.collection), settings, embedder)


def open_library(kind: str, settings: Settings, embedder: Embedder) -> Library:
    """A Library over open_store_for(kind, ...)."""
    return Library(settings, embedder=embedder, store=open_store_for(kind, settings, embedder))


# -- crash and disk-full tests (tests/integration/test_crash_safety.py) ------------------------------------------------
# These also run in forked children and in a subprocess under `unshare -m`, so they take plain arguments.
STAND_IN = SimpleNamespace(name=DEFAULT_EMBEDDING_MODEL, dim=384)  # a Store only reads the model's name and size
WRITES = ("put_entry", "flush", "delete_document", "delete_entry", "upsert", "set_status")


def open_bare_store(kind: str, data_dir: str) -> Store:
    """A Store on `kind` for `data_dir` without loading the embedding model (vectors are given, never computed)."""
    return open_store_for(kind, Settings(data_dir=Path(data_dir)), STAND_IN)  # type: ignore[arg-type]


def synthetic_document(store: Store, doc_id: str, n: int, seed: int = 0) -> tuple[SourceMeta, list[Chunk], tuple]:
    """A document of `n` chunks with random unit dense vectors and real lexical vectors."""
    src = SourceMeta(file_name=f"{doc_id}.txt", title=f"Title {doc_id}", kind="txt", sha256=doc_id)
    words = ("lighthouse", "keeper", "storm", "honey", "bees", "volcano", "pump", "tea", "harbour", "ledger")
    rng = np.random.default_rng(seed)
    chunks = [Chunk(doc_id, i, f"Passage {i} of {doc_id}: " + " ".join(rng.choice(words, 12)) + ".", i * 100,
                    i * 100 + 99, None, None, ("Section",), src) for i in range(n)]
    dense = rng.normal(size=(n, STAND_IN.dim)).astype(np.float32)
    dense /= np.linalg.norm(dense, axis=1, keepdims=True)
    return src, chunks, (dense, store.lexical.embed_documents([c.text for c in chunks]))


def add_synthetic(store: Store, doc_id: str, n: int, seed: int = 0) -> None:
    """Store a synthetic document of `n` chunks."""
    src, chunks, vectors = synthetic_document(store, doc_id, n, seed)
    store.add_chunks(src, chunks, None, vectors=vectors)


def die_before_write(store: Store, k: int) -> list[int]:
    """SIGKILL this process just before the store's k-th backend write call (0-based; -1: never); the returned list
    holds the number of write calls made so far."""
    seen = [0]
    for name in WRITES:
        real = getattr(store.backend, name)

        def wrapped(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if seen[0] == k:
                os.kill(os.getpid(), signal.SIGKILL)
            seen[0] += 1
            return _real(*args, **kwargs)

        setattr(store.backend, name, wrapped)
    return seen


def child_operation(kind: str, data_dir: str, op: str, doc_id: str, n: int, batch: int, ready: Any,
                    kill_at: int | None, measured: Any = None) -> None:
    """In a child process: open the library, get ready, then add (`op` "add", n chunks) or delete a document; with
    `kill_at`, SIGKILL itself before that write call (== the number of calls: after the operation, before close).
    `measured` (a shared array of 2 floats) receives the number of write calls and the operation's seconds."""
    import rag_core.store.vector_store as store_module

    store_module.UPSERT_BATCH = batch
    store = open_bare_store(kind, data_dir)
    doc = synthetic_document(store, doc_id, n) if op == "add" else None
    seen = die_before_write(store, -1 if kill_at is None else kill_at)
    ready.set()
    started = time.perf_counter()
    if doc is not None:
        store.add_chunks(doc[0], doc[1], None, vectors=doc[2])
    else:
        store.delete(doc_id)
    if kill_at is not None:
        os.kill(os.getpid(), signal.SIGKILL)
    if measured is not None:
        measured[0], measured[1] = seen[0], time.perf_counter() - started
    store.close()


def open_bare_backend(kind: str, data_dir: str) -> Backend:
    """The backend of `kind` for `data_dir`, without a Store (so nothing is cleaned up on opening)."""
    settings = Settings(data_dir=Path(data_dir))
    if kind == "edge":
        return EdgeBackend(edge_path(settings))
    return ClientBackend(QdrantClient(path=str(settings.library.data_dir / SERVER_FOLDER)), settings.library.collection)


def raw_state(backend: Backend) -> dict[str, tuple[str, int, int]]:
    """Every registry entry and every document with points: doc_id -> (entry status or "none", recorded chunks,
    stored points), read straight from the backend."""
    points: dict[str, int] = {}
    for batch in backend.points(with_vectors=False):
        for p in batch:
            doc_id = p.payload[METADATA_KEY]["doc_id"]
            points[doc_id] = points.get(doc_id, 0) + 1
    state = {e.doc_id: (status, e.chunks, points.get(e.doc_id, 0))
             for status in (PENDING, DELETING, COMPLETE) for e in backend.entries(status)}
    state.update({d: ("none", 0, n) for d, n in points.items() if d not in state})
    return state


class Filler:
    """Fills a filesystem to the last byte with one file, and gives space back."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "filler"

    def free(self) -> int:
        """Bytes still writable."""
        st = os.statvfs(self.path.parent)
        return st.f_bavail * st.f_frsize

    def fill(self) -> None:
        """Write until the disk says ENOSPC."""
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for size in (1 << 20, 4096, 512):
                try:
                    while True:
                        os.write(fd, b"\1" * size)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
            os.fsync(fd)
        finally:
            os.close(fd)

    def leave_free(self, nbytes: int) -> None:
        """Shrink the filler until about `nbytes` are writable."""
        os.truncate(self.path, max(0, self.path.stat().st_size - max(0, nbytes - self.free())))

    def remove(self) -> None:
        """Give all its space back."""
        self.path.unlink(missing_ok=True)


def disk_full_scenario(image: str, mount: str, small: str, large: str) -> dict[str, Any]:
    """Run as root inside a private mount namespace (`unshare -m`): mount the ext4 `image` at `mount`, keep a library
    there, and fill the disk while adding the `large` file; the facts seen on the way, for the test to check."""
    import subprocess

    import rag_core.store.vector_store as store_module
    from rag_core.core.errors import DocChatError
    from rag_core.store.backends.edge import MIN_FREE_BYTES, RESERVE_BYTES, RESERVE_FILE

    subprocess.run(["mount", "-o", "loop", image, mount], check=True)
    store_module.UPSERT_BATCH = 8  # several batches: the disk fills between two of them
    settings = Settings(data_dir=Path(mount) / "data")
    filler = Filler(Path(mount))
    facts: dict[str, Any] = {}

    def fill_after_first_batch(stage: str, done: int, total: int) -> None:
        if stage == "saving" and done == store_module.UPSERT_BATCH:
            filler.fill()

    def look(lib: Library, name: str) -> None:
        facts[f"{name}_state"] = raw_state(lib.store.backend)
        facts[f"{name}_listed"] = [d.file_name for d in lib.documents()]
        facts[f"{name}_found"] = sorted({p.chunk.source.file_name for p in lib.search("lighthouse keeper", k=20)})
        facts[f"{name}_free"] = filler.free()

    lib = Library(settings)
    facts["small"] = lib.ingest_path(Path(small)).as_json()
    facts["reserve_before"] = (edge_path(settings) / RESERVE_FILE).is_file()
    facts["large"] = lib.ingest_path(Path(large), progress=fill_after_first_batch).as_json()  # 1. full mid-add
    facts["reserve_after"] = (edge_path(settings) / RESERVE_FILE).is_file()
    look(lib, "rolled_back")
    filler.fill()  # 2. the reserve's space is taken too: 100 % full
    look(lib, "full")
    facts["again"] = lib.ingest_path(Path(large)).as_json()
    try:
        lib.delete(facts["small"]["doc_id"])
    except DocChatError as e:
        facts["delete_error"] = str(e)
    look(lib, "after_delete")
    lib.close()
    lib = Library(settings, embedder=lib.embedder)  # 3. opened again, still full
    look(lib, "reopened")
    filler.leave_free(MIN_FREE_BYTES + (RESERVE_BYTES // 2))  # 4. room to start, none for the reserve or a roll-back
    facts["unrolled"] = lib.ingest_path(Path(large), progress=fill_after_first_batch).as_json()
    look(lib, "unrolled")
    lib.close()
    filler.remove()  # 5. space again: the next open finishes what the roll-back could not
    lib = Library(settings, embedder=lib.embedder)
    look(lib, "freed")
    facts["readded"] = lib.ingest_path(Path(large)).as_json()
    look(lib, "final")
    lib.close()

    store = open_bare_store("server", str(Path(mount) / "server"))  # 6. qdrant-client's local mode: SQLite files
    add_synthetic(store, "doc-a", 10, seed=1)
    src, chunks, vectors = synthetic_document(store, "doc-b", 40, seed=2)
    try:
        store.add_chunks(src, chunks, None, progress=fill_after_first_batch, vectors=vectors)
    except DocChatError as e:
        facts["server_error"] = str(e)
    facts["server_state"] = raw_state(store.backend)
    facts["server_listed"] = [d.doc_id for d in store.list_documents()]
    facts["server_found"] = sorted({p.chunk.doc_id for p in store.query(None, store.lexical.embed_query("bees"), 20)})
    store.close()
    filler.remove()
    return facts
