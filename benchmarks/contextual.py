"""Contextual passages on and off: chunks embedded and indexed with their document title and section path in front.

Run: .venv/bin/python -m benchmarks.contextual [--json]

Each dataset (XQuAD, PubMedQA; the paraphrased XQuAD questions on the XQuAD library) is ingested twice through the
normal path, once as today and once with rag_core.store.context.PREFIX_CONTEXT on (its own cached library), and
asked with the default retrieval. Splits as in benchmarks/rerank.py; the decision is made on `test`. PubMedQA's titles
are the PubMed ids (on purpose: its questions are often the article's title), so there the prefix is an id only.
"""
from __future__ import annotations

import argparse
import json

from benchmarks.rerank import paraphrased, per_split, xquad_splits
from rag_core.adapters import evaluation as ev
from rag_core.core.config import Settings
from rag_core.service.library import Library
from rag_core.store import context


def run(name: str, on: bool, xsplits: dict[str, str]) -> dict:
    """Recall@1/@5 per split for one dataset, prefix on or off."""
    context.PREFIX_CONTEXT = on
    ds = ev.load_dataset(name)
    settings = ev.cache_settings(ds, Settings(), ev.DEFAULT_CACHE_DIR)
    if on:
        settings = settings.with_overrides(data_dir=settings.library.data_dir.with_name(settings.library.data_dir.name + "-contextual"))
    lib = Library(settings)
    out: dict = {}
    try:
        ev.ingest_dataset(lib, ds)
        sets = [(name, ds)] + ([("paraphrased", paraphrased(ds))] if name == "xquad" else [])
        for label, d in sets:
            out[label] = per_split(label, d, ev.evaluate(lib.store, d, ["zscore"])[0]["zscore"], xsplits)
    finally:
        lib.close()
        context.PREFIX_CONTEXT = False
    return out


def main() -> None:
    """Print the table (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    xsplits = xquad_splits()
    report: dict = {"off": {}, "on": {}}
    for name in ("xquad", "pubmedqa"):
        for mode in ("off", "on"):
            report[mode].update(run(name, mode == "on", xsplits))
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for label in report["off"]:
        for mode in ("off", "on"):
            cells = "  ".join(f"{s} R@1 {f['recall@1']:.4f} R@5 {f['recall@5']:.4f} MRR {f['mrr@10']:.4f}"
                              for s, f in report[mode][label].items())
            print(f"{label:12} prefix {mode:3}  {cells}")


if __name__ == "__main__":
    main()
