"""Upgrade a library of the previous release (qdrant-client local mode under `<data_dir>/qdrant/`) to Qdrant Edge.

Run by the first open of such a data folder (rag_core.service.library.Library) or explicitly by `docchat migrate`. The
collection `<collection>` and its registry `<collection>__library` become `<data_dir>/edge/<collection>/` with the
same point ids, chunk texts and metadata (laid out as rag_core.store.vector_store.chunk_metadata writes it today; owners kept),
the same registry entries (titles, owners, flags, Wikipedia url / licence / revision) and the same dense vectors:
nothing is embedded again. Only the lexical vectors are re-encoded (the old ones came from fastembed's BM25).

Crash safety: the new library is built in `<data_dir>/edge/.migrating-<collection>/` while a lock file is held, gets
the marker MARKER, and is renamed into place only when complete, so the rename is also the "done" record; a crash
leaves a half-built folder that the next attempt deletes before starting over. The old folder is only read (as the
old release did, qdrant-client takes its `.lock` file while reading), never changed or deleted: the log says when it
can be deleted. Documents whose old ingest never finished ("pending") are left out, as the old release would have.
"""
from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, LibraryBusy, LibraryUpgradeFailed
from rag_core.core.files import ExclusiveLock, exclusive_lock, fsync_dir
from rag_core.core.models import Progress
from rag_core.store.backends import COMPLETE, CONTENT_KEY, DENSE, METADATA_KEY, PENDING, RawPoint, edge_path
from rag_core.store.backends.edge import EdgeBackend
from rag_core.store.embeddings import LEXICAL_VERSION, Embedder
from rag_core.store.vector_store import Store, chunk_from_payload, chunk_metadata, now_iso

if TYPE_CHECKING:  # pragma: no cover - the server backend (qdrant-client, seconds to import) only when migrating
    from rag_core.store.backends.client import ClientBackend

log = logging.getLogger(__name__)

STAGE = "upgrading"  # the Progress stage: ("upgrading", passages done, passages in the old library)
MARKER = "migrated-from-local-mode.json"  # inside the new library folder: this one was migrated, not again
BATCH = 256  # points read, re-encoded and written per step


@dataclass(frozen=True)
class Upgrade:
    """What one migration did."""

    documents: int
    passages: int
    seconds: float
    old_folder: Path


def old_folder(settings: Settings) -> Path:
    """The previous release's embedded library folder (qdrant-client local mode) of these settings."""
    return settings.library.data_dir / "qdrant"


def upgrade_state(settings: Settings) -> str:
    """"server" (QDRANT_URL: nothing to migrate), "none" (no old library), "done" (migrated) or "needed"."""
    if settings.library.qdrant_url:
        return "server"
    if not (old_folder(settings) / "collection" / settings.library.collection).is_dir():
        return "none"
    return "done" if (edge_path(settings) / MARKER).is_file() else "needed"


def migrate_if_needed(settings: Settings, embedder: Embedder, progress: Progress | None = None) -> Upgrade | None:
    """Migrate the old library of these settings unless that is done (or there is none); None when nothing ran."""
    if upgrade_state(settings) != "needed":
        return None
    return migrate(settings, embedder, progress)


def migrate(settings: Settings, embedder: Embedder, progress: Progress | None = None) -> Upgrade | None:
    """Build the Qdrant Edge library from the old one and move it into place (None: another process just did)."""
    target = edge_path(settings)
    with _migration_lock(target):
        if upgrade_state(settings) != "needed":
            return None
        _clear_empty_target(settings, target)
        temp = target.parent / f".migrating-{target.name}"
        if temp.exists():
            log.warning("Starting over an interrupted library upgrade (%s)", temp)
            shutil.rmtree(temp)
        try:
            upgrade = _build(settings, embedder, temp, progress)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        os.rename(temp, target)
        fsync_dir(target.parent)
    log.warning("Upgraded your library to the new search engine: %d documents, %d passages in %.1f s. The old "
                "folder %s is no longer used; you can delete it.", upgrade.documents, upgrade.passages,
                upgrade.seconds, upgrade.old_folder)
    return upgrade


