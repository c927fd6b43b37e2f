"""What answer code reads of a library: its store, its embedder and its listing. The service's `Library` is one;
answer code types against this protocol, so it never imports the service above it."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.core.models import DocumentInfo
    from rag_core.store.embeddings import Embedder
    from rag_core.store.vector_store import Store


class LibraryView(Protocol):
    """A library as the answer steps read it (rag_core.service.library.Library satisfies it)."""

    @property
    def store(self) -> Store:
        """The chunks and the registry of complete documents."""
        ...

    @property
    def embedder(self) -> Embedder:
        """The embedding model the store was built with."""
        ...

    def documents(self, owners: Iterable[str | None] | None = None) -> list[DocumentInfo]:
        """The library listing, newest first."""
        ...
