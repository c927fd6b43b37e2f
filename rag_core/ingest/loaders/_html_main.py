"""The main content of a saved web page, by a few rules measured on real pages (benchmarks/html_extractors.py).

1. Drop what is never content: scripts, styles, forms, media, hidden elements; navigation, asides and footers (tags
   and ARIA roles); cookie and consent banners, share bars, newsletters, adverts, comments, related links, sidebars,
   breadcrumbs (by class or id). An element holding at least half of the text or of the paragraphs of the page (or
   of the <main>/<article> it is in) is kept all the same, unless it is surely furniture and short (a cookie banner
   on a page of three lines).
2. Pick the root: the <main>/<article>/role="main" element with the most text (then its deepest such element still
   holding most of it); without one, descend from <body> while one child holds most of the text.
3. Inside the root, drop blocks that are mostly links (menus, "related" lists, tag clouds).
Nothing is fetched: the element tree is only read and pruned.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from enum import Enum

from lxml import etree

from rag_core.ingest.loaders._html_text import SKIP_TAGS, tag_of

_NAV_TAGS = frozenset({"nav", "aside", "footer", "menu"})
_NAV_ROLES = frozenset({
    "navigation", "banner", "contentinfo", "complementary", "search", "dialog", "alertdialog", "menu", "menubar",
    "toolbar", "tablist", "form",
})
# Class or id words of page furniture. STRONG ones mark furniture wherever they appear in a name ("cookiebanner",
# "jp-relatedposts"); WEAK ones are whole words of a name and only count when no name of the element sounds like
# content ("comments-area" goes, "comment-content" in an article stays).
_STRONG = re.compile(
    r"cookie|consent|gdpr|newsletter|subscri|sharing|sharedaddy|social|advert|sponsor|breadcrumb|disqus"
    r"|outbrain|taboola|related|recommend|skip-?link|skip-?to|screen-?reader|sr-only|visually-?hidden|gpt-ad"
    r"|ad-?slot|ad-?unit|most-?read|comment-?form|comment-?respond|author-?bio|about-?the-?author")
_WEAK_WORDS = frozenset({
    "nav", "navbar", "navigation", "menu", "submenu", "sidebar", "masthead", "footer", "banner", "comment",
    "comments", "share", "toolbar", "tags", "tagcloud", "toc", "topbar", "rail", "sitemap", "legal", "copyright",
    "rss", "pagination", "pager", "login", "signup", "promo", "popular", "trending", "print", "author", "byline",
    "teaser", "teasers", "credit", "credits",
})
_HEADER_RE = re.compile(r"^(?:site|page|global|top|main)?[-_]?header(?:[-_](?:wrap|wrapper|container|inner))?$")
_CONTENT_WORDS = frozenset({
    "article", "content", "main", "body", "post", "entry", "story", "text", "blog", "hentry", "prose",
})
# Class names a CMS derives from the post's categories and tags ("category-social-issues"): not about the element.
_TAXONOMY = ("category-", "tag-", "format-", "status-", "type-")
_WORD_RE = re.compile(r"[a-z]+")
_HIDDEN_STYLE_RE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden")
_KEEP_SHARE = 0.5  # an element holding this share of the page's text is never dropped as furniture...
_SMALL = 500  # ...unless it is surely furniture (Furniture.SURE) and has fewer characters than this
_ROOT_SHARE = 0.25  # a <main>/<article> needs this share of the page's text to be the root
_DESCEND_SHARE = 0.75  # descend into a child holding this share of its parent's text
_LINK_DENSITY = 0.5  # a block whose text is more than this share link text...
_LINK_BLOCK_MAX = 400  # ...and has fewer characters than this outside links is a list of links
_LINK_BLOCKS = frozenset({"ul", "ol", "dl", "div", "section", "p", "table", "span", "li", "header", "center"})
_DEADLINE_EVERY = 2048


def main_content(body: etree._Element, tick: Callable[[], None] = lambda: None) -> etree._Element:
    """The element holding the page's main content, `body` pruned in place (see the module's docstring)."""
    for el in list(body.iter(*SKIP_TAGS)):
        el.drop_tree()
    total = _text_len(body)
    _prune(body, total, tick)
    stats = _stats(body, tick)
    root = _pick_root(body, stats)
    _drop_link_lists(root, stats, tick)
    return root


def lead_heading(body: etree._Element, root: etree._Element) -> etree._Element | None:
    """The page's first <h1> when it comes before `root` (outside it): the title of the content below it."""
    if root is body or next(root.iter("h1"), None) is not None:
        return None
    for h1 in body.iter("h1"):
        if any(a is root for a in h1.iterancestors()):
            return None
        if _text_len(h1):
            return h1
    return None


