"""Qdrant Edge (qdrant-edge-py, in-process native engine): the embedded library under `<data_dir>/edge/<collection>/`.

Two shards: `chunks` (dense + lexical vectors, payload indexes) and `registry` (payload-only points: one per
document plus the library metadata; a shard must declare a vector, so it declares an unused sparse one).

Concurrency and ownership:
- One process per folder: an exclusive lock on `<folder>/lock` (rag_core.core.files.exclusive_lock) is taken before
  either shard is opened, and a second opener, in this process or another, gets LibraryBusy. The lock comes first
  because a second `EdgeShard.load` of an open shard in the same process, although it fails (`Can't init WAL:
  Kind(WouldBlock)`), breaks the first one's next flush.
- Threads: writes go through one lock; reads run without it (the engine allows reads during writes).
- Every update is in the write-ahead log before `update` returns (it survives a killed process); `flush` writes
  the segments. `optimize` builds the HNSW index and holds Python's GIL while it runs (the whole process pauses:
  21 s for 100,000 clustered chunks here, ten times that for random vectors), so it is only run when asked for
  (rag_core.store.vector_store.Store.optimize; Store runs it on open when many chunks are unindexed).
- Payloads are kept in the page cache (`Memory.Cached`): every search hit reads one.

A full disk: the engine writes through memory-mapped files, and a page that cannot get a disk block kills the
whole process with SIGBUS instead of raising. So nothing is written blindly: new chunk points are refused with
DiskFull unless their estimated size (GROWTH x their bytes) still leaves MIN_FREE_BYTES free, and a file of
RESERVE_BYTES (`space-reserve`) is kept in the folder and given back when a write that must happen (a delete, the
roll-back of a failed add, finishing a journalled delete) finds the disk full; it is made again once there is room.
Reads need no space: a full disk still lists and searches.
"""
from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import qdrant_edge as qe

from rag_core.core.errors import DiskFull, DocChatError, LibraryBusy, StorageError
from rag_core.core.files import allocated_bytes, exclusive_lock, free_bytes, reserve_space
from rag_core.store.backends.base import (
    COMPLETE,
    DENSE,
    INDEXED_FIELDS,
    LEXICAL,
    META_POINT_ID,
    METADATA_KEY,
    RRF_K,
    STATUS_KEY,
    Hit,
    RawPoint,
    Scope,
    Search,
    disk_full,
    raw_points,
    registry_point_id,
)
from rag_core.store.backends.entry import RegistryEntry

if TYPE_CHECKING:  # pragma: no cover - type only: importing langchain-qdrant takes seconds (issue 28)
    from langchain_qdrant import SparseVector

log = logging.getLogger(__name__)

REGISTRY_VECTOR = "_unused"  # the registry shard's declared (never written) vector
META_KEY = "library_meta"
RESERVE_FILE = "space-reserve"
RESERVE_BYTES = 4 << 20  # given back to finish deletes and roll-backs on a full disk
MIN_FREE_BYTES = 16 << 20  # new chunks must leave this much free (beyond the reserve file)
MUST_WRITE_BYTES = 1 << 20  # a necessary write is not tried with less than this free: it could crash the process
GROWTH = 4  # disk bytes per byte of chunk data (WAL, segment, payload rewritten on completion); 2.5 measured


def _sparse(v: SparseVector) -> qe.SparseVector:
    return qe.SparseVector(list(v.indices), list(v.values))


def _owners_condition(key: str, owners: Sequence[str | None]) -> qe.Filter:
    named = [o for o in owners if o is not None]
    should: list[Any] = []
    if named:
        should.append(qe.FieldCondition(key, match=qe.MatchAny(named)))
    if None in owners:
        should.append(qe.IsNullCondition(key))
    if not should:  # no owner at all: nothing matches
        should.append(qe.HasIdCondition(set()))
    return qe.Filter(should=should)


def scope_filter(scope: Scope) -> qe.Filter | None:
    """The Edge filter of a Scope (status, doc ids, owners), evaluated inside the engine."""
    must: list[Any] = []
    if scope.complete_only:
        must.append(qe.FieldCondition(f"{METADATA_KEY}.{STATUS_KEY}", match=qe.MatchValue(COMPLETE)))
    if scope.doc_ids is not None:
        must.append(qe.FieldCondition(f"{METADATA_KEY}.doc_id", match=qe.MatchAny(list(scope.doc_ids))))
    if scope.owners is not None:
        must.append(_owners_condition(f"{METADATA_KEY}.owner", scope.owners))
    if scope.point_ids is not None:
        must.append(qe.HasIdCondition(set(scope.point_ids)))
    return qe.Filter(must=must) if must else None


