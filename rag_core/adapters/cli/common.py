"""Helpers shared by the CLI commands."""
from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from rag_core.core.config import Settings
from rag_core.core.names import printable_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.core.models import DocumentInfo
    from rag_core.service.library import Library

K_MAX = 50  # the most passages `search -k` and `ask -k` fetch (the bound of DOCCHAT_TOP_K and of the MCP tools)
REPLACEMENT = "\ufffd"  # what a terminal shows instead of a control character

# Characters a terminal acts on instead of showing: bidi embeddings/overrides (U+202A-E), isolates (U+2066-9),
# marks (U+200E/F, U+061C); C0 controls, DEL and C1 controls (U+0080-9F, e.g. CSI U+009B).
_BIDI = "\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c"
_BREAKS = "\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029"  # line and paragraph breaks
_CONTROL_RE = re.compile(f"[{_BIDI}\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
_BREAK_RE = re.compile(f"\r\n|[{_BREAKS}]")
_SPACE_RE = re.compile(f"[\t{_BREAKS}]")
_JSON_RE = re.compile(f"[{_BIDI}\x7f-\x9f\u2028\u2029]")  # json.dumps already escapes C0
_WHOLE_NUMBER_RE = re.compile(r"\s*\+?[0-9]{1,6}\s*")


def terminal_text(text: str, newlines: bool = False) -> str:
    """`text` (from a document, a model or a file name) safe to print to a terminal: bidi and control characters
    become U+FFFD, visibly, as do a file name's bytes that are not UTF-8 (`printable_text`); line breaks and tabs stay
    when `newlines`, else each becomes a space (one line)."""
    text = printable_text(text)
    if newlines:
        text = _BREAK_RE.sub("\n", text)
    else:
        text = _SPACE_RE.sub(" ", text.replace("\r\n", "\n"))
    return _CONTROL_RE.sub(REPLACEMENT, text)


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def json_text(payload: object, indent: int | None = 2) -> str:
    """`payload` as indented JSON that keeps every character exactly, with the ones a terminal would act on written
    as \\uXXXX escapes (json.dumps writes bidi controls, DEL, C1 and U+2028/9 raw); always UTF-8: a file name's
    bytes that are not UTF-8 are written as U+FFFD (`printable_text`)."""
    return _JSON_RE.sub(_escape, printable_text(json.dumps(payload, ensure_ascii=False, indent=indent)))


def k_value(text: str) -> int:
    """argparse type for -k: a whole number from 1 to K_MAX, else a one-line usage error."""
    k = int(text) if _WHOLE_NUMBER_RE.fullmatch(text) else 0
    if not 1 <= k <= K_MAX:
        raise argparse.ArgumentTypeError(f"“{terminal_text(text)}” is not allowed: use a whole number from 1 to "
                                         f"{K_MAX} (how many passages to fetch).")
    return k


def emit(args: argparse.Namespace, payload: dict, human: Callable[[], None]) -> None:
    """Print `payload` as JSON with --json (see `json_text`), else call `human` to print it for people."""
    if args.json:
        print(json_text(payload))
    else:
        human()


def open_library(settings: Settings) -> Library:
    """Open the library (imported lazily so `--help` stays fast); the embedding model loads only when a command first
    embeds or counts tokens (`list`, `delete` and `wiki-refresh --dry-run` never load torch; issue 28)."""
    from rag_core.service.library import Library
    from rag_core.store.model_record import library_model
    from rag_core.store.server_embeddings import open_embedder

    return Library(settings, embedder=open_embedder(settings, library_model(settings), lazy=True))


def library_listing(settings: Settings) -> list[DocumentInfo]:
    """The library's documents, newest first, read as the Library opens its store (a library of the previous release
    upgraded first) but without importing the Library: its adding and searching machinery takes a third of a second
    to import, which `docchat list` never uses (issue 28: it must answer within 2 s)."""
    from rag_core.store.migrate import migrate_if_needed
    from rag_core.store.model_record import library_model
    from rag_core.store.server_embeddings import open_embedder
    from rag_core.store.vector_store import open_store

    embedder = open_embedder(settings, library_model(settings), lazy=True)
    migrate_if_needed(settings, embedder)
    store = open_store(settings, embedder)
    try:
        return store.list_documents()
    finally:
        store.close()