def _text_len(el: etree._Element) -> int:
    return sum(len(t.strip()) for t in el.itertext())


def _walk(root: etree._Element, tick: Callable[[], None]) -> Iterator[tuple[etree._Element, list[etree._Element]]]:
    """(element, its children) top-down, below `root`; a caller that empties the children list skips them."""
    stack = list(reversed(root))
    count = 0
    while stack:
        el = stack.pop()
        count += 1
        if not count % _DEADLINE_EVERY:
            tick()
        if not isinstance(el.tag, str):
            continue
        children = list(el)
        yield el, children
        stack.extend(reversed(children))


def _prune(body: etree._Element, total: int, tick: Callable[[], None]) -> None:
    page = (total, _para_len(body))
    containers: dict[etree._Element, tuple[int, int]] = {}  # (text, paragraph text) of each <main>/<article>
    for el, children in _walk(body, tick):
        if _is_container(el):
            containers[el] = (_text_len(el), _para_len(el))
        furniture = _furniture(el)
        if furniture is Furniture.NO:
            continue
        if (furniture is Furniture.SURE and _text_len(el) < _SMALL) or not _holds_content(el, page, containers):
            children.clear()
            el.drop_tree()


def _is_container(el: etree._Element) -> bool:
    return tag_of(el) in ("main", "article") or (el.get("role") or "").lower() == "main"


def _para_len(el: etree._Element) -> int:
    """Characters of text in the <p> elements under `el`: prose, where furniture has little."""
    return sum(_text_len(p) for p in el.iter("p"))


def _holds_content(el: etree._Element, page: tuple[int, int], containers: dict[etree._Element, tuple[int, int]]) -> bool:
    """Does `el` hold most of the text or of the paragraphs of the page, or of the <main>/<article> it is in, or
    hold a <main>/<article>?"""
    own = (_text_len(el), _para_len(el))
    whole = next((containers[a] for a in el.iterancestors() if a in containers), page)
    if any(whole_part and part >= _KEEP_SHARE * whole_part for part, whole_part in zip(own, whole)):
        return True
    if not whole[0]:
        return True
    return any(_is_container(d) and _text_len(d) for d in el.iter() if d is not el)


class Furniture(Enum):
    """How sure it is that an element is page furniture."""

    NO = "no"
    NAMED = "named"  # a word of its class or id (sidebar, comments…), or a <form>: dropped unless it holds the content
    SURE = "sure"  # navigation, footer, aside, hidden, a cookie/share/advert name: dropped when small whatever it holds


def _furniture(el: etree._Element) -> Furniture:
    """Is `el` navigation, a banner, a footer, hidden, or other page furniture?"""
    tag = tag_of(el)
    if tag == "form":
        return Furniture.NAMED
    if tag in _NAV_TAGS or el.get("hidden") is not None or (el.get("aria-hidden") or "").lower() == "true":
        return Furniture.SURE
    if _HIDDEN_STYLE_RE.search((el.get("style") or "").lower()):
        return Furniture.SURE
    if (el.get("role") or "").lower() in _NAV_ROLES or (el.get("aria-modal") or "").lower() == "true":
        return Furniture.SURE
    if tag == "header":
        return Furniture.NO if _in_article(el) or _has_own_h1(el) else Furniture.SURE
    names = _names(el)
    if not names or tag in ("body", "html", "main", "article"):
        return Furniture.NO
    if _STRONG.search(names):
        return Furniture.SURE
    words = set(_WORD_RE.findall(names))
    weak = bool(words & _WEAK_WORDS) or any(_HEADER_RE.match(name) for name in names.split())
    return Furniture.NAMED if weak and not words & _CONTENT_WORDS else Furniture.NO


