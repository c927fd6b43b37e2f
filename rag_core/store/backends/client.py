"""A Qdrant server through qdrant-client (QDRANT_URL): collections `<collection>` (chunks) and
`<collection>__library` (registry, payload-only points). Library metadata lives in the chunk collection's metadata.

Issue 46: re-embedding with another model builds a side collection on the same connection (`sibling`) and switches
in one step with collection aliases (`switch_alias`: the library's names become aliases of the side collection and
its registry); rag_core.store.server_model has the plan and the names.

The same class drives qdrant-client's local mode (`QdrantClient(path=...)` or `":memory:"`), which tests use in
place of a server; local mode is not thread-safe, so every call is serialised unless `serialize=False` (a server
connection, where requests from many threads run side by side).
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from langchain_qdrant import SparseVector
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ApiException, ResponseHandlingException

from rag_core.core.errors import DocChatError, StorageError, StoreUnavailable
from rag_core.store.backends import base
from rag_core.store.backends.base import DENSE, LEXICAL, METADATA_KEY, STATUS_KEY, Hit, RawPoint, Scope, Search
from rag_core.store.backends.entry import RegistryEntry

if TYPE_CHECKING:
    from rag_core.core.config import Settings

log = logging.getLogger(__name__)

TIMEOUT_S = 30


def connect(settings: Settings) -> ClientBackend:
    """The Qdrant server at settings.qdrant_url (StoreUnavailable when it does not answer)."""
    try:
        client = QdrantClient(url=settings.library.qdrant_url, api_key=settings.library.qdrant_api_key, timeout=TIMEOUT_S)
        client.get_collections()
        return library_backend(client, settings.library.collection, serialize=False)
    except Exception as e:  # any transport error means "unreachable"
        raise StoreUnavailable(type(e).__name__) from e


def library_backend(client: QdrantClient, collection: str, serialize: bool = True) -> ClientBackend:
    """The library `collection` on `client`, by the name of the collection it is now (issue 46: after a switch of
    embedding model `collection` is an alias). A process keeps the collection it opened, with the model it opened it
    with: a later switch never makes its searches meet another model's vectors (they fail once the old one is gone)."""
    aliases = {a.alias_name: a.collection_name for a in client.get_aliases().aliases}
    return ClientBackend(client, aliases.get(collection, collection), serialize=serialize)


def _sparse(v: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=list(v.indices), values=list(v.values))


def _owners_condition(key: str, owners: Sequence[str | None]) -> models.Filter:
    named = [o for o in owners if o is not None]
    should: list[models.Condition] = []
    if named:
        should.append(models.FieldCondition(key=key, match=models.MatchAny(any=named)))
    if None in owners:
        should.append(models.IsNullCondition(is_null=models.PayloadField(key=key)))
    if not should:  # no owner at all: nothing matches
        should.append(models.HasIdCondition(has_id=[]))
    return models.Filter(should=should)


def scope_filter(scope: Scope) -> models.Filter | None:
    """The qdrant-client filter of a Scope (status, doc ids, owners), evaluated inside Qdrant."""
    must: list[models.Condition] = []
    if scope.complete_only:
        must.append(models.FieldCondition(key=f"{METADATA_KEY}.{STATUS_KEY}", match=models.MatchValue(value=base.COMPLETE)))
    if scope.doc_ids is not None:
        must.append(models.FieldCondition(key=f"{METADATA_KEY}.doc_id", match=models.MatchAny(any=list(scope.doc_ids))))
    if scope.owners is not None:
        must.append(_owners_condition(f"{METADATA_KEY}.owner", scope.owners))
    if scope.point_ids is not None:
        must.append(models.HasIdCondition(has_id=list(scope.point_ids)))
    return models.Filter(must=must) if must else None


def _doc_filter(doc_id: str) -> models.Filter:
    return models.Filter(must=[models.FieldCondition(key=f"{METADATA_KEY}.doc_id",
                                                     match=models.MatchValue(value=doc_id))])


def _request(s: Search, flt: models.Filter | None) -> models.QueryRequest:
    kind = s.kind()
    if kind == DENSE:
        return models.QueryRequest(query=list(s.dense or ()), using=DENSE, limit=s.limit, filter=flt, with_payload=True)
    if kind == "sparse":
        assert s.sparse is not None
        return models.QueryRequest(query=_sparse(s.sparse), using=LEXICAL, limit=s.limit, filter=flt,
                                   with_payload=True)
    assert s.sparse is not None and s.dense is not None
    pre = s.prefetch_limit or s.limit
    fusion: models.Query = (models.RrfQuery(rrf=models.Rrf(k=base.RRF_K)) if kind == "rrf"
                            else models.FusionQuery(fusion=models.Fusion.DBSF))
    return models.QueryRequest(query=fusion, limit=s.limit, with_payload=True, prefetch=[
        models.Prefetch(query=list(s.dense), using=DENSE, limit=pre, filter=flt),
        models.Prefetch(query=_sparse(s.sparse), using=LEXICAL, limit=pre, filter=flt)])


