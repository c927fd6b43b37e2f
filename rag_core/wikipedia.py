"""Wikipedia as a source: search, import and refresh articles over the MediaWiki Action API.

The only module that talks HTTP to Wikipedia. Requests go to https://{lang}.wikipedia.org/w/api.php
(the language code is validated, so no input can steer them to another host) unless the setting
`wikipedia_api` (env DOCCHAT_WIKIPEDIA_API, a URL template with {lang}) points elsewhere, e.g. a test server.
"""
from __future__ import annotations

import email.utils
import hashlib
import html
import logging
import random
import re
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Callable, Iterator
from urllib.parse import quote, unquote

import httpx

from .config import Settings
from .errors import (DocChatError, DocumentNotFound, WikipediaAPIError, WikipediaBadLanguage, WikipediaBadResponse,
                     WikipediaBadTitle, WikipediaError, WikipediaPageMissing, WikipediaRateLimited,
                     WikipediaRequestRejected, WikipediaServerError, WikipediaTimeout, WikipediaUnreachable)
from .models import Document, DocumentInfo, Section, SourceMeta

if TYPE_CHECKING:
    from .library import Library

log = logging.getLogger(__name__)

VERSION = "0.1"
LICENSE = "CC BY-SA 4.0"
LICENSE_URL = "https://creativecommons.org/licenses/by-sa/4.0/"
REMOVED_UPSTREAM = "removed upstream"  # registry flag set by refresh; the article is kept
MAX_RETRY_AFTER_S = 60.0  # a longer Retry-After fails at once instead of freezing the app
CONNECT_TIMEOUT_S = 10.0
PAGEIDS_PER_REQUEST = 50  # the API's limit for anonymous clients
MAX_TITLE_BYTES = 255

# Sections that hold lists of sources or links rather than prose: kept verbatim in Document.text but not
# covered by a Section, so they are not chunked (they would only add noise to retrieval). English headings.
NON_PROSE_SECTIONS = frozenset({"see also", "references", "notes", "notes and references", "footnotes",
                                "citations", "sources", "further reading", "external links"})

# Wikipedia language editions: 2-3 letters, optionally with subtags (be-tarask, zh-min-nan), plus "simple".
_LANG_RE = re.compile(r"(?:[a-z]{2,3}(?:-[a-z]{2,8}){0,2}|simple)")
_NOT_LANGS = frozenset({"www"})
_HEADING_RE = re.compile(r"^(={2,6})[ \t]*(.+?)[ \t]*\1[ \t]*$", re.M)
_TAG_RE = re.compile(r"<[^>]*>")
_ARTICLE_URL_RE = re.compile(r"https?://([a-z-]+)\.(?:m\.)?wikipedia\.org/wiki/([^?#]+)(?:[?#].*)?", re.I)
_BAD_TITLE_RE = re.compile(r"[|<>\[\]{}\x00-\x1f\x7f]")

# One request fetches the plain text with `== Heading ==` lines, the page/revision ids, the canonical URL
# and the disambiguation flag, following redirects.
ARTICLE_PARAMS = {"prop": "extracts|info|pageprops", "explaintext": "1", "exsectionformat": "wiki",
                  "inprop": "url", "ppprop": "disambiguation", "redirects": "1"}

Progress = Callable[[str, int, int], None]  # (stage, done, total), like rag_core.store.Progress


# -- results -------------------------------------------------------------------
@dataclass(frozen=True)
class WikiHit:
    """One search result."""

    title: str
    snippet: str  # plain text, HTML removed
    page_id: int
    url: str = ""

    def as_json(self) -> dict:
        """The CLI's JSON shape."""
        return {"title": self.title, "snippet": self.snippet, "page_id": self.page_id, "url": self.url}


@dataclass(frozen=True)
class Article:
    """A fetched article, before it becomes a Document."""

    lang: str
    title: str
    page_id: int
    revision_id: int
    url: str
    text: str
    redirected_from: str | None = None