def _names(el: etree._Element) -> str:
    """The element's class names and id, lower case, without the taxonomy classes of a CMS."""
    return " ".join(n for n in f"{el.get('class') or ''} {el.get('id') or ''}".lower().split()
                    if not n.startswith(_TAXONOMY))


def _in_article(el: etree._Element) -> bool:
    return any(tag_of(a) in ("article", "main") or (a.get("role") or "") == "main" for a in el.iterancestors())


def _has_own_h1(el: etree._Element) -> bool:
    """Does `el` hold an <h1> that is not a link (a site's logo is a link home)?"""
    for h1 in el.iter("h1"):
        links = sum(len(t.strip()) for a in h1.iter("a") for t in a.itertext())
        if _text_len(h1) > links:
            return True
    return False


def _stats(body: etree._Element, tick: Callable[[], None]) -> dict[etree._Element, tuple[int, int]]:
    """(characters of text, characters of link text) of every element under `body`, in one bottom-up pass."""
    stats: dict[etree._Element, tuple[int, int]] = {}
    elements = [body, *(el for el, _ in _walk(body, tick))]
    for i, el in enumerate(reversed(elements)):
        if not i % _DEADLINE_EVERY:
            tick()
        text = len((el.text or "").strip())
        links = 0
        for child in el:
            if not isinstance(child.tag, str):
                continue
            child_text, child_links = stats.get(child, (0, 0))
            text += child_text + len((child.tail or "").strip())
            links += child_links
        stats[el] = (text, text if tag_of(el) == "a" else links)
    return stats


def _own(stats: dict[etree._Element, tuple[int, int]], el: etree._Element) -> int:
    """Characters of `el`'s text outside links."""
    text, links = stats.get(el, (0, 0))
    return text - links


def _pick_root(body: etree._Element, stats: dict[etree._Element, tuple[int, int]]) -> etree._Element:
    page = _own(stats, body)
    candidates = [el for el in stats if tag_of(el) in ("main", "article") or (el.get("role") or "") == "main"
                  or (el.get("itemprop") or "") == "articleBody"]
    if candidates and page:
        best = max(candidates, key=lambda el: _own(stats, el))
        if _own(stats, best) >= _ROOT_SHARE * page:
            inner = [c for c in candidates if c is not best and any(a is best for a in c.iterancestors())]
            while True:
                deeper = [c for c in inner if _own(stats, c) >= _DESCEND_SHARE * _own(stats, best)
                          and any(a is best for a in c.iterancestors())]
                if not deeper:
                    return best
                best = max(deeper, key=lambda el: _own(stats, el))
    root = body
    while True:
        children = [c for c in root if isinstance(c.tag, str)]
        if not children:
            return root
        top = max(children, key=lambda el: _own(stats, el))
        if _own(stats, root) == 0 or _own(stats, top) < _DESCEND_SHARE * _own(stats, root):
            return root
        root = top


def _drop_link_lists(root: etree._Element, stats: dict[etree._Element, tuple[int, int]],
                     tick: Callable[[], None]) -> None:
    for el, children in _walk(root, tick):
        if tag_of(el) not in _LINK_BLOCKS:
            continue
        text, links = stats.get(el, (0, 0))
        if text and links > _LINK_DENSITY * text and text - links < _LINK_BLOCK_MAX:
            children.clear()
            el.drop_tree()
