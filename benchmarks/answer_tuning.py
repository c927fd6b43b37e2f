"""Choose the weights of rag_core.answer.grounding.quotes and the thresholds of rag_core.answer.grounding.answerability on the tune split of both
wordings at once, by replaying the real answer path with its slow parts cached.

Every question of benchmarks/answers.py (XQuAD and its paraphrases, the unanswerable set and its paraphrases) is
answered once through rag_core.answer.generation.answer (no model); the query vectors, retrieved passages, library phrase
searches and sentence embeddings are kept, so each point of a grid replays the whole decision — ranking, the evidence
check, quoting — in seconds. Chosen (thresholds, weights): the point with the fewest false refusals, then the most gold answers
in the reply and in the first quote (both wordings), among those whose false refusals stay at most MAX_FALSE and
whose near- and off-topic refusals reach MIN_NEAR and MIN_OFF on each wording; then the one refusing least. Chosen (direct): the "closest passages" label on the most
unanswerable questions while at most MAX_CLOSEST of the answerable ones get it.

Run:  .venv/bin/python -m benchmarks.answer_tuning [--split tune] [--grid thresholds|weights]
"""
from __future__ import annotations

import argparse
import functools
import importlib
import itertools
import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.answers import WORDINGS, _figures, _library, load_sets, refused_at, share
from rag_core.adapters.evaluation import load_xquad
from rag_core.answer.generation import extractive
from rag_core.answer.generation.answer import answer
from rag_core.answer.grounding import answerability, quotes
from rag_core.core.config import Settings

answer_module = importlib.import_module("rag_core.answer.generation.steps")  # where the answer steps call them

MAX_FALSE = 0.04  # false refusals allowed on the tune split, per wording (the goal is 5 %: a margin for the test)
MIN_NEAR = 0.2  # near-topic refusals on the original wording before this issue (test split): no regression
MIN_OFF = 0.9  # off-topic refusals: the goal 85 % plus a margin (one tune question is 3.6 points; at 0.85 the test missed)
MAX_CLOSEST = 0.1  # answerable questions whose reply may be labelled "closest passages", per wording
GRIDS: dict[str, dict[tuple[Any, str], tuple[float, ...]]] = {
    "thresholds": {
        (answerability, "OFF_RELEVANCE"): (0.3, 0.35, 0.38, 0.4, 0.45),
        (answerability, "OFF_COSINE"): (0.3, 0.35, 0.4, 0.45, 0.5),
        (answerability, "OFF_SUPPORT"): (0.34, 0.5, 0.67),
        (answerability, "ON_TOPIC"): (0.5, 0.55),
        (answerability, "ON_TOPIC_SENTENCE"): (0.5, 0.55, 1.01),
    },
    "direct": {
        (answerability, "MIN_SUPPORT"): (0.2, 0.3, 0.4),
        (answerability, "MIN_ASKED"): (0.0, 0.2, 0.34, 0.5),
        (answerability, "MIN_QUOTE_SCORE"): (1.5, 1.75, 2.0, 2.25),
        (answerability, "DIRECT_COSINE"): (0.5, 0.6, 0.7, 1.01),
    },
    "weights": {
        (quotes, "W_DENSE"): (1.0, 2.0, 3.0),
        (quotes, "DENSE_CONTEXT"): (True, False),
        (extractive, "EXTRACTIVE_SENTENCES"): (3, 4),
        (extractive, "EXTRACTIVE_MARGIN"): (1.5, 2.5),
    },
}


