"""Answers without a model: does the quoted answer answer, and does DocChat refuse what the documents can't answer?

Every question goes through the real path (rag_core.answer.generation.answer, use_llm=False) against cached libraries
ingested through the normal path:
  - XQuAD: the 48 English Wikipedia articles, all 1,190 questions. Split by article (alternate titles in sorted
    order) into "tune" (where the weights of rag_core.answer.grounding.quotes and the thresholds of rag_core.answer.grounding.answerability were
    chosen) and "test" (reported, never tuned on).
  - benchmarks/data/unanswerable.jsonl: questions the 48 articles cannot answer (off-topic, near-topic, adversarial),
    split tune/test in the file, asked of the XQuAD library.
  - both again in the words people use (benchmarks/data/paraphrased.jsonl, unanswerable_paraphrased.jsonl: 336
    XQuAD questions and all 252 unanswerable ones reworded; see benchmarks/data/paraphrased.md), reported apart.
  - PubMedQA: 1,000 questions over their 1,000 abstracts (answerable: false refusals only; gold answers are yes/no).
  - the hosted demo's suggested questions (rag_core.demo.answers.SAMPLE_QUESTIONS) over the shared samples (samples/).
Reported: gold answer anywhere in the answer, gold in the first quote, refusals per kind, false refusals, the time of
the answer-choosing steps (quote ranking + evidence check + quoting), replies labelled "closest passages", and a
refusal curve over the off-topic thresholds (rag_core.answer.grounding.answerability.OFF_RELEVANCE / OFF_COSINE), per wording.
The operating point is chosen on the tune split by benchmarks/answer_tuning.py.

Run:  .venv/bin/python -m benchmarks.answers [--limit N] [--pubmedqa-limit N|-1] [--json FILE] [--widen]   (~9 min on 2 cores)
"""
from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.faithfulness import contains, gold_answers
from rag_core.adapters.evaluation import DEFAULT_CACHE_DIR, cache_settings, ingest_dataset, load_pubmedqa, load_xquad
from rag_core.answer.generation import answer
from rag_core.answer.grounding import answerability
from rag_core.core.config import Settings
from rag_core.core.models import Answer
from rag_core.demo.answers import SAMPLE_QUESTIONS
from rag_core.demo.samples import SAMPLES_DIR, sample_document, sample_files
from rag_core.service.library import Library

ROOT = Path(__file__).resolve().parents[1]
UNANSWERABLE = ROOT / "benchmarks" / "data" / "unanswerable.jsonl"
PARAPHRASED = ROOT / "benchmarks" / "data" / "paraphrased.jsonl"  # XQuAD questions as people ask them (same gold)
UNANSWERABLE_PARAPHRASED = ROOT / "benchmarks" / "data" / "unanswerable_paraphrased.jsonl"
WORDINGS = ("original", "paraphrased")
# What a correct answer to each suggested demo question quotes (tests/integration/test_answers.py asks them too).
DEMO_EXPECTED = {
    "What does the Zen of Python say about errors?": "Errors should never pass silently",
    "When was Python first released?": "1991",
    "How many files can I add in the demo?": "up to 10 files",
    "When is my library deleted?": "removed automatically after a period without activity",
}


def quotes(a: Answer) -> list[str]:
    """The quoted lines of an extractive answer, in order."""
    return [ln for ln in a.text.splitlines() if ln.lstrip().startswith("- ")]


def ask_all(lib: Library, settings: Settings, items: list[dict], label: str) -> list[dict]:
    """Answer every item (dicts with "question"), adding what came back."""
    out = []
    for i, it in enumerate(items, 1):
        a = answer(lib, it["question"], settings, use_llm=False)
        t = a.extra.get("timings", {})
        lines = quotes(a)
        out.append({**it, "mode": a.mode, "refused": a.mode == "not_found", "relevance": a.relevance,
                    "first": lines[0] if lines else "", "text": a.text, "notice": a.notice,
                    "check": a.extra.get("answerability", {}), "closest": bool(a.extra.get("closest")),
                    "choose_ms": round(t.get("answerability", 0.0) + t.get("extractive", 0.0), 2),
                    "total_ms": t.get("total")})
        if i % 100 == 0:
            print(f"  {label}: {i}/{len(items)}", file=sys.stderr, flush=True)
    return out


