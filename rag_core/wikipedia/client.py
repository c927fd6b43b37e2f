"""The HTTP side of Wikipedia: the MediaWiki Action API client (headers, timeouts, retries) and its queries.

The only module that talks HTTP to Wikipedia. Requests go to https://{lang}.wikipedia.org/w/api.php
(the language code is validated, so no input can steer them to another host) unless the setting
`wikipedia_api` (env DOCCHAT_WIKIPEDIA_API, a URL template with {lang}) points elsewhere, e.g. a test server.
"""
from __future__ import annotations

import email.utils
import html
import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from ..config import Settings
from ..errors import (
    WikipediaAPIError,
    WikipediaBadResponse,
    WikipediaBadTitle,
    WikipediaError,
    WikipediaPageMissing,
    WikipediaRateLimited,
    WikipediaRequestRejected,
    WikipediaServerError,
    WikipediaTimeout,
    WikipediaUnreachable,
)
from .documents import Article, article_url, check_lang

log = logging.getLogger(__name__)

VERSION = "0.1"
MAX_RETRY_AFTER_S = 60.0  # a longer Retry-After fails at once instead of freezing the app
CONNECT_TIMEOUT_S = 10.0
_TAG_RE = re.compile(r"<[^>]*>")

# One request fetches the plain text with `== Heading ==` lines, the page/revision ids, the canonical URL
# and the disambiguation flag, following redirects.
ARTICLE_PARAMS = {"prop": "extracts|info|pageprops", "explaintext": "1", "exsectionformat": "wiki",
                  "inprop": "url", "ppprop": "disambiguation", "redirects": "1"}


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
class Disambiguation:
    """A disambiguation page: the user has to pick one of the candidate titles."""

    lang: str
    title: str
    page_id: int
    url: str
    candidates: tuple[str, ...]
    redirected_from: str | None = None


# -- addresses -------------------------------------------------------------------
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
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


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

    def __enter__(self) -> WikipediaClient:
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
def client_session(settings: Settings, client: WikipediaClient | None) -> Iterator[WikipediaClient]:
    """`client` if given (the caller closes it), else a new client closed on exit."""
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
    with client_session(settings, client) as c:
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


# -- latest revisions (for refresh) ------------------------------------------------
@dataclass(frozen=True)
class LatestRevision:
    """What Wikipedia says about a page now: its current revision, or why it is gone."""

    revision_id: int | None
    title: str | None
    gone: str | None = None  # why the article no longer exists as such


def latest_revisions(client: WikipediaClient, lang: str, page_ids: list[int]) -> dict[int, LatestRevision]:
    """Current revision (or why it is gone) of up to 50 pages, by page id (robust to renames)."""
    data = client.query(lang, {"prop": "info", "pageids": "|".join(str(p) for p in page_ids)})
    out: dict[int, LatestRevision] = {}
    for page in _pages(data):
        raw_id: Any = page.get("pageid")
        try:
            pid = int(raw_id)
        except (TypeError, ValueError):
            continue
        if _has(page, "missing"):
            out[pid] = LatestRevision(None, page.get("title"), "the article no longer exists on Wikipedia")
        elif _has(page, "redirect"):
            out[pid] = LatestRevision(None, page.get("title"),
                                      "the article is now a redirect on Wikipedia; import the article it points to")
        elif page.get("lastrevid"):
            out[pid] = LatestRevision(int(page["lastrevid"]), page.get("title"))
    return out