def _doc_filter(doc_id: str) -> qe.Filter:
    return qe.Filter(must=[qe.FieldCondition(f"{METADATA_KEY}.doc_id", match=qe.MatchValue(doc_id))])


def _request(s: Search, flt: qe.Filter | None) -> qe.QueryRequest:
    kind = s.kind()
    if kind == DENSE:
        return qe.QueryRequest(limit=s.limit, query=qe.Query.Nearest(list(s.dense or ()), using=DENSE), filter=flt,
                               with_payload=True)
    if kind == "sparse":
        assert s.sparse is not None
        return qe.QueryRequest(limit=s.limit, query=qe.Query.Nearest(_sparse(s.sparse), using=LEXICAL), filter=flt,
                               with_payload=True)
    assert s.sparse is not None and s.dense is not None
    pre = s.prefetch_limit or s.limit
    # The stubs type Fusion.Rrf / Fusion.Dbsf apart from Fusion, which QueryRequest names.
    fusion: Any = qe.Fusion.Rrf(k=RRF_K) if kind == "rrf" else qe.Fusion.Dbsf()
    return qe.QueryRequest(limit=s.limit, query=fusion, with_payload=True, prefetches=[
        qe.Prefetch(limit=pre, query=qe.Query.Nearest(list(s.dense), using=DENSE), filter=flt),
        qe.Prefetch(limit=pre, query=qe.Query.Nearest(_sparse(s.sparse), using=LEXICAL), filter=flt)])


def _busy(e: BaseException) -> bool:
    return "WouldBlock" in str(e)