@dataclass(frozen=True)
class Disambiguation:
    """A disambiguation page: the user has to pick one of the candidate titles."""

    lang: str
    title: str
    page_id: int
    url: str
    candidates: tuple[str, ...]
    redirected_from: str | None = None


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


# -- addresses -------------------------------------------------------------------
def check_lang(lang: str) -> str:
    """The normalised language code, or WikipediaBadLanguage: only *.wikipedia.org hosts can result."""
    code = (lang or "").strip().lower()
    if not _LANG_RE.fullmatch(code) or code in _NOT_LANGS:
        raise WikipediaBadLanguage(lang or "")
    return code


def api_url(settings: Settings, lang: str) -> str:
    """The Action API endpoint for a language edition (the override template, if set, else Wikipedia)."""
    code = check_lang(lang)
    template = settings.wikipedia_api
    if template:
        if not template.startswith(("http://", "https://")):
            raise WikipediaError("DOCCHAT_WIKIPEDIA_API must be an http(s) URL template such as "
                                 "http://127.0.0.1:8080/{lang}/w/api.php. Fix or unset it.")
        return template.replace("{lang}", code)
    return f"https://{code}.wikipedia.org/w/api.php"


def article_url(lang: str, title: str) -> str:
    """The canonical article URL as MediaWiki builds it (spaces -> underscores, wfUrlencode)."""
    return f"https://{check_lang(lang)}.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe=";@$!*(),/:~")


def anchor_for(heading: str) -> str:
    """The section anchor MediaWiki gives a heading (HTML5 ids: whitespace -> underscores)."""
    return re.sub(r"[ \t\n\f\r]", "_", heading.strip())


def section_url(url: str, anchor: str | None) -> str:
    """Link to a section: url + '#' + anchor (escaped like MediaWiki's links), or the article for the lead."""
    if not anchor:
        return url
    return url + "#" + re.sub(r"%([0-9A-Fa-f]{2})", r"%25\1", anchor)


def parse_article_ref(text: str, lang: str = "en") -> tuple[str, str]:
    """(lang, title) from a title or a pasted article URL such as https://de.wikipedia.org/wiki/Berlin."""
    raw = (text or "").strip()
    m = _ARTICLE_URL_RE.fullmatch(raw)
    if m:
        lang, raw = m.group(1), unquote(m.group(2))
    code = check_lang(lang)
    title = " ".join(raw.replace("_", " ").split())
    if not title:
        raise WikipediaBadTitle(text or "", "it is empty")
    if _BAD_TITLE_RE.search(title):
        raise WikipediaBadTitle(title, "it contains a character Wikipedia titles cannot have, such as | [ ] { } < >")
    if len(title.encode("utf-8")) > MAX_TITLE_BYTES:
        raise WikipediaBadTitle(title[:60] + "…", "it is too long")
    return code, title


def user_agent(settings: Settings) -> str:
    """A descriptive User-Agent as Wikimedia's policy asks: name/version (contact) library/version."""
    contact = settings.wikipedia_contact or "self-hosted; operator contact not set (DOCCHAT_WIKIPEDIA_CONTACT)"
    return f"DocChat/{VERSION} (local document-chat app; {contact}) httpx/{httpx.__version__}"


# -- HTTP ------------------------------------------------------------------------
def _retry_after(resp: httpx.Response) -> float | None:
    """Seconds asked for by a Retry-After header (delta-seconds or HTTP date), or None."""
    value = resp.headers.get("Retry-After", "").strip()
    if not value:
        return None
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def _api_error(err: object) -> WikipediaAPIError:
    if isinstance(err, dict):
        return WikipediaAPIError(str(err.get("code") or "unknown"), str(err.get("info") or ""))
    return WikipediaAPIError("unknown", str(err))


