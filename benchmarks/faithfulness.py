"""Faithfulness of answers and their citations, for the extractive mode and with a real model (SmolLM2-135M).

Corpus: the 48 XQuAD articles, ingested through the normal path (rag_core.adapters.evaluation.ingest_dataset →
Library.ingest_document) into a cached library under benchmarks/.cache/faithfulness/.
Questions: a seeded sample of XQuAD questions (answerable, with gold answers) and benchmarks/data/unanswerable.jsonl
(written for this benchmark: their answers are in none of the 48 articles).
Every answer goes through rag_core.answer.grounding.evidence.verify_answer. Reported per mode:
  gold        answer contains a gold answer (answerable questions)
  support     shown citations whose passage holds the evidence: of the verified/matched citations backing a sentence
              that states a gold answer, the share whose passage contains that gold answer (baseline: the same share
              for the citations the model wrote, before verification)
  marked      shown citations that are verified, unsupported or matched (never an unchecked plain source)
  ≥1 verified answers (answerable, not refused) with at least one verified citation
  refusals    on unanswerable questions, and false refusals on answerable ones
  time        seconds per question (answer + verification), and the verification alone
--calibrate compares the evidence signals (lexical coverage, embedding cosine, both) on claims built from XQuAD.

Run:  .venv/bin/python -m benchmarks.faithfulness --limit 40 --unanswerable-limit 30 [--modes extractive,llm] [--json]
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from rag_core.adapters.evaluation import DATASET_FILES, cache_settings, ingest_dataset, load_xquad
from rag_core.answer.grounding import evidence as ev
from rag_core.core.config import Settings
from rag_core.core.models import Answer
from rag_core.retrieve.search import retrieve
from rag_core.service.library import Library

ROOT = Path(__file__).resolve().parents[1]

CACHE = ROOT / "benchmarks" / ".cache"  # the same cached XQuAD library as benchmarks/answers.py and `docchat eval`
UNANSWERABLE = ROOT / "benchmarks" / "data" / "unanswerable.jsonl"
SEED = 7
ANSWER_TOKENS = 60  # num_predict for the real model: enough for one or two sentences
COVERAGE_GATES = (0.5, 0.75)


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Item:
    """One benchmark question; `gold` is empty for unanswerable ones."""

    qid: str
    question: str
    gold: tuple[str, ...] = ()

    @property
    def answerable(self) -> bool:
        return bool(self.gold)


def gold_answers() -> dict[str, tuple[str, ...]]:
    """XQuAD question id → its gold answer texts."""
    raw = json.loads(DATASET_FILES["xquad"].read_text(encoding="utf-8"))
    return {qa["id"]: tuple(dict.fromkeys(a["text"].strip() for a in qa["answers"]))
            for art in raw["data"] for p in art["paragraphs"] for qa in p["qas"]}


def sample_items(ds, limit: int, unanswerable_limit: int) -> list[Item]:
    """A seeded sample of answerable XQuAD questions followed by the first unanswerable ones."""
    gold = gold_answers()
    queries = random.Random(SEED).sample(list(ds.queries), min(limit, len(ds.queries)))
    items = [Item(q.qid, q.question, gold[q.qid]) for q in queries]
    lines = [json.loads(ln) for ln in UNANSWERABLE.read_text(encoding="utf-8").splitlines() if ln.strip()]
    items += [Item(o["id"], o["question"]) for o in lines[:unanswerable_limit]]
    return items


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def contains(text: str, golds: tuple[str, ...]) -> bool:
    """Does `text` state one of the gold answers (case, punctuation and spacing ignored)?"""
    t = f" {_norm(text)} "
    return any(f" {_norm(g)} " in t for g in golds if _norm(g))


# --------------------------------------------------------------------------- scoring one answer
@dataclass
class Row:
    """What one question produced."""

    item: Item
    answer: Answer
    raw: Answer
    seconds: float
    verify_ms: float
    by_method: dict[str, Answer] = field(default_factory=dict)

    @property
    def refused(self) -> bool:
        return self.answer.mode == "not_found"

    @property
    def withheld(self) -> bool:
        """A model answer none of whose sentences was backed, replaced by the closest quotes."""
        return "withheld_text" in self.answer.extra

    def citation_support(self, answer: Answer, statuses: tuple[str, ...]) -> list[tuple[bool, object]]:
        """(passage holds the gold answer, citation) for citations with these statuses backing a gold sentence."""
        out = []
        for c in answer.citations:
            if c.status not in statuses:
                continue
            spans = c.answer_spans or tuple((s.start, s.end) for s in answer.sentences if c.n in s.cited)
            if any(contains(answer.text[s:e], self.item.gold) for s, e in spans):
                out.append((contains(c.passage.chunk.text, self.item.gold), c))
        return out

    def raw_support(self) -> list[bool]:
        """Baseline: the citations as written (before verification) in sentences stating a gold answer."""
        out = []
        for (s, e), numbers in ev.answer_sentences(self.raw.text):
            if not contains(self.raw.text[s:e], self.item.gold):
                continue
            cited = {c.n: c for c in self.raw.citations}
            out += [contains(cited[n].passage.chunk.text, self.item.gold) for n in numbers if n in cited]
        return out


def summarise(rows: list[Row]) -> dict:
    """The reported figures for one mode."""
    ans = [r for r in rows if r.item.answerable]
    una = [r for r in rows if not r.item.answerable]
    shown = [c for r in rows if not r.refused for c in r.answer.citations]
    marked = sum(c.status in (ev.VERIFIED, ev.UNSUPPORTED, ev.MATCHED) for c in shown)
    support = [ok for r in ans for ok, _ in r.citation_support(r.answer, (ev.VERIFIED, ev.MATCHED))]
    support_verified = [ok for r in ans for ok, _ in r.citation_support(r.answer, (ev.VERIFIED,))]
    raw = [ok for r in ans for ok in r.raw_support()]
    answered = [r for r in ans if not r.refused]
    with_verified = sum(any(c.status == ev.VERIFIED for c in r.answer.citations) for r in answered)
    with_backed = sum(any(c.status in (ev.VERIFIED, ev.MATCHED) for c in r.answer.citations) for r in answered)
    # A stricter policy the app could adopt: withhold an answer none of whose sentences any passage backs.
    gate = [r.refused or not any(s.status in (ev.VERIFIED, ev.MATCHED) for s in r.answer.sentences) for r in rows]
    # ... or whose evidence covers less than this share of the question's content words.
    cover = {t: [r.refused or (r.answer.extra.get("evidence", {}).get("question_coverage") or 0.0) < t
                 for r in rows] for t in COVERAGE_GATES}
    times = [r.seconds for r in rows]

    def share(xs) -> float | None:
        xs = list(xs)
        return round(sum(xs) / len(xs), 4) if xs else None

    return {
        "answerable": len(ans), "unanswerable": len(una),
        "gold": share(contains(r.answer.text, r.item.gold) and not r.refused for r in ans),
        "support": share(support), "support_n": len(support),
        "support_verified_only": share(support_verified), "support_verified_n": len(support_verified),
        "support_raw_baseline": share(raw), "support_raw_n": len(raw),
        "citations_shown": len(shown), "marked": share([True] * marked + [False] * (len(shown) - marked)),
        "status_counts": {s: sum(c.status == s for c in shown) for s in (ev.VERIFIED, ev.UNSUPPORTED, ev.MATCHED)},
        "answers_with_verified": share([True] * with_verified + [False] * (len(answered) - with_verified)),
        "answers_with_verified_or_matched": share([True] * with_backed + [False] * (len(answered) - with_backed)),
        "refusal": share(r.refused for r in una), "false_refusal": share(r.refused for r in ans),
        "withheld_unanswerable": share(r.withheld for r in una), "withheld_answerable": share(r.withheld for r in ans),
        "refused_or_withheld_unanswerable": share(r.refused or r.withheld for r in una),
        "gold_when_withheld": share(contains(r.answer.text, r.item.gold) for r in ans if r.withheld),
        "refusal_with_gate": share(g for g, r in zip(gate, rows) if not r.item.answerable),
        "false_refusal_with_gate": share(g for g, r in zip(gate, rows) if r.item.answerable),
        **{f"refusal_coverage_{t}": share(g for g, r in zip(cover[t], rows) if not r.item.answerable)
           for t in COVERAGE_GATES},
        **{f"false_refusal_coverage_{t}": share(g for g, r in zip(cover[t], rows) if r.item.answerable)
           for t in COVERAGE_GATES},
        "seconds_median": round(statistics.median(times), 2) if times else None,
        "seconds_mean": round(statistics.fmean(times), 2) if times else None,
        "verify_ms_median": round(statistics.median(r.verify_ms for r in rows), 1) if rows else None,
    }


def method_comparison(rows: list[Row]) -> dict:
    """On the same answers: how each evidence signal would have judged the citations (support precision, count)."""
    out = {}
    for method in ev.METHODS:
        ok = [x for r in rows if r.item.answerable and method in r.by_method
              for x, _ in r.citation_support(r.by_method[method], (ev.VERIFIED, ev.MATCHED))]
        shown = [c for r in rows if method in r.by_method for c in r.by_method[method].citations]
        out[method] = {"support": round(sum(ok) / len(ok), 4) if ok else None, "support_n": len(ok),
                       "verified_or_matched": sum(c.status in (ev.VERIFIED, ev.MATCHED) for c in shown),
                       "unsupported": sum(c.status == ev.UNSUPPORTED for c in shown)}
    return out


def failures(rows: list[Row]) -> list[dict]:
    """Per-question failures against the goals."""
    out = []
    for r in rows:
        a, why = r.answer, []
        if r.item.answerable:
            if r.refused:
                why.append("false refusal")
            elif not contains(a.text, r.item.gold):
                why.append("gold answer missing")
            why += [f"citation [{c.n}] {c.status} but its passage lacks the gold answer"
                    for ok, c in r.citation_support(a, (ev.VERIFIED, ev.MATCHED)) if not ok]
        elif not r.refused:
            why.append("answered an unanswerable question")
        if why:
            out.append({"id": r.item.qid, "question": r.item.question, "gold": list(r.item.gold), "why": why,
                        "answer": a.text[:300], "relevance": a.relevance, "mode": a.mode,
                        "question_coverage": a.extra.get("evidence", {}).get("question_coverage"),
                        "citations": [(c.n, c.status, c.support) for c in a.citations],
                        "sentences": [(s.status, a.text[s.start:s.end][:80]) for s in a.sentences]})
    return out


# --------------------------------------------------------------------------- running
def run_mode(lib: Library, settings: Settings, items: list[Item], use_llm: bool, compare: bool,
             progress: bool) -> list[Row]:
    """Ask every question in one mode; verify each answer (and, with `compare`, with every method)."""
    from rag_core.answer.generation import answer as ask

    rows = []
    for i, item in enumerate(items, 1):
        t0 = time.perf_counter()
        raw = ask(lib, item.question, settings, use_llm=use_llm)
        t1 = time.perf_counter()
        checked = ev.verify_answer(raw, lib.embedder)
        t2 = time.perf_counter()
        row = Row(item, checked, raw, t2 - t0, (t2 - t1) * 1000)
        if compare:
            row.by_method = {m: checked if m == "combined" else ev.verify_answer(raw, lib.embedder, method=m)
                             for m in ev.METHODS}
        rows.append(row)
        if progress:
            print(f"  [{'llm' if use_llm else 'ext'} {i}/{len(items)}] {row.seconds:5.1f}s {checked.mode:10} "
                  f"{item.qid}: {checked.text[:70]!r}", file=sys.stderr, flush=True)
    return rows


def calibrate(lib: Library, ds, n: int) -> dict:
    """Claims built from XQuAD: "<question> <gold answer>" against a passage holding the answer (should be backed),
    the same claim against a top-ranked passage without it (should not), and the claim with another answer of the
    same article swapped in (should not). Precision / recall / accuracy per evidence signal."""
    gold = gold_answers()
    rng = random.Random(SEED + 1)
    by_doc: dict[str, list[str]] = {}
    for q in ds.queries:
        by_doc.setdefault(q.doc_id, []).extend(gold[q.qid][:1])
    cases = []  # (claim, passage text, expected)
    for q in rng.sample(list(ds.queries), min(n, len(ds.queries))):
        answer = gold[q.qid][0]
        passages = retrieve(lib.store, q.question, k=5)
        pos = next((p for p in passages if contains(p.chunk.text, (answer,))), None)
        neg = next((p for p in passages if not contains(p.chunk.text, (answer,))), None)
        others = [a for a in by_doc[q.doc_id] if _norm(a) != _norm(answer)
                  and pos is not None and not contains(pos.chunk.text, (a,))]
        claim = f"{q.question.rstrip(' ?')}: {answer}."
        if pos is not None:
            cases.append((claim, pos.chunk.text, True, q.question))
            if others:
                cases.append((f"{q.question.rstrip(' ?')}: {rng.choice(others)}.", pos.chunk.text, False, q.question))
        if neg is not None:
            cases.append((claim, neg.chunk.text, False, q.question))
    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    evid = [ev.find_evidence([c], [p], lib.embedder, question=qq)[0][0] for c, p, _, qq in cases]
    seconds = time.perf_counter() - t0
    for method in ev.METHODS:
        pred = [e is not None and ev.decide(e.coverage, e.cosine, e.keys_ok,
                                            len(ev.content_terms(c).words), method, e.novel)
                for e, (c, _, _, _) in zip(evid, cases)]
        truth = [t for _, _, t, _ in cases]
        tp = sum(p and t for p, t in zip(pred, truth))
        fp = sum(p and not t for p, t in zip(pred, truth))
        fn = sum(t and not p for p, t in zip(pred, truth))
        results[method] = {"precision": round(tp / (tp + fp), 4) if tp + fp else None,
                           "recall": round(tp / (tp + fn), 4) if tp + fn else None,
                           "accuracy": round(sum(p == t for p, t in zip(pred, truth)) / len(truth), 4)}
    return {"cases": len(cases), "positives": sum(t for _, _, t, _ in cases),
            "ms_per_pair": round(seconds * 1000 / max(1, len(cases)), 1), "methods": results}


def open_library(base: Settings) -> tuple[Library, object, Settings]:
    """The cached XQuAD library (ingested on first use)."""
    ds = load_xquad()
    settings = cache_settings(ds, base, CACHE)
    lib = Library(settings)
    t0 = time.perf_counter()
    added = ingest_dataset(lib, ds)
    if added:
        print(f"ingested {added} articles in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return lib, ds, settings


def _pct(x) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def print_table(report: dict) -> None:
    """The markdown table of docs/faithfulness.md."""
    modes = report["modes"]
    print("| metric | goal | " + " | ".join(modes) + " |")
    print("|---|---|" + "---|" * len(modes))
    lines = [
        ("answer contains the gold answer", "", "gold", _pct),
        ("shown citations verified or explicitly marked", "100 %", "marked", _pct),
        ("verified/matched citations whose passage holds the evidence", "≥ 90 %", "support", _pct),
        ("… verified only", "", "support_verified_only", _pct),
        ("… baseline: citations as the model wrote them", "", "support_raw_baseline", _pct),
        ("answers with ≥ 1 verified citation", "", "answers_with_verified", _pct),
        ("answers with ≥ 1 verified or matched citation", "", "answers_with_verified_or_matched", _pct),
        ("refusals on unanswerable", "≥ 90 %", "refusal", _pct),
        ("false refusals on answerable", "≤ 10 %", "false_refusal", _pct),
        ("model answer withheld (quotes shown instead): unanswerable", "", "withheld_unanswerable", _pct),
        ("… answerable (the cost)", "", "withheld_answerable", _pct),
        ("… gold answer in the quotes shown instead", "", "gold_when_withheld", _pct),
        ("refused or withheld on unanswerable", "", "refused_or_withheld_unanswerable", _pct),
        ("refusals if unbacked answers were withheld", "", "refusal_with_gate", _pct),
        ("false refusals with that gate", "", "false_refusal_with_gate", _pct),
        *[(f"refusals if evidence covers < {t:.0%} of the question", "", f"refusal_coverage_{t}", _pct)
          for t in COVERAGE_GATES],
        *[(f"false refusals with that gate ({t:.0%})", "", f"false_refusal_coverage_{t}", _pct)
          for t in COVERAGE_GATES],
        ("seconds per question (median)", "", "seconds_median", str),
        ("verification ms (median)", "", "verify_ms_median", str),
    ]
    for label, goal, key, fmt in lines:
        print(f"| {label} | {goal} | " + " | ".join(fmt(m[key]) for m in modes.values()) + " |")
    print("\ncitation statuses: " + "; ".join(f"{k}: {v['status_counts']}" for k, v in modes.items()))
    print("support samples: " + "; ".join(f"{k}: {v['support_n']} (raw {v['support_raw_n']})"
                                          for k, v in modes.items()))


def main() -> None:
    """Run the benchmark and print the table (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=40, help="answerable XQuAD questions (seeded sample)")
    ap.add_argument("--unanswerable-limit", type=int, default=30)
    ap.add_argument("--modes", default="extractive,llm", help="comma list of extractive, llm")
    ap.add_argument("--k", type=int, default=3, help="passages per question (top_k)")
    ap.add_argument("--calibrate", type=int, default=0, metavar="N", help="also compare signals on N XQuAD claims")
    ap.add_argument("--json", metavar="FILE", help="write the full report (with failures) to FILE")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    base = Settings(top_k=args.k, answer_tokens=ANSWER_TOKENS, llm_timeout_s=900)
    lib, ds, settings = open_library(base)
    items = sample_items(ds, args.limit, args.unanswerable_limit)
    report: dict = {"command": " ".join(sys.argv), "k": args.k, "questions": len(items), "modes": {},
                    "methods": {}, "failures": {}}
    try:
        if args.calibrate:
            report["calibration"] = calibrate(lib, ds, args.calibrate)
        for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
            if mode == "quotes":
                rows = run_mode(lib, settings, items, False, True, not args.quiet)
            elif mode == "llm":
                from tests.llm_server import LLMServer

                t0 = time.perf_counter()
                with LLMServer() as srv:
                    report["llm_load_s"] = round(time.perf_counter() - t0, 1)
                    llm_settings = settings.with_overrides(ollama_host=srv.url, ollama_model=srv.model_name)
                    rows = run_mode(lib, llm_settings, items, True, True, not args.quiet)
                    gens = srv.generations
                    report["llm_tokens_per_s"] = round(sum(g.eval_count for g in gens) /
                                                       max(1e-9, sum(g.seconds for g in gens)), 1)
            else:
                raise SystemExit(f"unknown mode {mode!r}")
            report["modes"][mode] = summarise(rows)
            report["methods"][mode] = method_comparison(rows)
            report["failures"][mode] = failures(rows)
    finally:
        lib.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    print(f"command: {report['command']}")
    print_table(report)
    print("\nevidence signals on the same answers (support / verified+matched / unsupported):")
    for mode, methods in report["methods"].items():
        print(f"  {mode}: " + "; ".join(f"{m} {_pct(v['support'])} n={v['support_n']} "
                                        f"{v['verified_or_matched']}/{v['unsupported']}" for m, v in methods.items()))
    if "calibration" in report:
        cal = report["calibration"]
        print(f"\ncalibration on {cal['cases']} XQuAD claims ({cal['positives']} backed), {cal['ms_per_pair']} ms/pair:")
        for m, v in cal["methods"].items():
            print(f"  {m:10} precision {_pct(v['precision'])}  recall {_pct(v['recall'])}  "
                  f"accuracy {_pct(v['accuracy'])}")


if __name__ == "__main__":
    main()
