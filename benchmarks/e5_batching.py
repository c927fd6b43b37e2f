"""e5's batching before and after issue 46's speed-up, back to back with MiniLM: embedding only, and adding documents
end to end through the Library.

Run: .venv/bin/python -m benchmarks.e5_batching embed [--rounds 2]   (120 XQuAD paragraphs)
     .venv/bin/python -m benchmarks.e5_batching ingest [--repeat 2]  (benchmarks.ingest's "mixed" folder)

"before" is e5's old batching (32 texts at a time sorted by characters, padded to the longest); "after" is
`OnnxE5.encode` (sorted by pieces, within onnx_e5.BATCH_PIECES padded pieces). One process, one e5 model: the class's
`encode` is swapped between the runs. Wall and CPU seconds (the process's, steadier on a shared machine), and for
`embed` the cosine of each run's vectors to the old batching's. `ingest` first adds the folder once with each model
(the readers' imports and e5's tokenizer word cache warm up), then the best of `--repeat` runs each.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import numpy as np

from benchmarks import ingest
from benchmarks.e5_runtime import xquad
from rag_core.core.config import MULTILINGUAL_EMBEDDING_MODEL
from rag_core.store.embeddings import Embedder
from rag_core.store.onnx_e5 import Kind, OnnxE5, prefix

NEW_ENCODE = OnnxE5.encode


def old_encode(self: OnnxE5, texts: list[str], kind: Kind, batch_size: int = 32) -> np.ndarray:
    """e5's batching before the speed-up: 32 texts at a time, longest first by characters."""
    out = np.zeros((len(texts), self.dim), dtype=np.float32)
    prefixed = prefix(texts, kind)
    order = np.argsort([-len(t) for t in prefixed], kind="stable")
    for i in range(0, len(texts), batch_size):
        rows = order[i:i + batch_size]
        ids, mask = self.tokenizer.encode_batch([prefixed[j] for j in rows])
        out[rows] = self.run(ids, mask, last=i + batch_size >= len(texts))
    return out


def batching(old: bool) -> None:
    """Make every OnnxE5 batch the old way or the new."""
    OnnxE5.encode = old_encode if old else NEW_ENCODE  # type: ignore[method-assign]


def cpu() -> float:
    """CPU seconds of this process and its finished children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(fn: Callable[[], object]) -> tuple[object, float, float]:
    t, c = time.perf_counter(), cpu()
    out = fn()
    return out, round(time.perf_counter() - t, 2), round(cpu() - c, 2)


def main() -> None:
    """Print one JSON line per run."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("mode", choices=["embed", "ingest"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    minilm, e5 = Embedder(), Embedder(MULTILINGUAL_EMBEDDING_MODEL)
    runs = [("minilm", minilm, False), ("e5-before", e5, True), ("e5-after", e5, False)]
    if args.mode == "embed":
        paragraphs, _ = xquad(120, 0)
        for emb in (minilm, e5):
            emb.encode(paragraphs[:8], background=True)
        reference = None
        for r in range(args.rounds):
            for name, emb, old in runs:
                batching(old)
                vectors, wall, cpu_s = timed(lambda emb=emb: emb.encode(paragraphs, background=True))
                row = {"round": r, "model": name, "wall_s": wall, "cpu_s": cpu_s, "load": os.getloadavg()[0]}
                if name == "e5-before":
                    reference = vectors
                elif name == "e5-after" and isinstance(vectors, np.ndarray) and isinstance(reference, np.ndarray):
                    row["cosine_min_to_before"] = round(float(np.sum(vectors * reference, axis=1).min()), 6)
                print(json.dumps(row), flush=True)
        return
    files = [ingest.DOCS / n for n in ingest.MIXED]
    for emb in (minilm, e5):
        ingest.run(files, emb)
    for name, emb, old in runs:
        batching(old)
        print(json.dumps({"model": name, "load": os.getloadavg()[0], **ingest.run(files, emb, args.repeat)}),
              flush=True)


if __name__ == "__main__":
    main()
