"""When to move from the embedded library to a Qdrant server: retrieval latency as the store grows, unfiltered (one
local user) and filtered to one demo session plus the shared samples (hosted demo), and the memory the points take.

Run: .venv/bin/python -m benchmarks.qdrant_scaling [--sizes 5000 20000 50000] [--queries 30] [--no-optimize] [--json]

Measured through the real code path: rag_core.retrieve.search.retrieve (default zscore: one batched dense + lexical
request) -> Store -> Qdrant Edge in a temporary folder, after Store.optimize() has built the HNSW index (unless
--no-optimize: then dense search is exhaustive). Query vectors are precomputed (embedding a question adds ~10 ms).
Points: random unit 384-d vectors and random 60-term sparse vectors (synthetic: random vectors are the worst case
for HNSW), in documents of 100 chunks spread over 100 session owners, with 1 % of the documents owned by "shared".
The ratio column is against the smallest size of this run.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_core.core.config import Settings
from rag_core.core.models import Chunk, SourceMeta
from rag_core.retrieve.search import QueryVectors, retrieve
from rag_core.store.backends import sparse_vector
from rag_core.store.embeddings import Embedder
from rag_core.store.vector_store import Store, open_store

DOC_CHUNKS = 100
OWNERS = 100
VOCAB = 30_000
TERMS = 60


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


def fill(store: Store, n: int, rng: np.random.Generator) -> list[str]:
    """Add n chunk points in documents of DOC_CHUNKS; returns the owners used."""
    owners = [f"s-bench-owner-{i:03d}-xxxxxxxxxxxx" for i in range(OWNERS)]
    for d in range(n // DOC_CHUNKS):
        owner = "shared" if d % 100 == 0 else owners[d % OWNERS]
        src = SourceMeta(file_name=f"doc{d}.txt", title=f"doc {d}", kind="txt", sha256=str(d), added_at="2026-11-01T00:00:00+00:00")
        chunks = [Chunk(doc_id=f"bench{d:06d}", index=i, text=f"chunk {i} of document {d}", char_start=i * 10,
                        char_end=i * 10 + 9, page_start=None, page_end=None, heading_path=(), source=src)
                  for i in range(DOC_CHUNKS)]
        dense = rng.standard_normal((DOC_CHUNKS, store.embedder.dim)).astype(np.float32)
        dense /= np.linalg.norm(dense, axis=1, keepdims=True)
        sparse = [sparse_vector(sorted(rng.choice(VOCAB, TERMS, replace=False).tolist()), [1.0] * TERMS)
                  for _ in range(DOC_CHUNKS)]
        store.add_chunks(src, chunks, None, owner=owner, vectors=(dense, sparse))
    return owners


def measure(store: Store, owners: list[str], queries: int, rng: np.random.Generator) -> dict:
    """p50/p95 of retrieve() unfiltered and filtered to [one owner, shared]."""
    out = {}
    for label, scope in (("all", lambda i: None), ("session+shared", lambda i: [owners[i % OWNERS], "shared"])):
        times = []
        for i in range(queries):
            d = rng.standard_normal(store.embedder.dim).astype(np.float32)
            qv = QueryVectors((d / np.linalg.norm(d)).tolist(),
                              sparse_vector(sorted(rng.choice(VOCAB, 6, replace=False).tolist()), [1.0] * 6))
            t = time.perf_counter()
            hits = retrieve(store, "", k=5, owners=scope(i), vectors=qv)
            times.append(time.perf_counter() - t)
            assert hits
        times.sort()
        out[label] = {"p50_ms": round(statistics.median(times) * 1000, 1),
                      "p95_ms": round(times[int(0.95 * (len(times) - 1))] * 1000, 1)}
    return out


def main() -> None:
    """Print latency per size and filter, and the RSS the points add."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 20000, 50000])
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--no-optimize", action="store_true", help="search without building the HNSW index")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    embedder = Embedder()
    rng = np.random.default_rng(7)
    rows = []
    for n in args.sizes:
        before = rss_mb()
        with tempfile.TemporaryDirectory() as tmp:
            store = open_store(Settings(data_dir=Path(tmp), collection=f"bench{n}"), embedder)
            t = time.perf_counter()
            owners = fill(store, n, rng)
            fill_s = time.perf_counter() - t
            t = time.perf_counter()
            if not args.no_optimize:
                store.optimize()
            row = {"chunks": store.count_chunks(), "fill_s": round(fill_s, 1),
                   "optimize_s": round(time.perf_counter() - t, 1), "rss_added_mb": round(rss_mb() - before),
                   **measure(store, owners, args.queries, rng)}
            rows.append(row)
            store.close()
            del store
    base = rows[0]
    for r in rows:
        r["filtered_vs_smallest"] = round(r["session+shared"]["p50_ms"] / base["session+shared"]["p50_ms"], 1)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'chunks':>8} {'all p50':>8} {'all p95':>8} {'session p50':>12} {'session p95':>12} {'x smallest':>10} "
          f"{'RSS +MiB':>9}")
    for r in rows:
        print(f"{r['chunks']:>8} {r['all']['p50_ms']:>8.1f} {r['all']['p95_ms']:>8.1f} "
              f"{r['session+shared']['p50_ms']:>12.1f} {r['session+shared']['p95_ms']:>12.1f} "
              f"{r['filtered_vs_smallest']:>10.1f} {r['rss_added_mb']:>9}")


if __name__ == "__main__":
    main()