class CachedEmbedder:
    """The library's embedder with a cache of every text it has encoded (replays encode nothing twice)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.cache: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        """Vectors from the cache, encoding only new texts (in one batch)."""
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            self.cache.update(zip(new, self.inner.encode(new), strict=True))
        return np.stack([self.cache[t] for t in texts]) if texts else self.inner.encode([])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _memo(fn: Callable[..., Any], key: Callable[..., Any]) -> Callable[..., Any]:
    cache: dict[Any, Any] = {}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        k = key(*args, **kwargs)
        if k not in cache:
            cache[k] = fn(*args, **kwargs)
        return cache[k]
    return wrapper


@contextmanager
def cached_path(lib: Any) -> Iterator[None]:
    """Cache the slow steps of the answer path: query vectors, retrieval, phrase searches, sentence vectors."""
    saved = {n: getattr(answer_module, n) for n in ("embed_queries", "retrieve_scored", "phrase_in_library")}
    answer_module.embed_queries = _memo(saved["embed_queries"], lambda store, qs: tuple(qs))  # type: ignore[assignment]
    answer_module.retrieve_scored = _memo(  # type: ignore[assignment]
        saved["retrieve_scored"], lambda store, q, k, doc_ids=None, owners=None, **kw: (q, k))
    answer_module.phrase_in_library = _memo(  # type: ignore[assignment]
        saved["phrase_in_library"], lambda store, phrase, doc_ids=None, owners=None: phrase)
    inner = lib.embedder
    lib.embedder = CachedEmbedder(inner)
    try:
        yield
    finally:
        lib.embedder = inner
        for n, f in saved.items():
            setattr(answer_module, n, f)


def replay(lib: Any, settings: Settings, items: list[dict]) -> list[dict]:
    """Answer every item through the (cached) real path; the rows benchmarks.answers reports on."""
    out = []
    for it in items:
        a = answer(lib, it["question"], settings, use_llm=False)
        lines = [ln for ln in a.text.splitlines() if ln.lstrip().startswith("- ")]
        out.append({**it, "refused": a.mode == "not_found", "relevance": a.relevance, "text": a.text,
                    "first": lines[0] if lines else "", "check": a.extra.get("answerability", {}),
                    "closest": bool(a.extra.get("closest"))})
    return out


@contextmanager
def settings_at(point: dict[tuple[Any, str], float]) -> Iterator[None]:
    """Set module constants for the duration."""
    saved = {k: getattr(*k) for k in point}
    try:
        for (mod, name), v in point.items():
            setattr(mod, name, v)
        yield
    finally:
        for (mod, name), v in saved.items():
            setattr(mod, name, v)


def _figures_of(rows: list[dict], min_rel: float, thresholds: dict[str, float] | None = None) -> dict[str, dict]:
    """benchmarks.answers' figures per wording; with `thresholds`, refusals as answerability would decide at them."""
    if thresholds is not None:
        rows = [{**r, "refused": refused_at(r, min_rel, **thresholds)} for r in rows]
        rows = [{**r, "text": "" if r["refused"] else r["text"], "first": "" if r["refused"] else r["first"]}
                for r in rows]
    out = {}
    for w in WORDINGS:
        u = {k: [r for r in rows if r.get("kind") == k and r["wording"] == w]
             for k in ("off-topic", "near-topic", "adversarial")}
        out[w] = _figures([r for r in rows if "gold" in r and r["wording"] == w], u, min_rel, curve=False)
    return out


def _closest_of(rows: list[dict], thresholds: dict[str, float]) -> dict[str, dict]:
    """Per wording: the share of answered questions whose reply would be labelled "closest passages"."""
    out: dict[str, dict] = {}
    with settings_at({(answerability, k): v for k, v in thresholds.items()}):
        for w in WORDINGS:
            def closest(r: dict) -> bool:
                c = r["check"]
                return not answerability.Signals(**{k: c.get(k) for k in (
                    "relevance", "cosine", "support", "bridged", "score", "asked")}).direct()
            answered = [r for r in rows if r["wording"] == w and not r["refused"] and r["check"]]
            out[w] = {"closest_answerable": share(closest(r) for r in answered if "gold" in r),
                      "closest_unanswerable": share(closest(r) for r in answered if "gold" not in r)}
    return out


def _closest_score(figs: dict[str, dict]) -> tuple[bool, float, float, float]:
    """(feasible: at most MAX_CLOSEST of the answerable labelled, unanswerable labelled, -answerable labelled, 0)."""
    worst = max(figs[w]["closest_answerable"] or 0.0 for w in WORDINGS)
    labelled = sum(figs[w]["closest_unanswerable"] or 0.0 for w in WORDINGS) / len(WORDINGS)
    return worst <= MAX_CLOSEST, round(labelled, 4), -round(worst, 4), 0.0


