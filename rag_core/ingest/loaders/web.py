"""Saved web pages (.html, .htm): the main content only, with headings as sections, lists, tables and the page title.

The page is parsed by lxml's HTML parser (nothing is fetched, no entity or DTD is loaded), its boilerplate is pruned
and its main content chosen by the rules in rag_core.ingest.loaders._html_main, and the content is turned into text
by rag_core.ingest.loaders._html_text (links keep their text, never their address). These rules were chosen over
trafilatura, readability-lxml and selectolax by measuring them on real saved pages: see docs/formats.md and
benchmarks/html_extractors.py.
"""
from __future__ import annotations

import codecs
import logging
import re
from html import unescape as _html_unescape

from lxml import etree, html

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import NoText
from rag_core.core.models import Progress
from rag_core.ingest.loaders._blocks import BlockKind, assemble
from rag_core.ingest.loaders._common import Extracted, build_sections, choose_title, clean_text, collapse_ws
from rag_core.ingest.loaders._decode import decode_text
from rag_core.ingest.loaders._html_main import lead_heading, main_content
from rag_core.ingest.loaders._html_text import HTML_PARSER, blocks_of, tag_of
from rag_core.ingest.loaders._isolated import run_isolated

log = logging.getLogger(__name__)

_READER = "web page"
_SNIFF = 4096  # where a page declares its character set (a <meta> must come early in <head>)
_META_CHARSET_RE = re.compile(rb"""<meta[^>]{0,200}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.IGNORECASE)
_XML_ENCODING_RE = re.compile(rb"""\A\s*<\?xml[^>]{0,200}?encoding\s*=\s*["']([A-Za-z0-9_.:-]{1,40})""")
_XML_DECL_RE = re.compile(r"\A\s*<\?xml[^>]*\?>")
# Labels browsers read as another encoding (WHATWG Encoding): Latin-1 and ASCII pages are Windows-1252, and a page
# that says UTF-16 in a <meta> it could be read through is really an ASCII-compatible one.
_ALIASES = {"latin1": "cp1252", "iso8859-1": "cp1252", "ascii": "cp1252", "utf-16": "utf-8", "utf-16-le": "utf-8",
            "utf-16-be": "utf-8", "utf-32": "utf-8", "utf-32-le": "utf-8", "utf-32-be": "utf-8"}
_BOMS = (codecs.BOM_UTF8, codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
_TITLE_SEPARATORS = "|-–—·:»/•~"
# Taking the tags out of a page whose tree could not be built (_markup_stripped): what is never text, the tags that
# end a paragraph, and any other tag (each a linear scan: an attribute of 60 MB is one match).
_DROPPED_RE = re.compile(r"<!--.*?-->|<(script|style|template|noscript|head)\b[^>]*>.*?</\1\s*>|<![^>]*>",
                         re.IGNORECASE | re.DOTALL)
_BLOCK_TAG_RE = re.compile(r"</?(?:p|div|br|li|tr|h[1-6]|section|article|blockquote|pre|table|ul|ol|dd|dt)\b[^>]*>",
                           re.IGNORECASE)
_TAG_RE = re.compile(r"<[^>]*>")


def load_html(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    """Extract a saved web page's main content in a child process that is stopped at `deadline` (IngestTimedOut),
    see rag_core.ingest.loaders._isolated."""
    return run_isolated(read_html, (data, file_name, settings), deadline or Deadline.never(file_name), _READER)


def read_html(data: bytes, file_name: str, settings: Settings, deadline: Deadline,
              progress: Progress | None = None) -> Extracted:
    """`load_html` in this process, checking `deadline` while the page is walked."""
    deadline.check()
    page = decode_html(data, file_name)
    doc = parse_html(page, file_name)
    deadline.check()
    head_title, og_title = _head_titles(doc)
    body = doc.find("body")
    if body is None:
        body = doc
    tree_has_text = any(t.strip() for t in body.itertext())  # before boilerplate is pruned from it
    root = main_content(body, deadline.check)
    blocks, _ = blocks_of(root, deadline.check)
    lead = lead_heading(body, root)
    if lead is not None:
        lead_blocks, _ = blocks_of(lead)
        blocks = lead_blocks + blocks
    assembled = assemble(blocks, deadline)
    text = assembled.text
    if not text.strip():
        if not tree_has_text:  # no text in the tree at all, not only boilerplate: lxml gave up on the markup
            return _markup_stripped(page, file_name, head_title)
        raise NoText(file_name)
    first_h1 = next((b.text for b in blocks if b.kind is BlockKind.HEADING and b.level == 1), "")
    title = choose_title(file_name, page_title(head_title, og_title, first_h1))
    log.debug("%s: %d blocks, %d characters, title %r", file_name, len(blocks), len(text), title)
    return Extracted(text, build_sections(text, assembled.heads), title)


def _markup_stripped(page: str, file_name: str, head_title: str) -> Extracted:
    """The page's text with its tags taken out, for a page whose tree held none: lxml gives up on a tag nested past
    256 levels or an attribute past 10 MB, and drops what follows. NoText when there is no text at all."""
    text = _DROPPED_RE.sub(" ", page)
    text = _BLOCK_TAG_RE.sub("\n\n", text)
    text = _html_unescape(_TAG_RE.sub(" ", text))
    lines = (collapse_ws(line) for line in text.split("\n"))
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    if not text:
        raise NoText(file_name)
    log.info("%s: its markup could not be read as a tree (nested too deep, or too long); read as plain text", file_name)
    return Extracted(text, build_sections(text, ()), choose_title(file_name, head_title))


def decode_html(data: bytes, file_name: str) -> str:
    """The page as text: a byte-order mark, else the charset its <meta> or XML declaration names when the page
    decodes with it, else what rag_core.ingest.loaders._decode.decode_text finds (UTF-8, else charset-normalizer's
    guess; binary data refused)."""
    if not data.startswith(_BOMS):
        declared = _declared_encoding(data[:_SNIFF])
        if declared and declared != "utf-8":
            try:
                return clean_text(data.decode(declared))
            except UnicodeDecodeError:
                log.info("%s does not decode as the %s it declares; guessing its encoding", file_name, declared)
    return clean_text(decode_text(data, file_name))


def _declared_encoding(head: bytes) -> str | None:
    """The Python codec for the charset the page declares, or None when it declares none Python knows."""
    m = _XML_ENCODING_RE.search(head) or _META_CHARSET_RE.search(head)
    if not m:
        return None
    try:
        name = codecs.lookup(m.group(1).decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None
    return _ALIASES.get(name, name)


def parse_html(text: str, file_name: str) -> html.HtmlElement:
    """The page's element tree (lxml's HTML parser: no network, no entities, nesting cut at 256 levels); NoText when
    there is no markup to read."""
    text = _XML_DECL_RE.sub("", text, count=1)
    if not text.strip():
        raise NoText(file_name)
    try:
        return html.document_fromstring(text, parser=HTML_PARSER)
    except (etree.ParserError, ValueError) as e:  # "Document is empty": nothing but a doctype or comments
        raise NoText(file_name) from e


def _head_titles(doc: html.HtmlElement) -> tuple[str, str]:
    """The page's <title> and its og:title (or twitter:title), each "" when absent."""
    title = ""
    for el in doc.iter("title"):
        if not any(tag_of(a) == "svg" for a in el.iterancestors()):
            title = collapse_ws(el.text_content())
            if title:
                break
    og = ""
    for meta in doc.iter("meta"):
        key = (meta.get("property") or meta.get("name") or "").lower()
        if key in ("og:title", "twitter:title"):
            og = collapse_ws(meta.get("content") or "")
            if og:
                break
    return clean_text(title), clean_text(og)


def page_title(head_title: str, og_title: str, h1: str) -> str:
    """The page's title: its <title>, shortened to its og:title or first <h1> when it is that plus the site's name
    ("Baking bread | The Kitchen" -> "Baking bread"); og:title, then the <h1>, when it has no <title>."""
    for short in (og_title, h1):
        if not head_title or not short or len(short) >= len(head_title):
            continue
        if head_title.startswith(short) and head_title[len(short):].lstrip()[:1] in _TITLE_SEPARATORS:
            return short
        if head_title.endswith(short) and head_title[:-len(short)].rstrip()[-1:] in _TITLE_SEPARATORS:
            return short
    return head_title or og_title or h1
