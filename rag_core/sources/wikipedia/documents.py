"""Wikipedia articles as Documents: addresses, sections with their anchors, and the attribution (licence).

No HTTP here: rag_core.sources.wikipedia.client fetches the text, this module turns it into the same
Document/Section contract as an uploaded file.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote, unquote, urlsplit

from rag_core.core.errors import WikipediaBadLanguage, WikipediaBadTitle
from rag_core.core.models import DocKind, Document, Section, SourceMeta

LICENSE = "CC BY-SA 4.0"
LICENSE_URL = "https://creativecommons.org/licenses/by-sa/4.0/"
MAX_TITLE_BYTES = 255

# Sections that hold lists of sources or links rather than prose: kept verbatim in Document.text but not
# covered by a Section, so they are not chunked (they would only add noise to retrieval). English headings.
NON_PROSE_SECTIONS = frozenset({"see also", "references", "notes", "notes and references", "footnotes",
                                "citations", "sources", "further reading", "external links"})

# Wikipedia language editions: 2-3 letters, optionally with subtags (be-tarask, zh-min-nan), plus "simple".
_LANG_RE = re.compile(r"(?:[a-z]{2,3}(?:-[a-z]{2,8}){0,2}|simple)")
_NOT_LANGS = frozenset({"www"})
_HEADING_RE = re.compile(r"^(={2,6})[ \t]*(.+?)[ \t]*\1[ \t]*$", re.M)
_ARTICLE_URL_RE = re.compile(r"https?://([a-z-]+)\.(?:m\.)?wikipedia\.org/wiki/([^?#]+)(?:[?#].*)?", re.I)
_BAD_TITLE_RE = re.compile(r"[|<>\[\]{}\x00-\x1f\x7f]")
_URL_UNSAFE_RE = re.compile(r"[^!-~]|[\"'<>\\^`{|}]")  # anything but printable ASCII, and quote/bracket chars
_DOT_SEGMENT_RE = re.compile(r"/\.\.?(?:/|$)")  # /./ or /../ would leave /wiki/ (titles never contain them)
MAX_URL_CHARS = 2048


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


# -- addresses -------------------------------------------------------------------
def check_lang(lang: str) -> str:
    """The normalised language code, or WikipediaBadLanguage: only *.wikipedia.org hosts can result."""
    code = (lang or "").strip().lower()
    if not _LANG_RE.fullmatch(code) or code in _NOT_LANGS:
        raise WikipediaBadLanguage(lang or "")
    return code


def article_url(lang: str, title: str) -> str:
    """The canonical article URL as MediaWiki builds it (spaces -> underscores, wfUrlencode)."""
    return f"https://{check_lang(lang)}.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe=";@$!*(),/:~")


def valid_title(title: str) -> bool:
    """True when `title` can be a Wikipedia title: not blank, at most 255 bytes, none of | [ ] { } < > or controls."""
    return (bool(title.strip()) and len(title.encode("utf-8", "replace")) <= MAX_TITLE_BYTES
            and not _BAD_TITLE_RE.search(title))


def checked_article_url(url: object, lang: str) -> str | None:
    """`url` if it is an https://<lang>.wikipedia.org/wiki/… article address (printable ASCII, no user, port, query or
    fragment), else None: the only kind of link DocChat stores or prints for an article."""
    if not isinstance(url, str) or len(url) > MAX_URL_CHARS or _URL_UNSAFE_RE.search(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    host = f"{check_lang(lang)}.wikipedia.org"
    prefix = f"https://{host}/wiki/"
    if (not url.startswith(prefix) or len(url) == len(prefix) or parts.netloc != host
            or parts.query or parts.fragment or _DOT_SEGMENT_RE.search(parts.path)):
        return None
    return url


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
    retrieved = retrieved_at or datetime.now(UTC).replace(microsecond=0).isoformat()
    source = SourceMeta(
        file_name=article.title, title=article.title, kind=DocKind.WIKIPEDIA.value,
        sha256=hashlib.sha256(article.text.encode("utf-8")).hexdigest(), url=article.url, license=LICENSE,
        revision_id=article.revision_id, retrieved_at=retrieved, lang=article.lang, page_id=article.page_id,
    )
    return Document(doc_id=make_doc_id(article.lang, article.page_id, article.revision_id),
                    text=article.text, sections=split_sections(article.text), source=source)