class WikipediaClient:
    """An httpx client with Wikimedia-friendly headers, timeouts and retries; use it as a context manager."""

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        read = settings.wikipedia_timeout_s
        self._http = httpx.Client(
            headers={"User-Agent": user_agent(settings), "Accept": "application/json"},
            timeout=httpx.Timeout(read, connect=min(read, CONNECT_TIMEOUT_S)),
            follow_redirects=False,  # an HTTP redirect could lead off Wikipedia; the API never needs one
            transport=transport,
        )

    def __enter__(self) -> "WikipediaClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with jitter: base * 2^(attempt-1) * [0.5, 1.5)."""
        return self.settings.wikipedia_backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random())

    def query(self, lang: str, params: dict[str, str]) -> dict:
        """GET the Action API (action=query unless given) and return the JSON; errors become WikipediaError."""
        url = api_url(self.settings, lang)
        full = {"action": "query", **params, "format": "json"}
        attempts = max(0, self.settings.wikipedia_retries) + 1
        for attempt in range(1, attempts + 1):
            try:
                resp = self._http.get(url, params=full)
            except httpx.TimeoutException as e:
                if attempt < attempts:
                    delay = self._backoff(attempt)
                    log.info("Wikipedia timed out (attempt %d/%d); retrying in %.2f s", attempt, attempts, delay)
                    self._sleep(delay)
                    continue
                raise WikipediaTimeout(attempts) from e
            except httpx.RemoteProtocolError as e:  # e.g. the body was cut off
                raise WikipediaBadResponse("the answer was cut off") from e
            except httpx.TransportError as e:
                raise WikipediaUnreachable(f"{httpx.URL(url).host}: {type(e).__name__}") from e
            status = resp.status_code
            if status == 429 or status >= 500:
                wait = _retry_after(resp)
                if attempt < attempts and (wait is None or wait <= MAX_RETRY_AFTER_S):
                    delay = wait if wait is not None else self._backoff(attempt)
                    log.info("Wikipedia answered HTTP %d (attempt %d/%d); retrying in %.2f s",
                             status, attempt, attempts, delay)
                    self._sleep(delay)
                    continue
                if status == 429:
                    raise WikipediaRateLimited(wait)
                raise WikipediaServerError(status, attempt)
            if status >= 400:
                raise WikipediaRequestRejected(status)
            if status >= 300:
                raise WikipediaBadResponse(f"it pointed to another address, HTTP {status}; check the language code")
            try:
                data = resp.json()
            except ValueError as e:
                raise WikipediaBadResponse("it is not valid JSON") from e
            if not isinstance(data, dict):
                raise WikipediaBadResponse("it is not a JSON object")
            if "error" in data:
                raise _api_error(data["error"])
            if data.get("warnings"):
                log.debug("Wikipedia API warnings: %s", data["warnings"])
            return data
        raise AssertionError("unreachable")  # the loop always returns or raises


@contextmanager
def _session(settings: Settings, client: WikipediaClient | None) -> Iterator[WikipediaClient]:
    if client is not None:
        yield client
        return
    with WikipediaClient(settings) as own:
        yield own


def _pages(data: dict) -> list[dict]:
    """query.pages in either format version (dict keyed by id, or a list)."""
    pages = (data.get("query") or {}).get("pages") or {}
    return list(pages.values()) if isinstance(pages, dict) else list(pages)


def _has(page: dict, key: str) -> bool:
    """A MediaWiki boolean: present as "" (formatversion 1) or true (formatversion 2)."""
    return key in page and page[key] is not False


def _strip_html(text: str) -> str:
    return " ".join(html.unescape(_TAG_RE.sub("", text)).split())