class EdgeBackend:
    """The Backend protocol over two Qdrant Edge shards in one folder, locked to this process while open."""

    kind = "edge"

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._write = threading.RLock()
        self._folder_lock = exclusive_lock(self.path / "lock", self.path)
        self._chunks: qe.EdgeShard | None = None
        try:
            self._registry = self._open(self.path / "registry", qe.EdgeConfig(
                sparse_vectors={REGISTRY_VECTOR: qe.EdgeSparseVectorParams()}))
            if self._has_data(self.path / "chunks"):
                self._chunks = self._open(self.path / "chunks", None)
        except BaseException:
            self._release()
            raise
        self._keep_reserve()

    # -- setup -------------------------------------------------------------------
    @staticmethod
    def _has_data(path: Path) -> bool:
        return path.is_dir() and any(path.iterdir())

    def _open(self, path: Path, config: qe.EdgeConfig | None) -> qe.EdgeShard:
        try:
            if self._has_data(path):
                return qe.EdgeShard.load(str(path))
            if config is None:
                raise FileNotFoundError(path)
            if self.free_bytes() < MIN_FREE_BYTES:
                raise DiskFull("the library could not be created")
            return qe.EdgeShard.create(str(path), config)
        except DocChatError:
            raise
        except Exception as e:
            if _busy(e):
                raise LibraryBusy(str(self.path)) from e
            if disk_full(e):
                raise DiskFull("the library could not be opened") from e
            log.warning("Opening %s failed", path, exc_info=e)
            raise StorageError("be opened") from e

    @property
    def chunks(self) -> qe.EdgeShard:
        """The chunk shard (RuntimeError before create())."""
        if self._chunks is None:
            raise RuntimeError("the chunk shard has not been created")
        return self._chunks

    # -- disk space ------------------------------------------------------------------
    def free_bytes(self) -> int:
        """Bytes this process may still write on the library's disk."""
        return free_bytes(self.path)

    def _keep_reserve(self) -> None:
        """Make the reserve file again when it is missing and the disk has room for it."""
        reserve = self.path / RESERVE_FILE
        try:
            if reserve.is_file() and allocated_bytes(reserve.stat()) >= RESERVE_BYTES:
                return
            if self.free_bytes() < RESERVE_BYTES + MIN_FREE_BYTES:
                return
            fd = os.open(reserve, os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                reserve_space(fd, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as e:  # no reserve: only a safety margin is lost
            log.warning("Could not keep %s (%s)", reserve, e.strerror)
            reserve.unlink(missing_ok=True)

    def _can_write(self) -> bool:
        """Before a write that finishes or undoes work: True when it can be done safely, after giving back the
        reserve if the disk is (nearly) full."""
        if self.free_bytes() >= MUST_WRITE_BYTES:
            return True
        reserve = self.path / RESERVE_FILE
        if reserve.exists():
            log.warning("The disk holding %s is full; using its reserved space", self.path)
            reserve.unlink()
        return self.free_bytes() >= MUST_WRITE_BYTES

    def _must_write(self) -> None:
        if not self._can_write():
            raise DiskFull()

    def check_room(self, points: Sequence[RawPoint]) -> None:
        """DiskFull unless writing these points leaves MIN_FREE_BYTES free (nothing is written)."""
        need = GROWTH * sum(4 * len(p.dense) + 8 * len(p.sparse.indices) + len(json.dumps(p.payload))
                            for p in points)
        if self.free_bytes() < need + MIN_FREE_BYTES:
            raise DiskFull()
        self._keep_reserve()

    def explain(self, error: BaseException, action: str, outcome: str = "") -> DocChatError | None:
        """StorageError for the engine's own failures (qdrant-edge raises plain Exception) and OS errors."""
        return StorageError(action, outcome) if isinstance(error, OSError) or type(error) is Exception else None

    def read_meta(self) -> dict[str, Any] | None:
        """The library metadata, or None when the chunk shard does not exist yet."""
        if self._chunks is None:
            return None
        got = self._registry.retrieve([META_POINT_ID], with_payload=True, with_vector=False)
        return dict((got[0].payload or {}).get(META_KEY) or {}) if got else {}

    def create(self, dim: int, meta: dict[str, Any]) -> None:
        """Create the chunk shard (dense cosine of `dim`, lexical with IDF, keyword indexes) and record `meta`."""
        with self._write:
            self._chunks = self._open(self.path / "chunks", qe.EdgeConfig(
                vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
                sparse_vectors={LEXICAL: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
                payload_memory=qe.Memory.Cached))  # every hit reads its payload: p95 5.6 -> 2.1 ms at 10k
            for key in INDEXED_FIELDS:
                self._chunks.update(qe.UpdateOperation.create_field_index(f"{METADATA_KEY}.{key}",
                                                                         qe.PayloadSchemaType.Keyword))
            self.write_meta(meta)
            self.flush()

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace the library metadata (a registry point)."""
        with self._write:
            self._must_write()
            self._registry.update(qe.UpdateOperation.upsert_points([qe.Point(META_POINT_ID, {}, {META_KEY: meta})]))

    # -- chunk points -------------------------------------------------------------
    def upsert(self, points: Sequence[RawPoint]) -> None:
        """Insert or replace chunk points."""
        ops = [qe.Point(p.id, {DENSE: [float(x) for x in p.dense], LEXICAL: _sparse(p.sparse)}, p.payload)
               for p in points]
        with self._write:
            self.check_room(points)
            self.chunks.update(qe.UpdateOperation.upsert_points(ops))

    def set_status(self, doc_id: str, status: str) -> None:
        """Set metadata.status on every chunk point of a document."""
        with self._write:
            self._must_write()
            self.chunks.update(qe.UpdateOperation.set_payload_by_filter(_doc_filter(doc_id), {STATUS_KEY: status},
                                                                        key=METADATA_KEY))

    def delete_document(self, doc_id: str) -> None:
        """Delete every chunk point of a document."""
        with self._write:
            self._must_write()
            self.chunks.update(qe.UpdateOperation.delete_points_by_filter(_doc_filter(doc_id)))

    def count(self, scope: Scope | None = None) -> int:
        """Exact number of chunk points in `scope` (None: all)."""
        if self._chunks is None:
            return 0
        return self._chunks.count(qe.CountRequest(exact=True, filter=None if scope is None else scope_filter(scope)))

    def search(self, searches: Sequence[Search], scope: Scope) -> list[list[Hit]]:
        """Several searches as one query_batch call of the engine."""
        flt = scope_filter(scope)
        batch = self.chunks.query_batch(qe.QueryBatchRequest([_request(s, flt) for s in searches]))
        return [[Hit(str(p.id), float(p.score), p.payload or {}) for p in hits] for hits in batch]

    def points(self, with_vectors: bool = True, batch: int = 256, scope: Scope | None = None
               ) -> Iterator[list[RawPoint]]:
        """Every chunk point (in `scope`) in batches."""
        if self._chunks is None:
            return
        offset: Any = None
        flt = None if scope is None else scope_filter(scope)
        while True:
            records, offset = self._chunks.scroll(qe.ScrollRequest(offset=offset, limit=batch, with_payload=True,
                                                                   with_vector=with_vectors, filter=flt))
            out = raw_points(records)
            if out:
                yield out
            if offset is None:
                return

    def set_sparse(self, vectors: Sequence[tuple[str, SparseVector]]) -> None:
        """Replace the lexical vectors of these points."""
        ops = [qe.PointVectors(pid, {LEXICAL: _sparse(v)}) for pid, v in vectors]
        if self.free_bytes() < GROWTH * sum(8 * len(v.indices) for _, v in vectors) + MIN_FREE_BYTES:
            raise DiskFull("the search index could not be updated")
        with self._write:
            self.chunks.update(qe.UpdateOperation.update_vectors(ops))

    # -- registry -----------------------------------------------------------------
    def get_entry(self, doc_id: str) -> RegistryEntry | None:
        """A document's registry entry, or None."""
        got = self._registry.retrieve([registry_point_id(doc_id)], with_payload=True, with_vector=False)
        return RegistryEntry.from_payload(got[0].payload or {}) if got else None

    def put_entry(self, entry: RegistryEntry) -> None:
        """Write a registry entry."""
        point = qe.Point(registry_point_id(entry.doc_id), {}, entry.to_payload())
        with self._write:
            self._must_write()
            self._registry.update(qe.UpdateOperation.upsert_points([point]))

    def delete_entry(self, doc_id: str) -> None:
        """Remove a document's registry entry."""
        with self._write:
            self._must_write()
            self._registry.update(qe.UpdateOperation.delete_points([registry_point_id(doc_id)]))

    def entries(self, status: str, owners: Sequence[str | None] | None = None) -> list[RegistryEntry]:
        """Registry entries with this status (and one of these owners)."""
        must: list[Any] = [qe.FieldCondition(STATUS_KEY, match=qe.MatchValue(status))]
        if owners is not None:
            must.append(_owners_condition("owner", list(owners)))
        out: list[RegistryEntry] = []
        offset: Any = None
        while True:
            records, offset = self._registry.scroll(qe.ScrollRequest(offset=offset, limit=1000,
                                                                     filter=qe.Filter(must=must), with_payload=True,
                                                                     with_vector=False))
            out.extend(RegistryEntry.from_payload(r.payload or {}) for r in records)
            if offset is None:
                return out

    # -- lifecycle ----------------------------------------------------------------
    def unindexed_points(self) -> int:
        """Roughly how many chunk points have no HNSW index yet (dense vectors searched exhaustively)."""
        if self._chunks is None:
            return 0
        info = self._chunks.info()
        return max(0, 2 * info.points_count - info.indexed_vectors_count)  # sparse vectors are always indexed

    def flush(self) -> None:
        """Write both shards' segments to disk (skipped when the disk is full: the write-ahead log keeps the writes)."""
        with self._write:
            if not self._can_write():
                log.warning("Not flushing %s: the disk is full (its write-ahead log keeps every write)", self.path)
                return
            self._registry.flush()
            if self._chunks is not None:
                self._chunks.flush()

    def optimize(self) -> bool:
        """Build the HNSW index and vacuum deleted points (blocking; pauses the whole process); skipped (False) when
        the disk has less room than the chunk shard takes."""
        with self._write:
            if self._chunks is None:
                return False
            used = sum(allocated_bytes(f.stat()) for f in (self.path / "chunks").rglob("*") if f.is_file())
            if self.free_bytes() < used + MIN_FREE_BYTES:
                log.warning("Not indexing %s: the disk has less free space than the index needs", self.path)
                return False
            return self._chunks.optimize()

    def close(self) -> None:
        """Flush and close both shards, then release the folder lock (a second call does nothing)."""
        with self._write:
            if not self._folder_lock.held:
                return
            try:
                full = not self._can_write()  # then the write-ahead log keeps what flush would write
                for shard in (self._chunks, self._registry):
                    if shard is not None:
                        try:
                            if not full:
                                shard.flush()
                        finally:
                            shard.close()
            finally:
                self._chunks = None
                self._release()

    def _release(self) -> None:
        self._folder_lock.release()

