"""Search latency in embedded Qdrant: p50/p95 per method at 10k and 100k chunks, with a numpy/scipy floor.

    .venv/bin/python benchmarks/search_latency.py [--sizes 10000 100000] [--queries 100] [--json]

Corpus (said plainly, because it matters for what the numbers mean):
- texts: synthetic chunks of 4-8 sentences drawn at random from the 1,000 bundled PubMedQA abstracts, encoded by
  the real LexicalEncoder, so the sparse vectors have realistic length and term statistics;
- dense vectors: the real embeddings of 500 such texts, repeated with small Gaussian noise and re-normalised
  (embedded Qdrant searches exactly, so its cost does not depend on the values);
- queries: real PubMedQA questions.
Measured through the real code path: rag_core.retrieval.retrieve -> Store -> qdrant-client local mode
(":memory:" storage; a path-backed client holds the same arrays in memory once loaded, so search costs the same).
"excl. embedding" passes precomputed query vectors; "incl. embedding" embeds the question inside the timed call.
The floor is the same search as one numpy matrix product (dense) plus one scipy sparse product (lexical, with the
same IDF weighting Qdrant applies) over the very same vectors, in the same process and run.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qdrant_client import QdrantClient  # noqa: E402

from rag_core import retrieval  # noqa: E402
from rag_core.config import Settings  # noqa: E402
from rag_core.embeddings import Embedder  # noqa: E402
from rag_core.evaluation import load_pubmedqa  # noqa: E402
from rag_core.models import Chunk, SourceMeta  # noqa: E402
from rag_core.store import Store  # noqa: E402

CHUNKS_PER_DOC = 50
REAL_DENSE = 500


def _synthetic_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    sentences = []
    for doc in load_pubmedqa().documents:
        sentences.extend(s.strip() + "." for s in doc.text.replace("\n\n", " ").split(". ") if len(s) > 20)
    return [" ".join(rng.sample(sentences, rng.randint(4, 8))) for _ in range(n)]


def _dense(embedder: Embedder, texts: list[str], n: int, seed: int) -> np.ndarray:
    base = embedder.encode(texts[:min(REAL_DENSE, n)])
    rng = np.random.default_rng(seed)
    reps = base[np.arange(n) % len(base)]
    noisy = reps + rng.normal(0, 0.02, reps.shape).astype(np.float32)
    return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)


def build(store: Store, texts: list[str], dense: np.ndarray) -> list:
    """Store the synthetic corpus through Store.add_chunks (documents of CHUNKS_PER_DOC chunks); returns sparse vectors."""
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
        store.add_chunks(src, chunks, None, vectors=(dense[start:end], sparse[start:end]))
    return sparse


def _pcts(samples: list[float]) -> dict:
    ms = np.array(samples) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
            "n": len(samples)}


def floor_search(dense: np.ndarray, doc_matrix, idf: np.ndarray, vocab: dict, qv: retrieval.QueryVectors,
                 k: int, hybrid: bool) -> list[int]:
    """The same top-k as a numpy matrix product (+ scipy sparse product and DBSF-style fusion for hybrid)."""
    d = dense @ np.asarray(qv.dense, dtype=np.float32)
    if not hybrid:
        top = np.argpartition(-d, k)[:k]
        return top[np.argsort(-d[top])].tolist()
    cols = [vocab[i] for i in qv.sparse.indices if i in vocab]
    vals = [v * idf[vocab[i]] for i, v in zip(qv.sparse.indices, qv.sparse.values) if i in vocab]
    s = doc_matrix[:, cols] @ np.asarray(vals) if cols else np.zeros(len(d))
    n = retrieval.CANDIDATES
    fused: dict[int, float] = {}
    for scores in (d, s):
        top = np.argpartition(-scores, n)[:n]
        vals_ = scores[top]
        mu, sd = vals_.mean(), vals_.std() or 1.0
        for j, z in zip(top.tolist(), ((vals_ - mu) / sd).tolist()):
            fused[j] = fused.get(j, 0.0) + z
    return sorted(fused, key=fused.get, reverse=True)[:k]


def sparse_matrix(sparse: list, n_docs: int):
    """Documents x terms (scipy CSR) and Qdrant's IDF per term, from the stored sparse vectors."""
    import scipy.sparse as sp

    vocab: dict[int, int] = {}
    rows, cols, vals = [], [], []
    for r, v in enumerate(sparse):
        for i, x in zip(v.indices, v.values):
            rows.append(r)
            cols.append(vocab.setdefault(int(i), len(vocab)))
            vals.append(x)
    m = sp.csr_matrix((vals, (rows, cols)), shape=(n_docs, len(vocab))).tocsc()
    df = np.bincount(cols, minlength=len(vocab))
    idf = np.log((n_docs - df + 0.5) / (df + 0.5) + 1)
    return m, idf, vocab


