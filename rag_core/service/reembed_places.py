"""Where a re-embedding (rag_core.service.reembed) builds its side library, keeps its plan and switches, for each
kind of library (issue 46): `EdgePlaces` for the embedded Qdrant Edge library (a side folder, the plan file and the
pointer file; rag_core.store.model_record) and `ServerPlaces` for a library on a Qdrant server (a side collection,
the plan in the library's collection metadata and a collection alias; rag_core.store.server_model)."""
from __future__ import annotations

import logging
import shutil
from typing import TYPE_CHECKING, Protocol

from rag_core.store import model_record, server_model
from rag_core.store.model_record import ModelRecord, ReembedPlan
from rag_core.store.vector_store import Store

if TYPE_CHECKING:
    from rag_core.core.config import Settings
    from rag_core.service.library import Library
    from rag_core.store.backends.client import ClientBackend
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)


class Places(Protocol):
    """What a re-embedding needs from the kind of library it rebuilds."""

    def side_name(self, model: str) -> str:
        """The side library a re-embedding with `model` builds (folder or collection name)."""

    def read_plan(self) -> ReembedPlan | None: ...

    def write_plan(self, plan: ReembedPlan) -> None: ...

    def drop_plan(self) -> None: ...

    def open_side(self, plan: ReembedPlan, embedder: Embedder) -> Store:
        """The side library of `plan` as a Store (created when new, repaired when resumed)."""

    def switch(self, plan: ReembedPlan, record: ModelRecord) -> None:
        """Make the side library the library, in one step."""

    def tidy(self, keep: ReembedPlan | None) -> None:
        """Remove the side libraries nothing uses (all but `keep`'s and the library)."""


class EdgePlaces:
    """The embedded library: `<data_dir>/edge/` folders, the plan file and the pointer file."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def side_name(self, model: str) -> str:
        return model_record.side_folder(self.settings, model).name

    def read_plan(self) -> ReembedPlan | None:
        return model_record.read_plan(self.settings)

    def write_plan(self, plan: ReembedPlan) -> None:
        model_record.write_plan(self.settings, plan)

    def drop_plan(self) -> None:
        model_record.drop_plan(self.settings)

    def open_side(self, plan: ReembedPlan, embedder: Embedder) -> Store:
        from rag_core.store.backends.edge import EdgeBackend

        return Store(EdgeBackend(model_record.edge_root(self.settings) / plan.folder), self.settings, embedder)

    def switch(self, plan: ReembedPlan, record: ModelRecord) -> None:
        model_record.write_pointer(self.settings, model_record.edge_root(self.settings) / plan.folder, record)

    def tidy(self, keep: ReembedPlan | None) -> None:
        for path in model_record.stale_folders(self.settings, keep=keep):
            log.info("Removing the unused library folder %s", path)
            shutil.rmtree(path, ignore_errors=True)


class ServerPlaces:
    """A library on a Qdrant server: side collections on the same server, the plan in the library's collection
    metadata and the alias switch. `backend` is the library's (its connection is shared with the side)."""

    def __init__(self, settings: Settings, backend: ClientBackend) -> None:
        self.settings, self.backend = settings, backend
        self.collection = settings.library.collection

    def side_name(self, model: str) -> str:
        return server_model.side_collection(self.collection, model)

    def read_plan(self) -> ReembedPlan | None:
        return server_model.read_plan(self.backend)

    def write_plan(self, plan: ReembedPlan) -> None:
        server_model.write_plan(self.backend, plan)

    def drop_plan(self) -> None:
        server_model.drop_plan(self.backend)

    def open_side(self, plan: ReembedPlan, embedder: Embedder) -> Store:
        side = Store(self.backend.sibling(plan.folder), self.settings, embedder)
        side.repair()  # points of a document whose entry a kill prevented: removed (Edge's open does this itself)
        return side

    def switch(self, plan: ReembedPlan, record: ModelRecord) -> None:
        server_model.switch(self.backend, self.collection, plan.folder)

    def tidy(self, keep: ReembedPlan | None) -> None:
        for name in server_model.stale_collections(self.backend, self.collection, keep):
            log.info("Removing the unused collection %s", name)
            server_model.drop_collection(self.backend, name)


def places_of(library: Library) -> Places:
    """The places of `library`'s kind (by its store's backend: a server, or qdrant-client's local mode in tests)."""
    backend = library.store.backend
    if backend.kind == "server":
        from rag_core.store.backends.client import ClientBackend

        assert isinstance(backend, ClientBackend)
        return ServerPlaces(library.settings, backend)
    return EdgePlaces(library.settings)


__all__ = ["EdgePlaces", "Places", "ServerPlaces", "places_of"]