def share(xs) -> float | None:
    """Mean of booleans, rounded (None for none)."""
    xs = list(xs)
    return round(sum(xs) / len(xs), 4) if xs else None


def refused_at(r: dict, min_relevance: float, **thresholds: float) -> bool:
    """Would this answer be refused with these thresholds (rag_core.answer.grounding.answerability's constants, by name), from what
    the check recorded? Mirrors answerability.check."""
    c = r["check"]
    if r["refused"] and not c:  # refused before the check: nothing in scope, or relevance below the setting
        return True
    if r["relevance"] is not None and r["relevance"] < min_relevance:
        return True
    saved = {k: getattr(answerability, k) for k in thresholds}
    try:
        for k, v in thresholds.items():
            setattr(answerability, k, v)
        sig = answerability.Signals(**{k: c.get(k) for k in ("relevance", "cosine", "support", "bridged", "score",
                                                                        "asked")})
        return bool(c.get("lacking_numbers") or (c.get("lacking_names") and not sig.on_topic()) or sig.off_topic())
    finally:
        for k, v in saved.items():
            setattr(answerability, k, v)


# (OFF_RELEVANCE, OFF_COSINE) moved together around the operating point (0.35, 0.35): the off-topic rule's curve
CURVE = ((0.25, 0.25), (0.3, 0.3), (0.35, 0.35), (0.4, 0.4), (0.45, 0.45))


def _figures(a: list[dict], u: dict[str, list[dict]], min_rel: float, curve: bool = True) -> dict:
    """The figures of one wording in one split: answerable rows `a`, unanswerable rows per kind `u`."""
    answered = [r for r in a if not r["refused"]]
    every_u = [r for v in u.values() for r in v]
    return {
        "xquad_questions": len(a),
        "gold_in_answer": share(contains(r["text"], r["gold"]) for r in a),
        "gold_in_first_quote": share(contains(r["first"], r["gold"]) for r in a),
        "gold_in_answer_when_answered": share(contains(r["text"], r["gold"]) for r in answered),
        "gold_in_first_when_answered": share(contains(r["first"], r["gold"]) for r in answered),
        "false_refusal_xquad": share(r["refused"] for r in a),
        "closest_answerable": share(r["closest"] for r in answered),
        "closest_unanswerable": share(r["closest"] for r in every_u if not r["refused"]),
        **{f"refusal_{k}": share(r["refused"] for r in v) for k, v in u.items()},
        "refusal_off_and_near": share(r["refused"] for r in u["off-topic"] + u["near-topic"]),
        "unanswerable_counts": {k: len(v) for k, v in u.items()},
        "refused_by": {reason: sum(1 for r in every_u if r["refused"] and (r["check"].get("reason") or "relevance")
                                   == reason) for reason in ("missing", "off_topic", "relevance")},
        "curve": [{"off": f"{x} / {y}",
                   "refusal_off_topic": share(refused_at(r, min_rel, OFF_RELEVANCE=x, OFF_COSINE=y)
                                              for r in u["off-topic"]),
                   "refusal_near_topic": share(refused_at(r, min_rel, OFF_RELEVANCE=x, OFF_COSINE=y)
                                               for r in u["near-topic"]),
                   "refusal_adversarial": share(refused_at(r, min_rel, OFF_RELEVANCE=x, OFF_COSINE=y)
                                                for r in u["adversarial"]),
                   "false_refusal_xquad": share(refused_at(r, min_rel, OFF_RELEVANCE=x, OFF_COSINE=y) for r in a)}
                  for x, y in CURVE] if curve else [],
    }