def run_size(embedder: Embedder, n: int, questions: list[str], methods: list[str], k: int, seed: int,
             max_seconds: float) -> dict:
    """Build an n-chunk store and time every method, excluding and including query embedding."""
    t0 = time.perf_counter()
    texts = _synthetic_texts(n, seed)
    dense = _dense(embedder, texts, n, seed)
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp), collection="bench")
        store = Store(QdrantClient(":memory:"), settings, embedder)
        sparse = build(store, texts, dense)
        build_s = time.perf_counter() - t0
        qvs = retrieval.embed_queries(store, questions)
        matrix, idf, vocab = sparse_matrix(sparse, n)
        out: dict = {"chunks": n, "build_seconds": round(build_s, 1), "methods": {}}
        for m in methods:
            excl, incl = [], []
            retrieval.retrieve(store, questions[0], k=k, method=m, vectors=qvs[0])  # warm-up
            budget = time.perf_counter() + max_seconds
            for q, qv in zip(questions, qvs):
                t = time.perf_counter()
                retrieval.retrieve(store, q, k=k, method=m, vectors=qv)
                excl.append(time.perf_counter() - t)
                t = time.perf_counter()
                retrieval.retrieve(store, q, k=k, method=m)
                incl.append(time.perf_counter() - t)
                if time.perf_counter() > budget and len(excl) >= 10:
                    break
            out["methods"][m] = {"excluding_embedding": _pcts(excl), "including_embedding": _pcts(incl)}
        for name, hybrid in (("floor_dense", False), ("floor_hybrid", True)):
            samples, embed_samples = [], []
            for q, qv in zip(questions, qvs):
                t = time.perf_counter()
                floor_search(dense, matrix, idf, vocab, qv, k, hybrid)
                samples.append(time.perf_counter() - t)
                t = time.perf_counter()
                floor_search(dense, matrix, idf, vocab, retrieval.embed_queries(store, [q])[0], k, hybrid)
                embed_samples.append(time.perf_counter() - t)
            out["methods"][name] = {"excluding_embedding": _pcts(samples), "including_embedding": _pcts(embed_samples)}
        store.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--queries", type=int, default=100, help="questions per method and size")
    ap.add_argument("--methods", nargs="+", default=["vector", retrieval.DEFAULT_METHOD])
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--max-seconds", type=float, default=120.0, help="time budget per method and size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    embedder = Embedder()
    questions = [q.question for q in load_pubmedqa().queries]
    random.Random(args.seed).shuffle(questions)
    questions = questions[:args.queries]
    results = {"command": " ".join(sys.argv), "default_method": retrieval.DEFAULT_METHOD, "k": args.k, "sizes": []}
    for n in args.sizes:
        res = run_size(embedder, n, questions, args.methods, args.k, args.seed, args.max_seconds)
        results["sizes"].append(res)
        if not args.json:
            print(f"\n{n:,} chunks (built in {res['build_seconds']} s)")
            print(f"  {'method':<14} {'p50 excl':>9} {'p95 excl':>9} {'p50 incl':>9} {'p95 incl':>9}  (ms; n)  x floor p95")
            floors = {False: res["methods"]["floor_dense"], True: res["methods"]["floor_hybrid"]}
            for m, r in res["methods"].items():
                e, i = r["excluding_embedding"], r["including_embedding"]
                base = floors[m != "vector" and m != "floor_dense"]["excluding_embedding"]["p95_ms"] or 1e-9
                print(f"  {m:<14} {e['p50_ms']:>9} {e['p95_ms']:>9} {i['p50_ms']:>9} {i['p95_ms']:>9}  "
                      f"(n={e['n']})  {e['p95_ms'] / base:.0f}x")
    if args.json:
        print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