# -- search ------------------------------------------------------------------------
def search(settings: Settings, words: str, lang: str = "en", limit: int = 10,
           client: WikipediaClient | None = None) -> list[WikiHit]:
    """Full-text search of one language edition's articles; snippets come back as plain text."""
    code = check_lang(lang)
    words = " ".join((words or "").split())
    if not words:
        return []
    limit = max(1, min(int(limit), 50))
    with _session(settings, client) as c:
        data = c.query(code, {"list": "search", "srsearch": words, "srnamespace": "0", "srlimit": str(limit),
                              "srprop": "snippet"})
    hits = []
    for row in (data.get("query") or {}).get("search") or []:
        title = row.get("title")
        if not title:
            continue
        hits.append(WikiHit(title, _strip_html(row.get("snippet") or ""), int(row.get("pageid") or 0),
                            article_url(code, title)))
    return hits[:limit]


# -- fetch -----------------------------------------------------------------------
def _disambiguation_candidates(client: WikipediaClient, lang: str, title: str) -> tuple[str, ...]:
    data = client.query(lang, {"prop": "links", "titles": title, "plnamespace": "0", "pllimit": "max"})
    seen: dict[str, None] = {}
    for page in _pages(data):
        for link in page.get("links") or []:
            if link.get("ns", 0) == 0 and link.get("title"):
                seen.setdefault(link["title"], None)
    return tuple(seen)


def fetch_article(client: WikipediaClient, lang: str, title: str | None = None,
                  page_id: int | None = None) -> Article | Disambiguation:
    """Plain text with `== Heading ==` lines plus ids and URL, by title (redirects followed) or page id."""
    code = check_lang(lang)
    params = dict(ARTICLE_PARAMS)
    if page_id is not None:
        params["pageids"] = str(int(page_id))
    elif title:
        params["titles"] = title
    else:
        raise WikipediaBadTitle("", "it is empty")
    data = client.query(code, params)
    pages = _pages(data)
    if not pages:
        raise WikipediaBadResponse("no page in the answer")
    page = pages[0]
    shown = page.get("title") or title or str(page_id)
    if _has(page, "invalid"):
        raise WikipediaBadTitle(shown, str(page.get("invalidreason") or ""))
    if _has(page, "missing") or _has(page, "special") or not page.get("pageid"):
        raise WikipediaPageMissing(shown, code)
    redirects = (data.get("query") or {}).get("redirects") or []
    redirected_from = redirects[0].get("from") if redirects else None
    pid = int(page["pageid"])
    url = page.get("canonicalurl") or page.get("fullurl") or article_url(code, shown)
    if "disambiguation" in (page.get("pageprops") or {}):
        return Disambiguation(code, shown, pid, url, _disambiguation_candidates(client, code, shown), redirected_from)
    text = page.get("extract")
    if not isinstance(text, str) or not text.strip():
        raise WikipediaBadResponse(f"“{shown}” came without any text")
    rev = page.get("lastrevid")
    if not rev:
        raise WikipediaBadResponse(f"“{shown}” came without a revision id")
    return Article(code, shown, pid, int(rev), url, text, redirected_from)


# -- document --------------------------------------------------------------------
def split_sections(text: str) -> tuple[Section, ...]:
    """Sections from the `== Heading ==` lines of a plain-text extract: exact offsets, heading path, anchor."""
    heads = list(_HEADING_RE.finditer(text))
    sections: list[Section] = []

    def add(start: int, end: int, path: tuple[str, ...], anchor: str | None) -> None:
        body = text[start:end]
        if not body.strip():
            return
        start += len(body) - len(body.lstrip())
        end -= len(body) - len(body.rstrip())
        sections.append(Section(path, start, end, anchor))

    add(0, heads[0].start() if heads else len(text), (), None)  # the lead: no heading, no anchor
    path: list[tuple[int, str]] = []
    used: dict[str, int] = {}
    skip_level: int | None = None
    for i, m in enumerate(heads):
        level, heading = len(m.group(1)), m.group(2).strip()
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, heading))
        anchor = anchor_for(heading)
        used[anchor] = used.get(anchor, 0) + 1
        if used[anchor] > 1:  # MediaWiki numbers repeated headings: Notes, Notes_2, ...
            anchor = f"{anchor}_{used[anchor]}"
        if skip_level is not None and level <= skip_level:
            skip_level = None
        if skip_level is None and heading.casefold() in NON_PROSE_SECTIONS:
            skip_level = level
        if skip_level is None:
            end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
            add(m.end(), end, tuple(h for _, h in path), anchor)
    return tuple(sections)


