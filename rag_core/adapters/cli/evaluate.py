"""`docchat eval`: measure retrieval quality on a bundled benchmark or on your own questions."""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rag_core.adapters.cli.common import json_text, terminal_text
from rag_core.core.config import Settings

_HELP = """Measure how well DocChat finds the right passage.

  --dataset pubmedqa   1,000 PubMedQA questions over their 1,000 abstracts (bundled)
  --dataset xquad      1,190 XQuAD questions over 48 Wikipedia articles (bundled)
  --dataset FILE.jsonl your own questions, one {"question": ..., "expected": ...} per line, asked of your
                       library; "expected" is a document title or a phrase a retrieved passage must contain

Bundled datasets are ingested through the normal path into their own cached library (first run only)."""


class _Methods:
    """The retrieval methods (rag_core.retrieve.search.METHODS) as argparse `choices`, read when a command line is
    checked or `eval --help` shown: importing retrieval loads the search engine, which no other command's start
    should wait for (issue 28)."""

    def _names(self) -> tuple[str, ...]:
        from rag_core.retrieve.search import METHODS

        return METHODS

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())


def register(sub, common: argparse.ArgumentParser) -> None:
    """Add the `eval` subcommand to the CLI."""
    methods = _Methods()
    p = sub.add_parser("eval", parents=[common], help="measure retrieval quality (Recall@1/@5, MRR@10)",
                       description=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", required=True, help="pubmedqa, xquad or FILE.jsonl")
    p.add_argument("--methods", nargs="+", choices=methods, metavar="METHOD", default=None,
                   help="methods to compare, from %(choices)s (default: all)")
    p.add_argument("--limit", type=int, default=None, help="only the first N questions (and their documents)")
    p.add_argument("--cache-dir", default=None, help="where bundled datasets are ingested (default benchmarks/.cache)")
    p.add_argument("--max-failures", type=int, default=20, help="failures to print (JSON always has all)")
    p.set_defaults(func=cmd_eval)


def _progress(stage: str, done: int, total: int) -> None:
    print(f"\r{stage} {done}/{total}", end="" if done < total else "\n", file=sys.stderr, flush=True)


def cmd_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Run the evaluation and print a table (or JSON)."""
    from rag_core.adapters import evaluation as ev
    from rag_core.retrieve.search import DEFAULT_METHOD, METHODS
    from rag_core.service.library import Library

    try:
        ds = ev.limit_dataset(ev.load_dataset(args.dataset), args.limit)
    except ValueError as e:
        print(json_text({"error": str(e)}, indent=None) if args.json else terminal_text(f"Error: {e}"),
              file=sys.stdout if args.json else sys.stderr)
        return 2
    progress = None if args.json else _progress
    methods = list(dict.fromkeys(args.methods or METHODS))
    if ds.documents:
        cache_dir = Path(args.cache_dir) if args.cache_dir else ev.DEFAULT_CACHE_DIR
        settings = ev.cache_settings(ds, settings, cache_dir)
    lib = Library(settings)
    try:
        if ds.documents:
            t0 = time.perf_counter()
            added = ev.ingest_dataset(lib, ds, progress)
            if added and not args.json:
                print(f"Ingested {added} documents in {time.perf_counter() - t0:.0f} s into {settings.library.data_dir}",
                      file=sys.stderr)
        elif not lib.documents():
            print("Your library is empty: add documents first (docchat ingest FILE...).", file=sys.stderr)
            return 2
        results, failures = ev.evaluate(lib.store, ds, methods, progress, default=DEFAULT_METHOD)
    finally:
        lib.close()
    report = ev.report_json(ds.name, results, failures, DEFAULT_METHOD)
    if args.json:
        print(json_text(report))
        return 0
    _print_table(report, results)
    _print_failures(failures, args.max_failures)
    return 0


def _print_table(report: dict, results) -> None:
    print(f"\n{report['dataset']}: {report['questions']} questions  (default method: {report['default']})")
    print(f"  {'method':<10} {'Recall@1':>9} {'Recall@5':>9} {'MRR@10':>8} {'ms/query':>9}")
    for m, r in report["methods"].items():
        mark = " *" if m == report["default"] else ""
        per_q = 1000 * results[m].seconds / max(1, len(results[m].ranks))
        print(f"  {m:<10} {r['recall@1']:>9.3f} {r['recall@5']:>9.3f} {r['mrr@10']:>8.3f} {per_q:>9.1f}{mark}")


def _print_failures(failures: list[dict], limit: int) -> None:
    if not failures:
        return
    shown = failures[:max(0, limit)]
    print(f"\n{len(failures)} questions where {failures[0]['method']}'s first hit was not ranked 1"
          + (f" (showing {len(shown)}; --max-failures N or --json for all)" if len(shown) < len(failures) else ""))
    for f in shown:
        rank = f"rank {f['rank']}" if f["rank"] else "not in top 10"
        print(f"\n  Q: {terminal_text(f['question'])}\n     expected {terminal_text(str(f['expected']))} — {rank}")
        for i, p in enumerate(f["top"], 1):
            snippet = terminal_text(p["text"][:110])
            print(f"     {i}. {p['score']:>8.3f}  {terminal_text(p['title'])} [{p['char_start']}-{p['char_end']}]  "
                  f"{snippet}…")
