"""The reranker (DOCCHAT_RERANKER: a rerank server or a cross-encoder folder) against the fused order: R@1, R@5 and the
milliseconds it adds to a question (p50 / p95).

Run: .venv/bin/python -m benchmarks.rerank_endpoint [--reranker http://host:port | /path/to/cross-encoder]
     [--dataset xquad|pubmedqa] [--limit N] [--json]

With --reranker, every question is asked twice of the dataset's cached library (rag_core.adapters.evaluation, as
`python -m rag_core eval`): the fused top K_EVAL as they are, then reordered by that reranker (its top
DOCCHAT_RERANK_TOP). Without one, no reranker runs here (no package ships reranker weights: docs/retrieval.md), so a
stand-in server on 127.0.0.1 answers `/v1/rerank` with scores that keep the fused order: recall must come out the
same, and the added time is the plumbing's alone (HTTP, JSON, the worker thread), not a model's. Say which it was
when quoting the figures.
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from rag_core.adapters import evaluation as ev
from rag_core.core.config import Settings
from rag_core.retrieve.search import embed_queries, retrieve_scored
from rag_core.service.library import Library


class _KeepOrder(BaseHTTPRequestHandler):
    """A rerank server that scores the passages in the order given (the fused order stays)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass

    def setup(self) -> None:
        """No Nagle delay: the headers and the body go out as two writes (else ~40 ms a request of delayed ACK)."""
        super().setup()
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_POST(self) -> None:  # http.server naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        n = len(body["documents"])
        data = json.dumps({"results": [{"index": i, "relevance_score": 1 - i / n} for i in range(n)]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def minilm_sized(folder: Path) -> Path:
    """A cross-encoder of ms-marco-MiniLM-L-6-v2's shape and cost in `folder`: the bundled all-MiniLM-L6-v2 encoder
    (the same 6 layers, 384 wide) with a random pooler and classifier. Its scores mean nothing: only its time counts."""
    import shutil

    import numpy as np
    from safetensors.numpy import load_file, save_file

    from rag_core.store.embeddings import resolve_model_path

    source = resolve_model_path(Settings().library.embedding_model)
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        shutil.copy(source / name, folder / name)
    weights = load_file(str(source / "model.safetensors"))
    rng = np.random.default_rng(46)
    hidden = weights["embeddings.word_embeddings.weight"].shape[1] if "embeddings.word_embeddings.weight" in weights \
        else 384
    weights.update({"pooler.dense.weight": (rng.normal(size=(hidden, hidden)) * 0.05).astype(np.float32),
                    "pooler.dense.bias": np.zeros(hidden, np.float32),
                    "classifier.weight": (rng.normal(size=(1, hidden)) * 0.05).astype(np.float32),
                    "classifier.bias": np.zeros(1, np.float32)})
    save_file(weights, str(folder / "model.safetensors"))
    return folder


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure(store, ds: ev.Dataset) -> dict:
    """R@1 and R@5 of the fused order and of the reranked one, and the added milliseconds per question."""
    vectors = embed_queries(store, [q.question for q in ds.queries])
    out: dict = {}
    for name, rerank in (("fused", False), ("reranked", True)):
        ranks, ms, notices = [], [], 0
        for q, qv in zip(ds.queries, vectors, strict=True):
            t = time.perf_counter()
            found = retrieve_scored(store, q.question, k=ev.K_EVAL, vectors=qv, relevance=False, model_rerank=rerank)
            ms.append((time.perf_counter() - t) * 1000)
            ranks.append(ev.first_hit(q, found.passages))
            notices += found.notice is not None
        res = ev.MethodResult(name, ranks)
        out[name] = {"n": len(ranks), "recall@1": round(res.recall_at(1), 4), "recall@5": round(res.recall_at(5), 4),
                     "ms_p50": round(statistics.median(ms), 2), "ms_p95": round(_percentile(ms, 0.95), 2),
                     "fallbacks": notices}
    out["added_ms_p50"] = round(out["reranked"]["ms_p50"] - out["fused"]["ms_p50"], 2)
    out["added_ms_p95"] = round(out["reranked"]["ms_p95"] - out["fused"]["ms_p95"], 2)
    return out


def main() -> None:
    """Print the figures (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reranker", default="", help="a rerank server's address or a cross-encoder folder")
    ap.add_argument("--minilm-sized", action="store_true",
                    help="time a cross-encoder of ms-marco-MiniLM-L-6-v2's size built here (random head: time only)")
    ap.add_argument("--dataset", default="xquad")
    ap.add_argument("--limit", type=int, default=200, help="questions asked (0: all)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    server = None
    where, label = args.reranker, args.reranker
    if args.minilm_sized:
        where = str(minilm_sized(Path(tempfile.mkdtemp(prefix="docchat-cross-encoder-"))))
        label = "a MiniLM-L6-sized ONNX cross-encoder with a random head (time only; its recall means nothing)"
    elif not where:
        label = "stand-in server keeping the fused order (plumbing only: no reranker weights here)"
        server = ThreadingHTTPServer(("127.0.0.1", 0), _KeepOrder)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        where = f"http://127.0.0.1:{server.server_address[1]}"
    ds = ev.limit_dataset(ev.load_dataset(args.dataset), args.limit or None)
    settings = ev.cache_settings(ds, Settings(), ev.DEFAULT_CACHE_DIR).with_overrides(reranker=where)
    lib = Library(settings)
    try:
        ev.ingest_dataset(lib, ds)
        report = {"dataset": args.dataset, "reranker": label, "rerank_top": settings.retrieval.rerank_top,
                  **measure(lib.store, ds)}
    finally:
        lib.close()
        if server is not None:
            server.shutdown()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{report['dataset']} ({report['fused']['n']} questions), reranker: {report['reranker']}, "
          f"top {report['rerank_top']}")
    for name in ("fused", "reranked"):
        r = report[name]
        print(f"  {name:8} R@1 {r['recall@1']:.4f}  R@5 {r['recall@5']:.4f}  ms p50 {r['ms_p50']:.1f}  "
              f"p95 {r['ms_p95']:.1f}  fallbacks {r['fallbacks']}")
    print(f"  added: p50 {report['added_ms_p50']} ms, p95 {report['added_ms_p95']} ms a question")


if __name__ == "__main__":
    main()
