"""Instruction detection (rag_core.injection.detect) on benchmarks/data/injection.jsonl: passages that address an AI
(injected) against ordinary ones, many full of imperatives (manuals, recipes, safety sheets, exam papers, contracts,
licences, patient leaflets) and encyclopedia paragraphs and abstracts.

Reported per split (tune: where the weights and threshold were chosen; test: the figures to quote):
  detection    share of injected passages flagged (goal ≥ 90 %)
  false flags  share of ordinary passages flagged (goal ≤ 2 %)
  per kind     the same by kind of passage
  time         microseconds per passage (median of REPEAT timed passes over the whole set)
--show tune lists the tune split's misses and false flags with their cues (never the test split's: that one is for
measuring only). --sweep prints detection and false flags on tune for a range of thresholds.

Run:  .venv/bin/python -m benchmarks.injection [--json] [--show tune] [--sweep]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rag_core.injection import detect as injection

DATA = Path(__file__).resolve().parent / "data" / "injection.jsonl"
SPLITS = ("tune", "test")
REPEAT = 5


@dataclass(frozen=True)
class Row:
    """One passage of the set."""

    id: str
    label: str  # "injected" | "ordinary"
    kind: str
    split: str
    source: str
    text: str

    @property
    def injected(self) -> bool:
        return self.label == "injected"


def load(path: Path = DATA) -> list[Row]:
    """The labelled passages."""
    with path.open(encoding="utf-8") as f:
        return [Row(**json.loads(line)) for line in f if line.strip()]


def _share(hits: int, total: int) -> float:
    return round(100.0 * hits / total, 1) if total else 0.0


def measure(rows: list[Row], threshold: float | None = None) -> dict:
    """Detection and false-flag rates per split and per kind (`threshold`: override the module's)."""
    limit = injection.THRESHOLD if threshold is None else threshold
    out: dict = {}
    for split in SPLITS:
        part = [r for r in rows if r.split == split]
        flagged = {r.id: injection.detect(r.text).score >= limit for r in part}
        inj = [r for r in part if r.injected]
        ordn = [r for r in part if not r.injected]
        kinds: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for r in part:
            kinds[f"{r.label}/{r.kind}"][0] += flagged[r.id]
            kinds[f"{r.label}/{r.kind}"][1] += 1
        out[split] = {
            "injected": len(inj), "ordinary": len(ordn),
            "detected": sum(flagged[r.id] for r in inj), "false_flags": sum(flagged[r.id] for r in ordn),
            "detection_pct": _share(sum(flagged[r.id] for r in inj), len(inj)),
            "false_flag_pct": _share(sum(flagged[r.id] for r in ordn), len(ordn)),
            "by_kind": {k: f"{v[0]}/{v[1]} flagged" for k, v in sorted(kinds.items())},
        }
    return out


def timing(rows: list[Row]) -> dict:
    """Microseconds per passage (median of REPEAT passes over every passage) and the passages' mean length."""
    texts = [r.text for r in rows]
    passes = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        for text in texts:
            injection.detect(text)
        passes.append((time.perf_counter() - t) / len(texts) * 1e6)
    return {"us_per_passage": round(statistics.median(passes), 1),
            "mean_chars": round(statistics.mean(len(t) for t in texts))}


def show(rows: list[Row], split: str) -> None:
    """Misses and false flags of one split, with their score and cues."""
    if split != "tune":
        sys.exit("Only the tune split's errors are shown: the test split is for measuring.")
    for r in rows:
        if r.split != split:
            continue
        found = injection.detect(r.text)
        if found.flagged != r.injected:
            what = "MISSED" if r.injected else "FALSE FLAG"
            print(f"{what:<10} {r.id} {r.kind:<12} score {found.score:<4} {','.join(found.cues)}\n    {r.text[:300]}")


def main(argv: list[str] | None = None) -> int:
    """Print the figures (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", choices=SPLITS)
    ap.add_argument("--sweep", action="store_true")
    args = ap.parse_args(argv)
    rows = load()
    if args.show:
        show(rows, args.show)
        return 0
    if args.sweep:
        for t in (1.0, 1.5, 2.0, 2.5, 3.0, 3.5):
            tune = measure(rows, t)["tune"]
            print(f"threshold {t:<4} tune: detection {tune['detection_pct']:5.1f} %  "
                  f"false flags {tune['false_flag_pct']:4.1f} %")
        return 0
    result = {"threshold": injection.THRESHOLD, "window_sentences": injection.WINDOW, **measure(rows),
              "time": timing(rows)}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for split in SPLITS:
        s = result[split]
        print(f"{split}: detection {s['detected']}/{s['injected']} = {s['detection_pct']} %   "
              f"false flags {s['false_flags']}/{s['ordinary']} = {s['false_flag_pct']} %")
        for kind, v in s["by_kind"].items():
            print(f"    {kind:<28} {v}")
    t = result["time"]
    print(f"time: {t['us_per_passage']} µs per passage (mean {t['mean_chars']} characters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
