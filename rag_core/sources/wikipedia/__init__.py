"""Wikipedia as a source: search and read articles over the MediaWiki Action API.

- `client`: the HTTP client (headers, timeouts, retries) and the API calls (search, fetch, latest revisions).
- `bounded`: reading an untrusted answer within a deadline, a size cap and a JSON depth limit.
- `documents`: addresses, and an article as a Document (sections, anchors, attribution); no HTTP.

Importing an article into the library and refreshing imported ones is a use case of the service:
`rag_core.service.wiki_sync` (`import_article`, `refresh`).

Import from here (`from rag_core.sources import wikipedia`); the names below are the public API.
"""
from __future__ import annotations

from rag_core.sources.wikipedia.bounded import MAX_JSON_DEPTH, MAX_JSON_ITEMS
from rag_core.sources.wikipedia.client import (
                     ARTICLE_PARAMS,
                     CONNECT_TIMEOUT_S,
                     MAX_RETRY_AFTER_S,
                     VERSION,
                     Disambiguation,
                     LatestRevision,
                     WikiHit,
                     WikipediaClient,
                     api_url,
                     fetch_article,
                     latest_revisions,
                     search,
                     user_agent,
)
from rag_core.sources.wikipedia.documents import (
                     LICENSE,
                     LICENSE_URL,
                     MAX_TITLE_BYTES,
                     NON_PROSE_SECTIONS,
                     Article,
                     anchor_for,
                     article_url,
                     build_document,
                     check_lang,
                     checked_article_url,
                     make_doc_id,
                     parse_article_ref,
                     section_url,
                     split_sections,
                     valid_title,
)

__all__ = [
    "ARTICLE_PARAMS", "CONNECT_TIMEOUT_S", "LICENSE", "LICENSE_URL", "MAX_JSON_DEPTH", "MAX_JSON_ITEMS",
    "MAX_RETRY_AFTER_S", "MAX_TITLE_BYTES",
    "NON_PROSE_SECTIONS", "VERSION",
    "Article", "Disambiguation", "LatestRevision", "WikiHit",
    "WikipediaClient",
    "anchor_for", "api_url", "article_url", "build_document", "check_lang", "checked_article_url", "fetch_article",
    "latest_revisions", "make_doc_id", "parse_article_ref", "search", "section_url", "split_sections",
    "user_agent", "valid_title",
]
