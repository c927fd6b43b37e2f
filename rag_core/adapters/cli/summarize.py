"""The `summarize` command: a whole document summarised (its key points, its outline), streamed to the terminal with
each stage on stderr, or printed as JSON. Without a model the summary quotes the document."""
from __future__ import annotations

import argparse
import sys

from rag_core.adapters.cli.answers import answer_json, checked_reply, print_sources
from rag_core.adapters.cli.common import json_text, terminal_text
from rag_core.core.config import Settings
from rag_core.core.models import StageEvent

SHAPES = ("summary", "key_points", "outline")


def _stage(event: StageEvent) -> None:
    if event.note:
        print(terminal_text(event.note), file=sys.stderr, flush=True)


def cmd_summarize(args: argparse.Namespace, settings: Settings) -> int:
    """Summarise one document (or compare several); exit code 1 when the summary is incomplete."""
    from rag_core.answer.summaries import Shape
    from rag_core.answer.summaries.start import start_summary
    from rag_core.service.library import Library

    if args.model:
        settings = settings.with_chat_model(args.model)
    shape = Shape.COMPARE if len(args.doc_ids) > 1 else Shape(args.shape)
    lib = Library(settings)
    streamed: list[str] = []
    try:
        stream = start_summary(lib, args.doc_ids, settings, shape, use_llm=not args.no_llm)
        if not args.json:
            stream.listen(_stage)
        for delta in stream:
            streamed.append(delta)
            if not args.json and delta:
                print(terminal_text(delta, newlines=True), end="", flush=True)
    finally:
        lib.close()
    ans = stream.answer
    assert ans is not None
    if args.json:
        print(json_text({**answer_json(ans), "summary": ans.extra.get("summary")}))
        return 1 if ans.incomplete else 0
    checked = checked_reply("".join(streamed), ans)
    if ans.mode == "model" and checked is None and "".join(streamed).strip() != ans.text.strip():
        checked = ans.text  # the parts as they were read, then the whole: the checked answer is what counts
    if checked is not None:
        print("\n\nChecked summary (what your documents back):\n" + terminal_text(checked, newlines=True))
    else:
        print()
    print_sources(ans)
    if ans.notice:
        details = ans.extra.get("details")
        print("\nNote: " + terminal_text(ans.notice) + (f"\n({terminal_text(str(details))})" if details else ""),
              file=sys.stderr)
    return 1 if ans.incomplete else 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Add the `summarize` subcommand."""
    p = sub.add_parser("summarize", parents=[common], help="summarize a whole document (two ids: compare them)",
                       description="Summarize a whole document, citing it: with a model part by part within its "
                                   "context (DOCCHAT_SUMMARY_MAX_CALLS calls at most), without one by quoting its "
                                   "opening and one central sentence of each part. Two or three ids compare them.")
    p.add_argument("doc_ids", nargs="+", metavar="DOC_ID", help="the document's id (from `list`)")
    p.add_argument("--as", dest="shape", choices=SHAPES, default="summary",
                   help="a summary (default), its key points, or its outline (headings with pages)")
    p.add_argument("--model", help="Chat model to use (default: the model of $DOCCHAT_CHAT_MODEL)")
    p.add_argument("--no-llm", action="store_true", help="no language model: quote the document")
    p.set_defaults(func=cmd_summarize)