def score(figs: dict[str, dict]) -> tuple[bool, float, float, float]:
    """(feasible, fewest false refusals, gold in the reply and in the first quote, fewest off-topic refusals), means
    over both wordings: higher is better. A false "not found" is the worst failure, so among points that meet the
    refusal goals the one refusing least wins: questions worded unlike the tune set's land on the answering side.
    Feasible: false refusals at most MAX_FALSE, near- and off-topic refusals at least MIN_NEAR and MIN_OFF, on
    each wording."""
    def worst(key: str, low: bool = True) -> float:
        vals = [figs[w][key] or 0.0 for w in WORDINGS]
        return min(vals) if low else max(vals)

    def mean(key: str) -> float:
        return round(sum(figs[w][key] or 0.0 for w in WORDINGS) / len(WORDINGS), 4)

    feasible = (worst("false_refusal_xquad", low=False) <= MAX_FALSE and worst("refusal_near-topic") >= MIN_NEAR
                and worst("refusal_off-topic") >= MIN_OFF)
    both = round((mean("gold_in_answer") + mean("gold_in_first_quote")) / 2, 4)
    return feasible, -mean("false_refusal_xquad"), both, -mean("refusal_off-topic")


def main() -> None:
    """Replay every point of a grid on one split and print the best."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--split", default="tune", choices=("tune", "test"))
    ap.add_argument("--grid", default="thresholds", choices=tuple(GRIDS))
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--rows", type=Path, help="thresholds, direct: read the replayed answers from this file if it exists, "
                                              "else write them there")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    base = Settings(ollama_model="")
    xq, un = load_sets()
    xq = [r for r in xq if r["split"] == args.split]
    un = [r for r in un if r["split"] == args.split]
    lib = _library(load_xquad(), base)
    settings = lib.settings.with_overrides(ollama_model="")
    results = []
    try:
        lib.embedder.wait()
        with cached_path(lib):
            if args.grid == "weights":
                replay(lib, settings, xq + un)  # warm the caches
            grid = GRIDS[args.grid]
            if args.rows and args.rows.exists():
                rows = json.loads(args.rows.read_text(encoding="utf-8"))
            else:
                rows = replay(lib, settings, xq + un)
                if args.rows:
                    args.rows.write_text(json.dumps(rows, default=str), encoding="utf-8")
            for values in itertools.product(*grid.values()):
                point = dict(zip(grid, values, strict=True))
                if args.grid == "direct":  # only the label changes: replay it from what the check measured
                    figs = _closest_of(rows, {name: v for (_, name), v in point.items()})
                    results.append((_closest_score(figs), point, figs))
                    continue
                if args.grid == "weights":  # the ranking changes: replay the whole path
                    with settings_at(point):
                        rows = replay(lib, settings, xq + un)
                    figs = _figures_of(rows, base.retrieval.min_relevance)
                else:  # only the decision changes: replay it from what the check measured
                    figs = _figures_of(rows, base.retrieval.min_relevance,
                                       {name: v for (_, name), v in point.items()})
                results.append((score(figs), point, figs))
                if args.grid == "weights":
                    print(f"  {len(results)} points", file=sys.stderr, flush=True)
    finally:
        lib.close()
    results.sort(key=lambda r: r[0], reverse=True)
    keys = ("gold_in_answer", "gold_in_first_quote", "false_refusal_xquad", "refusal_off-topic",
            "refusal_near-topic", "refusal_adversarial", "closest_answerable", "closest_unanswerable")
    if args.grid == "direct":
        for (ok, labelled, neg, _), point, figs in results[:args.top]:
            print(f"{'ok' if ok else 'NO'} unanswerable labelled {100 * labelled:.1f} %, answerable at most "
                  f"{-100 * neg:.1f} % | " + " ".join(f"{name}={v}" for (_, name), v in point.items()))
            print("    " + " ".join(f"{w}: {k} {100 * (v or 0):.1f}" for w in WORDINGS for k, v in figs[w].items()))
        return
    for (ok, neg_false, both, off), point, figs in results[:args.top]:
        print(f"{'ok' if ok else 'NO'} false refusals {-100 * neg_false:.1f} % gold in reply+first {100 * both:.1f} % "
              f"off-topic {-100 * off:.1f} % | "
              + " ".join(f"{name}={v}" for (_, name), v in point.items()))
        for w in WORDINGS:
            print(f"    {w:11s} " + " ".join(f"{k} {100 * (figs[w][k] or 0):.1f}" for k in keys))


if __name__ == "__main__":
    main()
