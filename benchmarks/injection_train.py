"""Train the instruction classifier (rag_core/injection/classifier.py) on the tune half of benchmarks/data/injection.jsonl
plus benchmarks/data/injection_extra.jsonl, and write rag_core/injection/weights.json.

Logistic regression (L2, Newton's method, numpy only) on the bundled all-MiniLM-L6-v2 vector of each passage. The
regularisation and the threshold are chosen by 5-fold cross-validation within the tune rows: the threshold is the
lowest that keeps out-of-fold false flags at or under MAX_FALSE_FLAGS of the ordinary tune passages. The test half is
never read for training; `--evaluate` prints both halves for the rules alone and for rules OR classifier.

Run:  .venv/bin/python -m benchmarks.injection_train              # writes rag_core/injection/weights.json
      .venv/bin/python -m benchmarks.injection_train --evaluate   # figures with the shipped weights
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.injection import DATA, Row, load
from rag_core.core.config import DEFAULT_EMBEDDING_MODEL
from rag_core.injection import classifier as injection_model
from rag_core.injection import detect as injection

EXTRA = DATA.with_name("injection_extra.jsonl")
FOLDS = 5
SEED = 0
LAMBDAS = (0.3, 1.0, 3.0)
MAX_FALSE_FLAGS = 0.005
COMMAND = ".venv/bin/python -m benchmarks.injection_train"


def fit(x: np.ndarray, y: np.ndarray, lam: float, steps: int = 25) -> np.ndarray:
    """Weights (last: bias) of an L2-regularised logistic regression, by Newton's method."""
    x1 = np.hstack([x, np.ones((len(x), 1))]).astype(np.float64)
    w = np.zeros(x1.shape[1])
    reg = np.eye(x1.shape[1]) * lam
    reg[-1, -1] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(x1 @ w)))
        grad = x1.T @ (p - y) + reg @ w
        hess = (x1 * (p * (1 - p))[:, None]).T @ x1 + reg
        w -= np.linalg.solve(hess, grad)
    return w


def decide(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Decision values of rows `x`."""
    return x @ w[:-1] + w[-1]


def folds(y: np.ndarray) -> np.ndarray:
    """A stratified fold number per row (seeded)."""
    rng = np.random.default_rng(SEED)
    out = np.zeros(len(y), dtype=int)
    for label in (0, 1):
        idx = np.where(y == label)[0]
        rng.shuffle(idx)
        out[idx] = np.arange(len(idx)) % FOLDS
    return out


def threshold_for(scores: np.ndarray, y: np.ndarray) -> float:
    """The lowest threshold leaving at most MAX_FALSE_FLAGS of ordinary rows at or above it."""
    neg = np.sort(scores[y == 0])[::-1]
    allowed = int(MAX_FALSE_FLAGS * len(neg))
    return float(neg[allowed]) + 1e-6


def training_rows() -> list[Row]:
    """The tune half plus the classifier's extra written rows (all `tune`)."""
    rows = [r for r in load() if r.split == "tune"] + load(EXTRA)
    assert all(r.split == "tune" for r in rows)
    return rows


def data_hash(rows: list[Row]) -> str:
    """sha256 of the training rows' ids, labels and texts."""
    h = hashlib.sha256()
    for r in rows:
        h.update(f"{r.id}\t{r.label}\t{r.text}\n".encode())
    return h.hexdigest()


def embed(texts: list[str]) -> np.ndarray:
    """Vectors from the bundled embedding model (the one ingest uses)."""
    from rag_core.store.embeddings import Embedder

    return Embedder(DEFAULT_EMBEDDING_MODEL).encode(texts).astype(np.float64)


def train() -> dict:
    """Cross-validate, fit on every training row and return the weights file's content."""
    rows = training_rows()
    y = np.array([r.injected for r in rows], dtype=np.float64)
    x = embed([r.text for r in rows])
    fold = folds(y)
    best: dict = {}
    for lam in LAMBDAS:
        oof = np.zeros(len(y))
        for f in range(FOLDS):
            w = fit(x[fold != f], y[fold != f], lam)
            oof[fold == f] = decide(w, x[fold == f])
        th = threshold_for(oof, y)
        detected = float(np.mean(oof[y == 1] >= th))
        print(f"lambda {lam}: out-of-fold detection {100 * detected:.1f} %, false flags "
              f"{100 * np.mean(oof[y == 0] >= th):.1f} % at threshold {th:.3f}")
        if not best or detected > best["cv_detection"]:
            best = {"lambda": lam, "threshold": th, "cv_detection": detected,
                    "cv_false_flags": float(np.mean(oof[y == 0] >= th))}
    w = fit(x, y, best["lambda"])
    return {
        "model": DEFAULT_EMBEDDING_MODEL, "dim": int(x.shape[1]),
        "bias": round(float(w[-1]), 6), "threshold": round(best["threshold"], 6),
        "lambda": best["lambda"],
        "cv": {"folds": FOLDS, "seed": SEED, "detection_pct": round(100 * best["cv_detection"], 1),
               "false_flag_pct": round(100 * best["cv_false_flags"], 1)},
        "training": {"command": COMMAND, "rows": len(rows), "injected": int(y.sum()),
                     "ordinary": int(len(y) - y.sum()), "files": [DATA.name + " (split tune)", EXTRA.name],
                     "sha256": data_hash(rows)},
        "weights": [round(float(v), 6) for v in w[:-1]],
    }


def evaluate() -> dict:
    """Detection and false flags per split: rules alone, classifier alone, either (the shipped weights)."""
    clf = injection_model.load()
    if clf is None:
        sys.exit(f"No weights at {injection_model.WEIGHTS}: train first.")
    rows = load()
    started = time.perf_counter()
    vectors = embed([r.text for r in rows])
    embed_ms = (time.perf_counter() - started) / len(rows) * 1e3
    started = time.perf_counter()
    learned = clf.flags(vectors)
    clf_us = (time.perf_counter() - started) / len(rows) * 1e6
    rules = np.array([injection.detect(r.text).flagged for r in rows])
    out: dict = {"embed_ms_per_passage": round(embed_ms, 1), "classifier_us_per_passage": round(clf_us, 2)}
    for split in ("tune", "test"):
        m = np.array([r.split == split for r in rows])
        y = np.array([r.injected for r in rows])
        for name, flags in (("rules", rules), ("classifier", learned), ("either", rules | learned)):
            out[f"{split}/{name}"] = (f"detected {int((flags & m & y).sum())}/{int((m & y).sum())} = "
                                      f"{100 * (flags & m & y).sum() / (m & y).sum():.1f} %, false flags "
                                      f"{int((flags & m & ~y).sum())}/{int((m & ~y).sum())} = "
                                      f"{100 * (flags & m & ~y).sum() / (m & ~y).sum():.1f} %")
    return out


def main(argv: list[str] | None = None) -> int:
    """Train and write the weights, or evaluate them."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--evaluate", action="store_true")
    ap.add_argument("--out", type=Path, default=injection_model.WEIGHTS)
    args = ap.parse_args(argv)
    if args.evaluate:
        for k, v in evaluate().items():
            print(f"{k:<22} {v}")
        return 0
    result = train()
    args.out.write_text(json.dumps(result) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {result['cv']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
