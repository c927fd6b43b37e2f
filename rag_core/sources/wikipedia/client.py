"""The HTTP side of Wikipedia: the MediaWiki Action API client (headers, timeouts, retries) and its queries.

The only module that talks HTTP to Wikipedia. Requests go to https://{lang}.wikipedia.org/w/api.php
(the language code is validated, so no input can steer them to another host) unless the setting
`wikipedia_api` (env DOCCHAT_WIKIPEDIA_API, a URL template with {lang}) points elsewhere, e.g. a test server.

Every answer is treated as untrusted: one API call (all attempts and waits) ends by DOCCHAT_WIKIPEDIA_DEADLINE, its
body is read up to DOCCHAT_WIKIPEDIA_MAX_RESPONSE_MB, its JSON is depth-checked before parsing (rag_core.sources.wikipedia.
bounded), every field is type-checked where it is read, and the only URLs kept are https://<lang>.wikipedia.org/wiki/…
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

import httpx

from rag_core.core.config import Settings
from rag_core.core.errors import (
    WikipediaAPIError,
    WikipediaBadResponse,
    WikipediaBadTitle,
    WikipediaError,
    WikipediaPageMissing,
    WikipediaRateLimited,
    WikipediaRequestRejected,
    WikipediaServerError,
    WikipediaTimeout,
    WikipediaTooSlow,
    WikipediaUnreachable,
)
from rag_core.sources.wikipedia.bounded import RequestTimer, as_dict, as_id, as_list, one_line, parse_json, read_body
from rag_core.sources.wikipedia.documents import Article, article_url, check_lang, checked_article_url, valid_title

log = logging.getLogger(__name__)

VERSION = "0.1"
MAX_RETRY_AFTER_S = 60.0  # a longer Retry-After fails at once instead of freezing the app
CONNECT_TIMEOUT_S = 10.0
MAX_SNIPPET_CHARS = 1000
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
    template = settings.wikipedia.api
    if template:
        if not template.startswith(("http://", "https://")):
            raise WikipediaError("DOCCHAT_WIKIPEDIA_API must be an http(s) URL template such as "
                                 "http://127.0.0.1:8080/{lang}/w/api.php. Fix or unset it.")
        return template.replace("{lang}", code)
    return f"https://{code}.wikipedia.org/w/api.php"


def user_agent(settings: Settings) -> str:
    """A descriptive User-Agent as Wikimedia's policy asks: name/version (contact) library/version."""
    contact = settings.wikipedia.contact or "self-hosted; operator contact not set (DOCCHAT_WIKIPEDIA_CONTACT)"
    return f"DocChat/{VERSION} (local document-chat app; {contact}) httpx/{httpx.__version__}"


