"""Keeping Wikipedia articles in the library: import one article, refresh every imported one."""
from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, DocumentNotFound, WikipediaPageMissing
from rag_core.core.models import DocKind, Document, DocumentInfo, Progress
from rag_core.sources.wikipedia.client import (
    Disambiguation,
    LatestRevision,
    WikipediaClient,
    client_session,
    fetch_article,
    latest_revisions,
)
from rag_core.sources.wikipedia.documents import build_document, parse_article_ref

if TYPE_CHECKING:
    from rag_core.service.library import Library

log = logging.getLogger(__name__)

REMOVED_UPSTREAM = "removed upstream"  # registry flag set by refresh; the article is kept
PAGEIDS_PER_REQUEST = 50  # the API's limit for anonymous clients



# -- results -------------------------------------------------------------------
@dataclass(frozen=True)
class WikiImportResult:
    """What happened to one article import."""

    status: str  # "added" | "unchanged" | "failed" | "disambiguation"
    title: str
    lang: str = "en"
    doc_id: str | None = None
    chunks: int = 0
    redirected_from: str | None = None
    candidates: tuple[str, ...] = ()
    error: str | None = None
    url: str | None = None
    revision_id: int | None = None
    replaced: tuple[str, ...] = ()  # doc_ids of older revisions of the same article that were removed

    def as_json(self) -> dict:
        """The CLI's JSON shape."""
        return {"status": self.status, "title": self.title, "lang": self.lang, "doc_id": self.doc_id,
                "chunks": self.chunks, "redirected_from": self.redirected_from, "candidates": list(self.candidates),
                "error": self.error, "url": self.url, "revision_id": self.revision_id, "replaced": list(self.replaced)}


@dataclass(frozen=True)
class RefreshItem:
    """One article in a refresh report."""

    doc_id: str
    title: str
    lang: str | None
    revision_id: int | None  # the stored revision
    new_revision_id: int | None = None
    new_doc_id: str | None = None  # set when a changed article was replaced
    message: str = ""

    def as_json(self) -> dict:
        """The CLI's JSON shape."""
        return {"doc_id": self.doc_id, "title": self.title, "lang": self.lang, "revision_id": self.revision_id,
                "new_revision_id": self.new_revision_id, "new_doc_id": self.new_doc_id, "message": self.message}


@dataclass(frozen=True)
class RefreshReport:
    """Imported articles sorted by what Wikipedia says about them now."""

    unchanged: tuple[RefreshItem, ...] = ()
    changed: tuple[RefreshItem, ...] = ()
    removed_upstream: tuple[RefreshItem, ...] = ()
    failed: tuple[RefreshItem, ...] = ()
    dry_run: bool = False

    @property
    def total(self) -> int:
        """Number of articles checked."""
        return len(self.unchanged) + len(self.changed) + len(self.removed_upstream) + len(self.failed)

    def as_json(self) -> dict:
        """The CLI's JSON shape."""
        return {"dry_run": self.dry_run, "unchanged": [i.as_json() for i in self.unchanged],
                "changed": [i.as_json() for i in self.changed],
                "removed_upstream": [i.as_json() for i in self.removed_upstream],
                "failed": [i.as_json() for i in self.failed]}


# -- import ------------------------------------------------------------------------
def _same_page(d: DocumentInfo, lang: str, page_id: int, owner: str | None) -> bool:
    return d.kind == DocKind.WIKIPEDIA and d.lang == lang and d.page_id == page_id and d.owner == owner


def _retire(library: Library, doc_ids: list[str]) -> tuple[str, ...]:
    """Delete superseded revisions (called only after their replacement is complete)."""
    gone = []
    for doc_id in doc_ids:
        try:
            library.delete(doc_id)
            gone.append(doc_id)
        except DocumentNotFound:
            log.info("Old revision %s was already gone", doc_id)
    return tuple(gone)


def import_article(library: Library, settings: Settings, title: str, lang: str = "en", owner: str | None = None,
                   progress: Progress | None = None, client: WikipediaClient | None = None,
                   check: Callable[[Document], None] | None = None) -> WikiImportResult:
    """Fetch one article and add it to the library; never raises for Wikipedia trouble (see the result). `check`
    sees the article before it is stored and may refuse it by raising a DocChatError (the demo's quotas)."""
    shown, code = title, lang
    try:
        code, shown = parse_article_ref(title, lang)
        if progress:
            progress("downloading", 0, 1)
        with client_session(settings, client) as c:
            got = fetch_article(c, code, title=shown)
        if progress:
            progress("downloading", 1, 1)
        if isinstance(got, Disambiguation):
            return WikiImportResult("disambiguation", got.title, code, candidates=got.candidates,
                                    redirected_from=got.redirected_from, url=got.url)
        doc = build_document(got)  # the library scopes the id to `owner`
        if check is not None:
            check(doc)
        res = library.ingest_document(doc, owner=owner, progress=progress, label=got.title)
        older = [d.doc_id for d in library.documents()
                 if _same_page(d, got.lang, got.page_id, owner) and d.doc_id != res.doc_id]
        replaced = _retire(library, older) if res.status == "added" else ()
        return WikiImportResult(res.status, got.title, code, res.doc_id, res.chunks, got.redirected_from,
                                url=got.url, revision_id=got.revision_id, replaced=replaced)
    except DocChatError as e:
        log.info("Could not import %r from %s.wikipedia: %s", title, code, e)
        return WikiImportResult("failed", shown, code, error=str(e))
    except Exception:  # the user gets a sentence, the log gets the traceback
        log.exception("Unexpected failure while importing %r from %s.wikipedia", title, code)
        return WikiImportResult("failed", shown, code, error=(
            f"“{shown}”: something unexpected went wrong while importing this article; your library was not "
            "changed. Try again."))


