"""CLI commands for Wikipedia: wiki (import), wiki-search, wiki-refresh. Registered by rag_core.__main__.

The only links printed are https://<lang>.wikipedia.org/wiki/… addresses (`checked_article_url`); anything else an
answer carried is left out.
"""
from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from rag_core.adapters.cli.common import emit, open_library, terminal_text
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, WikipediaError

if TYPE_CHECKING:  # pragma: no cover - imported by each command: every other command starts without it (issue 28)
    from rag_core.service.wiki_sync import RefreshItem
    from rag_core.sources.wikipedia import WikiHit

log = logging.getLogger(__name__)

EXIT_FAILED = 1
EXIT_CHOOSE = 3  # a disambiguation page: nothing imported, the user has to pick a title


def say(line: str) -> None:
    """Print one line of article text (titles, snippets, errors) with terminal controls neutralised."""
    print(terminal_text(line))


def cmd_wiki(args: argparse.Namespace, settings: Settings) -> int:
    """Import one article."""
    from rag_core.service.wiki_sync import import_article
    from rag_core.sources.wikipedia import LICENSE, checked_article_url

    title = " ".join(args.title)
    lib = open_library(settings)
    try:
        r = import_article(lib, settings, title, lang=args.lang)
    finally:
        lib.close()

    url = checked_article_url(r.url, r.lang) if r.url else None

    def human() -> None:
        if r.status == "failed":
            say(f"failed     {r.title}: {r.error}")
            return
        if r.redirected_from:
            say(f"“{r.redirected_from}” redirected to “{r.title}”.")
        if r.status == "disambiguation":
            where = f" ({url})" if url else ""
            say(f"“{r.title}” is a disambiguation page{where}. Pick one of these and run the command again:")
            for c in r.candidates:
                say(f"  {c}")
            if r.candidates:
                say(f"Example: docchat wiki \"{r.candidates[0]}\" --lang {r.lang}")
            return
        note = "  — already in your library" if r.status == "unchanged" else ""
        say(f"{r.status:<10} {r.title}  (id {r.doc_id}, {r.chunks} chunks, revision {r.revision_id}){note}")
        print(f"           {url or 'Wikipedia'}  ·  {LICENSE}")
        for old in r.replaced:
            print(f"           replaced the older revision {old}")

    emit(args, {**r.as_json(), "url": url}, human)
    return {"failed": EXIT_FAILED, "disambiguation": EXIT_CHOOSE}.get(r.status, 0)


def cmd_wiki_search(args: argparse.Namespace, settings: Settings) -> int:
    """Search a language edition (no library needed, so it also works while the app runs)."""
    from rag_core.sources.wikipedia import checked_article_url

    words = " ".join(args.words)
    hits = _search(settings, words, args.lang, args.limit)

    def human() -> None:
        if not hits:
            say(f"No Wikipedia articles match “{words}” on {args.lang}.wikipedia.org.")
        for i, h in enumerate(hits, 1):
            say(f"{i}. {h.title}")
            if h.snippet:
                say(f"   {h.snippet}")
            url = checked_article_url(h.url, args.lang)
            if url:
                print(f"   {url}")

    emit(args, {"lang": args.lang, "query": words,
                "hits": [{**h.as_json(), "url": checked_article_url(h.url, args.lang)} for h in hits]}, human)
    return 0


def _search(settings: Settings, words: str, lang: str, limit: int) -> list[WikiHit]:
    """search(), with anything unexpected turned into one sentence (the traceback goes to the log with -v)."""
    from rag_core.sources.wikipedia import search

    try:
        return search(settings, words, lang=lang, limit=limit)
    except DocChatError:
        raise
    except Exception as e:  # the user gets a sentence, `-v` shows the traceback
        log.info("Unexpected failure while searching Wikipedia", exc_info=True)
        raise WikipediaError() from e


def _item_line(i: RefreshItem) -> str:
    rev = f"revision {i.revision_id}" + (f" → {i.new_revision_id}" if i.new_revision_id else "")
    extra = f"  (new id {i.new_doc_id})" if i.new_doc_id else ""
    msg = f"  — {i.message}" if i.message and not i.message.startswith("revision ") else ""
    return f"  {i.title}  [{i.lang}, {rev}, id {i.doc_id}]{extra}{msg}"


def cmd_wiki_refresh(args: argparse.Namespace, settings: Settings) -> int:
    """Check every imported article for a newer revision."""
    from rag_core.service.wiki_sync import refresh

    lib = open_library(settings)
    try:
        report = refresh(lib, settings, dry_run=args.dry_run)
    finally:
        lib.close()

    def human() -> None:
        if report.total == 0:
            print("No Wikipedia articles in your library. Import one with: docchat wiki TITLE")
            return
        dry = " (dry run: nothing was changed)" if report.dry_run else ""
        print(f"Checked {report.total} Wikipedia article{'s' if report.total != 1 else ''}{dry}.")
        for name, items in (("unchanged", report.unchanged), ("changed", report.changed),
                            ("removed upstream", report.removed_upstream), ("failed", report.failed)):
            print(f"{name} ({len(items)})")
            for i in items:
                say(_item_line(i))

    emit(args, report.as_json(), human)
    return EXIT_FAILED if report.failed else 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the Wikipedia subcommands to the main parser."""
    p = sub.add_parser("wiki", parents=[common], help="import a Wikipedia article by title (or URL)")
    p.add_argument("title", nargs="+", help="article title, e.g. \"Douglas Adams\", or its wikipedia.org URL")
    p.add_argument("--lang", default="en", help="language edition, e.g. en, de, fr, simple (default: en)")
    p.set_defaults(func=cmd_wiki)

    p = sub.add_parser("wiki-search", parents=[common], help="search Wikipedia articles")
    p.add_argument("words", nargs="+")
    p.add_argument("--lang", default="en", help="language edition (default: en)")
    p.add_argument("--limit", type=int, default=10, help="number of results, 1-50 (default: 10)")
    p.set_defaults(func=cmd_wiki_search)

    p = sub.add_parser("wiki-refresh", parents=[common],
                       help="check imported Wikipedia articles for newer revisions and update them")
    p.add_argument("--dry-run", action="store_true", help="only report what would change; write nothing")
    p.set_defaults(func=cmd_wiki_refresh)
