"""The rerank from existing signals (retrieval method `rerank`) against the default `zscore`, per split.

Run: .venv/bin/python -m benchmarks.rerank [--json]
Goals (issue 38): PubMedQA R@5 >= 0.995 and XQuAD R@1 >= 0.97; added latency per question <= 150 ms on 2 cores.

Each dataset goes through the normal ingestion path into its cached library (rag_core.adapters.evaluation, the same
as `python -m rag_core eval`), then every question is asked with both methods. Splits: XQuAD by article as in
benchmarks/data/paraphrased.jsonl (the set the answer figures use), PubMedQA by the first byte of the SHA-256 of the
PubMed id (even: tune). The weights in rag_core.retrieve.rerank were chosen on the tune splits; `test` is the figure.
The paraphrased XQuAD questions (benchmarks/data/paraphrased.jsonl) are asked of the XQuAD library the same way.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re

from rag_core.adapters import evaluation as ev
from rag_core.core.config import Settings
from rag_core.service.library import Library

METHODS = ("zscore", "rerank")


def xquad_splits() -> dict[str, str]:
    """XQuAD document id -> split, from the paraphrased set."""
    out = {}
    for line in (ev.DATA_DIR / "paraphrased.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        out["xquad-" + re.sub(r"[^A-Za-z0-9_-]+", "_", row["title"])] = row["split"]
    return out


def paraphrased(ds: ev.Dataset) -> ev.Dataset:
    """The paraphrased questions, with the gold paragraph of the XQuAD question each rewrites."""
    gold = {q.qid: q for q in ds.queries}
    queries = []
    for line in (ev.DATA_DIR / "paraphrased.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        q = gold[row["id"]]
        queries.append(ev.Query(qid=row["id"], question=row["question"], doc_id=q.doc_id, span=q.span))
    return ev.Dataset("paraphrased", ds.documents, tuple(queries), ds.fingerprint)


def split_of(name: str, q: ev.Query, xsplits: dict[str, str]) -> str:
    """The question's split."""
    if name == "pubmedqa":
        return "tune" if hashlib.sha256(q.qid.encode()).digest()[0] % 2 == 0 else "test"
    return xsplits[str(q.doc_id)]


def per_split(name: str, ds: ev.Dataset, res: ev.MethodResult, xsplits: dict[str, str]) -> dict:
    """n, recall@1/@5 and MRR@10 of one method's ranks on the tune split, the test split and all questions."""
    out = {}
    for split in ("tune", "test", "all"):
        part = ev.MethodResult(res.method, [r for q, r in zip(ds.queries, res.ranks, strict=True)
                                            if split == "all" or split_of(name, q, xsplits) == split])
        out[split] = {"n": len(part.ranks), "recall@1": round(part.recall_at(1), 4),
                      "recall@5": round(part.recall_at(5), 4), "mrr@10": round(part.mrr(10), 4)}
    return out


def figures(name: str, ds: ev.Dataset, store, xsplits: dict[str, str]) -> dict:
    """Recall@1/@5 per method and split, and milliseconds per question."""
    results, _ = ev.evaluate(store, ds, METHODS)
    out: dict = {}
    for m, res in results.items():
        out[m] = {"ms_per_question": round(1000 * res.seconds / len(res.ranks), 2), **per_split(name, ds, res, xsplits)}
    out["added_ms"] = round(out["rerank"]["ms_per_question"] - out["zscore"]["ms_per_question"], 2)
    return out


def main() -> None:
    """Print the table (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    xsplits = xquad_splits()
    report = {}
    for name in ("xquad", "pubmedqa"):
        ds = ev.load_dataset(name)
        lib = Library(ev.cache_settings(ds, Settings(), ev.DEFAULT_CACHE_DIR))
        try:
            ev.ingest_dataset(lib, ds)
            report[name] = figures(name, ds, lib.store, xsplits)
            if name == "xquad":
                report["paraphrased"] = figures("paraphrased", paraphrased(ds), lib.store, xsplits)
        finally:
            lib.close()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name, fig in report.items():
        print(f"{name}: added latency {fig['added_ms']} ms a question")
        for m in METHODS:
            cells = "  ".join(f"{s} (n={fig[m][s]['n']}) R@1 {fig[m][s]['recall@1']:.4f} R@5 {fig[m][s]['recall@5']:.4f}"
                              for s in ("tune", "test", "all"))
            print(f"  {m:7} {cells}")


if __name__ == "__main__":
    main()
