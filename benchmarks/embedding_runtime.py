"""The embedding runtime without torch against torch: vectors, encode throughput, peak memory, install size.

Run: .venv/bin/python -m benchmarks.embedding_runtime [--texts 400] [--rounds 3] [--json]
Goals (issue 38): cosine >= 0.999 against torch's vectors; throughput >= torch's on 2 cores; install size at most
half of torch's stack.

Each round runs one fresh process per runtime, in turn (ONNX Runtime, then torch, then again), so both see the same
machine: load the bundled all-MiniLM-L6-v2, encode a warm-up batch, then encode the texts (XQuAD paragraphs and
questions, batch rag_core.store.embeddings.BATCH_SIZE) and report the seconds, the peak RSS (VmHWM) and the vectors.
The ratio is torch's median time over ONNX Runtime's. Install size is the sum of the installed files of each
runtime's distributions (importlib.metadata), as pip put them in this environment. Needs requirements-dev.txt (torch).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
XQUAD = ROOT / "benchmarks" / "data" / "xquad" / "xquad.en.json"
# What each runtime installs beyond what DocChat needs anyway (sentence-transformers' own dependencies included).
ONNX_STACK = ["onnxruntime", "onnx", "tokenizers", "safetensors"]
TORCH_STACK = ["torch", "transformers", "sentence-transformers", "scipy", "scikit-learn", "sympy", "tokenizers",
               "safetensors"]

WORKER = """
import json, sys, time, numpy as np
import rag_core.store.embeddings as e
if sys.argv[1] == "torch":
    e.RUNTIME = e.EmbeddingRuntime.TORCH
texts = json.load(open(sys.argv[2]))
emb = e.Embedder()
emb.embed_documents(texts[:e.BATCH_SIZE])
t = time.perf_counter()
vecs = np.asarray(emb.embed_documents(texts), dtype=np.float32)
seconds = time.perf_counter() - t
np.save(sys.argv[3], vecs)
peak = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0] / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "torch_loaded": "torch" in sys.modules}))
"""


def sample_texts(n: int) -> list[str]:
    """The first n XQuAD paragraphs and questions, alternating (long and short inputs, as an upload and a question)."""
    texts: list[str] = []
    for article in json.loads(XQUAD.read_text())["data"]:
        for para in article["paragraphs"]:
            texts.append(para["context"])
            texts.extend(q["question"] for q in para["qas"][:2])
            if len(texts) >= n:
                return texts[:n]
    return texts


def installed_mb(names: list[str]) -> float:
    """Megabytes of the installed files of these distributions."""
    total = 0
    for name in names:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            p = Path(str(dist.locate_file(f)))
            if p.is_file():
                total += p.stat().st_size
    return total / 1e6


def run_once(runtime: str, texts_file: Path, out: Path) -> dict:
    """One fresh process encoding the texts with this runtime."""
    proc = subprocess.run([sys.executable, "-c", WORKER, runtime, str(texts_file), str(out)], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    """Print the figures (or --json)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--texts", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    texts = sample_texts(args.texts)
    runs: dict[str, list[dict]] = {"onnx": [], "torch": []}
    with tempfile.TemporaryDirectory() as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts))
        for _ in range(args.rounds):
            for runtime in runs:
                runs[runtime].append(run_once(runtime, texts_file, Path(tmp) / f"{runtime}.npy"))
        a, b = np.load(Path(tmp) / "onnx.npy"), np.load(Path(tmp) / "torch.npy")
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    med = {r: statistics.median(x["seconds"] for x in v) for r, v in runs.items()}
    report = {
        "texts": len(texts), "rounds": args.rounds,
        "seconds": {r: [round(x["seconds"], 2) for x in v] for r, v in runs.items()},
        "median_seconds": {r: round(s, 2) for r, s in med.items()},
        "speedup_vs_torch": round(med["torch"] / med["onnx"], 2),
        "peak_rss_mb": {r: round(max(x["peak_mb"] for x in v)) for r, v in runs.items()},
        "onnx_imported_torch": any(x["torch_loaded"] for x in runs["onnx"]),
        "cosine_min": float(cos.min()), "cosine_mean": float(cos.mean()),
        "install_mb": {"onnx": round(installed_mb(ONNX_STACK)), "torch": round(installed_mb(TORCH_STACK))},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{len(texts)} texts, {args.rounds} rounds, one process per runtime and round")
    for r in runs:
        print(f"  {r:6} seconds {report['seconds'][r]}  median {report['median_seconds'][r]}  "
              f"peak RSS {report['peak_rss_mb'][r]} MB  installed {report['install_mb'][r]} MB")
    print(f"ONNX Runtime encodes {report['speedup_vs_torch']}x as fast as torch; cosine min {cos.min():.7f}; "
          f"torch imported by the ONNX run: {report['onnx_imported_torch']}")


if __name__ == "__main__":
    main()