# -- HTTP ------------------------------------------------------------------------
def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds asked for by a Retry-After header (delta-seconds or HTTP date), or None."""
    value = headers.get("Retry-After", "").strip()
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
    err = err if isinstance(err, dict) else {}
    return WikipediaAPIError(one_line(err.get("code"), 60) or "unknown", one_line(err.get("info"), 300))


class WikipediaClient:
    """An httpx client with Wikimedia-friendly headers, timeouts and retries; use it as a context manager."""

    def __init__(self, settings: Settings, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        read = settings.wikipedia.timeout_s
        self._http = httpx.Client(
            headers={"User-Agent": user_agent(settings), "Accept": "application/json", "Accept-Encoding": "gzip"},
            timeout=httpx.Timeout(read, connect=min(read, CONNECT_TIMEOUT_S)),
            follow_redirects=False,  # an HTTP redirect could lead off Wikipedia; the API never needs one
            # A new connection per request: the timer can always cut the request's own socket (RequestTimer.trace).
            limits=httpx.Limits(max_keepalive_connections=0),
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
        return self.settings.wikipedia.backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random())

    def query(self, lang: str, params: dict[str, str]) -> dict:
        """GET the Action API (action=query unless given) and return the JSON; errors become WikipediaError.

        Retries 429/5xx/timeouts with backoff, all within one deadline (DOCCHAT_WIKIPEDIA_DEADLINE): a wait that
        would pass it fails at once instead."""
        url = api_url(self.settings, lang)
        full = {"action": "query", **params, "format": "json"}
        attempts = max(0, self.settings.wikipedia.retries) + 1
        limit = self.settings.wikipedia.deadline_s
        end = time.monotonic() + limit

        def wait(delay: float) -> bool:
            """Sleep `delay` s before the next attempt, if that leaves time for it."""
            if time.monotonic() + delay >= end:
                return False
            self._sleep(delay)
            return True

        for attempt in range(1, attempts + 1):
            left = end - time.monotonic()
            if left <= 0:
                raise WikipediaTooSlow(limit)
            try:
                status, headers, body = self._get(url, full, left)
            except httpx.TimeoutException as e:
                if attempt < attempts:
                    delay = self._backoff(attempt)
                    log.info("Wikipedia timed out (attempt %d/%d); retrying in %.2f s", attempt, attempts, delay)
                    if wait(delay):
                        continue
                raise WikipediaTimeout(attempt) from e
            except httpx.RemoteProtocolError as e:  # e.g. the body was cut off
                raise WikipediaBadResponse("the answer was cut off") from e
            except httpx.TransportError as e:
                raise WikipediaUnreachable(f"{httpx.URL(url).host}: {type(e).__name__}") from e
            if status == 429 or status >= 500:
                asked = _retry_after(headers)
                if attempt < attempts and (asked is None or asked <= MAX_RETRY_AFTER_S):
                    delay = asked if asked is not None else self._backoff(attempt)
                    log.info("Wikipedia answered HTTP %d (attempt %d/%d); retrying in %.2f s",
                             status, attempt, attempts, delay)
                    if wait(delay):
                        continue
                if status == 429:
                    raise WikipediaRateLimited(asked)
                raise WikipediaServerError(status, attempt)
            if status >= 400:
                raise WikipediaRequestRejected(status)
            if status >= 300:
                raise WikipediaBadResponse(f"it pointed to another address, HTTP {status}; check the language code")
            data = parse_json(body)
            if not isinstance(data, dict):
                raise WikipediaBadResponse("it is not a JSON object")
            if "error" in data:
                raise _api_error(data["error"])
            if data.get("warnings"):
                log.debug("Wikipedia API warnings: %.500s", data["warnings"])
            return data
        raise AssertionError("unreachable")  # the loop always returns or raises

    def _get(self, url: str, params: dict[str, str], seconds: float) -> tuple[int, httpx.Headers, bytes]:
        """One attempt, cut off after `seconds` (WikipediaTooSlow): status, headers and, for a 2xx, the body."""
        read = min(self.settings.wikipedia.timeout_s, seconds)
        timeout = httpx.Timeout(read, connect=min(read, CONNECT_TIMEOUT_S))
        with RequestTimer(seconds) as timer:
            try:
                with self._http.stream("GET", url, params=params, timeout=timeout,
                                       extensions={"trace": timer.trace}) as resp:
                    body = b""
                    if 200 <= resp.status_code < 300:
                        body = read_body(resp, self.settings.wikipedia.max_response_mb, timer)
            except httpx.TransportError as e:  # includes timeouts; the timer's cut shows up as one of these
                if timer.passed:
                    raise WikipediaTooSlow(self.settings.wikipedia.deadline_s) from e
                raise
            if timer.passed:  # cut while the body was being read (it may even look complete)
                raise WikipediaTooSlow(self.settings.wikipedia.deadline_s)
        return resp.status_code, resp.headers, body


@contextmanager
def client_session(settings: Settings, client: WikipediaClient | None) -> Iterator[WikipediaClient]:
    """`client` if given (the caller closes it), else a new client closed on exit."""
    if client is not None:
        yield client
        return
    with WikipediaClient(settings) as own:
        yield own


# -- reading the JSON: every field is checked for its type where it is read (bounded.as_*) -------
def _title(value: object) -> str | None:
    """`value` if it can be a Wikipedia title (text, at most 255 bytes, no forbidden characters), else None."""
    return value if isinstance(value, str) and valid_title(value) else None


def _query(data: dict) -> dict:
    return as_dict(data.get("query"))


def _pages(data: dict) -> list[dict]:
    """query.pages in either format version (dict keyed by id, or a list); only the JSON objects in it."""
    pages = _query(data).get("pages")
    rows = pages.values() if isinstance(pages, dict) else as_list(pages)
    return [p for p in rows if isinstance(p, dict)]


def _has(page: dict, key: str) -> bool:
    """A MediaWiki boolean: present as "" (formatversion 1) or true (formatversion 2)."""
    return key in page and page[key] is not False


def _strip_html(text: str) -> str:
    """Plain text of a search snippet: tags and control characters removed, entities decoded, one line."""
    plain = html.unescape(_TAG_RE.sub("", text[:MAX_SNIPPET_CHARS * 4]))
    return one_line(plain, MAX_SNIPPET_CHARS)


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
    for row in as_list(_query(data).get("search")):
        row = as_dict(row)
        title = _title(row.get("title"))
        if not title:
            if row:
                log.info("Skipped a search result without a valid title")
            continue
        snippet = row.get("snippet")
        hits.append(WikiHit(title, _strip_html(snippet) if isinstance(snippet, str) else "",
                            as_id(row.get("pageid")) or 0, article_url(code, title)))
        if len(hits) == limit:
            break
    return hits


# -- fetch -----------------------------------------------------------------------
def _disambiguation_candidates(client: WikipediaClient, lang: str, title: str) -> tuple[str, ...]:
    data = client.query(lang, {"prop": "links", "titles": title, "plnamespace": "0", "pllimit": "max"})
    seen: dict[str, None] = {}
    for page in _pages(data):
        for link in as_list(page.get("links")):
            link = as_dict(link)
            name = _title(link.get("title"))
            if link.get("ns", 0) == 0 and name:
                seen.setdefault(name, None)
    return tuple(seen)


def _article_url(page: dict, lang: str, title: str) -> str:
    """The page's canonical URL when it is https://<lang>.wikipedia.org/wiki/…, else the one built from the title."""
    for key in ("canonicalurl", "fullurl"):
        url = checked_article_url(page.get(key), lang)
        if url:
            return url
        if page.get(key) is not None:
            log.warning("Ignored the %s Wikipedia gave for “%s”: not an https://%s.wikipedia.org/wiki/ address",
                        key, title, lang)
    return article_url(lang, title)


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
    raw_title = page.get("title")
    if raw_title is not None and not _title(raw_title):
        raise WikipediaBadResponse("the article's title is not a valid Wikipedia title")
    shown = _title(raw_title) or title or str(page_id)
    if _has(page, "invalid"):
        raise WikipediaBadTitle(shown, one_line(page.get("invalidreason"), 200))
    pid = as_id(page.get("pageid"))
    if _has(page, "missing") or _has(page, "special") or not pid:
        raise WikipediaPageMissing(shown, code)
    redirects = as_list(_query(data).get("redirects"))
    redirected_from = _title(as_dict(redirects[0]).get("from")) if redirects else None
    url = _article_url(page, code, shown)
    if "disambiguation" in as_dict(page.get("pageprops")):
        return Disambiguation(code, shown, pid, url, _disambiguation_candidates(client, code, shown), redirected_from)
    text = page.get("extract")
    if not isinstance(text, str) or not text.strip():
        raise WikipediaBadResponse(f"“{shown}” came without any text")
    rev = as_id(page.get("lastrevid"))
    if not rev:
        raise WikipediaBadResponse(f"“{shown}” came without a revision id")
    return Article(code, shown, pid, rev, url, text, redirected_from)


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
    asked = set(page_ids)
    out: dict[int, LatestRevision] = {}
    for page in _pages(data):
        pid = as_id(page.get("pageid"))
        if pid is None or pid not in asked:
            continue
        title = _title(page.get("title"))
        rev = as_id(page.get("lastrevid"))
        if _has(page, "missing"):
            out[pid] = LatestRevision(None, title, "the article no longer exists on Wikipedia")
        elif _has(page, "redirect"):
            out[pid] = LatestRevision(None, title,
                                      "the article is now a redirect on Wikipedia; import the article it points to")
        elif rev:
            out[pid] = LatestRevision(rev, title)
    return out
