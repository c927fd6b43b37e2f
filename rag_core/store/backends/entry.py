"""A document's registry entry as a frozen dataclass, and its on-disk JSON form (the registry point's payload).

The payload layout is the one every release since the registry exists has written, key for key and in the same
order: doc_id, title, kind, pages, chunks, added_at, file_name, url, sha256, revision_id, lang, page_id, owner,
flags (a list), status, started; then `replaces` (a replacement not finished yet) and `removed_at` (a removed file)
only when set. Keys this release does not know are kept in `extra` and written back after them, so an entry read
and written again comes out as it was.
"""
from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from rag_core.core.models import DocumentInfo, SourceMeta

_OPTIONAL = ("replaces", "removed_at")  # written only when set


@dataclass(frozen=True)
class RegistryEntry:
    """One document of the registry: what the library lists, plus the journal fields of crash recovery."""

    doc_id: str
    title: str = ""
    kind: str = ""
    pages: int | None = None
    chunks: int = 0
    added_at: str = ""
    file_name: str = ""
    url: str | None = None
    sha256: str = ""
    revision_id: int | None = None
    lang: str | None = None
    page_id: int | None = None
    owner: str | None = None
    flags: tuple[str, ...] = ()
    status: str = "pending"  # pending | complete | deleting | removed | superseded (rag_core.store.backends.base)
    started: float | None = None  # when its adding started (epoch seconds): a server's stale pending adds
    replaces: str | None = None  # the document this one replaces (Store.replace_document), until it is gone
    removed_at: float | None = None  # when a linked folder's file went (epoch seconds), for Undo
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}), compare=False, hash=False)

    @classmethod
    def pending(cls, doc_id: str, source: SourceMeta, pages: int | None, chunks: int, owner: str | None,
                added_at: str, replaces: str | None = None) -> RegistryEntry:
        """The "pending" entry of a document about to be stored (its journal record until it is complete)."""
        return cls(doc_id=doc_id, title=source.title, kind=source.kind, pages=pages, chunks=chunks, added_at=added_at,
                   file_name=source.file_name, url=source.url, sha256=source.sha256, revision_id=source.revision_id,
                   lang=source.lang, page_id=source.page_id, owner=owner, flags=(), status="pending",
                   started=time.time(), replaces=replaces)

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> RegistryEntry:
        """The entry a registry point's payload holds (missing keys at their defaults, unknown ones in `extra`)."""
        known = {f.name for f in fields(cls)} - {"extra"}
        values = {"doc_id": "", **{k: v for k, v in payload.items() if k in known}}
        values["flags"] = tuple(values.get("flags") or ())
        extra = {k: v for k, v in payload.items() if k not in known}
        return cls(**values, extra=MappingProxyType(extra))

    def to_payload(self) -> dict[str, Any]:
        """The entry as a registry point's payload (plain JSON values, the layout above)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "extra" or (f.name in _OPTIONAL and value is None):
                continue
            out[f.name] = list(value) if f.name == "flags" else value
        out.update((k, v) for k, v in self.extra.items() if k not in out)
        return out

    def with_status(self, status: str, **changes: Any) -> RegistryEntry:
        """A copy with this status (and other fields changed)."""
        return replace(self, status=status, **changes)

    def info(self) -> DocumentInfo:
        """The entry as the DocumentInfo the library lists."""
        return DocumentInfo(
            doc_id=self.doc_id, title=self.title, kind=self.kind, pages=self.pages, chunks=self.chunks,
            added_at=self.added_at, file_name=self.file_name, url=self.url, sha256=self.sha256,
            revision_id=self.revision_id, lang=self.lang, page_id=self.page_id, owner=self.owner, flags=self.flags,
        )
