"""The per-file time budget on pathological files: how long until each is refused, stopped or added.

Run: .venv/bin/python -m benchmarks.ingest_budget [--mb 10] [--budget 300]
Issue 13: a 10 MB one-line "lorem ipsum" text (no sentence end) ran for > 600 s; then it was refused by the passage
cap only after ~35 s of chunking; now its size and speed are judged from samples and it is refused in about 1 s
(or, on a machine fast enough to embed it within the budget, added).
"""
from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.service.library import Library
from rag_core.store.embeddings import Embedder

MB = 1024 * 1024


def cases(mb: float) -> dict[str, tuple[str, bytes]]:
    """name -> (file name, bytes) of the pathological inputs, `mb` megabytes each."""
    size = int(mb * MB)
    return {
        "one line, no sentence end": ("lorem.txt", (b"lorem ipsum " * (size // 12 + 1))[:size]),
        "no whitespace": ("xs.txt", b"x" * size),
        "one-line sentences": ("ab.txt", (b"Ab. " * (size // 4 + 1))[:size]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    parser.add_argument("--budget", type=float, default=300.0, help="DOCCHAT_INGEST_TIMEOUT_S")
    args = parser.parse_args()
    embedder = Embedder()
    out = []
    for label, (name, data) in cases(args.mb).items():
        with tempfile.TemporaryDirectory() as tmp:
            lib = Library(Settings(data_dir=Path(tmp), ingest_timeout_s=args.budget), embedder=embedder)
            t = time.perf_counter()
            result = lib.ingest_bytes(data, name)
            took = time.perf_counter() - t
            out.append({"case": label, "mb": args.mb, "seconds": round(took, 1), "status": result.status,
                        "chunks": result.chunks, "error": result.error, "points_left": lib.store.count_chunks()})
            lib.close()
        print(json.dumps(out[-1], ensure_ascii=False), flush=True)
    print(json.dumps({"peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}))


if __name__ == "__main__":
    main()