def report(xq: list[dict], un: list[dict], pm: list[dict], demo: list[dict], min_rel: float) -> dict:
    """All figures, per split and wording."""
    out: dict = {"operating_point": {k: getattr(answerability, k) for k in (
        "OFF_RELEVANCE", "OFF_COSINE", "OFF_SUPPORT", "ON_TOPIC", "ON_TOPIC_SENTENCE", "MIN_QUOTE_SCORE",
        "MIN_SUPPORT", "DIRECT_COSINE")} | {"min_relevance": min_rel}}
    for split in ("tune", "test"):
        out[split] = {}
        for wording in WORDINGS:
            a = [r for r in xq if r["split"] == split and r["wording"] == wording]
            u = {k: [r for r in un if r["split"] == split and r["kind"] == k and r["wording"] == wording]
                 for k in ("off-topic", "near-topic", "adversarial")}
            out[split][wording] = _figures(a, u, min_rel)
        out[split]["false_refusal_pubmedqa"] = share(r["refused"] for r in pm if r["split"] == split)
    choose = [r["choose_ms"] for r in xq + un + pm]
    if choose:
        out["choose_ms_median"] = round(statistics.median(choose), 2)
        out["choose_ms_p95"] = round(statistics.quantiles(choose, n=20)[18], 2) if len(choose) > 1 else choose[0]
        out["total_ms_median"] = round(statistics.median(r["total_ms"] for r in xq + un + pm), 2)
    out["demo"] = [{"question": r["question"], "first": r["first"][:160], "expected": r["expected"],
                    "ok": r["expected"].lower() in r["first"].lower()} for r in demo]
    return out