REGISTRY_SUFFIX = "__library"


class Connection:
    """One qdrant-client connection shared by the backends opened on it (a library and its side collection while
    re-embedding): one lock, closed with the last backend."""

    def __init__(self, client: QdrantClient, serialize: bool) -> None:
        self.client = client
        self.lock: AbstractContextManager[Any] = threading.RLock() if serialize else nullcontext()
        self.users = 0


class ClientBackend:
    """The Backend protocol over a qdrant-client connection (a server, or local mode in tests)."""

    kind = "server"

    def __init__(self, client: QdrantClient, collection: str, serialize: bool = True,
                 connection: Connection | None = None) -> None:
        self.connection = connection or Connection(client, serialize)
        self.connection.users += 1
        self.client = self.connection.client
        self.collection = collection
        self.registry = f"{collection}{REGISTRY_SUFFIX}"
        self._lock = self.connection.lock
        self._closed = False

    def sibling(self, collection: str) -> ClientBackend:
        """The library in `collection` on the same connection (issue 46: the side collection of a re-embedding)."""
        return ClientBackend(self.client, collection, connection=self.connection)

    # -- collections and aliases (issue 46) ------------------------------------------
    def collection_names(self) -> list[str]:
        """Every collection on the connection (aliases not included)."""
        with self._lock:
            return [c.name for c in self.client.get_collections().collections]

    def alias_target(self, name: str) -> str | None:
        """The collection the alias `name` points at; None when `name` is no alias."""
        with self._lock:
            found = [a.collection_name for a in self.client.get_aliases().aliases if a.alias_name == name]
        return found[0] if found else None

    def switch_alias(self, name: str, physical: str) -> None:
        """Make `name` and its registry name aliases of `physical` and its registry, in one alias request (applied
        at once by Qdrant). A library never switched before holds these names as collections: they are deleted
        first (the caller marked `physical` so that a start after a kill in between finishes the switch)."""
        names = ((name, physical), (f"{name}{REGISTRY_SUFFIX}", f"{physical}{REGISTRY_SUFFIX}"))
        ops: list[models.AliasOperations] = []
        with self._lock:
            existing = set(self.collection_names())
            for alias, target in names:
                if alias in existing:
                    self.client.delete_collection(alias)
                elif self.alias_target(alias) is not None:
                    ops.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
                ops.append(models.CreateAliasOperation(create_alias=models.CreateAlias(collection_name=target,
                                                                                       alias_name=alias)))
            self.client.update_collection_aliases(change_aliases_operations=ops)

    def drop(self) -> None:
        """Delete this library's collections (a side collection nothing uses any more)."""
        with self._lock:
            for name in (self.collection, self.registry):
                self.client.delete_collection(name)

    # -- setup -------------------------------------------------------------------
    def read_meta(self) -> dict[str, Any] | None:
        """The chunk collection's metadata, or None when it does not exist yet."""
        with self._lock:
            if not self.client.collection_exists(self.collection):
                return None
            meta = dict(self.client.get_collection(self.collection).config.metadata or {})
            if not self.client.collection_exists(self.registry):
                self.client.create_collection(self.registry, vectors_config={})
        return meta

    def create(self, dim: int, meta: dict[str, Any]) -> None:
        """Create both collections (dense cosine of `dim`, lexical with IDF, keyword indexes) with `meta`."""
        with self._lock:
            self.client.create_collection(
                self.collection,
                vectors_config={DENSE: models.VectorParams(size=dim, distance=models.Distance.COSINE)},
                sparse_vectors_config={LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                metadata=meta)
            with warnings.catch_warnings():  # local mode (tests) warns that it has no payload indexes
                warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
                for key in base.INDEXED_FIELDS:
                    self.client.create_payload_index(self.collection, f"{METADATA_KEY}.{key}",
                                                     models.PayloadSchemaType.KEYWORD)
            if not self.client.collection_exists(self.registry):
                self.client.create_collection(self.registry, vectors_config={})

    def write_meta(self, meta: dict[str, Any]) -> None:
        """Replace the chunk collection's metadata."""
        with self._lock:
            self.client.update_collection(self.collection, metadata=meta)

    # -- chunk points -------------------------------------------------------------
    def upsert(self, points: Sequence[RawPoint]) -> None:
        """Insert or replace chunk points (waits until they are stored)."""
        structs = [models.PointStruct(id=p.id, vector={DENSE: [float(x) for x in p.dense], LEXICAL: _sparse(p.sparse)},
                                      payload=p.payload) for p in points]
        with self._lock:
            self.client.upsert(self.collection, points=structs, wait=True)

    def set_status(self, doc_id: str, status: str) -> None:
        """Set metadata.status on every chunk point of a document."""
        with self._lock:
            self.client.set_payload(self.collection, payload={STATUS_KEY: status}, key=METADATA_KEY,
                                    points=models.FilterSelector(filter=_doc_filter(doc_id)), wait=True)

    def delete_document(self, doc_id: str) -> None:
        """Delete every chunk point of a document."""
        with self._lock:
            self.client.delete(self.collection, points_selector=models.FilterSelector(filter=_doc_filter(doc_id)),
                               wait=True)

    def check_room(self, points: Sequence[RawPoint]) -> None:
        """Nothing to check here: the server reports a full disk when it has one."""

    def explain(self, error: BaseException, action: str, outcome: str = "") -> DocChatError | None:
        """StoreUnavailable when the server did not answer; StorageError for its errors, local mode's SQLite errors
        and OS errors; None for anything else."""
        if isinstance(error, ResponseHandlingException):
            return StoreUnavailable(type(error.source).__name__)
        if isinstance(error, ApiException | sqlite3.Error | OSError):
            return StorageError(action, outcome)
        return None

    def count(self, scope: Scope | None = None) -> int:
        """Exact number of chunk points in `scope` (None: all)."""
        with self._lock:
            return self.client.count(self.collection, count_filter=None if scope is None else scope_filter(scope),
                                     exact=True).count

    def search(self, searches: Sequence[Search], scope: Scope) -> list[list[Hit]]:
        """Several searches as one batched query request."""
        flt = scope_filter(scope)
        with self._lock:
            res = self.client.query_batch_points(self.collection, requests=[_request(s, flt) for s in searches])
        return [[Hit(str(p.id), float(p.score), p.payload or {}) for p in r.points] for r in res]

    def points(self, with_vectors: bool = True, batch: int = 256, scope: Scope | None = None
               ) -> Iterator[list[RawPoint]]:
        """Every chunk point (in `scope`) in batches."""
        offset = None
        flt = None if scope is None else scope_filter(scope)
        while True:
            with self._lock:
                records, offset = self.client.scroll(self.collection, limit=batch, offset=offset, with_payload=True,
                                                     with_vectors=with_vectors, scroll_filter=flt)
            out = base.raw_points(records)
            if out:
                yield out
            if offset is None:
                return

    def set_sparse(self, vectors: Sequence[tuple[str, SparseVector]]) -> None:
        """Replace the lexical vectors of these points."""
        with self._lock:
            self.client.update_vectors(self.collection, wait=True, points=[
                models.PointVectors(id=pid, vector={LEXICAL: _sparse(v)}) for pid, v in vectors])

    # -- registry -----------------------------------------------------------------
    def get_entry(self, doc_id: str) -> RegistryEntry | None:
        """A document's registry entry, or None."""
        with self._lock:
            got = self.client.retrieve(self.registry, ids=[base.registry_point_id(doc_id)], with_payload=True)
        return RegistryEntry.from_payload(got[0].payload or {}) if got else None

    def put_entry(self, entry: RegistryEntry) -> None:
        """Write a registry entry."""
        with self._lock:
            self.client.upsert(self.registry, wait=True, points=[
                models.PointStruct(id=base.registry_point_id(entry.doc_id), vector={}, payload=entry.to_payload())])

    def delete_entry(self, doc_id: str) -> None:
        """Remove a document's registry entry."""
        with self._lock:
            self.client.delete(self.registry, points_selector=models.PointIdsList(points=[base.registry_point_id(doc_id)]),
                               wait=True)

    def entries(self, status: str, owners: Sequence[str | None] | None = None) -> list[RegistryEntry]:
        """Registry entries with this status (and one of these owners)."""
        must: list[models.Condition] = [models.FieldCondition(key=STATUS_KEY, match=models.MatchValue(value=status))]
        if owners is not None:
            must.append(_owners_condition("owner", list(owners)))
        out: list[RegistryEntry] = []
        offset = None
        while True:
            with self._lock:
                records, offset = self.client.scroll(self.registry, scroll_filter=models.Filter(must=must), limit=1000,
                                                     offset=offset, with_payload=True, with_vectors=False)
            out.extend(RegistryEntry.from_payload(r.payload or {}) for r in records)
            if offset is None:
                return out

    # -- lifecycle ----------------------------------------------------------------
    def flush(self) -> None:
        """Nothing to do: every write above waits until Qdrant has stored it."""

    def unindexed_points(self) -> int:
        """0: a server indexes in the background (and local mode has no index to build)."""
        return 0

    def optimize(self) -> bool:
        """Nothing to do: a server builds its indexes in the background."""
        return False

    def close(self) -> None:
        """Let the connection go; the last backend on it closes it (local mode: releases its folder)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.connection.users -= 1
            if self.connection.users <= 0:
                self.client.close()
