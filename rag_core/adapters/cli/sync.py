"""`docchat sync FOLDER`: compare a folder with the library and apply the difference (`--dry-run`: only show it)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from rag_core.adapters.cli.common import emit, open_library, terminal_text
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, LinkNeedsConfirmation

SHOWN = 20  # file names listed per bucket for people (--json lists them all)


def cmd_sync(args: argparse.Namespace, settings: Settings) -> int:
    """Show a folder's diff against the library; without --dry-run, link the folder and apply every change."""
    from rag_core.service.folder_sync import Bucket, FolderDiff, diff_folder
    from rag_core.service.linked_folders import FolderLinks, needs_confirmation
    from rag_core.service.wiki_changes import apply_any, wikipedia_changes

    links = FolderLinks(settings)
    new_link = not args.dry_run and links.find(args.folder) is None
    if new_link and needs_confirmation(args.folder, settings) and not args.yes:
        raise LinkNeedsConfirmation(args.folder)
    lib = open_library(settings)
    try:
        if new_link:
            links.link(args.folder)
        try:
            diff = diff_folder(lib, links, args.folder, remember=not args.dry_run)
        except DocChatError:
            if new_link:
                links.unlink(args.folder)  # a folder that cannot be read is not left linked
            raise
        if args.wikipedia:  # the imported articles with a newer revision, in their own bucket
            wiki = wikipedia_changes(lib)
            diff = FolderDiff(diff.folder, diff.changes + wiki.bucket(Bucket.WIKIPEDIA), diff.notes + wiki.notes)
        results: list[Any] = []
        if not args.dry_run:
            for c in diff.pending:
                if not args.json:
                    print(terminal_text(f"  {c.bucket}: {c.rel}…"), file=sys.stderr, flush=True)
                results.append(apply_any(lib, links, diff.folder, c))
    finally:
        links.flush()
        lib.close()
    failed = [r for r in results if r.status == "failed"]
    payload = {**diff.as_json(), "dry_run": args.dry_run, "applied": [r.as_json() for r in results]}

    def human() -> None:
        counts = diff.counts()
        print(terminal_text(f"{diff.folder}: " + ", ".join(f"{counts[b]} {b}" for b in Bucket
                                                           if b != Bucket.WIKIPEDIA or args.wikipedia)))
        for b in (Bucket.NEW, Bucket.CHANGED, Bucket.REMOVED, Bucket.WIKIPEDIA):
            for c in diff.bucket(b)[:SHOWN]:
                print(terminal_text(f"  {b:<9} {c.rel}"))
            if len(diff.bucket(b)) > SHOWN:
                print(f"  … and {len(diff.bucket(b)) - SHOWN} more {b}")
        for note in diff.notes:
            print(terminal_text(f"  note: {note}"))
        if args.dry_run:
            print("Nothing was changed (--dry-run)." if diff.pending else "The library is up to date.")
            return
        for r in failed:
            print(terminal_text(f"failed     {r.path}: {r.error}"))
        done = len(results) - len(failed)
        removed = len(diff.bucket(Bucket.REMOVED))
        print(f"Applied {done} of {len(results)} changes." + (
            f" Removed files' documents can be restored: docchat sync-undo DOC_ID ({removed} removed)."
            if removed else ""))

    emit(args, payload, human)
    return 1 if failed else 0


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    """Undo the removal of a document by `docchat sync` (a file gone from its folder)."""
    lib = open_library(settings)
    try:
        info = lib.restore(args.doc_id)
    finally:
        lib.close()
    emit(args, {"restored": info.doc_id, "title": info.title},
         lambda: print(terminal_text(f"Restored “{info.title}” ({info.doc_id}).")))
    return 0


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add `sync` and `sync-undo` to the command line."""
    p = sub.add_parser("sync", parents=[common], help="compare a folder with the library and apply the changes",
                       description="Compare FOLDER (recursively, the kinds DocChat reads) with the library by content: "
                                   "new, changed, removed and unchanged files. Without --dry-run the folder is linked "
                                   "and every change applied: new files added, changed ones replaced, removed ones "
                                   "hidden (docchat sync-undo brings one back).")
    p.add_argument("folder")
    p.add_argument("--dry-run", action="store_true", help="only show the changes; the library stays as it is")
    p.add_argument("--yes", action="store_true", help="link a folder outside your home and data folders")
    p.add_argument("--wikipedia", action="store_true",
                   help="also list (and apply) imported Wikipedia articles that have a newer revision")
    p.set_defaults(func=cmd_sync)
    p = sub.add_parser("sync-undo", parents=[common], help="restore a document that `sync` removed")
    p.add_argument("doc_id")
    p.set_defaults(func=cmd_restore)