# -- refresh ---------------------------------------------------------------------
def _flag(library: Library, d: DocumentInfo, on: bool) -> None:
    flags = [f for f in d.flags if f != REMOVED_UPSTREAM] + ([REMOVED_UPSTREAM] if on else [])
    if flags != list(d.flags):
        try:
            library.store.set_flags(d.doc_id, flags)
        except DocumentNotFound:
            log.info("%s was deleted while it was being refreshed", d.doc_id)


def refresh(library: Library, settings: Settings, dry_run: bool = False, owners: list[str | None] | None = None,
            progress: Progress | None = None, client: WikipediaClient | None = None,
            doc_ids: Collection[str] | None = None) -> RefreshReport:
    """Check every imported article's latest revision (or only `doc_ids`); replace changed ones (in one step: a
    question sees the old revision or the new one), flag removed ones, keep failed ones."""
    docs = [d for d in library.documents(owners) if d.kind == DocKind.WIKIPEDIA and (doc_ids is None or d.doc_id in doc_ids)]
    buckets: dict[str, list[RefreshItem]] = {"unchanged": [], "changed": [], "removed": [], "failed": []}
    by_lang: dict[str, list[tuple[DocumentInfo, int]]] = {}  # (document, its page id)
    for d in docs:
        if d.page_id is None or d.lang is None:
            buckets["failed"].append(RefreshItem(d.doc_id, d.title, d.lang, d.revision_id,
                                                 message="no Wikipedia page id is recorded for this document"))
        else:
            by_lang.setdefault(d.lang, []).append((d, d.page_id))
    done = 0
    with client_session(settings, client) as c:
        for lang, group in by_lang.items():
            for i in range(0, len(group), PAGEIDS_PER_REQUEST):
                batch = group[i:i + PAGEIDS_PER_REQUEST]
                try:
                    latest = latest_revisions(c, lang, [page_id for _, page_id in batch])
                except DocChatError as e:
                    buckets["failed"].extend(RefreshItem(d.doc_id, d.title, lang, d.revision_id, message=str(e))
                                             for d, _ in batch)
                else:
                    for d, page_id in batch:
                        bucket, item = _refresh_one(library, c, d, latest.get(page_id), dry_run, progress)
                        buckets[bucket].append(item)
                done += len(batch)
                if progress:
                    progress("checking", done, len(docs))
    return RefreshReport(tuple(buckets["unchanged"]), tuple(buckets["changed"]), tuple(buckets["removed"]),
                         tuple(buckets["failed"]), dry_run)


def _refresh_one(library: Library, client: WikipediaClient, d: DocumentInfo, now: LatestRevision | None,
                 dry_run: bool, progress: Progress | None) -> tuple[str, RefreshItem]:
    """Sort one article into a bucket, and (unless dry_run) act on it."""
    base = RefreshItem(d.doc_id, d.title, d.lang, d.revision_id)
    if now is None:
        return "failed", replace(base, message="Wikipedia's answer did not mention this article")
    if now.gone:
        if not dry_run:
            _flag(library, d, True)
        return "removed", replace(base, message=now.gone)
    if now.revision_id == d.revision_id:
        if not dry_run:
            _flag(library, d, False)  # it came back
        return "unchanged", base
    base = replace(base, new_revision_id=now.revision_id)
    if dry_run:
        return "changed", replace(base, message=f"revision {d.revision_id} → {now.revision_id}")
    try:
        got = fetch_article(client, d.lang or "", page_id=d.page_id)
        if isinstance(got, Disambiguation):
            _flag(library, d, True)
            return "removed", replace(base, message="the article is now a disambiguation page on Wikipedia")
        doc = build_document(got)  # the library scopes the id to d.owner
        if got.revision_id == d.revision_id:  # the page answered with the revision we already have
            return "unchanged", replace(base, new_revision_id=None)
        res = library.ingest_document(doc, owner=d.owner, progress=progress, label=got.title, replaces=d.doc_id)
    except WikipediaPageMissing as e:
        _flag(library, d, True)
        return "removed", replace(base, message=str(e))
    except DocChatError as e:
        return "failed", replace(base, message=str(e))
    except Exception:  # one article must not stop the others; the old copy is untouched
        log.exception("Unexpected failure while refreshing %s", d.doc_id)
        return "failed", replace(base, message="something unexpected went wrong; the stored copy was kept")
    base = replace(base, new_revision_id=got.revision_id, new_doc_id=res.doc_id,
                 message=f"revision {d.revision_id} → {got.revision_id}")
    if res.doc_id != d.doc_id:
        try:
            _retire(library, [d.doc_id])  # only now: the new revision is complete, so the article never goes missing
        except DocChatError as e:
            log.warning("Refreshed %s but could not delete the old copy %s: %s", got.title, d.doc_id, e)
            base = replace(base, message=base.message + f"; the old copy could not be removed ({e})")
    return "changed", base