def _library(ds, base: Settings) -> Library:
    lib = Library(cache_settings(ds, base, DEFAULT_CACHE_DIR))
    t0 = time.perf_counter()
    added = ingest_dataset(lib, ds)
    if added:
        print(f"ingested {added} {ds.name} documents in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return lib


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def load_sets(limit: int | None = None) -> tuple[list[dict], list[dict]]:
    """The answerable XQuAD questions and the unanswerable ones, each in both wordings (at most `limit` of each)."""
    xds = load_xquad()
    titles = sorted({q.doc_id for q in xds.queries})
    gold = gold_answers()
    split = {q.qid: "tune" if titles.index(q.doc_id) % 2 == 0 else "test" for q in xds.queries}
    xq = [{"id": q.qid, "question": q.question, "gold": gold[q.qid], "split": split[q.qid], "wording": "original"}
          for q in xds.queries][:limit]
    xq += [{"id": p["id"], "question": p["question"], "gold": gold[p["id"]], "split": split[p["id"]],
            "wording": "paraphrased", "style": p["style"]} for p in _jsonl(PARAPHRASED)][:limit]
    un = [{**o, "wording": "original"} for o in _jsonl(UNANSWERABLE)][:limit]
    un += [{**o, "wording": "paraphrased"} for o in _jsonl(UNANSWERABLE_PARAPHRASED)][:limit]
    return xq, un


def main() -> None:
    """Run everything and print the tables (or write JSON)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=0, help="at most N questions per dataset (0: all)")
    ap.add_argument("--pubmedqa-limit", type=int, default=0, help="at most N PubMedQA questions (0: as --limit; "
                                                                   "-1: none)")
    ap.add_argument("--json", metavar="FILE", help="write the report and every answer to FILE")
    ap.add_argument("--widen", action="store_true", help="the small-to-large read on (rag_core/retrieve/widen.py)")
    args = ap.parse_args()
    if args.widen:
        from rag_core.retrieve import widen
        widen.WIDEN_READ = True
    logging.basicConfig(level=logging.WARNING)
    base = Settings(ollama_model="")
    lim = args.limit or None

    xds = load_xquad()
    xq, un = load_sets(lim)
    pds = load_pubmedqa()
    pm = [{"id": q.qid, "question": q.question, "split": "tune" if i % 2 == 0 else "test"}
          for i, q in enumerate(pds.queries)][:args.pubmedqa_limit or lim]
    if args.pubmedqa_limit < 0:
        pm = []

    lib = _library(xds, base)
    try:
        settings = lib.settings.with_overrides(ollama_model="")
        lib.embedder.wait()
        xq_rows = ask_all(lib, settings, xq, "xquad")
        un_rows = ask_all(lib, settings, un, "unanswerable")
    finally:
        lib.close()
    pm_rows: list[dict] = []
    if pm:
        lib = _library(pds, base)
        try:
            pm_rows = ask_all(lib, lib.settings.with_overrides(ollama_model=""), pm, "pubmedqa")
        finally:
            lib.close()
    with tempfile.TemporaryDirectory() as tmp:
        demo_settings = base.with_overrides(data_dir=Path(tmp) / "data")
        lib = Library(demo_settings)
        try:
            for f in sample_files(SAMPLES_DIR):
                lib.ingest_document(sample_document(f.read_bytes(), f.name, demo_settings))
            demo_rows = ask_all(lib, demo_settings, [{"question": q, "expected": DEMO_EXPECTED[q]}
                                                     for q in SAMPLE_QUESTIONS], "demo")
        finally:
            lib.close()

    rep = report(xq_rows, un_rows, pm_rows, demo_rows, base.retrieval.min_relevance)
    rep["command"] = " ".join(sys.argv)
    if args.json:
        Path(args.json).write_text(json.dumps({"report": rep, "xquad": xq_rows, "unanswerable": un_rows,
                                               "pubmedqa": pm_rows, "demo": demo_rows}, indent=1,
                                              ensure_ascii=False, default=str), encoding="utf-8")
    print_report(rep)


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


ROWS = (("gold answer in the reply", "≥ 95 % / ≥ 85 %", "gold_in_answer"),
        ("gold answer in the first quote", "– / ≥ 65 %", "gold_in_first_quote"),
        ("… of the answered questions: in the reply", "", "gold_in_answer_when_answered"),
        ("… of the answered questions: first quote", "", "gold_in_first_when_answered"),
        ("false refusals (XQuAD)", "≤ 5 %", "false_refusal_xquad"),
        ("answered, labelled 'closest passages'", "", "closest_answerable"),
        ("refusals: off-topic", "≥ 85 %", "refusal_off-topic"),
        ("refusals: near-topic", "≥ 20 %", "refusal_near-topic"),
        ("refusals: adversarial", "≥ 1.7 %", "refusal_adversarial"),
        ("unanswerable answered, labelled 'closest passages'", "", "closest_unanswerable"))


def print_report(rep: dict) -> None:
    """The markdown tables of docs/faithfulness.md."""
    print(f"command: {rep['command']}\noperating point: {rep['operating_point']}\n")
    print("| metric | goal (original / paraphrased) | tune original | tune paraphrased | **test original** | "
          "**test paraphrased** |\n|---|---|---|---|---|---|")
    for label, goal, key in ROWS:
        cells = " | ".join(_pct(rep[sp][w][key]) for sp in ("tune", "test") for w in WORDINGS)
        print(f"| {label} | {goal} | {cells} |")
    print(f"| false refusals (PubMedQA) | ≤ 5 % | {_pct(rep['tune']['false_refusal_pubmedqa'])} | | "
          f"{_pct(rep['test']['false_refusal_pubmedqa'])} | |")
    for sp in ("tune", "test"):
        for w in WORDINGS:
            f = rep[sp][w]
            print(f"\n{sp} {w}: {f['xquad_questions']} answerable, unanswerable {f['unanswerable_counts']}, "
                  f"refused by {f['refused_by']}")
    if "choose_ms_median" in rep:
        print(f"\nanswer-choosing time (quote ranking + check + quoting): median {rep['choose_ms_median']} ms, "
              f"p95 {rep['choose_ms_p95']} ms; whole answer median {rep['total_ms_median']} ms\n")
    for sp in ("tune", "test"):
        for w in WORDINGS:
            print(f"refusal curve over OFF_RELEVANCE / OFF_COSINE ({sp}, {w}):\n| thresholds | refused off-topic | "
                  "refused near-topic | refused adversarial | false refusals |\n|---|---|---|---|---|")
            for c in rep[sp][w]["curve"]:
                print(f"| {c['off']} | {_pct(c['refusal_off_topic'])} | {_pct(c['refusal_near_topic'])} | "
                      f"{_pct(c['refusal_adversarial'])} | {_pct(c['false_refusal_xquad'])} |")
            print()
    print("demo questions:")
    for d in rep["demo"]:
        print(f"  {'OK  ' if d['ok'] else 'MISS'} {d['question']} -> {d['first']}")


if __name__ == "__main__":
    main()
