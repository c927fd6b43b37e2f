"""Opening a DocChat store on either backend in tests: Qdrant Edge (the embedded default) or qdrant-client's local
mode standing in for a Qdrant server (the backend used when QDRANT_URL is set)."""
from __future__ import annotations

from qdrant_client import QdrantClient

from rag_core.backends.client import ClientBackend
from rag_core.config import Settings
from rag_core.embeddings import Embedder
from rag_core.library import Library
from rag_core.store import Store, open_store

BACKENDS = ("edge", "server")
SERVER_FOLDER = "qdrant-server"  # not "qdrant": that name is the old embedded library's folder


def open_store_for(kind: str, settings: Settings, embedder: Embedder) -> Store:
    """A Store on `kind` ("edge" or "server") for the library folder of `settings`."""
    if kind == "edge":
        return open_store(settings, embedder)
    if kind != "server":
        raise ValueError(kind)
    client = QdrantClient(path=str(settings.data_dir / SERVER_FOLDER))
    return Store(ClientBackend(client, settings.collection), settings, embedder)


def open_library(kind: str, settings: Settings, embedder: Embedder) -> Library:
    """A Library over open_store_for(kind, ...)."""
    return Library(settings, embedder=embedder, store=open_store_for(kind, settings, embedder))