def make_doc_id(lang: str, page_id: int, revision_id: int) -> str:
    """Deterministic id of one revision of one article (Library.ingest_document scopes it per owner)."""
    key = f"{lang}:{page_id}:{revision_id}"
    return "wp-" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:20]


def build_document(article: Article, retrieved_at: str | None = None) -> Document:
    """The same Document/Section contract as uploaded files; Document.text is the extract, verbatim."""
    retrieved = retrieved_at or datetime.now(timezone.utc).replace(microsecond=0).isoformat()
    source = SourceMeta(
        file_name=article.title, title=article.title, kind="wikipedia",
        sha256=hashlib.sha256(article.text.encode("utf-8")).hexdigest(), url=article.url, license=LICENSE,
        revision_id=article.revision_id, retrieved_at=retrieved, lang=article.lang, page_id=article.page_id,
    )
    return Document(doc_id=make_doc_id(article.lang, article.page_id, article.revision_id),
                    text=article.text, sections=split_sections(article.text), source=source)


# -- import ------------------------------------------------------------------------
def _same_page(d: DocumentInfo, lang: str, page_id: int, owner: str | None) -> bool:
    return d.kind == "wikipedia" and d.lang == lang and d.page_id == page_id and d.owner == owner


def _retire(library: "Library", doc_ids: list[str]) -> tuple[str, ...]:
    """Delete superseded revisions (called only after their replacement is complete)."""
    gone = []
    for doc_id in doc_ids:
        try:
            library.delete(doc_id)
            gone.append(doc_id)
        except DocumentNotFound:
            log.info("Old revision %s was already gone", doc_id)
    return tuple(gone)


def import_article(library: "Library", settings: Settings, title: str, lang: str = "en", owner: str | None = None,
                   progress: Progress | None = None, client: WikipediaClient | None = None) -> WikiImportResult:
    """Fetch one article and add it to the library; never raises for Wikipedia trouble (see the result)."""
    shown, code = title, lang
    try:
        code, shown = parse_article_ref(title, lang)
        if progress:
            progress("downloading", 0, 1)
        with _session(settings, client) as c:
            got = fetch_article(c, code, title=shown)
        if progress:
            progress("downloading", 1, 1)
        if isinstance(got, Disambiguation):
            return WikiImportResult("disambiguation", got.title, code, candidates=got.candidates,
                                    redirected_from=got.redirected_from, url=got.url)
        doc = build_document(got)  # the library scopes the id to `owner`
        res = library.ingest_document(doc, owner=owner, progress=progress, label=got.title)
        older = [d.doc_id for d in library.documents()
                 if _same_page(d, got.lang, got.page_id, owner) and d.doc_id != res.doc_id]
        replaced = _retire(library, older) if res.status == "added" else ()
        return WikiImportResult(res.status, got.title, code, res.doc_id, res.chunks, got.redirected_from,
                                url=got.url, revision_id=got.revision_id, replaced=replaced)
    except DocChatError as e:
        log.info("Could not import %r from %s.wikipedia: %s", title, code, e)
        return WikiImportResult("failed", shown, code, error=str(e))
    except Exception:  # noqa: BLE001 - the user gets a sentence, the log gets the traceback
        log.exception("Unexpected failure while importing %r from %s.wikipedia", title, code)
        return WikiImportResult("failed", shown, code, error=(
            f"“{shown}”: something unexpected went wrong while importing this article; your library was not "
            "changed. Try again."))


