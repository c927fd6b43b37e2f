"""What the dense re-rank of quotes costs: one batched encode of N real XQuAD sentences under their article's title
(as rag_core.answer.grounding.quotes embeds its shortlist), with the bundled MiniLM, against one short sentence (the model's fixed
cost per call). The answer choice of benchmarks/answers.py is mostly this encode.

Run:  .venv/bin/python -m benchmarks.quote_encode [--runs 20]
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from rag_core.adapters.evaluation import DATASET_FILES
from rag_core.core.config import Settings
from rag_core.core.text import sentences
from rag_core.store.embeddings import Embedder


def main() -> None:
    """Print the median time of one encode per batch size."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    data = json.loads(DATASET_FILES["xquad"].read_text(encoding="utf-8"))["data"]
    texts = [f"{a['title'].replace('_', ' ')}: {s}" for a in data for p in a["paragraphs"]
             for s in sentences(p["context"])]
    emb = Embedder(Settings().library.embedding_model)
    emb.wait()
    print(f"{len(texts)} sentences, mean {statistics.mean(len(t) for t in texts):.0f} characters")
    for label, n, pool in (("one short sentence", 1, ["When did Tesla die?"] * args.runs),
                           ("shortlist of 3", 3, texts), ("shortlist of 5", 5, texts)):
        emb.encode(pool[:n])  # warm up
        times = []
        for i in range(args.runs):
            batch = pool[i * n:(i + 1) * n] if len(pool) >= (i + 1) * n else pool[:n]
            t = time.perf_counter()
            emb.encode(batch)
            times.append((time.perf_counter() - t) * 1000)
        print(f"{label}: median {statistics.median(times):.1f} ms")


if __name__ == "__main__":
    main()