def _migration_lock(target: Path) -> ExclusiveLock:
    """Take `<target>/../.migrating-<name>.lock` (LibraryBusy when another process is migrating)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    return exclusive_lock(target.parent / f".migrating-{target.name}.lock", target)


def _clear_empty_target(settings: Settings, target: Path) -> None:
    """Remove a new-engine library in the way when it holds nothing; LibraryUpgradeFailed when it holds documents."""
    if not target.exists():
        return
    backend = EdgeBackend(target)
    try:
        empty = backend.count() == 0 and not backend.entries(COMPLETE)
    finally:
        backend.close()
    if not empty:
        raise _failed(settings, f"a library of the new version already exists in {target}",
                      fix=f"to keep the old library instead, move the folder {target} away")
    shutil.rmtree(target)


def _build(settings: Settings, embedder: Embedder, temp: Path, progress: Progress | None) -> Upgrade:
    """Copy the old library into a new Qdrant Edge library at `temp`, marker included."""
    from qdrant_client import QdrantClient

    started = time.perf_counter()
    path = old_folder(settings)
    if not (path / "meta.json").is_file():
        raise _failed(settings, f"{path / 'meta.json'} is missing", fix=f"restore the folder {path} from a backup")
    try:
        client = QdrantClient(path=str(path))
    except RuntimeError as e:
        if "already accessed" in str(e):  # the previous release (its app, say) still has the folder open
            raise LibraryBusy(str(path)) from e
        raise _unreadable(settings, e) from e
    except Exception as e:  # any damage to the old files gets the same sentence
        raise _unreadable(settings, e) from e
    try:
        meta = _check_model(settings, client, embedder)
        store = Store(EdgeBackend(temp), settings, embedder)
        try:
            documents, passages = _copy(client, store, settings.library.collection, progress)
            store.backend.write_meta({**meta, "embedding_model": embedder.name, "dim": embedder.dim,
                                      "lexical": LEXICAL_VERSION, "migrated_at": now_iso()})
            if store.count_chunks() != passages or len(store.list_documents()) != documents:
                raise _failed(settings, "the new library came out incomplete")
        finally:
            store.close()
    except DocChatError:
        raise
    except Exception as e:  # reading or writing failed half-way: the sentence, the cause chained
        raise _unreadable(settings, e) from e
    finally:
        client.close()
    (temp / MARKER).write_text(json.dumps({"from": str(path.resolve()), "at": now_iso(), "documents": documents,
                                           "passages": passages}), encoding="utf-8")
    return Upgrade(documents, passages, time.perf_counter() - started, path.resolve())


def _check_model(settings: Settings, client: Any, embedder: Embedder) -> dict[str, Any]:
    """The old library's metadata; LibraryUpgradeFailed unless it was built with this embedding model."""
    config = client.get_collection(settings.library.collection).config
    meta = dict(config.metadata or {})
    built_with = meta.get("embedding_model") or embedder.name
    vectors = config.params.vectors
    dim = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
    if built_with != embedder.name or dim != embedder.dim:
        raise _failed(settings, f"it was built with the embedding model “{built_with}” ({dim} dimensions), but "
                                f"DocChat is set to use “{embedder.name}”",
                      env=f"DOCCHAT_EMBEDDING_MODEL={shlex.quote(built_with)}")
    return meta


def _copy(client: Any, store: Store, collection: str, progress: Progress | None) -> tuple[int, int]:
    """Write the complete documents' points (lexical vectors re-encoded) and registry entries; (documents, points)."""
    from rag_core.store.backends.client import ClientBackend

    old = ClientBackend(client, collection, serialize=False)  # the old layout is the server backend's layout
    complete = [e for e in old.entries(COMPLETE) if e.doc_id]
    unfinished = len(old.entries(PENDING))
    if unfinished:
        log.warning("Leaving out %d documents whose adding never finished", unfinished)
    keep = {e.doc_id for e in complete}
    total = client.count(collection, exact=True).count
    log.warning("Upgrading your library to the new search engine (%d documents, %d passages; nothing is embedded "
                "again)…", len(complete), total)
    # One import_points call for everything: it writes BATCH at a time and flushes once (a flush is ~40 ms).
    written = store.import_points(_points(old, store, keep, total, progress), status=COMPLETE, batch=BATCH)
    for entry in complete:  # one flush for all (import_entry flushes each: 12 ms a document)
        store.backend.put_entry(entry)
    store.backend.flush()
    return len(complete), written


def _points(old: ClientBackend, store: Store, keep: set[str], total: int,
            progress: Progress | None) -> Iterator[RawPoint]:
    """The old chunk points of these documents, lexical vectors re-encoded; progress after each batch is written."""
    read = 0
    if progress:
        progress(STAGE, 0, total)
    for batch in old.points(with_vectors=True, batch=BATCH):
        points = [_modernised(p) for p in batch if (p.payload.get(METADATA_KEY) or {}).get("doc_id") in keep]
        yield from _reencoded(store, points)
        read += len(batch)  # import_points has written the batch once it asks for the next point
        log.info("Upgrading your library to the new search engine… %d/%d passages", read, total)
        if progress:
            progress(STAGE, read, total)


def _modernised(point: RawPoint) -> RawPoint:
    """An old chunk point with the same id and dense vector, its metadata in today's layout (lexical set later)."""
    old = point.payload[METADATA_KEY]
    meta = {**old, **chunk_metadata(chunk_from_payload(point.payload)), "owner": old.get("owner")}
    return RawPoint(point.id, point.dense, point.sparse, {CONTENT_KEY: point.payload[CONTENT_KEY], METADATA_KEY: meta})


def _reencoded(store: Store, points: Sequence[RawPoint]) -> list[RawPoint]:
    """The points with lexical vectors from today's encoder."""
    sparse = store.lexical.embed_documents([p.payload[CONTENT_KEY] for p in points])
    return [RawPoint(p.id, p.dense, s, p.payload) for p, s in zip(points, sparse, strict=True)]


def _failed(settings: Settings, reason: str, fix: str = "", env: str = "") -> LibraryUpgradeFailed:
    return LibraryUpgradeFailed(str(settings.library.data_dir.resolve()), reason, fix=fix, env=env)


def _unreadable(settings: Settings, e: BaseException) -> LibraryUpgradeFailed:
    log.info("Reading the old library failed", exc_info=e)
    detail = f"{type(e).__name__}: {e}".strip().rstrip(":")[:160]
    return _failed(settings, f"the old library could not be read or copied: {detail}",
                   fix=f"check that the folder {old_folder(settings)} is readable and undamaged (or restore it from a backup)")