# -- refresh ---------------------------------------------------------------------
@dataclass(frozen=True)
class _Latest:
    revision_id: int | None
    title: str | None
    gone: str | None = None  # why the article no longer exists as such


def latest_revisions(client: WikipediaClient, lang: str, page_ids: list[int]) -> dict[int, _Latest]:
    """Current revision (or why it is gone) of up to 50 pages, by page id (robust to renames)."""
    data = client.query(lang, {"prop": "info", "pageids": "|".join(str(p) for p in page_ids)})
    out: dict[int, _Latest] = {}
    for page in _pages(data):
        try:
            pid = int(page.get("pageid"))
        except (TypeError, ValueError):
            continue
        if _has(page, "missing"):
            out[pid] = _Latest(None, page.get("title"), "the article no longer exists on Wikipedia")
        elif _has(page, "redirect"):
            out[pid] = _Latest(None, page.get("title"),
                               "the article is now a redirect on Wikipedia; import the article it points to")
        elif page.get("lastrevid"):
            out[pid] = _Latest(int(page["lastrevid"]), page.get("title"))
    return out


def _flag(library: "Library", d: DocumentInfo, on: bool) -> None:
    flags = [f for f in d.flags if f != REMOVED_UPSTREAM] + ([REMOVED_UPSTREAM] if on else [])
    if flags != list(d.flags):
        try:
            library.store.set_flags(d.doc_id, flags)
        except DocumentNotFound:
            log.info("%s was deleted while it was being refreshed", d.doc_id)


def refresh(library: "Library", settings: Settings, dry_run: bool = False, owners: list[str | None] | None = None,
            progress: Progress | None = None, client: WikipediaClient | None = None) -> RefreshReport:
    """Check every imported article's latest revision; replace changed ones, flag removed ones, keep failed ones."""
    docs = [d for d in library.documents(owners) if d.kind == "wikipedia"]
    buckets: dict[str, list[RefreshItem]] = {"unchanged": [], "changed": [], "removed": [], "failed": []}
    by_lang: dict[str, list[DocumentInfo]] = {}
    for d in docs:
        if d.page_id is None or d.lang is None:
            buckets["failed"].append(RefreshItem(d.doc_id, d.title, d.lang, d.revision_id,
                                                 message="no Wikipedia page id is recorded for this document"))
        else:
            by_lang.setdefault(d.lang, []).append(d)
    done = 0
    with _session(settings, client) as c:
        for lang, group in by_lang.items():
            for i in range(0, len(group), PAGEIDS_PER_REQUEST):
                batch = group[i:i + PAGEIDS_PER_REQUEST]
                try:
                    latest = latest_revisions(c, lang, [d.page_id for d in batch])
                except DocChatError as e:
                    buckets["failed"].extend(RefreshItem(d.doc_id, d.title, lang, d.revision_id, message=str(e))
                                             for d in batch)
                    latest = None
                for d in batch if latest is not None else ():
                    bucket, item = _refresh_one(library, c, d, latest.get(d.page_id), dry_run, progress)
                    buckets[bucket].append(item)
                done += len(batch)
                if progress:
                    progress("checking", done, len(docs))
    return RefreshReport(tuple(buckets["unchanged"]), tuple(buckets["changed"]), tuple(buckets["removed"]),
                         tuple(buckets["failed"]), dry_run)


def _refresh_one(library: "Library", client: WikipediaClient, d: DocumentInfo, now: _Latest | None, dry_run: bool,
                 progress: Progress | None) -> tuple[str, RefreshItem]:
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
        res = library.ingest_document(doc, owner=d.owner, progress=progress, label=got.title)
    except WikipediaPageMissing as e:
        _flag(library, d, True)
        return "removed", replace(base, message=str(e))
    except DocChatError as e:
        return "failed", replace(base, message=str(e))
    except Exception:  # noqa: BLE001 - one article must not stop the others; the old copy is untouched
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

