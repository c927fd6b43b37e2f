"""Command line: docchat (or python -m rag_core) COMMAND ... (ingest, list, search, delete, migrate, settings, wiki, ask, summarize,
eval, mcp)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from rag_core.adapters.cli.common import emit, json_text, k_value, library_listing, open_library, terminal_text
from rag_core.core.config import Settings, describe, load_settings, settings_markdown
from rag_core.core.errors import DocChatError, SettingsError
from rag_core.core.formats import accepted_kinds, location_label
from rag_core.core.models import Progress

PROG = "docchat"  # the command the package installs (pyproject [project.scripts]); `python -m rag_core` is the same
INGEST_STAGES = {"reading": "reading", "ocr": "reading scanned pages (OCR)", "chunking": "splitting into passages",
                 "embedding": "embedding passages", "saving": "saving"}


def ingest_progress(name: str) -> Progress:
    """A progress callback printing each new stage of adding `name` (and every scanned page read) to stderr."""
    seen: set[str] = set()
    pages: set[int] = set()
    shown = terminal_text(name)

    def report(stage: str, done: int, total: int) -> None:
        if stage in INGEST_STAGES and stage not in seen:
            seen.add(stage)
            print(f"  {shown}: {INGEST_STAGES[stage]}…", file=sys.stderr, flush=True)
        if stage == "ocr" and total and done < total and done not in pages:
            pages.add(done)
            print(f"  {shown}: reading scanned page {done + 1} of {total}", file=sys.stderr, flush=True)

    return report


def cmd_ingest(args: argparse.Namespace, settings: Settings) -> int:
    from rag_core.service.library import expand_paths

    lib = open_library(settings)
    try:
        results = [lib.ingest_path(p, progress=ingest_progress(p.name)) for p in expand_paths(args.paths)]
    finally:
        lib.close()

    def human() -> None:
        for r in results:
            if r.status == "failed":
                print(terminal_text(f"failed     {r.path}: {r.error}" + (f" ({r.details})" if r.details else "")))
            else:
                print(terminal_text(f"{r.status:<10} {r.path}  (id {r.doc_id}, {r.chunks} chunks)"))

    emit(args, {"results": [r.as_json() for r in results]}, human)
    return 1 if any(r.status == "failed" for r in results) else 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    docs = library_listing(settings)
    rows = [{"doc_id": d.doc_id, "title": d.title, "kind": d.kind, "pages": d.pages, "chunks": d.chunks,
             "added_at": d.added_at, "url": d.url, "flags": list(d.flags)} for d in docs]

    def human() -> None:
        if not rows:
            print("Your library is empty. Add files with: docchat ingest FILE...")
        for r in rows:
            pages = f"{r['pages']} pages, " if r["pages"] else ""
            print(terminal_text(f"{r['doc_id']}  {r['title']}  [{r['kind']}, {pages}{r['chunks']} chunks, added "
                                f"{r['added_at']}]"))

    emit(args, {"documents": rows}, human)
    return 0


def cmd_search(args: argparse.Namespace, settings: Settings) -> int:
    lib = open_library(settings)
    try:
        hits = lib.search(args.query, k=args.k)
    finally:
        lib.close()
    rows: list[dict[str, Any]] = [{"doc_id": p.chunk.doc_id, "title": p.chunk.source.title, "page": p.chunk.page_start,
             "section": p.chunk.section, "location": location_label(p.chunk), "text": p.chunk.text,
             "score": round(p.score, 4), "char_start": p.chunk.char_start, "char_end": p.chunk.char_end} for p in hits]

    def human() -> None:
        if not rows:
            print("No matching passages.")
        for i, r in enumerate(rows, 1):
            where = r["location"]  # "page 3, section Foo", "slide 3 — Budget", "sheet Budget"
            print(terminal_text(f"[{i}] {r['title']}{' — ' + where if where else ''}  (score {r['score']})"))
            print("    " + terminal_text(r["text"][:300]) + ("…" if len(r["text"]) > 300 else ""))

    emit(args, {"hits": rows}, human)
    return 0


def cmd_delete(args: argparse.Namespace, settings: Settings) -> int:
    lib = open_library(settings)
    try:
        info = lib.delete(args.doc_id)
    finally:
        lib.close()
    emit(args, {"deleted": info.doc_id, "title": info.title},
         lambda: print(terminal_text(f"Deleted “{info.title}” ({info.doc_id}).")))
    return 0


def cmd_settings(args: argparse.Namespace, settings: Settings) -> int:
    """List every setting: variable, meaning, allowed values, default and current value (or docs/settings.md)."""
    if args.markdown:
        print(settings_markdown(), end="")
        return 0
    rows = describe(settings)

    def human() -> None:
        for r in rows:
            shown = r.as_json()
            value = "(not set)" if shown["value"] is None else shown["value"]
            default = "(not set)" if shown["default"] is None else shown["default"]
            print(terminal_text(f"{r.variable} = {value}"))
            print(terminal_text(f"    {r.description} Allowed: {r.allowed}. Default: {default}."))

    emit(args, {"settings": [r.as_json() for r in rows]}, human)
    return 0


def _upgrade_progress(stage: str, done: int, total: int) -> None:
    print(f"\rUpgrading your library to the new search engine… {done}/{total} passages",
          end="" if done < total else "\n", file=sys.stderr, flush=True)


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    """Upgrade a library of the previous release to the new search engine (opening it does that too)."""
    from rag_core.store.embeddings import Embedder
    from rag_core.store.migrate import migrate, old_folder, upgrade_state

    state = upgrade_state(settings)
    notes = {"server": "The library is on the Qdrant server at QDRANT_URL; there is nothing to upgrade.",
             "none": f"There is no library of the previous release in {settings.library.data_dir}; nothing to upgrade.",
             "done": f"This library was already upgraded; the old folder {old_folder(settings)} is no longer used "
                     "and can be deleted."}
    done = None
    if state == "needed":
        embedder = Embedder(settings.library.embedding_model, lazy=True)  # an upgrade copies the vectors: no model needed
        done = migrate(settings, embedder, None if args.json else _upgrade_progress)
    if done is None:
        note = notes.get(state, notes["done"])  # "needed" and nothing done: another process just did it
        emit(args, {"upgraded": False, "state": state, "message": note}, lambda: print(terminal_text(note)))
        return 0
    message = (f"Upgraded {done.documents} documents ({done.passages} passages) in {done.seconds:.1f} s. The old "
               f"folder {done.old_folder} is no longer used; you can delete it.")
    emit(args, {"upgraded": True, "documents": done.documents, "passages": done.passages,
                "seconds": round(done.seconds, 2), "old_folder": str(done.old_folder), "message": message},
         lambda: print(terminal_text(message)))
    return 0


def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Serve the library to agents over the Model Context Protocol (stdio, or streamable HTTP with --http)."""
    from rag_core.adapters.mcp.files import allowed_dirs
    from rag_core.adapters.mcp.server import serve

    if args.http and not 0 < args.port < 65536:
        raise SettingsError(f"--port {args.port} is not a port: use a whole number from 1 to 65535.")
    if args.allow_dir and not args.allow_writes:
        raise SettingsError("--allow-dir is for the tool add_document, which is offered only with --allow-writes: "
                            "add --allow-writes, or leave out --allow-dir.")
    serve(settings, allow_writes=args.allow_writes, http_port=args.port if args.http else None,
          idle_close_s=args.idle_close, use_llm=not args.no_llm, allow_dirs=allowed_dirs(args.allow_dir or ()))
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argparse tree for every command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-dir", help="library folder (default: $DOCCHAT_DATA_DIR or ./data)")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("-v", "--verbose", action="store_true", help="log details to stderr")
    # One name in every usage line, however it was started (`docchat` or `python -m rag_core`): the one to type.
    parser = argparse.ArgumentParser(prog=PROG, description="DocChat document library")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", parents=[common], help=f"add files ({accepted_kinds()}) or folders",
                       description=f"Add files or folders (walked for {accepted_kinds(extensions=True)} files).")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("list", parents=[common], help="list documents")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("search", parents=[common], help="find passages")
    p.add_argument("query")
    p.add_argument("-k", type=k_value, default=5, help="how many passages, 1-50 (default 5)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("delete", parents=[common], help="delete a document and its chunks")
    p.add_argument("doc_id")
    p.set_defaults(func=cmd_delete)

    p = sub.add_parser("migrate", parents=[common],
                       help="upgrade a library of the previous release to the new search engine (with progress)")
    p.set_defaults(func=cmd_migrate)

    p = sub.add_parser("settings", parents=[common], help="list every setting (environment variable) and its value")
    p.add_argument("--markdown", action="store_true", help="print docs/settings.md instead")
    p.set_defaults(func=cmd_settings)
    p = sub.add_parser("mcp", parents=[common], help="serve the library to AI assistants over MCP (docs/mcp.md)")
    p.add_argument("--allow-writes", action="store_true",
                   help="also offer add_document and import_wikipedia (off: the tools are not even listed)")
    p.add_argument("--allow-dir", action="append", metavar="FOLDER",
                   help="a folder whose documents (the kinds `ingest` reads) add_document may add (repeatable; "
                        "none: add_document reads no local file)")
    p.add_argument("--no-llm", action="store_true", help="ask quotes the documents, without a language model")
    p.add_argument("--http", action="store_true", help="streamable HTTP on 127.0.0.1 instead of stdio")
    p.add_argument("--port", type=int, default=8765, help="port for --http (default 8765)")
    p.add_argument("--idle-close", type=float, default=30.0, metavar="SECONDS",
                   help="close the embedded library after this long without calls, so the app can open it (0: never)")
    p.set_defaults(func=cmd_mcp)
    from rag_core.adapters.cli.answers import register as register_answers
    from rag_core.adapters.cli.app import register as register_app
    from rag_core.adapters.cli.evaluate import register as register_eval
    from rag_core.adapters.cli.summarize import register as register_summarize
    from rag_core.adapters.cli.sync import register as register_sync
    from rag_core.adapters.cli.wikipedia import register as register_wikipedia

    for register in (register_wikipedia, register_answers, register_summarize, register_eval, register_app,
                     register_sync):
        register(sub, common)
    return parser


def quiet_progress_bars() -> None:
    """No progress bars of the Hugging Face libraries ("Loading weights: 0%|…" while the model loads) on stderr: with
    --json a script reads the output, and a bar is noise to it. Read when they are imported, which is when a command
    first embeds (the model loads lazily), after this."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # huggingface_hub's switch; transformers' bars follow it


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    if getattr(args, "json", False):
        quiet_progress_bars()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.verbose:  # DocChat's own debug lines too: the tracebacks of expected failures (a model server's error)
        logging.getLogger("rag_core").setLevel(logging.DEBUG)
    try:
        settings = load_settings()
        if args.data_dir:
            settings = settings.with_overrides(data_dir=Path(args.data_dir))
    except SettingsError as e:  # always on stderr, even with --json: nothing ran
        print(terminal_text(f"Error: {e}"), file=sys.stderr)
        return 2
    try:
        return args.func(args, settings)
    except DocChatError as e:
        if getattr(args, "json", False):
            print(json_text({"error": str(e)}, indent=None))
        else:
            print(terminal_text(f"Error: {e}") + (f"\n({terminal_text(e.details)})" if e.details else ""),
                  file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
