"""Reading real manuals without a model: does the quoted reply carry the sentence that answers, and does DocChat
say "not in your documents" for near-topic questions the manuals don't answer?

Six real technical documents shipped with Debian packages (benchmarks/data/manuals/, README.md there lists their
source, package, version and licence) are ingested through the normal path into one library, and every question
goes through the real answer path (rag_core.answer.generation.answer, use_llm=False):
  - benchmarks/data/reading.jsonl: 72 paraphrased questions (12 per document), each with its gold span (a piece of
    the sentence that answers) and its place (document and section);
  - benchmarks/data/reading_unanswerable.jsonl: 30 near-topic questions (5 per document) about the same software
    that the documents do not answer.
Split by document (sorted file names alternate): "tune" (base-passwd, gzip, yq) and "test" (dpkg, libffi, zstd).
Reported per split: the gold span in the quoted reply, in its first quote, false refusals, and near-topic
refusals. See benchmarks/data/reading.md.

Run:  .venv/bin/python -m benchmarks.reading [--json FILE] [--misses] [--model NAME]   (~1 min)
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path

from benchmarks.faithfulness import contains
from rag_core.answer.generation import answer
from rag_core.answer.generation.extractive import EXTRACTIVE_PASSAGES
from rag_core.core.config import Settings
from rag_core.core.models import Answer
from rag_core.ingest.loaders import load_bytes
from rag_core.service.library import Library

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
MANUALS = DATA / "manuals"
ANSWERABLE = DATA / "reading.jsonl"
UNANSWERABLE = DATA / "reading_unanswerable.jsonl"
SPLITS = ("tune", "test")
PASSAGES = EXTRACTIVE_PASSAGES  # the passages quotes are drawn from


def jsonl(path: Path) -> list[dict]:
    """The objects of a JSON-lines file."""
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def manual_files() -> list[Path]:
    """The documents of the set, sorted by name (their order decides the split)."""
    return sorted(p for p in MANUALS.iterdir() if p.is_file() and p.name != "README.md")


def split_of(name: str) -> str:
    """A document's split: sorted file names alternate tune, test."""
    names = [p.name for p in manual_files()]
    return "tune" if names.index(name) % 2 == 0 else "test"


def quotes(a: Answer) -> list[str]:
    """The quoted lines of an extractive answer, in order."""
    return [ln for ln in a.text.splitlines() if ln.lstrip().startswith("- ")]


def ask(lib: Library, settings: Settings, items: list[dict]) -> list[dict]:
    """Answer every item without a model, adding what came back."""
    out = []
    for it in items:
        a = answer(lib, it["question"], settings, use_llm=False)
        lines = quotes(a)
        gold = tuple(it.get("gold", ()))
        out.append({**it, "refused": a.mode == "not_found", "text": a.text, "first": lines[0] if lines else "",
                    "closest": bool(a.extra.get("closest")), "check": a.extra.get("answerability", {}),
                    "cited": sorted({c.passage.chunk.source.title for c in a.citations}),
                    "retrieved": bool(gold) and any(contains(p.chunk.text, gold) for p in a.passages[:PASSAGES]),
                    "in_reply": bool(gold) and contains(a.text, gold),
                    "in_first": bool(gold) and contains(lines[0] if lines else "", gold)})
    return out


def share(xs) -> float | None:
    """Mean of booleans, rounded (None for none)."""
    xs = list(xs)
    return round(sum(xs) / len(xs), 4) if xs else None


def report(ans: list[dict], una: list[dict]) -> dict:
    """The figures per split."""
    out = {}
    for sp in SPLITS:
        a = [r for r in ans if r["split"] == sp]
        u = [r for r in una if r["split"] == sp]
        out[sp] = {"answerable": len(a), "unanswerable": len(u),
                   "gold_in_reply": share(r["in_reply"] for r in a),
                   "gold_in_first_quote": share(r["in_first"] for r in a),
                   "gold_retrieved": share(r["retrieved"] for r in a),
                   "false_refusals": share(r["refused"] for r in a),
                   "near_topic_refusals": share(r["refused"] for r in u),
                   "unanswerable_closest": share(r["closest"] for r in u if not r["refused"])}
    return out


def run(model: str | None = None) -> tuple[dict, list[dict], list[dict]]:
    """Ingest the manuals into a fresh library (embedded with `model`, default the bundled MiniLM) and ask every
    question."""
    ans, una = jsonl(ANSWERABLE), jsonl(UNANSWERABLE)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(ollama_model="").with_overrides(data_dir=Path(tmp) / "data")
        if model:
            settings = settings.with_overrides(embedding_model=model)
        lib = Library(settings)
        try:
            for f in manual_files():
                lib.ingest_document(load_bytes(f.read_bytes(), f.name, settings))
            lib.embedder.wait()
            rows_a, rows_u = ask(lib, settings, ans), ask(lib, settings, una)
        finally:
            lib.close()
    return report(rows_a, rows_u), rows_a, rows_u


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def main() -> None:
    """Run and print the table (and the misses, or write JSON)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", metavar="FILE", help="write the report and every answer to FILE")
    ap.add_argument("--misses", action="store_true", help="print every answerable question whose gold is not "
                                                          "quoted first, and every unanswerable one answered")
    ap.add_argument("--model", metavar="NAME", help="the embedding model (DOCCHAT_EMBEDDING_MODEL value), e.g. "
                                                   "multilingual-e5-small, a new library's default where it installs")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rep, rows_a, rows_u = run(args.model)
    if args.json:
        Path(args.json).write_text(json.dumps({"report": rep, "answerable": rows_a, "unanswerable": rows_u},
                                              indent=1, ensure_ascii=False), encoding="utf-8")
    print("| metric | goal | tune | **test** |\n|---|---|---|---|")
    for label, goal, key in (("gold in the quoted reply", "≥ 90 %", "gold_in_reply"),
                             ("gold in the first quote", "", "gold_in_first_quote"),
                             ("gold in the passages quoted from (top 3)", "", "gold_retrieved"),
                             ("false refusals", "", "false_refusals"),
                             ("near-topic refusals", "≥ 80 %", "near_topic_refusals")):
        print(f"| {label} | {goal} | {_pct(rep['tune'][key])} | {_pct(rep['test'][key])} |")
    print(f"\ntune: {rep['tune']['answerable']} answerable, {rep['tune']['unanswerable']} unanswerable; "
          f"test: {rep['test']['answerable']} answerable, {rep['test']['unanswerable']} unanswerable")
    if args.misses:
        for r in rows_a:
            if not r["in_first"]:
                print(f"\n[{r['split']} {'REPLY' if r['in_reply'] else 'MISS '}] {r['question']}  gold: {r['gold'][0]}"
                      f"\n{r['text']}", file=sys.stderr)
        for r in rows_u:
            if not r["refused"]:
                print(f"\n[{r['split']} ANSWERED] {r['question']} {r['check']}\n{r['text']}", file=sys.stderr)


if __name__ == "__main__":
    main()
