"""Search latency of the embedded library (Qdrant Edge): p50/p95 of retrieve() per size, method and filter.

    .venv/bin/python -m benchmarks.search_latency [--chunks 10000,100000] [--queries 100] [--methods default,vector]
                                                  [--no-optimize] [--json]

Prints {"results": [{"chunks", "method", "filtered", "p50_ms", "p95_ms", "queries"}, ...], "builds": [...]}: one
row per size, method ("default" = rag_core.retrieve.search.DEFAULT_METHOD) and filter (filtered = scoped to one owner
who holds 1 % of the points: 100 owners, documents of 50 chunks dealt round-robin).

Corpus, synthetic (embedding 100,000 real chunks would take over an hour here):
- texts: 4-8 sentences drawn at random from the bundled PubMedQA abstracts, so the lexical vectors (the real
  LexicalEncoder) have realistic lengths and term statistics;
- dense vectors: the real embeddings of 500 such texts, repeated with small Gaussian noise and re-normalised
  (clustered like real data, which matters for the HNSW index);
- queries: real PubMedQA questions, embedded before timing: the times exclude query embedding (~10 ms).
Stored through the real path (Store.add_chunks, one document at a time, each flushed) into a Qdrant Edge library
in a temporary folder; then Store.optimize() builds the HNSW index (what opening a library with
>= OPTIMIZE_AT_OPEN unindexed chunks does) unless --no-optimize. Timed: rag_core.retrieve.search.retrieve_scored - the
app's call: passages plus the relevance cosine, one engine request.
"""
from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from rag_core.adapters.evaluation import load_pubmedqa
from rag_core.core.config import Settings
from rag_core.core.models import Chunk, SourceMeta
from rag_core.retrieve import search
from rag_core.store.embeddings import Embedder
from rag_core.store.vector_store import Store, open_store

log = logging.getLogger(__name__)

CHUNKS_PER_DOC = 50
OWNERS = 100  # one owner = 1 % of the points
REAL_DENSE = 500


def synthetic_texts(n: int, seed: int) -> list[str]:
    """n chunk texts of 4-8 random PubMedQA sentences."""
    rng = random.Random(seed)
    sentences = []
    for doc in load_pubmedqa().documents:
        sentences.extend(s.strip() + "." for s in doc.text.replace("\n\n", " ").split(". ") if len(s) > 20)
    return [" ".join(rng.sample(sentences, rng.randint(4, 8))) for _ in range(n)]


def synthetic_dense(embedder: Embedder, texts: list[str], seed: int) -> np.ndarray:
    """Real embeddings of the first REAL_DENSE texts, repeated with noise to len(texts) unit vectors."""
    base = embedder.encode(texts[:min(REAL_DENSE, len(texts))])
    rng = np.random.default_rng(seed)
    reps = base[np.arange(len(texts)) % len(base)]
    noisy = reps + rng.normal(0, 0.02, reps.shape).astype(np.float32)
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def owner_of(doc: int) -> str:
    """The owner of synthetic document number `doc`."""
    return f"owner-{doc % OWNERS:03d}"


def build(store: Store, texts: list[str], dense: np.ndarray) -> None:
    """Store the corpus through Store.add_chunks, documents of CHUNKS_PER_DOC chunks dealt to OWNERS owners."""
    sparse = store.lexical.embed_documents(texts)
    for d, start in enumerate(range(0, len(texts), CHUNKS_PER_DOC)):
        src = SourceMeta(file_name=f"synthetic-{d}.txt", title=f"Synthetic {d}", kind="txt", sha256=str(d))
        chunks, pos = [], 0
        for i in range(start, min(start + CHUNKS_PER_DOC, len(texts))):
            chunks.append(Chunk(doc_id=f"syn-{d}", index=i - start, text=texts[i], char_start=pos,
                                char_end=pos + len(texts[i]), page_start=None, page_end=None, heading_path=(),
                                source=src))
            pos += len(texts[i]) + 2
        end = start + len(chunks)
        store.add_chunks(src, chunks, None, owner=owner_of(d), vectors=(dense[start:end], sparse[start:end]))


def percentiles(samples: list[float]) -> dict:
    """p50 / p95 in milliseconds."""
    ms = np.array(samples) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2)}


def run_size(embedder: Embedder, n: int, questions: list[str], methods: list[str], k: int, seed: int,
             optimize: bool) -> tuple[list[dict], dict]:
    """Build an n-chunk library and time every method unfiltered and filtered; returns (rows, build info)."""
    texts = synthetic_texts(n, seed)
    dense = synthetic_dense(embedder, texts, seed)
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Settings(data_dir=Path(tmp), collection="bench"), embedder)
        try:
            t0 = time.perf_counter()
            build(store, texts, dense)
            build_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            if optimize:
                store.optimize()
            info = {"chunks": n, "build_s": round(build_s, 1), "optimize_s": round(time.perf_counter() - t0, 1),
                    "indexed": optimize}
            qvs = search.embed_queries(store, questions)
            rows = []
            for label in methods:
                method = search.DEFAULT_METHOD if label == "default" else label
                for filtered in (False, True):
                    times = []
                    for i, (q, qv) in enumerate([(questions[0], qvs[0]), *zip(questions, qvs, strict=True)]):
                        owners = [owner_of(i)] if filtered else None
                        t = time.perf_counter()
                        got = search.retrieve_scored(store, q, k=k, owners=owners, method=method, vectors=qv)
                        if i:  # the first query is a warm-up
                            times.append(time.perf_counter() - t)
                        if not got.passages:
                            raise RuntimeError(f"no passages for {q!r} ({label}, filtered={filtered})")
                    rows.append({"chunks": n, "method": label, "filtered": filtered, **percentiles(times),
                                 "queries": len(times)})
        finally:
            store.close()
    return rows, info


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print a table (or JSON)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", default="10000,100000", help="comma-separated library sizes")
    ap.add_argument("--queries", type=int, default=100, help="questions per size, method and filter")
    ap.add_argument("--methods", default="default,vector", help="comma-separated: default or a retrieval method")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-optimize", action="store_true", help="search without building the HNSW index first")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    sizes = [int(x) for x in args.chunks.split(",") if x.strip()]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m != "default" and m not in search.METHODS:
            ap.error(f"unknown method {m!r}")
    embedder = Embedder()
    questions = [q.question for q in load_pubmedqa().queries]
    random.Random(args.seed).shuffle(questions)
    questions = questions[:args.queries]
    results: list[dict] = []
    builds: list[dict] = []
    for n in sizes:
        rows, info = run_size(embedder, n, questions, methods, args.k, args.seed, not args.no_optimize)
        results.extend(rows)
        builds.append(info)
        if not args.json:
            print(f"\n{n:,} chunks: stored in {info['build_s']} s, indexed in {info['optimize_s']} s")
            print(f"  {'method':<10} {'filtered':>8} {'p50 ms':>8} {'p95 ms':>8}")
            for r in rows:
                print(f"  {r['method']:<10} {str(r['filtered']):>8} {r['p50_ms']:>8} {r['p95_ms']:>8}")
    if args.json:
        print(json.dumps({"results": results, "builds": builds, "default_method": search.DEFAULT_METHOD,
                          "k": args.k, "command": " ".join(sys.argv)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
